package hookdtype

import (
	"encoding/json"
	"reflect"
	"strconv"
	"sync"
)

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	numberType     = reflect.TypeFor[json.Number]()
)

// decodeValue decodes the valid JSON value at b[i] into v (settable) as json.Unmarshal would,
// for the shapes of hookd's request bodies: structs of strings, numbers, booleans, pointers and
// raw messages. Anything else is handed to json.Unmarshal for that value alone. It returns the
// index after the value, or ok false at the first value that json.Unmarshal would refuse, or that
// it is not sure to decode alike; v is then partly written, and the caller decodes the whole text
// with json.Unmarshal, which writes every field the text has again.
func decodeValue(b []byte, i int, v reflect.Value) (end int, ok bool) {
	i = SkipSpace(b, i)
	t := v.Type()
	for b[i] != 'n' && t.Kind() == reflect.Pointer && !implements(t) {
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		v, t = v.Elem(), t.Elem()
	}
	switch b[i] {
	case '{':
		if t.Kind() == reflect.Struct && !implements(t) {
			return decodeStruct(b, i, v)
		}
	case '"':
		if t.Kind() == reflect.String && t != numberType && !implements(t) {
			end, decode := StringEnd(b, i)
			v.SetString(StringContent(b[i:end], decode))
			return end, true
		}
	}
	end = ValueEnd(b, i)
	switch {
	case t == rawMessageType: // its UnmarshalJSON: a copy of the value's text, null included
		v.SetBytes(append(v.Bytes()[:0], b[i:end]...))
		return end, true
	case b[i] != 'n' && factsOf(t).unmarshaler: // handed its text, as encoding/json does
		return end, v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b[i:end]) == nil
	case b[i] == 'n' || t == numberType || implements(t):
		return end, json.Unmarshal(b[i:end], v.Addr().Interface()) == nil
	}
	lit := b[i:end]
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(b[i] == 't')
		return end, b[i] == 't' || b[i] == 'f'
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(string(lit), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return 0, false
		}
		v.SetInt(n)
		return end, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(string(lit), 10, 64)
		if err != nil || v.OverflowUint(n) {
			return 0, false
		}
		v.SetUint(n)
		return end, true
	case reflect.Float32, reflect.Float64:
		if b[i] != '-' && (b[i] < '0' || b[i] > '9') {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(lit), t.Bits())
		if err != nil || v.OverflowFloat(f) {
			return 0, false
		}
		v.SetFloat(f)
		return end, true
	case reflect.String, reflect.Struct: // a string or an object was not what came
		return 0, false
	}
	return end, json.Unmarshal(lit, v.Addr().Interface()) == nil
}

// implements says whether t decodes itself: encoding/json hands such a value its text.
func implements(t reflect.Type) bool { return factsOf(t).decodesItself }

// typeFacts are what decoding asks of a type, found once per type: reflect's Implements takes
// longer than decoding a short string.
type typeFacts struct {
	unmarshaler   bool // *T is a json.Unmarshaler
	decodesItself bool // or an encoding.TextUnmarshaler, or T an interface
	checked       reflect.Type
}

var factCache sync.Map // reflect.Type -> *typeFacts

func factsOf(t reflect.Type) *typeFacts {
	if f, ok := factCache.Load(t); ok {
		return f.(*typeFacts)
	}
	p := reflect.PointerTo(t)
	f := &typeFacts{unmarshaler: p.Implements(jsonUnmarshaler), checked: checkedType(t)}
	f.decodesItself = f.unmarshaler || p.Implements(textUnmarshaler) || t.Kind() == reflect.Interface
	factCache.Store(t, f)
	return f
}

// decodeStruct decodes the object at b[i] into the struct v. The strict walk has checked that
// every key names a field, once.
func decodeStruct(b []byte, i int, v reflect.Value) (int, bool) {
	fields := fieldsOf(v.Type())
	if fields.index == nil {
		end := ValueEnd(b, i)
		return end, json.Unmarshal(b[i:end], v.Addr().Interface()) == nil
	}
	for i = SkipSpace(b, i+1); b[i] != '}'; {
		end, decode := StringEnd(b, i)
		var idx []int
		var found bool
		if decode {
			idx, found = fields.index[StringContent(b[i:end], true)]
		} else {
			idx, found = fields.index[string(b[i+1:end-1])]
		}
		if !found { // a field behind an embedded pointer
			return 0, false
		}
		f := v.FieldByIndex(idx)
		if !f.CanSet() {
			return 0, false
		}
		var ok bool
		if i, ok = decodeValue(b, SkipSpace(b, end)+1, f); !ok { // after ':'
			return 0, false
		}
		if i = SkipSpace(b, i); b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	return i + 1, true
}
