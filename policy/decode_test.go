package policy

import (
	"cel.dev/cel-go/common/types"

	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestDecodeJSONMatchesDecoder compares DecodeJSON with encoding/json's decoding into an any
// (UseNumber, whole numbers then made int64) on random JSON: numbers of every form, escapes,
// non-ASCII and invalid UTF-8, keys sent twice, whitespace; and invalid texts, which must fail.
func TestDecodeJSONMatchesDecoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	for range 20000 {
		var b bytes.Buffer
		randomJSON(rng, &b, 0)
		doc := b.Bytes()
		if rng.IntN(10) == 0 {
			doc = doc[:rng.IntN(len(doc)+1)]
		}
		got, gerr := DecodeJSON(doc)
		want, werr := referenceDecode(doc)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v (%v), want %#v (%v)", doc, got, gerr, want, werr)
		}
	}
}

func referenceDecode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return celScalars(v), nil
}

var randomStrings = []string{`"a"`, `""`, `"q\"uote\\"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"日本\"", "\"\xff\xfe\"", `"\n\t\/"`}
var randomNumbers = []string{"0", "-0", "12", "-3", "10000", "1.5", "1e3", "1E+2", "-2.5e-3", "9223372036854775807",
	"9223372036854775808", "-9223372036854775809", "1e400", "0.0", "123456789012345678901234567890"}

func randomJSON(rng *rand.Rand, b *bytes.Buffer, depth int) {
	space := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n"}[rng.IntN(4)])
		}
	}
	space()
	switch k := rng.IntN(10); {
	case depth < 4 && k < 4:
		b.WriteByte('{')
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			b.WriteString([]string{`"a"`, `"b"`, `"\u0061"`, `"amount"`, `""`, "\"é\""}[rng.IntN(6)])
			space()
			b.WriteByte(':')
			randomJSON(rng, b, depth+1)
		}
		space()
		b.WriteByte('}')
	case depth < 4 && k < 6:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomJSON(rng, b, depth+1)
		}
		space()
		b.WriteByte(']')
	case k < 7:
		b.WriteString(randomStrings[rng.IntN(len(randomStrings))])
	case k < 9:
		b.WriteString(randomNumbers[rng.IntN(len(randomNumbers))])
	default:
		b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
	}
	space()
}

// TestInputOfMatchesNewInput: the lazily built event of InputOf is the envelope NewInput takes,
// and so are the shortcuts.
func TestInputOfMatchesNewInput(t *testing.T) {
	p, s := int64(1001), int64(10001)
	for _, env := range []*Envelope{
		{SchemaVersion: "1.0", EventID: "e1", HookType: "pre_tool_use", HookName: "h", OccurredAt: 1, DispatchedAt: 2,
			DeliveryAttempt: 1, TraceID: "t", SessionID: &s, PrincipalID: &p},
		{SchemaVersion: "1.0", EventID: "e2", HookType: "pre_scheduled_task", HookName: "h", DeliveryAttempt: 1},
	} {
		ctx := DecodeValid([]byte(`{"toolName":"x","arguments":{"a":1},"userInput":"u","taskId":3}`))
		got := InputOf(env, Decoded(ctx))
		event, _ := got.ResolveName("event")
		got.ResolveName("args")
		got.ResolveName("task")
		want := NewInput(event.(map[string]any))
		var trace any
		if env.TraceID != "" {
			trace = types.String(env.TraceID)
		}
		id := func(v *int64) any {
			if v == nil {
				return nil
			}
			return types.Int(*v)
		}
		wantEvent := map[string]any{"schemaVersion": types.String(env.SchemaVersion), "eventId": types.String(env.EventID),
			"hookType": types.String(env.HookType), "hookName": types.String(env.HookName), "occurredAt": types.Int(env.OccurredAt),
			"dispatchedAt": types.Int(env.DispatchedAt), "deliveryAttempt": types.Int(env.DeliveryAttempt), "traceId": trace, "sessionId": id(env.SessionID),
			"principalId": id(env.PrincipalID), "agentId": id(env.AgentID), "context": ctx}
		got.env, got.src, got.task = nil, nil, false
		want.src, want.task = nil, false
		if !reflect.DeepEqual(event, wantEvent) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v:\n got %#v\nwant %#v", env, got, want)
		}
	}
}

// TestWrittenNumbers: the numbers a double does not hold are kept as written, by their double;
// one whose double another number of the text is read as too is not, nor are those a double or
// an int64 holds.
func TestWrittenNumbers(t *testing.T) {
	got := writtenNumbers(`{"a":12345678901234567890123,"b":[0.10000000000000000001,0.1],"c":1e400,"d":-1e400,` +
		`"e":2.5,"f":9007199254740993,"g":9007199254740993.0,"h":"1e400","1e500":0.3}`)
	want := map[types.Double]string{1.2345678901234568e22: "12345678901234567890123", types.Double(math.Inf(1)): "1e400",
		types.Double(math.Inf(-1)): "-1e400", 9007199254740992: "9007199254740993.0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
