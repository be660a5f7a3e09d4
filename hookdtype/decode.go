package hookdtype

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
)

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	numberType     = reflect.TypeFor[json.Number]()
)

// decoder reads a JSON text into a Go value in one pass, checking as it reads all that
// DecodeStrict refuses: the syntax (as Valid), the nesting depth, bytes that are not UTF-8, a key
// sent twice, a field the type does not have, a value of the wrong type, an empty value a strict
// tag refuses. It decodes as json.Unmarshal would the shapes of hookd's requests: structs, maps
// with string keys, slices, pointers, strings, numbers and booleans; other values are checked,
// then handed to their own decoder or to json.Unmarshal.
//
// It gives up (an index of -1) at anything it does not accept, an error or a shape it does not
// know (an escaped key, an array type), leaving v partly written. DecodeStrict then takes the
// path that names errors, whose json.Unmarshal writes again every value the text has: the
// separate passes cost three times this one, and every request takes them.
type decoder struct {
	b     []byte
	depth int
}

// keySpan is where a key's text is in decoder.b, quotes excluded.
type keySpan struct{ start, end int }

// decode decodes the whole text into v, a value a pointer points to, and reports whether it did.
func (d *decoder) decode(v reflect.Value) bool {
	i := d.value(SkipSpace(d.b, 0), v)
	return i >= 0 && SkipSpace(d.b, i) == len(d.b)
}

// value decodes the value at b[i] (after the space before it) into v, which is settable, and
// returns the index after it.
func (d *decoder) value(i int, v reflect.Value) int {
	if i >= len(d.b) {
		return -1
	}
	c, t := d.b[i], v.Type()
	if c == 'n' {
		return d.null(i, v)
	}
	for t.Kind() == reflect.Pointer && !implements(t) {
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		v, t = v.Elem(), t.Elem()
	}
	if implements(t) || t == numberType {
		if promoted(t) {
			return -1
		}
		end := d.skip(i)
		if end < 0 || !decodeItself(d.b[i:end], v) {
			return -1
		}
		return end
	}
	switch t.Kind() {
	case reflect.String:
		if c != '"' {
			return -1
		}
		end, escaped := d.string(i)
		if end < 0 {
			return -1
		}
		v.SetString(StringContent(d.b[i:end], escaped))
		return end
	case reflect.Bool:
		end := literal(d.b, i, "true")
		if end < 0 {
			end = literal(d.b, i, "false")
		}
		if end >= 0 {
			v.SetBool(c == 't')
		}
		return end
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		end := numberEnd(d.b, i)
		if end < 0 {
			return -1
		}
		n, err := strconv.ParseInt(string(d.b[i:end]), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return -1
		}
		v.SetInt(n)
		return end
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		end := numberEnd(d.b, i)
		if end < 0 {
			return -1
		}
		n, err := strconv.ParseUint(string(d.b[i:end]), 10, 64)
		if err != nil || v.OverflowUint(n) {
			return -1
		}
		v.SetUint(n)
		return end
	case reflect.Float32, reflect.Float64:
		end := numberEnd(d.b, i)
		if end < 0 {
			return -1
		}
		f, err := strconv.ParseFloat(string(d.b[i:end]), t.Bits())
		if err != nil || v.OverflowFloat(f) {
			return -1
		}
		v.SetFloat(f)
		return end
	case reflect.Struct:
		if c == '{' {
			return d.structObject(i, v)
		}
	case reflect.Map:
		if c == '{' {
			return d.mapObject(i, v)
		}
	case reflect.Slice:
		if c == '[' {
			return d.slice(i, v)
		}
	}
	return -1 // a value of the wrong type, or a shape left to the other path (an array type, base64)
}

// null decodes the null at b[i] into v as encoding/json does: a pointer, a map or a slice is set
// to nil, a value that decodes itself is handed the null, any other keeps its value.
func (d *decoder) null(i int, v reflect.Value) int {
	end := literal(d.b, i, "null")
	if end < 0 || !v.CanSet() {
		return -1
	}
	switch t := v.Type(); {
	case t.Kind() == reflect.Pointer:
		v.SetZero()
	case implements(t):
		if promoted(t) || !decodeItself(d.b[i:end], v) {
			return -1
		}
	case t.Kind() == reflect.Map || t.Kind() == reflect.Slice:
		v.SetZero()
	}
	return end
}

// promoted reports whether t, which decodes itself, is a type without a name given its methods
// by a field: encoding/json does not hand a field of that type its text, and the walk checks its
// kind; the decoder leaves it to them.
func promoted(t reflect.Type) bool { return t.PkgPath() == "" && t.Kind() != reflect.Interface }

