package dispatcher

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The hand-written encoder must give json.Marshal's bytes exactly: the envelope is signed, and
// the golden envelopes are a wire contract. These tests compare the two on random values built to
// hit every escaping rule (HTML characters, control characters, invalid UTF-8, U+2028/U+2029,
// quotes and backslashes) and every Value case (compact JSON, spaced JSON, text, blank).

// encoderAlphabet is what random strings are made of: plain ASCII, every character
// encoding/json escapes, multi-byte runes, the JS line terminators and broken UTF-8.
var encoderAlphabet = []string{
	"a", "Z", "0", " ", "~", "\x7f", "/", ":", ",", "{", "}", "[", "]",
	`"`, `\`, "<", ">", "&", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f",
	"é", "已发货", "张三", "😀", "\u2028", "\u2029", "\u2027", "\u202a", "\ufffd",
	"\xff", "\xe2", "\xe2\x80", "\xe2\x80\xa8"[:2], "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	`\u0041`, `\n`, `\"`,
}

func randString(r *rand.Rand, maxParts int) string {
	var b strings.Builder
	for range r.IntN(maxParts + 1) {
		b.WriteString(encoderAlphabet[r.IntN(len(encoderAlphabet))])
	}
	return b.String()
}

func randStringPtr(r *rand.Rand) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	s := randString(r, 8)
	return &s
}

func randInt64Ptr(r *rand.Rand) *int64 {
	if r.IntN(3) == 0 {
		return nil
	}
	n := randInt64(r)
	return &n
}

func randInt64(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -r.Int64()
	case 2:
		return int64(r.IntN(100000))
	}
	return r.Int64()
}

// randJSON returns a random JSON text: sometimes compact, sometimes spaced, with strings that need
// escaping and, rarely, deep nesting.
func randJSON(r *rand.Rand, depth int) string {
	ws := func() string {
		if r.IntN(4) == 0 {
			return []string{" ", "\n", "\t", "\r", "  "}[r.IntN(5)]
		}
		return ""
	}
	switch k := r.IntN(9); {
	case depth > 3 || k == 0:
		return []string{"0", "-1", "42.5", "1e10", "-0.5E-3", "12345678901234567890", "3.0"}[r.IntN(7)]
	case k == 1:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case k <= 3:
		// a JSON string: encoding/json's own rendering of a random string, or raw text in quotes
		if r.IntN(2) == 0 {
			b, _ := json.Marshal(randString(r, 6))
			return string(b)
		}
		return `"` + strings.NewReplacer(`"`, "", `\`, "").Replace(randString(r, 6)) + `"`
	case k <= 6:
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			key, _ := json.Marshal(randString(r, 3))
			b.Write(key)
			b.WriteString(ws() + ":" + ws() + randJSON(r, depth+1))
		}
		b.WriteString(ws() + "}")
		return b.String()
	default:
		var b strings.Builder
		b.WriteString("[" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			b.WriteString(randJSON(r, depth+1))
		}
		b.WriteString(ws() + "]")
		return b.String()
	}
}

// randValue is a tool argument or output: JSON of any layout, text, truncated JSON, or blank.
func randValue(r *rand.Rand) Value {
	switch r.IntN(6) {
	case 0:
		return Value(randString(r, 10))
	case 1:
		j := randJSON(r, 0)
		return Value(j[:r.IntN(len(j)+1)]) // often no longer JSON
	case 2:
		return Value([]string{"", " ", "\n\t", "\u00a0", "null", " 1 "}[r.IntN(6)])
	default:
		return Value(randJSON(r, 0))
	}
}

// randCodingAgent is a coding agent's fields, or none.
func randCodingAgent(r *rand.Rand) *CodingAgent {
	if r.IntN(2) == 0 {
		return nil
	}
	a := &CodingAgent{AgentKind: randString(r, 3), ExternalSessionID: randString(r, 6)}
	if r.IntN(2) == 0 {
		a.Cwd = randString(r, 6)
	}
	if r.IntN(2) == 0 {
		a.PermissionMode = randString(r, 3)
	}
	return a
}

