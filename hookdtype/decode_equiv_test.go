package hookdtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fastShapes has every shape the one-pass decoder decodes itself, and those it leaves to the
// checks one by one (an array type, a ",string" field, map keys that are numbers, base64).
type fastShapes struct {
	fastEmbedded
	*FastAgent
	*fastHidden
	Name    string               `json:"name"`
	Kind    fastKind             `json:"kind"`
	Mode    string               `json:"mode,omitempty" strict:"nonempty"`
	Retries *int                 `json:"retries" strict:"nonnull"`
	Timeout int8                 `json:"timeoutMs" strict:"nonempty"`
	Count   uint16               `json:"count"`
	Handle  uintptr              `json:"handle"`
	Ratio   float32              `json:"ratio"`
	Weight  float64              `json:"weight"`
	On      bool                 `json:"on"`
	IDs     []int64              `json:"ids"`
	Tags    map[string]string    `json:"tags"`
	Rules   []fastRule           `json:"rules"`
	ByName  map[string]*fastRule `json:"byName"`
	Grid    [][]string           `json:"grid"`
	Pair    [2]int               `json:"pair"`
	Raw     json.RawMessage      `json:"raw"`
	RawPtr  *json.RawMessage     `json:"rawPtr"`
	Any     any                  `json:"any"`
	Anys    map[string]any       `json:"anys"`
	Text    textValue            `json:"text"`
	When    *time.Time           `json:"when"`
	Num     json.Number          `json:"num"`
	Bytes   []byte               `json:"bytes"`
	Odd     fastOdd              `json:"odd"`
	ByCount map[int]string       `json:"byCount"`
	Deep    **fastRule           `json:"deep"`
	Picky   pickyValue           `json:"picky"`
	// Promoted is given UnmarshalJSON by its field, but encoding/json does not look for the
	// method on a type without a name, and the walk checks it is an object.
	Promoted struct{ textValue } `json:"promoted"`
}

// fastHidden is reached through an embedded pointer that cannot be given a value: encoding/json
// refuses its fields.
type fastHidden struct {
	Secret string `json:"secret"`
}

// pickyValue decodes itself and takes a string alone, null included.
type pickyValue string

func (v *pickyValue) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) == 0 || b[0] != '"' {
		return errors.New("not a string")
	}
	err := json.Unmarshal(b, &s)
	*v = pickyValue(s)
	return err
}

type fastKind string

type fastEmbedded struct {
	Created string `json:"created"`
}

// FastAgent is reached through an embedded pointer, which decoding gives a value.
type FastAgent struct {
	AgentKind string `json:"agentKind"`
	Cwd       string `json:"cwd,omitempty"`
}

type fastRule struct {
	When     string  `json:"when"`
	Reason   *string `json:"reason" strict:"nonempty"`
	Priority int     `json:"priority"`
}

type fastOdd struct {
	N int `json:"n,string"`
}

// TestDecoderMatchesChecks holds DecodeStrict, which tries the one-pass decoder first, to the
// checks one by one (decodeChecked, the path every error takes) on texts generated from the
// types themselves, mostly right, some with one thing wrong: the same error, word for word, or
// the same value, decoded into a zero value and into one a decode has filled before (whose
// slices, maps and pointers encoding/json reuses).
func TestDecoderMatchesChecks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var taken, refused int
	const prefill = `{"name":"pre","ids":[9,9,9,9],"tags":{"keep":"1"},"rules":[{"when":"w","priority":3},{"when":"x"}],
		"retries":5,"agentKind":"pre","any":{"p":1},"text":"t","raw":[1,2,3,4,5,6,7,8],"deep":{"when":"d"}}`
	for n := range 20000 {
		g := docGen{rng: rng}
		var doc []byte
		switch n % 4 {
		case 0, 1:
			doc = g.doc(reflect.TypeFor[fastShapes]())
			ok := matchChecks[fastShapes](t, doc, "", "")
			matchChecks[fastShapes](t, doc, "context", prefill)
			matchChecks[*fastShapes](t, doc, "", prefill)
			if ok {
				taken++
			} else {
				refused++
			}
		case 2:
			doc = g.doc(reflect.TypeFor[[]fastRule]())
			matchChecks[[]fastRule](t, doc, "rules", "")
			matchChecks[[]fastRule](t, doc, "", `[{"when":"a","priority":1},{"when":"b"},{"when":"c"}]`)
		case 3:
			doc = g.doc(reflect.TypeFor[map[string]int]())
			matchChecks[map[string]int](t, doc, "", "")
			matchChecks[map[string]int](t, doc, "", `{"a":1,"zz":2}`)
		}
	}
	// Both paths are walked often: neither match is by default.
	if taken < 2000 || refused < 2000 {
		t.Errorf("the decoder took %d documents and refused %d; the generator should give it plenty of both", taken, refused)
	}
}

