package hookdtype

// maxNesting is the deepest nesting of objects and arrays encoding/json accepts.
const maxNesting = 10000

// Valid reports whether b is one JSON value, with what encoding/json.Valid says of every input
// (FuzzValid): bytes that are not UTF-8 inside a string pass, as there, and so does nesting up to
// 10,000 levels. It is the first check of every request body and of every tool's arguments, and
// takes less than half of json.Valid's time (BenchmarkValid): one loop over the bytes, where
// encoding/json's scanner makes a function call per byte.
func Valid(b []byte) bool {
	var inline [4]uint64
	open := inline[:0:len(inline)] // one bit per open container: 1 an object, 0 an array
	depth := 0
	push := func(object bool) bool {
		if depth == maxNesting {
			return false
		}
		if depth/64 == len(open) {
			open = append(open, 0)
		}
		if object {
			open[depth/64] |= 1 << (depth % 64)
		} else {
			open[depth/64] &^= 1 << (depth % 64)
		}
		depth++
		return true
	}
	inObject := func() bool { return open[(depth-1)/64]&(1<<((depth-1)%64)) != 0 }

	i := SkipSpace(b, 0)
	for {
		// A value starts at i; after it, i is past it.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if !push(c == '{') {
				return false
			}
			if i = SkipSpace(b, i+1); i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				depth--
				i++
				break
			}
			if c == '{' {
				if i = member(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = stringEnd(b, i)
		case 't':
			i = literal(b, i, "true")
		case 'f':
			i = literal(b, i, "false")
		case 'n':
			i = literal(b, i, "null")
		default:
			i = numberEnd(b, i)
		}
		if i < 0 {
			return false
		}
		// Past a value: close what ends here, up to the next value.
		for {
			i = SkipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			closer := byte(']')
			if inObject() {
				closer = '}'
			}
			if b[i] == closer {
				depth--
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			if i = SkipSpace(b, i+1); inObject() {
				if i = member(b, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// member reads an object member's name and colon from i (after the space before it), and returns
// where its value starts (after the space before it), or -1.
func member(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i); i < 0 {
		return -1
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// stringEnd is the index after the JSON string that starts at b[i], or -1 when it is not one: it
// ends before the text does, holds a byte below 0x20, or an escape JSON does not have.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		for i < len(b) && !inStringSpecial[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// inStringSpecial are the bytes a string's scan stops at: its end, an escape, and those JSON
// refuses there.
var inStringSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// numberEnd is the index after the JSON number that starts at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(b []byte, i int) int {
	digits := func(i int) int { // past one digit or more, or -1
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	default:
		if i = digits(i); i < 0 {
			return -1
		}
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

// literal is the index after word at b[i], or -1 when b does not hold it there.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