// decodeItself decodes the checked JSON value raw into v, whose type decodes itself (or is
// json.Number, which encoding/json checks).
func decodeItself(raw []byte, v reflect.Value) bool {
	t := v.Type()
	switch {
	case t == rawMessageType: // its UnmarshalJSON: a copy of the value's text
		v.SetBytes(append(v.Bytes()[:0], raw...))
		return true
	case raw[0] != 'n' && factsOf(t).unmarshaler: // handed its text, as encoding/json does
		return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw) == nil
	}
	return json.Unmarshal(raw, v.Addr().Interface()) == nil
}

// open enters the object or array at b[i] and returns the index of its first member or element,
// or of its end.
func (d *decoder) open(i int) int {
	if d.depth++; d.depth > MaxDepth {
		return -1
	}
	i = SkipSpace(d.b, i+1)
	if i >= len(d.b) {
		return -1
	}
	return i
}

// next reads what follows the member or element that ends at b[i]: the index of the next one,
// or of the end of the object or array (closer) and done.
func (d *decoder) next(i int, closer byte) (next int, done bool) {
	if i = SkipSpace(d.b, i); i >= len(d.b) {
		return -1, false
	}
	switch d.b[i] {
	case ',':
		return SkipSpace(d.b, i+1), false
	case closer:
		d.depth--
		return i + 1, true
	}
	return -1, false
}

// keySet are the keys of one object read so far, to find a key sent twice.
type keySet struct {
	few [fewKeys]keySpan
	n   int
	// many are the keys once they are more than few: compared one by one, an object of n keys
	// would cost n²/2 comparisons (50,000 keys, half a megabyte, took six seconds).
	many map[string]struct{}
}

// fewKeys is the number of keys past which an object's are looked up in a map.
const fewKeys = 16

// key reads the key of the member at b[i] and the colon after it, and returns the key's text and
// the index of the value (after the space before it); -1 at a key sent twice in ks's object, or
// one with an escape (which is compared by what it decodes to: the other path's to read).
func (d *decoder) key(i int, ks *keySet) (key []byte, value int) {
	if i >= len(d.b) || d.b[i] != '"' {
		return nil, -1
	}
	end, escaped := d.string(i)
	if end < 0 || escaped {
		return nil, -1
	}
	key = d.b[i+1 : end-1]
	if ks.n == fewKeys && ks.many == nil {
		ks.many = make(map[string]struct{}, 4*fewKeys)
		for _, seen := range ks.few {
			ks.many[string(d.b[seen.start:seen.end])] = struct{}{}
		}
	}
	if ks.many != nil {
		if _, dup := ks.many[string(key)]; dup {
			return nil, -1
		}
		ks.many[string(key)] = struct{}{}
	} else {
		for _, seen := range ks.few[:ks.n] {
			if bytes.Equal(d.b[seen.start:seen.end], key) {
				return nil, -1
			}
		}
		ks.few[ks.n] = keySpan{i + 1, end - 1}
		ks.n++
	}
	if i = SkipSpace(d.b, end); i >= len(d.b) || d.b[i] != ':' {
		return nil, -1
	}
	return key, SkipSpace(d.b, i+1)
}

// structObject decodes the object at b[i] into the struct v.
func (d *decoder) structObject(i int, v reflect.Value) int {
	fields := fieldsOf(v.Type())
	if fields.index == nil {
		return -1
	}
	if i = d.open(i); i < 0 || d.b[i] == '}' {
		return d.close(i, '}')
	}
	var ks keySet
	for {
		k, start := d.key(i, &ks)
		if start < 0 {
			return -1
		}
		index, known := fields.index[string(k)]
		if !known {
			return -1
		}
		f, ok := fieldByIndex(v, index)
		if !ok {
			return -1
		}
		end := d.value(start, f)
		if end < 0 || fields.refusesEmpty(string(k), d.b[start:end]) {
			return -1
		}
		var done bool
		if i, done = d.next(end, '}'); i < 0 || done {
			return i
		}
	}
}

// close is the index after the empty object or array whose end is at b[i].
func (d *decoder) close(i int, closer byte) int {
	if i < 0 || d.b[i] != closer {
		return -1
	}
	d.depth--
	return i + 1
}

// fieldByIndex is the field of the struct v at index, as encoding/json finds it: an embedded
// pointer on the way is given a value when it has none, unless it cannot be set.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return v, false // an embedded pointer to an unexported struct: encoding/json refuses it
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, v.CanSet()
}