func randContext(r *rand.Rand) any {
	switch r.IntN(4) {
	case 0:
		return &PreToolUseContext{ToolName: randString(r, 4), ToolCallID: randString(r, 4), Arguments: randValue(r),
			CodingAgent: randCodingAgent(r)}
	case 1:
		return &UserMessageContext{UserInput: randString(r, 12), ChatMode: randString(r, 2),
			TriggerSource: TriggerSource{SourceType: randString(r, 2), ChannelType: randStringPtr(r), ChannelProvider: randStringPtr(r)},
			BizKey:        randStringPtr(r), UserNickname: randStringPtr(r), CodingAgent: randCodingAgent(r)}
	case 2:
		return &PreScheduledTaskContext{TaskID: randInt64(r), TaskName: randString(r, 6)}
	default:
		return &PostToolUseContext{ToolName: randString(r, 4), ToolCallID: randString(r, 4), Arguments: randValue(r),
			Output: randValue(r), Succeeded: r.IntN(2) == 0, ErrorMessage: randStringPtr(r), DurationMs: randInt64(r),
			CodingAgent: randCodingAgent(r)}
	}
}

func randEnvelope(r *rand.Rand) *Envelope {
	return &Envelope{SchemaVersion: randString(r, 2), EventID: randString(r, 4), HookType: HookType(randString(r, 3)),
		HookName: randString(r, 8), OccurredAt: randInt64(r), DispatchedAt: randInt64(r), DeliveryAttempt: int(randInt64(r)),
		TraceID: randStringPtr(r), SessionID: randInt64Ptr(r), PrincipalID: randInt64Ptr(r), AgentID: randInt64Ptr(r)}
}

// checkContext compares encodeContext with json.Marshal for one context.
func checkContext(t *testing.T, c any) (json.RawMessage, bool) {
	t.Helper()
	want, wantErr := json.Marshal(c)
	got, canonical, err := encodeContext(c)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("context %#v: error %v, json.Marshal's %v", c, err, wantErr)
	}
	if err != nil {
		return nil, false
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("context %#v:\n got %q\nwant %q", c, got, want)
	}
	if !canonical {
		t.Fatalf("context %#v: rendered by us or json.Marshal, yet not marked canonical", c)
	}
	return got, canonical
}

// checkEnvelope compares encodeEnvelope with json.Marshal for one envelope.
func checkEnvelope(t *testing.T, env *Envelope) {
	t.Helper()
	want, wantErr := json.Marshal(env)
	got, err := encodeEnvelope(env)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("envelope %#v: error %v, json.Marshal's %v", env, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("envelope %#v:\n got %q\nwant %q", env, got, want)
	}
}

func TestEncoderMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 50000 {
		env := randEnvelope(r)
		switch i % 4 {
		case 0: // the hot path: a context we rendered, embedded as it is
			env.Context, env.canonical = checkContext(t, randContext(r))
		case 1: // a context read back from the outbox: any bytes at all
			env.Context = json.RawMessage(randJSON(r, 0))
			if r.IntN(4) == 0 {
				env.Context = env.Context[:r.IntN(len(env.Context)+1)]
			}
		case 2:
			env.Context = nil
		default:
			c, _ := checkContext(t, randContext(r))
			env.Context = c // canonical, but not marked so
		}
		checkEnvelope(t, env)
	}
}

