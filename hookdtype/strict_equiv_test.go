package hookdtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestDecodeStrictMatchesTreeWalk compares DecodeStrict with the reference it replaced — the
// whole text read token by token into a tree, then the tree walked beside the type — on random
// texts built from the type's own field names, near misses, duplicates, escapes and syntax errors:
// the same error (field and message) or the same decoded value.
func TestDecodeStrictMatchesTreeWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 19))
	for n := range 30000 {
		doc := randomDoc(rng)
		at := ""
		if n%3 == 0 {
			at = "context"
		}
		compareStrict[strictOuter](t, doc, at)
		compareStrict[strictShapes](t, doc, at)
		compareStrict[*strictShapes](t, doc, at)
	}
}

func compareStrict[T any](t *testing.T, doc []byte, at string) {
	t.Helper()
	var got, want T
	gerr := DecodeStrict(doc, &got, at)
	werr := referenceStrict(doc, &want, at)
	if !sameError(gerr, werr) {
		t.Fatalf("%T: %s at %q:\n got  %v\n want %v", got, doc, at, gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T: %s: decoded %+v, want %+v", got, doc, got, want)
	}
}

// strictShapes has the shapes the decoder decodes itself, and some it leaves to encoding/json.
type strictShapes struct {
	HookName  string           `json:"hookName"`
	Timeout   int8             `json:"timeoutMs"`
	Ptr       *int64           `json:"ptr"`
	Context   json.RawMessage  `json:"context"`
	RawPtr    *json.RawMessage `json:"rules"`
	Any       any              `json:"any"`
	When      textValue        `json:"when"`
	Headers   map[string]int   `json:"headers"`
	Flag      bool             `json:"failureMode"`
	Ratio     float32          `json:"x"`
	Count     uint16           `json:"zzz"`
	Num       json.Number      `json:"wehn"`
	CreatedAt *time.Time       `json:"createdAt"`
	List      []string         `json:"日本"`
	*StrictAgent
}

// StrictAgent is an embedded pointer, whose fields encoding/json allocates.
type StrictAgent struct {
	Kind string `json:"dispatchConfig"`
}

// textValue decodes itself, as dispatcher.Value does.
type textValue string

func (v *textValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = textValue(s)
		return nil
	}
	*v = textValue(b)
	return nil
}

func sameError(a, b error) bool {
	var va, vb *ValidationError
	if errors.As(a, &va) != errors.As(b, &vb) {
		return false
	}
	if va != nil {
		return (va.Field == vb.Field || typeErrorBelow(va, vb)) && va.Msg == vb.Msg
	}
	return (a == nil) == (b == nil)
}

// typeErrorBelow reports whether a names the value of a wrong type that b, encoding/json's
// error, names, more exactly: with the indices and map keys that encoding/json leaves out
// (rules[2].reason for its rules.reason, headers.k for its headers), and without the Go name of
// an embedded struct that it puts in (StrictAgent.dispatchConfig for dispatchConfig).
func typeErrorBelow(a, b *ValidationError) bool {
	if !strings.HasPrefix(a.Msg, "must be ") {
		return false
	}
	indices := regexp.MustCompile(`\[\d+\]`)
	got, want := indices.ReplaceAllString(a.Field, ""), strings.Replace(b.Field, "StrictAgent.", "", 1)
	return got == want || strings.HasPrefix(got, want+".")
}

var docKeys = []string{"hookName", "timeoutMs", "dispatchConfig", "ptr", "context", "any", "createdAt",
	"failureMode", "headers", "rules", "when", "hook_name", "HookName", "wehn", "zzz", "Ignored", "skipped",
	`hook\u004eame`, `wh\u0065n`, "", "日本", "x"}

func randomDoc(rng *rand.Rand) []byte {
	var b bytes.Buffer
	randomValue(rng, &b, 0)
	out := b.Bytes()
	switch rng.IntN(12) {
	case 0: // cut short
		out = out[:rng.IntN(len(out)+1)]
	case 1: // trailing data
		out = append(out, " {}"...)
	case 2: // a stray byte
		if len(out) > 0 {
			out[rng.IntN(len(out))] = "x:,}]\""[rng.IntN(6)]
		}
	}
	return out
}

func randomValue(rng *rand.Rand, b *bytes.Buffer, depth int) {
	switch k := rng.IntN(10); {
	case depth < 4 && k < 5:
		b.WriteByte('{')
		n := rng.IntN(5)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if rng.IntN(4) == 0 {
				b.WriteString(" ")
			}
			b.WriteString(`"` + docKeys[rng.IntN(len(docKeys))] + `":`)
			randomValue(rng, b, depth+1)
		}
		b.WriteByte('}')
	case depth < 4 && k < 7:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString(", ")
			}
			randomValue(rng, b, depth+1)
		}
		b.WriteByte(']')
	case k < 8:
		b.WriteString(`"` + []string{"a", `q\"uote`, "2026-01-01T00:00:00Z", "DENY", `\u00e9`}[rng.IntN(5)] + `"`)
	case k < 9:
		b.WriteString(strconv.Itoa(rng.IntN(5000) - 10))
	default:
		b.WriteString([]string{"true", "null", "1.5", "false"}[rng.IntN(4)])
	}
}

// referenceStrict is DecodeStrict as it was before the single-pass walk.
func referenceStrict(data []byte, v any, at string) error {
	root := at
	if root == "" {
		root = "body"
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(root, "is empty; a JSON object is required")
	}
	if json.Valid(data) && !utf8.Valid(data) { // a syntax error is named first
		for i, r := range string(data) {
			if r == utf8.RuneError && !strings.HasPrefix(string(data[i:]), "\uFFFD") {
				return Invalid(root, "is not UTF-8 text: byte %d (%#x) is not part of a UTF-8 character", i, data[i])
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tree, err := refTree(dec, at)
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
	if err := refFields(tree, reflect.TypeOf(v), at); err != nil {
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

func refTree(dec *json.Decoder, path string) (any, error) {
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
			if obj[k], err = refTree(dec, at); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for i := 0; dec.More(); i++ {
			v, err := refTree(dec, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// refFields walks the tree beside the type; a map's keys are taken in sorted order too.
func refFields(node any, t reflect.Type, path string) error {
	t = checked(t)
	if t == nil {
		return nil
	}
	obj, isObj := node.(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	switch t.Kind() {
	case reflect.Struct:
		if !isObj {
			return nil
		}
		fields := fieldsOf(t)
		for _, k := range keys {
			ft, known := fields.types[k]
			if !known {
				return Invalid(join(path, k, k), "%s", fields.unknown(k))
			}
			if err := refFields(obj[k], ft, join(path, k, k)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for _, k := range keys {
			if err := refFields(obj[k], t.Elem(), join(path, k, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := node.([]any)
		for i, v := range arr {
			if err := refFields(v, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}
