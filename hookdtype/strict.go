package hookdtype

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// DecodeStrict decodes the JSON value data into v and refuses what encoding/json would let pass
// silently: a field v does not have (at any depth, with a "did you mean" when a known field is
// close), a field whose name differs from the known one only in case, and trailing data. Errors
// are ValidationErrors naming the JSON path below at ("" names the whole value "body"):
// `dispatchConfig.failure_mode`, `context.toolName`. A value of the wrong type is named the same way.
//
// Values whose type decodes itself (json.Unmarshaler, encoding.TextUnmarshaler, json.RawMessage,
// interfaces) are not looked into: their owner checks them.
func DecodeStrict(data []byte, v any, at string) error {
	root := at
	if root == "" {
		root = "body"
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(root, "is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tree, err := readTree(dec, at)
	var ve *ValidationError
	switch {
	case errors.As(err, &ve):
		return err
	case err != nil:
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) {
			return Invalid(root, "malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Invalid(root, "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invalid(root, "trailing data after the JSON value")
	}
	if err := checkFields(tree, reflect.TypeOf(v), at); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return Invalid(join(at, typeErr.Field, root), "must be %s, not %s", jsonKind(typeErr.Type), typeErr.Value)
		}
		return Invalid(root, "%v", err)
	}
	return nil
}

func join(at, field, root string) string {
	switch {
	case field == "":
		return root
	case at == "":
		return field
	}
	return at + "." + field
}

// readTree decodes one JSON value as encoding/json would into an any, refusing a key that appears
// twice in one object: encoding/json would keep the last silently, other readers the first.
func readTree(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			at := join(path, k, k)
			if _, dup := obj[k]; dup {
				return nil, Invalid(at, "appears twice; send each field once")
			}
			if obj[k], err = readTree(dec, at); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for i := 0; dec.More(); i++ {
			v, err := readTree(dec, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkFields walks the decoded tree beside the Go type it is decoded into.
func checkFields(node any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := node.(map[string]any)
		if !ok {
			return nil // a wrong type: json.Unmarshal names it
		}
		fields := fieldsOf(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first error is the same every time
		for _, k := range keys {
			ft, known := fields.types[k]
			if !known {
				msg := "unknown field"
				if s := Suggest(k, fields.names); s != "" {
					msg += " (did you mean " + strconv.Quote(s) + "?)"
				}
				return Invalid(join(path, k, k), "%s", msg)
			}
			if err := checkFields(obj[k], ft, join(path, k, k)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		for k, v := range obj {
			if err := checkFields(v, t.Elem(), join(path, k, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := node.([]any)
		if !ok {
			return nil
		}
		for i, v := range arr {
			if err := checkFields(v, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// structFields are the JSON names of a struct type's fields, embedded structs' included.
type structFields struct {
	types map[string]reflect.Type
	names []string
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{types: map[string]reflect.Type{}}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if sf.Anonymous && name == "" {
				et := sf.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					collect(et)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if _, dup := f.types[name]; !dup {
				f.names = append(f.names, name)
			}
			f.types[name] = sf.Type
		}
	}
	collect(t)
	fieldCache.Store(t, f)
	return f
}

// jsonKind names the JSON kind a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