// TestEncoderFixedCases pins the cases most likely to go wrong by hand.
func TestEncoderFixedCases(t *testing.T) {
	for _, s := range []string{"", "<script>&</script>", "\u2028\u2029", "\xff\xfe", "a\x00b", "\x7f", `"\`,
		"\xe2\x80", "\xe2\x80\xa8\xe2", "😀\xf0\x9f\x98", "\t\n\r\b\f"} {
		for _, c := range []any{
			&PreToolUseContext{ToolName: s, ToolCallID: s, Arguments: Value(s)},
			&PreToolUseContext{ToolName: s, Arguments: Value(s), CodingAgent: &CodingAgent{AgentKind: s, ExternalSessionID: s, Cwd: s, PermissionMode: s}},
			&UserMessageContext{UserInput: s, ChatMode: s, TriggerSource: TriggerSource{SourceType: s, ChannelType: &s}, BizKey: &s},
			&UserMessageContext{UserInput: s, CodingAgent: &CodingAgent{AgentKind: s, ExternalSessionID: s, Cwd: s}},
			&PreScheduledTaskContext{TaskID: -1 << 63, TaskName: s},
			&PostToolUseContext{ToolName: s, ToolCallID: s, Arguments: Value(s), Output: Value(s), ErrorMessage: &s, DurationMs: -1},
			&PostToolUseContext{Output: Value(s), Succeeded: true, CodingAgent: &CodingAgent{AgentKind: s, PermissionMode: s}},
		} {
			raw, canonical := checkContext(t, c)
			checkEnvelope(t, &Envelope{SchemaVersion: s, EventID: s, HookType: HookType(s), HookName: s, TraceID: &s,
				Context: raw, canonical: canonical})
		}
	}
	for _, v := range []string{`{"a":"<b>"}`, `{"a" : 1}`, " [1] ", `"\u2028"`, "\"\u2028\"", `{"a":"&amp;"}`,
		`1.`, `01`, `-`, `1e`, `"\x"`, `"\u12"`, `[1,]`, `{"a":1,}`, `{"a"}`, `nul`, `truex`, `"a` + "\x01" + `"`} {
		checkContext(t, &PreToolUseContext{Arguments: Value(v)})
	}
	// Nil pointers and other context types go through json.Marshal.
	checkContext(t, (*PreToolUseContext)(nil))
	checkContext(t, (*PostToolUseContext)(nil))
	checkContext(t, &SessionStartContext{NewSession: true})
	checkContext(t, SampleContext(AgentCompletion))
}

// TestCanonicalScanner: when the fast scanner says canonical, the text is valid JSON that
// json.Marshal leaves as it is.
func TestCanonicalScanner(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		j := randJSON(r, 0)
		if r.IntN(3) == 0 {
			j = j[:r.IntN(len(j)+1)]
		}
		checkCanonical(t, []byte(j))
	}
	deep := strings.Repeat("[", maxCanonicalDepth+1) + strings.Repeat("]", maxCanonicalDepth+1)
	if isCanonicalJSON(deep) {
		t.Error("deeper than maxCanonicalDepth, yet taken as canonical")
	}
	if !isCanonicalJSON(deep[1 : len(deep)-1]) {
		t.Error("maxCanonicalDepth deep, yet not taken as canonical")
	}
	for _, j := range []string{`{"a":[1,2,{"b":null}],"c":"\u003c"}`, `"x"`, `-0.5e+7`, `[]`, `{}`, `"😀"`} {
		if !isCanonicalJSON(j) {
			t.Errorf("%s: canonical, yet not taken as such", j)
		}
	}
}

func checkCanonical(t *testing.T, b []byte) {
	t.Helper()
	if !isCanonicalJSON(b) {
		return
	}
	if !json.Valid(b) {
		t.Fatalf("%q: taken as canonical but not valid JSON", b)
	}
	again, err := json.Marshal(json.RawMessage(b))
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("%q: taken as canonical but json.Marshal makes it %q (%v)", b, again, err)
	}
	if isCanonicalJSON(string(b)) != isCanonicalJSON(b) {
		t.Fatalf("%q: string and []byte scans disagree", b)
	}
}

// FuzzEncoderMatchesMarshal: go test -fuzz FuzzEncoderMatchesMarshal ./dispatcher/
func FuzzEncoderMatchesMarshal(f *testing.F) {
	f.Add("transferFunds", `{"amount":50000,"target":"ACC-002"}`, "帮我查一下 Q3 财报", int64(9001))
	f.Add("<a>&", "{\"a\" : \"\u2028\"}", "\xff\xe2\x80\xa9", int64(-1))
	f.Add("", "", "", int64(0))
	f.Fuzz(func(t *testing.T, s, v, u string, n int64) {
		checkCanonical(t, []byte(v))
		for _, c := range []any{
			&PreToolUseContext{ToolName: s, ToolCallID: u, Arguments: Value(v)},
			&UserMessageContext{UserInput: u, ChatMode: s, TriggerSource: TriggerSource{SourceType: v, ChannelProvider: &s}, UserNickname: &u},
			&PreScheduledTaskContext{TaskID: n, TaskName: u},
			&PostToolUseContext{ToolName: u, ToolCallID: s, Arguments: Value(u), Output: Value(v), ErrorMessage: &s, DurationMs: n},
		} {
			raw, canonical := checkContext(t, c)
			checkEnvelope(t, &Envelope{SchemaVersion: s, EventID: u, HookType: HookType(v), HookName: u, OccurredAt: n,
				DispatchedAt: -n, DeliveryAttempt: int(n), TraceID: &v, SessionID: &n, Context: raw, canonical: canonical})
		}
		checkEnvelope(t, &Envelope{HookName: s, Context: json.RawMessage(v)})
		if utf8.ValidString(v) {
			checkEnvelope(t, &Envelope{HookName: s, Context: json.RawMessage(strings.TrimSpace(v))})
		}
	})
}
