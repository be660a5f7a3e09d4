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
	"unicode/utf8"
)

// DecodeStrict decodes the JSON value data into v and refuses what encoding/json would let pass
// silently: text that is not UTF-8, a field v does not have (at any depth, with a "did you mean"
// when a known field is close), a field whose name differs from the known one only in case, an
// empty value ("", 0, null) of a field tagged strict:"nonempty" (null alone for strict:"nonnull"),
// and trailing data. Errors
// are ValidationErrors naming the JSON path below at ("" names the whole value "body"):
// `dispatchConfig.failure_mode`, `context.toolName`. A value of the wrong type is named the same way.
//
// Values whose type decodes itself (json.Unmarshaler, encoding.TextUnmarshaler, json.RawMessage,
// interfaces) are not looked into: their owner checks them.
func DecodeStrict(data []byte, v any, at string) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		d := decoder{b: data}
		if d.decode(rv.Elem()) {
			return nil
		}
	}
	return decodeChecked(data, v, at)
}

// decodeChecked is DecodeStrict for what the decoder does not take, and for every error, which it
// names: the checks one by one, in the order a reader meets their errors, then encoding/json.
func decodeChecked(data []byte, v any, at string) error {
	root := at
	if root == "" {
		root = "body"
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(root, "is empty; a JSON object is required")
	}
	if deeperThan(data, MaxDepth) {
		return Invalid(root, "nests objects and arrays more than %d levels deep", MaxDepth)
	}
	if !Valid(data) {
		return malformed(data, at, root)
	}
	if !utf8.Valid(data) {
		// encoding/json would replace each bad byte with U+FFFD and carry on: what is decoded
		// would not be what was sent.
		i := 0
		for r, n := utf8.DecodeRune(data); r != utf8.RuneError || n != 1; r, n = utf8.DecodeRune(data[i:]) {
			i += n
		}
		return Invalid(root, "is not UTF-8 text: byte %d (%#x) is not part of a UTF-8 character", i, data[i])
	}
	wrongType, err := walkStrict(data, reflect.TypeOf(v), at)
	if err != nil {
		return err
	}
	// A field of a wrong type is named as the walk found it, with the indices and keys
	// encoding/json leaves out.
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && wrongType != nil:
			return wrongType
		case errors.As(err, &typeErr):
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

// malformed is the first error of a text that is not one JSON value, in the order a reader meets
// them: a key sent twice before the syntax error is named as such.
func malformed(data []byte, at, root string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	err := firstDuplicate(dec, at)
	if err == nil {
		if _, err = dec.Token(); err != io.EOF {
			return Invalid(root, "trailing data after the JSON value")
		}
		return Invalid(root, "malformed JSON")
	}
	var ve *ValidationError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &ve):
		return err
	case errors.As(err, &syntaxErr):
		return Invalid(root, "malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return Invalid(root, "malformed JSON: %v", err)
}

// Duplicate names, as a ValidationError below at, the first key that appears twice in one object
// of data, a JSON value; nil when none does (or data is not JSON: that is its reader's to say).
// For JSON carried as text, which DecodeStrict does not look into: the arguments of a tool call
// sent as a string.
func Duplicate(data []byte, at string) error {
	d := decoder{b: data}
	if end := d.skip(SkipSpace(data, 0)); end >= 0 && SkipSpace(data, end) == len(data) {
		return nil // one JSON value, no deeper than MaxDepth, with no key twice in an object
	}
	return duplicateChecked(data, at)
}

// duplicateChecked is Duplicate for what the decoder's check does not take, and for every error.
func duplicateChecked(data []byte, at string) error {
	if deeperThan(data, MaxDepth) {
		return Invalid(at, "nests objects and arrays more than %d levels deep", MaxDepth)
	}
	if !Valid(data) {
		return nil
	}
	var steps [16]walkStep
	w := strictWalk{b: data, at: steps[:0]}
	if w.value(0, nil); w.dup != nil {
		return named(w.dup, at)
	}
	return nil
}

// MaxDepth is the deepest nesting of objects and arrays a strict decode takes. encoding/json
// takes 10,000 levels, but no request needs more than a few dozen, and each level is work for
// every reader after it (a path to name, a frame of every walk): 10,000 levels of long keys cost
// gigabytes before this bound.
const MaxDepth = 512

// deeperThan reports whether the JSON text b (valid or not) opens more than max objects and
// arrays inside one another, strings skipped.
func deeperThan(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			depth--
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return false
}

// firstDuplicate reads one JSON value token by token, refusing a key that appears twice in one
// object; steps are the keys and indices from at down to the value, joined only for the error.
func firstDuplicate(dec *json.Decoder, at string) error {
	steps := []string{at}
	var read func() error
	read = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				above := steps
				if k == "" {
					steps = []string{k} // a key "" names the path from the top afresh, as join does
				} else {
					steps = append(steps, k)
				}
				if seen[k] {
					return Invalid(shortField(joinPath(steps...)), "appears twice; send each field once")
				}
				seen[k] = true
				if err := read(); err != nil {
					return err
				}
				steps = above
			}
			_, err := dec.Token() // '}'
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				steps = append(steps, "["+strconv.Itoa(i)+"]")
				if err := read(); err != nil {
					return err
				}
				steps = steps[:len(steps)-1]
			}
			_, err := dec.Token() // ']'
			return err
		}
		return nil
	}
	return read()
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// strictWalk walks a valid JSON text beside the Go type it is decoded into, in one pass without
// decoding it: a key sent twice in one object (encoding/json would keep the last silently, other
// readers the first) anywhere in the text, the first in text order, ends the walk in dup; else the
// error is the first unknown field, with an object's keys (a struct's or a map's) taken in sorted
// order, so that the error is the same every time.
type strictWalk struct {
	b   []byte
	dup *walkError
	// typ is the first value, in text order, of a JSON type its Go field cannot take, named with
	// its indices (encoding/json's error names none: policyConfig.rules.reason for the reason of
	// rules[2]); reported when the text has no other error, as encoding/json's would be.
	typ *walkError
	// at are the keys and indices from the top to the value being walked, for typ's path.
	at []walkStep
}

