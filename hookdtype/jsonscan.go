package hookdtype

import (
	"encoding/json"
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
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