// matchChecks decodes doc with DecodeStrict and with decodeChecked into a T each (filled first
// from prefill when it is not ""), and reports whether the one-pass decoder took doc.
func matchChecks[T any](t *testing.T, doc []byte, at, prefill string) bool {
	t.Helper()
	var got, want, alone T
	if prefill != "" {
		for _, v := range []*T{&got, &want, &alone} {
			if err := json.Unmarshal([]byte(prefill), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	gerr := DecodeStrict(doc, &got, at)
	werr := decodeChecked(doc, &want, at)
	var gv, wv *ValidationError
	if (gerr == nil) != (werr == nil) || errors.As(gerr, &gv) != errors.As(werr, &wv) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%T at %q: %s\n got  %v\n want %v", got, at, doc, gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T at %q: %s\n decoded %+v\n want    %+v", got, at, doc, got, want)
	}
	d := decoder{b: doc}
	taken := d.decode(reflect.ValueOf(&alone).Elem())
	if taken && werr != nil {
		t.Fatalf("%T: %s: the decoder took a text the checks refuse: %v", got, doc, werr)
	}
	return taken
}

// docGen writes JSON texts for a type: the values its fields take, in any order, with space
// between tokens, escapes and UTF-8 in strings, and now and then one thing wrong: a value of
// another type, a number out of range, an unknown field, a field in another case, a key sent
// twice or escaped, a byte that is not UTF-8, nesting too deep, a text cut short.
type docGen struct {
	rng *rand.Rand
	b   bytes.Buffer
}

func (g *docGen) doc(t reflect.Type) []byte {
	g.space()
	g.value(t, 0)
	g.space()
	out := g.b.Bytes()
	switch g.rng.IntN(60) {
	case 0:
		out = out[:g.rng.IntN(len(out)+1)]
	case 1:
		out = append(out, " {}"...)
	case 2:
		out[g.rng.IntN(len(out))] = "x:,}]\"{[ \\"[g.rng.IntN(10)]
	}
	return out
}

func (g *docGen) one(choices ...string) string { return choices[g.rng.IntN(len(choices))] }

func (g *docGen) space() {
	if g.rng.IntN(5) == 0 {
		g.b.WriteString(g.one(" ", "\n\t", "\r\n  "))
	}
}

var (
	genStrings = []string{`""`, `"a"`, `"DENY"`, `"q\"uote"`, `"\u00e9t\u00e9"`, `"日本語"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"a\/b\\c\nd\te"`, `"2026-01-01T00:00:00Z"`, `"` + "\u2028\x7f" + `"`, `"MTIz"`, `"123"`}
	genInts   = []string{"0", "1", "-1", "-0", "42", "127", "128", "-129", "255", "256", "65535", "65536", "3000", "9223372036854775807", "9223372036854775808", "1.5", "1e2", "0.0"}
	genFloats = []string{"0", "1.5", "-2.5e-3", "3.4e38", "3.5e38", "1e309", "-0", "1E2", "123456789012345678901234567890", "0.1"}
	genKeys   = []string{"a", "b", "k1", "日本", "", "x y", `q\"`, `\u00e9`, "keep", "zz"}
)

func (g *docGen) value(t reflect.Type, depth int) {
	if g.rng.IntN(60) == 0 { // a value of any type
		g.any(depth)
		return
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		g.b.WriteString(g.one(`"2026-01-01T00:00:00Z"`, `"2026-13-01"`, `"2026-01-01T00:00:00.5+08:00"`))
		return
	case t == numberType:
		g.b.WriteString(g.one("1", "-2.5", `"3"`, `"abc"`, `""`, "1e5"))
		return
	case t == rawMessageType || t == reflect.TypeFor[textValue]() || t == reflect.TypeFor[pickyValue]() || t.Kind() == reflect.Interface:
		g.any(depth)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if g.rng.IntN(6) == 0 {
			g.b.WriteString("null")
			return
		}
		g.value(t.Elem(), depth)
	case reflect.String:
		g.b.WriteString(g.one(genStrings...))
	case reflect.Bool:
		g.b.WriteString(g.one("true", "false"))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if g.rng.IntN(4) == 0 {
			g.b.WriteString(g.one(genInts...))
			return
		}
		g.b.WriteString(g.one("0", "1", "7", "100", "20"))
	case reflect.Float32, reflect.Float64:
		g.b.WriteString(g.one(genFloats...))
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && g.rng.IntN(2) == 0 {
			g.b.WriteString(g.one(`"MTIz"`, `"!!"`, `""`))
			return
		}
		g.b.WriteByte('[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.space()
			g.value(t.Elem(), depth+1)
			g.space()
		}
		g.b.WriteByte(']')
	case reflect.Map:
		g.b.WriteByte('{')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			key := g.one(genKeys...)
			if t.Key().Kind() != reflect.String {
				key = g.one("1", "-2", "x", "300")
			}
			g.member(key, t.Elem(), depth)
		}
		g.b.WriteByte('}')
	case reflect.Struct:
		g.object(t, depth)
	default:
		g.any(depth)
	}
}