// walkStep is a step of strictWalk.at: an object's key, or an array's index when key is nil.
type walkStep struct {
	key   []byte
	index int
}

// path is the path of the value being walked, as walkError paths are written.
func (w *strictWalk) path() string {
	parts := make([]string, len(w.at))
	for i, s := range w.at {
		if s.key == nil {
			parts[i] = "[" + strconv.Itoa(s.index) + "]"
		} else {
			parts[i] = string(s.key)
		}
	}
	return joinPath(parts...)
}

// walkError is an error of the walk. Its path is from the value being walked, and each level adds
// its own step on the way out, so that a path costs nothing until there is an error to name (and
// is joined once then: joined level by level, a path 500 levels deep was copied 500 times). A
// key "" names the path from the top afresh (as join does): rooted, and no level adds to it.
type walkError struct {
	path, msg string
	outer     []string // the steps above path, the nearest first
	rooted    bool
}

// under is e one step further from the error: below key, or below an index ("[2]").
func (e *walkError) under(step string, key bool) *walkError {
	switch {
	case e.rooted:
	case key && step == "":
		e.rooted = true
	default:
		e.outer = append(e.outer, step)
	}
	return e
}

// below is e's path below the steps above: at, then e's own from the top.
func (e *walkError) below(above ...string) string {
	parts := make([]string, 0, len(above)+len(e.outer)+1)
	parts = append(parts, above...)
	for i := len(e.outer) - 1; i >= 0; i-- {
		parts = append(parts, e.outer[i])
	}
	return joinPath(append(parts, e.path)...)
}

// leaf is the error of the member key itself.
func leaf(key []byte, msg string) *walkError {
	return &walkError{path: string(key), msg: msg, rooted: len(key) == 0}
}

// joinPath joins parts, each a key or an index in brackets (or a path of them), from the top.
func joinPath(parts ...string) string {
	var b strings.Builder
	for _, rel := range parts {
		switch {
		case rel == "":
		case b.Len() == 0 || rel[0] == '[':
			b.WriteString(rel)
		default:
			b.WriteByte('.')
			b.WriteString(rel)
		}
	}
	return b.String()
}

// maxFieldBytes bounds the path an error names: a path of long keys is cut in its middle, so that
// an error about a megabyte of keys does not send the megabyte back.
const maxFieldBytes = 512

