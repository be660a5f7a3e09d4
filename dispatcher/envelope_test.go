package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

var update = flag.Bool("update", false, "rewrite testdata/envelopes from the envelopes the dispatcher sends")

const envelopeDir = "../testdata/envelopes"

// goldenEvent is one of the source document's webhook-events.json examples, as the event a
// caller hands to Intercept or Observe plus the values that the dispatcher mints itself.
type goldenEvent struct {
	hookName     string
	eventID      string // minted by the dispatcher: replaced in the captured bytes
	dispatchedAt int64  // stamped at send time: replaced in the captured bytes
	ev           Event
}

func goldenEvents() []goldenEvent {
	trace1, trace2 := "req-7a8b9c0d1e2f3g4h", "req-9z8y7x6w5v4u3t2s"
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	return []goldenEvent{
		{"财务审批 Hook", "0E7G6QYZX1234567", 1749300000000, Event{HookType: PreToolUse, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300000000),
			Context: &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_abc123",
				Arguments: `{"amount": 50000, "target": "ACC-002"}`}}},
		{"工具审计日志", "0E7G6QYZX1234568", 1749300003000, Event{HookType: PostToolUse, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300003000),
			Context: &PostToolUseContext{ToolName: "queryOrder", ToolCallID: "call_abc123",
				Arguments: `{"orderId":"ORD-2026001"}`, Output: `{"status":"已发货"}`, Succeeded: true, DurationMs: 320}}},
		{"输入内容安全审核", "0E7G6QYZX1234569", 1749300010000, Event{HookType: UserMessage, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300010000),
			Context: &UserMessageContext{UserInput: "帮我查一下 Q3 财报", ChatMode: "single_chat",
				TriggerSource: TriggerSource{SourceType: SourceHuman, ChannelType: ptr("im"), ChannelProvider: ptr("dingtalk")},
				BizKey:        ptr("order-2026-001"), UserNickname: ptr("张三")}}},
		{"会话追踪", "0E7G6QYZX123456A", 1749300011000, Event{HookType: SessionStart, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300011000),
			Context: &SessionStartContext{NewSession: true}}},
		{"执行结果统计", "0E7G6QYZX123456B", 1749300020000, Event{HookType: AgentCompletion, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300020000),
			Context: &AgentCompletionContext{Succeeded: true, Model: "qwen-max", DurationMs: 8420, TotalTokens: 2048,
				StepCount: 3, TriggerSourceType: SourceHuman, RequestID: "0E7G6R01AB234567",
				AssistantMessageID: ptr[int64](20003), UserMessageID: ptr[int64](20002), NewSession: true,
				AgentName: "财报助手", ChannelProvider: ptr("dingtalk")}}},
		{"LLM 调用度量", "0E7G6QYZX123456C", 1749300015000, Event{HookType: PostLLMCall, TraceID: trace1,
			SessionID: ptr[int64](10001), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749300015000),
			Context: &PostLLMCallContext{Model: "qwen-max", Step: 2, DurationMs: 2150, PromptTokens: 850,
				CompletionTokens: 320, TotalTokens: 1170, CachedTokens: 0, ReasoningTokens: 128}}},
		{"定时任务准入", "0E7G6QYZX123456D", 1749301800000, Event{HookType: PreScheduledTask, TraceID: trace2,
			SessionID: nil, PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749301800000),
			Context: &PreScheduledTaskContext{TaskID: 9001, TaskName: "每日财报生成"}}},
		{"定时任务结果统计", "0E7G6QYZX123456E", 1749301860000, Event{HookType: PostScheduledTask, TraceID: trace2,
			SessionID: ptr[int64](10002), PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001), OccurredAt: at(1749301860000),
			Context: &PostScheduledTaskContext{TaskID: 9001, TaskName: "每日财报生成", Succeeded: true,
				DurationMs: 60000, RequestID: ptr("0E7G6R01AB234568")}}},
	}
}

var dispatchedAtField = regexp.MustCompile(`"dispatchedAt":[0-9]+`)