// object writes some of struct t's fields, and now and then one it does not have.
func (g *docGen) object(t reflect.Type, depth int) {
	fields := fieldsOf(t)
	names := slicesShuffled(g.rng, fields.names)[:g.rng.IntN(min(len(fields.names), 6)+1)]
	g.b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			g.b.WriteByte(',')
		}
		ft := fields.types[name]
		switch g.rng.IntN(80) {
		case 0:
			name = "unknownField"
		case 1:
			name = strings.ToUpper(name[:1]) + name[1:]
		case 2:
			name = `\u00` + hexOf(name[0]) + name[1:]
		case 3:
			name, ft = names[0], fields.types[names[0]]
		}
		g.member(name, ft, depth)
	}
	g.b.WriteByte('}')
}

func (g *docGen) member(key string, t reflect.Type, depth int) {
	g.space()
	g.b.WriteString(`"` + key + `"`)
	g.space()
	g.b.WriteByte(':')
	g.space()
	if g.rng.IntN(300) == 0 {
		g.b.WriteString("\"caf\xc3\"") // not UTF-8
	} else {
		g.value(t, depth+1)
	}
	g.space()
}

// any writes a value of any type, once in a while one nested past MaxDepth.
func (g *docGen) any(depth int) {
	if g.rng.IntN(400) == 0 {
		g.b.WriteString(strings.Repeat("[", MaxDepth) + "{}" + strings.Repeat("]", MaxDepth))
		return
	}
	randomValue(g.rng, &g.b, depth)
}

func hexOf(c byte) string { return string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]) }

func slicesShuffled(rng *rand.Rand, s []string) []string {
	out := append([]string(nil), s...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestDuplicateMatchesChecks holds Duplicate, which tries the decoder's check first, to the checks
// one by one on the random texts the tree walk is compared on.
func TestDuplicateMatchesChecks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		doc := randomDoc(rng)
		got, want := Duplicate(doc, "context.arguments"), duplicateChecked(doc, "context.arguments")
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("%s:\n got  %v\n want %v", doc, got, want)
		}
	}
}