func shortField(p string) string {
	if len(p) <= maxFieldBytes {
		return p
	}
	head, tail := maxFieldBytes*2/3, len(p)-maxFieldBytes/3
	for head > 0 && !utf8.RuneStart(p[head]) {
		head--
	}
	for tail < len(p) && !utf8.RuneStart(p[tail]) {
		tail++
	}
	return p[:head] + "…" + p[tail:]
}

// walkStrict walks data beside t and returns its first error, named below at, or else the first
// value of a wrong type (which encoding/json reports too, unless it meets a worse error first).
func walkStrict(data []byte, t reflect.Type, at string) (wrongType, err error) {
	var steps [16]walkStep
	w := strictWalk{b: data, at: steps[:0]}
	_, werr := w.value(0, t)
	if w.dup != nil {
		werr = w.dup
	}
	switch {
	case werr != nil:
		return nil, named(werr, at)
	case w.typ != nil:
		return named(w.typ, at), nil
	}
	return nil, nil
}

// named is the walk's error as a ValidationError below at.
func named(err *walkError, at string) error {
	if err.rooted {
		return &ValidationError{Field: shortField(err.below()), Msg: err.msg}
	}
	field := err.below(at)
	if field == "" {
		field = "body" // the whole value, as DecodeStrict names it
	}
	return &ValidationError{Field: shortField(field), Msg: err.msg}
}

var jsonNumber = reflect.TypeFor[json.Number]()

func isNumberKind(k reflect.Kind) bool {
	return (k >= reflect.Int && k <= reflect.Uint64) || k == reflect.Float32 || k == reflect.Float64
}

// numberMismatch says why the number lit cannot be decoded into t, a number type: a fraction, or
// a value out of its range, as encoding/json would say it ("" when it can).
func numberMismatch(t reflect.Type, lit []byte) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	k := t.Kind()
	if !isNumberKind(k) || (t.PkgPath() != "" && factsOf(t).decodesItself) {
		return ""
	}
	s := string(lit)
	v := reflect.New(t).Elem()
	switch {
	case k >= reflect.Int && k <= reflect.Int64:
		if n, err := strconv.ParseInt(s, 10, 64); err != nil || v.OverflowInt(n) {
			return "must be " + jsonKind(t) + ", not number " + s
		}
	case k >= reflect.Uint && k <= reflect.Uint64:
		if n, err := strconv.ParseUint(s, 10, 64); err != nil || v.OverflowUint(n) {
			return "must be " + jsonKind(t) + ", not number " + s
		}
	default:
		if f, err := strconv.ParseFloat(s, t.Bits()); err != nil || v.OverflowFloat(f) {
			return "must be " + jsonKind(t) + ", not number " + s
		}
	}
	return ""
}

// checked is the type whose fields a value is checked against: nil when there is nothing to check
// (a scalar, an interface, a type that decodes itself: its owner checks it).
func checked(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	return factsOf(t).checked
}

func checkedType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return t
	}
	return nil
}

// value walks the value at b[i] and returns the index after it.
func (w *strictWalk) value(i int, t reflect.Type) (int, *walkError) {
	i = SkipSpace(w.b, i)
	msg := mismatch(t, w.b[i])
	if msg == "" && t != nil && (w.b[i] == '-' || (w.b[i] >= '0' && w.b[i] <= '9')) {
		msg = numberMismatch(t, w.b[i:ValueEnd(w.b, i)])
	}
	if msg != "" {
		if w.typ == nil {
			w.typ = &walkError{path: w.path(), msg: msg}
		}
		t = nil // walked all the same, for a key sent twice
	}
	switch w.b[i] {
	case '{':
		return w.object(i, checked(t))
	case '[':
		return w.array(i, checked(t))
	}
	return ValueEnd(w.b, i), nil
}