// TestGoldenEnvelopes sends every example event of the source document through the real
// Intercept / Observe path to a recording receiver and compares the captured body, with the two
// values the dispatcher mints (eventId, dispatchedAt) set to the document's, byte for byte with
// testdata/envelopes/<hookType>.json after json.Compact. Field order is part of the contract.
func TestGoldenEnvelopes(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, nil)
		for _, g := range goldenEvents() {
			h.add(Hook{HookName: g.hookName, HookType: g.ev.HookType, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		}
		ctx := context.Background()
		for _, g := range goldenEvents() {
			t.Run(string(g.ev.HookType), func(t *testing.T) {
				before := rec.count()
				var eventID string
				if g.ev.HookType.Interceptive() {
					dec, err := h.d.Intercept(ctx, g.ev)
					if err != nil || dec.Decision != Allow {
						t.Fatalf("intercept: %+v %v", dec, err)
					}
				} else {
					eventID = h.observeOne(g.ev)
				}
				waitFor(t, 10*time.Second, "the receiver to get the event", func() bool { return rec.count() > before })
				got := rec.requests()[before]
				var env Envelope
				if err := json.Unmarshal(got.body, &env); err != nil {
					t.Fatal(err)
				}
				if eventID != "" && env.EventID != eventID {
					t.Fatalf("eventId %s, Observe returned %s", env.EventID, eventID)
				}
				if ts := got.header.Get("X-Request-Id"); ts != g.ev.TraceID {
					t.Errorf("X-Request-Id %q, want the traceId %q", ts, g.ev.TraceID)
				}
				body := bytes.Replace(got.body, []byte(`"eventId":"`+env.EventID+`"`), []byte(`"eventId":"`+g.eventID+`"`), 1)
				body = dispatchedAtField.ReplaceAll(body, []byte(`"dispatchedAt":`+strconv.FormatInt(g.dispatchedAt, 10)))
				compareGolden(t, filepath.Join(envelopeDir, string(g.ev.HookType)+".json"), body)
			})
		}
	})
}

// TestGoldenEnvelopesDirect builds each envelope from the document's values and renders it both
// with json.Marshal and with the sender's own encoder (encodeEnvelope over encodeContext), so
// that the golden files also pin the encoding when nothing is minted at all, and the encoder is
// held to json.Marshal's bytes on the document's examples.
func TestGoldenEnvelopesDirect(t *testing.T) {
	for _, g := range goldenEvents() {
		ctxBytes, canonical, err := encodeContext(g.ev.Context)
		if err != nil {
			t.Fatal(err)
		}
		env := Envelope{SchemaVersion: SchemaVersion, EventID: g.eventID, HookType: g.ev.HookType, HookName: g.hookName,
			OccurredAt: g.ev.OccurredAt.UnixMilli(), DispatchedAt: g.dispatchedAt, DeliveryAttempt: 1,
			TraceID: strPtr(g.ev.TraceID), SessionID: g.ev.SessionID, PrincipalID: g.ev.PrincipalID, AgentID: g.ev.AgentID,
			Context: ctxBytes, canonical: canonical}
		body, err := json.Marshal(&env)
		if err != nil {
			t.Fatal(err)
		}
		encoded, err := encodeEnvelope(&env)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encoded, body) {
			t.Errorf("%s: the sender's encoder gives\n%s\njson.Marshal\n%s", g.ev.HookType, encoded, body)
		}
		if *update {
			continue // TestGoldenEnvelopes writes the files
		}
		compareGolden(t, filepath.Join(envelopeDir, string(g.ev.HookType)+".json"), body)
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	var gotC bytes.Buffer
	if err := json.Compact(&gotC, got); err != nil {
		t.Fatalf("sent body is not JSON: %v: %s", err, got)
	}
	if *update {
		var ind bytes.Buffer
		json.Indent(&ind, gotC.Bytes(), "", "  ")
		ind.WriteByte('\n')
		if err := os.WriteFile(path, ind.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	var wantC bytes.Buffer
	if err := json.Compact(&wantC, want); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	if !bytes.Equal(gotC.Bytes(), wantC.Bytes()) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", path, gotC.Bytes(), wantC.Bytes())
	}
}

// TestValueRule: arguments / output that are a JSON object or array go out as JSON; anything else
// goes out as a JSON string holding the text, a bare number or string literal too (the document's
// arguments and output are an object, an array or the raw string).
func TestValueRule(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"object", `{"amount": 50000, "target": "ACC-002"}`, `{"amount":50000,"target":"ACC-002"}`},
		{"array", `[1, "two", {"three": 3}]`, `[1,"two",{"three":3}]`},
		{"number", `42.5`, `"42.5"`},
		{"true", `true`, `"true"`},
		{"null", `null`, `"null"`},
		{"padded object", "\n {\"a\" : true}\t", `{"a":true}`},
		{"string literal", `"quoted"`, `"\"quoted\""`},
		{"not json", `not json`, `"not json"`},
		{"truncated object", `{"amount": 5`, `"{\"amount\": 5"`},
		{"empty", ``, `""`},
		{"blank", `   `, `"   "`},
		{"unicode text", `已发货`, `"已发货"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(Value(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("Value(%q) = %s, want %s", c.in, got, c.want)
			}
			// Embedded in a context the same rule holds.
			b, err := marshalContext(&PostToolUseContext{Arguments: Value(c.in), Output: Value(c.in)})
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if string(m["arguments"]) != c.want || string(m["output"]) != c.want {
				t.Errorf("in a context: arguments %s output %s, want %s", m["arguments"], m["output"], c.want)
			}
		})
	}
}
