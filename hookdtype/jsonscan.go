package hookdtype

import (
	"unicode/utf16"
	"unicode/utf8"
)

// The primitives below walk JSON text that json.Valid has accepted, without decoding it: they do
// not check syntax, and on text that is not valid JSON their results mean nothing.

// SkipSpace is the index of the first byte at or after i that is not JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// StringEnd is the index after the string that starts at b[i], and whether its text differs from
// its content: an escape, or bytes that are not UTF-8 (decoded as U+FFFD).
func StringEnd(b []byte, i int) (end int, decode bool) {
	start, high := i+1, false
	for i++; b[i] != '"'; i++ {
		switch {
		case b[i] == '\\':
			decode = true
			i++
		case b[i] >= utf8.RuneSelf:
			high = true
		}
	}
	if high && !decode {
		decode = !utf8.Valid(b[start:i])
	}
	return i + 1, decode
}

// ValueEnd is the index after the value that starts at b[i] (after whitespace).
func ValueEnd(b []byte, i int) int {
	i = SkipSpace(b, i)
	switch b[i] {
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case '"':
				i, _ = StringEnd(b, i)
				i--
			}
		}
	case '"':
		end, _ := StringEnd(b, i)
		return end
	}
	for i < len(b) && !delimiter(b[i]) {
		i++
	}
	return i
}

func delimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// StringContent is the content of the JSON string raw (with its quotes) as encoding/json decodes
// it; decode is StringEnd's answer for it.
func StringContent(raw []byte, decode bool) string {
	if !decode {
		return string(raw[1 : len(raw)-1])
	}
	s, _ := Unquote(raw)
	return s
}

// Unquote is the content of b when b is exactly one JSON string (with its quotes), as
// encoding/json decodes it: escapes resolved, a lone surrogate and each byte that is not UTF-8
// read as U+FFFD. ok is false for anything else. Unlike the primitives above it checks its input,
// so that a self-decoding type can use it on whatever text it is handed.
func Unquote(b []byte) (s string, ok bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	in := b[1:]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		switch c := in[i]; {
		case c == '"':
			if i != len(in)-1 {
				return "", false // text after the string
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(in) {
				return "", false
			}
			switch e := in[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(in[i+2:])
				if r < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair is one rune; a surrogate without its other half is U+FFFD.
					if i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(in[i+2:])); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			out = utf8.AppendRune(out, r) // RuneError for a byte that is not UTF-8, as encoding/json
			i += size
		}
	}
	return "", false // no closing quote
}

// hex4 is the code unit of the four hex digits b starts with, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