// mismatch says why a JSON value that starts with c cannot be decoded into t ("" when it can, or
// when that is not for the walk to say: null, an interface, a type that decodes itself).
func mismatch(t reflect.Type, c byte) string {
	if t == nil || c == 'n' {
		return ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	k := t.Kind()
	if (t.PkgPath() != "" || k == reflect.Interface) && factsOf(t).decodesItself {
		return ""
	}
	var ok bool
	switch {
	case t == jsonNumber:
		ok = c == '"' || c == '-' || (c >= '0' && c <= '9')
	case k == reflect.String:
		ok = c == '"'
	case k == reflect.Bool:
		ok = c == 't' || c == 'f'
	case isNumberKind(k):
		ok = c == '-' || (c >= '0' && c <= '9')
	case k == reflect.Struct || k == reflect.Map:
		ok = c == '{'
	case k == reflect.Slice:
		ok = c == '[' || (c == '"' && t.Elem().Kind() == reflect.Uint8) // []byte: base64 text
	case k == reflect.Array:
		ok = c == '['
	default:
		return ""
	}
	if ok {
		return ""
	}
	got := map[byte]string{'"': "string", '{': "object", '[': "array", 't': "bool", 'f': "bool"}[c]
	if got == "" {
		got = "number"
	}
	return "must be " + jsonKind(t) + ", not " + got
}

func (w *strictWalk) object(i int, t reflect.Type) (int, *walkError) {
	var fields *structFields
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		} // an array where an object came: json.Unmarshal names the wrong type
	}
	var small [16][]byte
	keys := small[:0]
	var many map[string]struct{}
	var firstKey, unknown []byte
	var first *walkError
	for i++; ; {
		if i = SkipSpace(w.b, i); w.b[i] == '}' {
			// The did-you-mean of an unknown field is looked for once, for the one named: for every
			// one of 80,000 unknown keys it took 15 s.
			if unknown != nil && (first == nil || bytes.Compare(unknown, firstKey) < 0) {
				first = leaf(unknown, fields.unknown(string(unknown)))
			}
			return i + 1, first
		}
		end, decode := StringEnd(w.b, i)
		k := w.b[i+1 : end-1]
		if decode {
			k = []byte(StringContent(w.b[i:end], true))
		}
		if seenKey(&keys, &many, k) {
			w.dup = leaf(k, "appears twice; send each field once")
			return 0, nil
		}
		i = SkipSpace(w.b, end) + 1 // ':'
		ft, known := elem, true
		if fields != nil {
			ft, known = fields.types[string(k)]
		}
		w.at = append(w.at, walkStep{key: k})
		end, err := w.value(i, ft)
		w.at = w.at[:len(w.at)-1]
		if w.dup != nil {
			w.dup.under(string(k), true)
			return 0, nil
		}
		switch {
		case !known:
			if err = nil; unknown == nil || bytes.Compare(k, unknown) < 0 {
				unknown = k
			}
		case err == nil && fields != nil && fields.refusesEmpty(string(k), w.b[SkipSpace(w.b, i):end]):
			err = leaf(k, "is empty; leave it out for the default, or give a value")
		case err != nil:
			err.under(string(k), true)
		}
		if err != nil && (first == nil || bytes.Compare(k, firstKey) < 0) {
			firstKey, first = k, err
		}
		if i = SkipSpace(w.b, end); w.b[i] == ',' {
			i++
		}
	}
}

// seenKey reports whether k is among an object's keys so far, and adds it: a scan of keys while
// they are few, a map once they are many, so that an object of n keys costs n lookups, not n²/2
// comparisons (50,000 keys, half a megabyte, took six seconds).
func seenKey(keys *[][]byte, many *map[string]struct{}, k []byte) bool {
	if *many == nil {
		for _, seen := range *keys {
			if bytes.Equal(seen, k) {
				return true
			}
		}
		if *keys = append(*keys, k); len(*keys) < cap(*keys) {
			return false
		}
		*many = make(map[string]struct{}, 2*len(*keys))
		for _, seen := range *keys {
			(*many)[string(seen)] = struct{}{}
		}
		return false
	}
	if _, dup := (*many)[string(k)]; dup {
		return true
	}
	(*many)[string(k)] = struct{}{}
	return false
}

func (w *strictWalk) array(i int, t reflect.Type) (int, *walkError) {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	var first *walkError
	i++
	for n := 0; ; n++ {
		if i = SkipSpace(w.b, i); w.b[i] == ']' {
			return i + 1, first
		}
		w.at = append(w.at, walkStep{index: n})
		end, err := w.value(i, elem)
		w.at = w.at[:len(w.at)-1]
		if w.dup != nil {
			w.dup.under("["+strconv.Itoa(n)+"]", false)
			return 0, nil
		}
		if err != nil && first == nil {
			first = err.under("["+strconv.Itoa(n)+"]", false)
		}
		if i = SkipSpace(w.b, end); w.b[i] == ',' {
			i++
		}
	}
}