// mapObject decodes the object at b[i] into the map v.
func (d *decoder) mapObject(i int, v reflect.Value) int {
	t := v.Type()
	if t.Key().Kind() != reflect.String || factsOf(t.Key()).text {
		return -1 // a key encoding/json decodes as a number or as text: the other path's
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	if i = d.open(i); i < 0 || d.b[i] == '}' {
		return d.close(i, '}')
	}
	var ks keySet
	// Each value is decoded into a zero element, then stored, as encoding/json does.
	elem := reflect.New(t.Elem()).Elem()
	key := reflect.New(t.Key()).Elem()
	for {
		k, start := d.key(i, &ks)
		if start < 0 {
			return -1
		}
		elem.SetZero()
		end := d.value(start, elem)
		if end < 0 {
			return -1
		}
		key.SetString(string(k))
		v.SetMapIndex(key, elem)
		var done bool
		if i, done = d.next(end, '}'); i < 0 || done {
			return i
		}
	}
}

// slice decodes the array at b[i] into the slice v, as encoding/json does: into the elements v
// has, then into new ones.
func (d *decoder) slice(i int, v reflect.Value) int {
	if i = d.open(i); i < 0 {
		return -1
	}
	n := 0
	if d.b[i] == ']' {
		i = d.close(i, ']')
	} else {
		for done := false; !done; n++ {
			if n >= v.Cap() {
				v.Grow(1)
			}
			if n >= v.Len() {
				v.SetLen(n + 1)
			}
			if i = d.value(i, v.Index(n)); i < 0 {
				return -1
			}
			if i, done = d.next(i, ']'); i < 0 {
				return -1
			}
		}
	}
	if n < v.Len() {
		v.SetLen(n)
	}
	if n == 0 {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	return i
}

// skip checks the value at b[i], which is not decoded here, and returns the index after it.
func (d *decoder) skip(i int) int {
	if i >= len(d.b) {
		return -1
	}
	switch d.b[i] {
	case '{':
		if i = d.open(i); i < 0 || d.b[i] == '}' {
			return d.close(i, '}')
		}
		var ks keySet
		for done := false; !done; {
			_, start := d.key(i, &ks)
			if start < 0 {
				return -1
			}
			if i = d.skip(start); i < 0 {
				return -1
			}
			if i, done = d.next(i, '}'); i < 0 {
				return -1
			}
		}
		return i
	case '[':
		if i = d.open(i); i < 0 || d.b[i] == ']' {
			return d.close(i, ']')
		}
		for done := false; !done; {
			if i = d.skip(i); i < 0 {
				return -1
			}
			if i, done = d.next(i, ']'); i < 0 {
				return -1
			}
		}
		return i
	case '"':
		end, _ := d.string(i)
		return end
	case 't':
		return literal(d.b, i, "true")
	case 'f':
		return literal(d.b, i, "false")
	case 'n':
		return literal(d.b, i, "null")
	}
	return numberEnd(d.b, i)
}

// string checks the string at b[i] and returns the index after it, and whether it has an escape;
// -1 when it is not a JSON string of UTF-8 text.
func (d *decoder) string(i int) (end int, escaped bool) {
	b := d.b
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf:
			i++
		case c == '"':
			return i + 1, escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return -1, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(b[i+2:]) < 0 {
					return -1, false
				}
				i += 6
			default:
				return -1, false
			}
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return -1, false
			}
			i += n
		default:
			return -1, false // a control character
		}
	}
	return -1, false
}

// implements says whether t decodes itself: encoding/json hands such a value its text.
func implements(t reflect.Type) bool { return factsOf(t).decodesItself }

// typeFacts are what decoding asks of a type, found once per type: reflect's Implements takes
// longer than decoding a short string.
type typeFacts struct {
	unmarshaler   bool // *T is a json.Unmarshaler
	text          bool // *T is an encoding.TextUnmarshaler
	decodesItself bool // either, or T an interface
	checked       reflect.Type
}

var factCache sync.Map // reflect.Type -> *typeFacts

func factsOf(t reflect.Type) *typeFacts {
	if f, ok := factCache.Load(t); ok {
		return f.(*typeFacts)
	}
	p := reflect.PointerTo(t)
	f := &typeFacts{unmarshaler: p.Implements(jsonUnmarshaler), text: p.Implements(textUnmarshaler), checked: checkedType(t)}
	f.decodesItself = f.unmarshaler || f.text || t.Kind() == reflect.Interface
	factCache.Store(t, f)
	return f
}
