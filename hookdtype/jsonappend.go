package hookdtype

import (
	"strconv"
	"unicode/utf8"
)

// The JSON writers hookd's hot paths use instead of encoding/json's reflection (the envelope and
// context encoders, the decision chain's canonical form): each writes exactly what json.Marshal
// writes for the same value, which the callers' tests hold them to.

// plainASCII marks the ASCII bytes encoding/json copies into a string as they are (its
// htmlSafeSet).
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendJSONStringPtr appends s as AppendJSONString does, or null.
func AppendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendJSONString(b, *s)
}

// AppendJSONIntPtr appends n, or null.
func AppendJSONIntPtr(b []byte, n *int64) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *n, 10)
}

const lowerHex = "0123456789abcdef"

// AppendJSONString appends s as a JSON string exactly as encoding/json does with HTML escaping on:
// ", \ and control characters escaped (\b \f \n \r \t by name, the rest as \u00XX), <, > and &
// as \u003c \u003e \u0026, U+2028 and U+2029 as \u2028 \u2029, and each byte of invalid UTF-8 as
// \ufffd.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