// structFields are the JSON names of a struct type's fields, embedded structs' included.
type structFields struct {
	types map[string]reflect.Type
	names []string
	// nonEmpty are the fields tagged strict:"nonempty": absent they take a default, and sent empty
	// ("", 0 or null) they are refused, since an empty value would take the default too, silently
	// (an empty failureMode is fail-open). A field tagged strict:"nonnull" (a count whose 0 means
	// something) is refused null alone. The value is the tag.
	nonEmpty map[string]string
	// index is where each name's field is, for the decoder; nil when encoding/json's own rules
	// are needed to find a field (see fieldsOf) and the decoder leaves the struct to it.
	index map[string][]int
}

var fieldCache sync.Map // reflect.Type -> *structFields

// unknown is the message for a field k these fields do not have: with the known field k is
// likely a typo of, else with the field of that name one object further in ("failureMode" sent
// beside hookName: did you mean "dispatchConfig.failureMode"?).
func (f *structFields) unknown(k string) string {
	if s := Suggest(k, f.names); s != "" {
		return "unknown field (did you mean " + strconv.Quote(s) + "?)"
	}
	for _, name := range f.names {
		t := f.types[name]
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			continue
		}
		for _, in := range fieldsOf(t).names {
			if foldName(in) == foldName(k) {
				return "unknown field here (did you mean " + strconv.Quote(name+"."+in) + "?)"
			}
		}
	}
	return "unknown field"
}

// FieldNames are the JSON names of the fields of v, a struct or a pointer to one, embedded
// structs' included, in declaration order: the members DecodeStrict takes.
func FieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return slices.Clone(fieldsOf(t).names)
}

// MemberNames are the JSON names of the members of what path selects from v, a struct or a
// pointer to one: FieldNames of the struct reached through the fields path names, outward (no
// path: v's own). ok is false when the path leaves the structs: a step no field names, or one to
// a map, a JSON value of any shape or a scalar, whose members no type says.
func MemberNames(v any, path []string) (names []string, ok bool) {
	t := reflect.TypeOf(v)
	for i := 0; ; i++ {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			return nil, false
		}
		f := fieldsOf(t)
		if i == len(path) {
			return slices.Clone(f.names), true
		}
		t = f.types[path[i]]
	}
}

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{types: map[string]reflect.Type{}, index: map[string][]int{}}
	simple := true // every name once, with no tag option that changes decoding
	var collect func(t reflect.Type, at []int)
	collect = func(t reflect.Type, at []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clip(at), i)
			if sf.Anonymous && name == "" {
				et := sf.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					collect(et, idx)
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
			} else {
				simple = false
			}
			f.types[name] = sf.Type
			if tag := sf.Tag.Get("strict"); tag == "nonempty" || tag == "nonnull" {
				if f.nonEmpty == nil {
					f.nonEmpty = map[string]string{}
				}
				f.nonEmpty[name] = tag
			}
			if strings.Contains(opts, "string") || strings.ContainsFunc(name, unusualInName) {
				simple = false
			}
			f.index[name] = idx
		}
	}
	collect(t, nil)
	if !simple {
		f.index = nil
	}
	fieldCache.Store(t, f)
	return f
}

// unusualInName is a character of a JSON name that encoding/json may not take as a tag name.
func unusualInName(r rune) bool {
	return !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
}

// jsonKind names the JSON kind a Go type decodes from.
// emptyLiteral reports whether the JSON value lit is "", 0 or null.
// refusesEmpty tells whether lit, the value of field k, is an empty value k's tag refuses.
func (f *structFields) refusesEmpty(k string, lit []byte) bool {
	switch f.nonEmpty[k] {
	case "nonempty":
		return emptyLiteral(lit)
	case "nonnull":
		return string(lit) == "null"
	}
	return false
}

func emptyLiteral(lit []byte) bool {
	switch string(lit) {
	case `""`, "0", "null":
		return true
	}
	return false
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer" // "an integer, not number -1" would be no help
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
