package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api/harness"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/tracing"
)

// spans records ended spans and says when one with a given name has ended.
type spans struct {
	*tracetest.SpanRecorder
	mu    sync.Mutex
	ended chan struct{} // closed and replaced at each end
}

func (s *spans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.SpanRecorder.OnEnd(sp)
	s.mu.Lock()
	close(s.ended)
	s.ended = make(chan struct{})
	s.mu.Unlock()
}

// await returns the ended spans once one named name is among them.
func (s *spans) await(t *testing.T, name string) []sdktrace.ReadOnlySpan {
	t.Helper()
	return s.until(t, "a span "+name, func(all []sdktrace.ReadOnlySpan) bool {
		return slices.ContainsFunc(all, func(sp sdktrace.ReadOnlySpan) bool { return sp.Name() == name })
	})
}

// until returns the ended spans once cond holds of them; it waits for each span's end.
func (s *spans) until(t *testing.T, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		ch := s.ended
		s.mu.Unlock()
		all := s.Ended()
		if cond(all) {
			return all
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s among %d ended spans: %v", what, len(all), names(all))
		}
	}
}

// record makes the global tracer provider one that records into the returned spans, for the test.
func record(t *testing.T) *spans {
	rec := &spans{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// received is what the receiver got of one event.
type received struct {
	hookType, traceparent, requestID string
	env                              dispatcher.Envelope
}

// newReceiver is a webhook receiver answering each envelope with answer; got lists what it has
// received so far.
func newReceiver(t *testing.T, answer func(dispatcher.Envelope) string) (srv *httptest.Server, got func() []received) {
	var mu sync.Mutex
	var all []received
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env dispatcher.Envelope
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		all = append(all, received{string(env.HookType), r.Header.Get("traceparent"), r.Header.Get("X-Request-Id"), env})
		mu.Unlock()
		io.WriteString(w, answer(env))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(all)
	}
}

const script = `{"scripts":[{"match":"/pay/","steps":[
 {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},
 {"toolCalls":[{"name":"workspace_list_files"}]},
 {"text":"done"}]}]}`

// One scripted turn — an allowed tool call, a denied one, and one delivery — is one trace: the
// client's, through the chat request, the run, its model calls, its hook calls and its tool call
// to the delivery attempt; and the receiver sees that trace in traceparent and in the envelope.
func TestTurnIsOneTrace(t *testing.T) {
	rec := record(t)

	recv, receivedSoFar := newReceiver(t, func(env dispatcher.Envelope) string {
		if env.HookType == dispatcher.PreToolUse && strings.Contains(string(env.Context), "workspace_list_files") {
			return `{"decision":"deny","reason":"not today"}`
		}
		return `{"decision":"allow"}`
	})

	env := agenttest.New(t, storagetest.SQLite(t), agenttest.Options{Script: script})
	env.Hook(t, `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`"}}`)
	env.Hook(t, `{"hookName":"audit","hookType":"agent_completion","dispatchConfig":{"url":"`+recv.URL+`"}}`)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(tracing.Middleware())
	harness.Register(r, harness.Deps{Runtime: env.Runtime})
	srv := httptest.NewServer(r)
	defer srv.Close()

	// The client's own trace comes in as traceparent.
	client := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID: trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled})
	traceID := client.TraceID().String()
	req, _ := http.NewRequest("POST", srv.URL+"/harness/chat", bytes.NewReader([]byte(`{"sessionId":"s1","userId":"u1","input":"pay now"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+client.SpanID().String()+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), "done") {
		t.Fatalf("chat: %d %s", resp.StatusCode, out)
	}

	// The delivery's attempt may end before the run's span does: wait for both.
	rec.await(t, "run")
	all := rec.await(t, "deliver agent_completion")
	for _, sp := range all {
		if sp.SpanContext().TraceID().String() != traceID {
			t.Errorf("span %q is in trace %s, not the client's %s", sp.Name(), sp.SpanContext().TraceID(), traceID)
		}
	}
	tr := treeOf(t, all, "")
	byName, one, childOf := tr.byName, tr.one, tr.childOf
	request := one("POST /harness/chat")
	if request.Parent().SpanID() != client.SpanID() {
		t.Errorf("the chat request's parent is %s, not the client's span", request.Parent().SpanID())
	}
	run := one("run")
	childOf(run, request)
	if calls := byName["model call"]; len(calls) != 3 {
		t.Errorf("%d model calls, want 3", len(calls))
	}
	for _, sp := range byName["model call"] {
		childOf(sp, run)
	}
	childOf(one("tool workspace_write_file"), run)
	if n := len(byName["tool workspace_list_files"]); n != 0 {
		t.Errorf("the denied tool ran: %d spans", n)
	}
	decisions := map[string]bool{}
	for _, sp := range byName["hook pre_tool_use"] {
		childOf(sp, run)
		at := attrs(sp)
		decisions[at["hookd.decision"]] = true
		if at["hookd.from_failure_mode"] != "false" || at["hookd.latency_ms"] == "" {
			t.Errorf("hook span attributes: %v", at)
		}
	}
	if len(byName["hook pre_tool_use"]) != 2 || !decisions["allow"] || !decisions["deny"] {
		t.Errorf("hook calls: %d, decisions %v; want one allow and one deny", len(byName["hook pre_tool_use"]), decisions)
	}
	delivery := one("deliver agent_completion")
	childOf(delivery, run)
	if attrs(delivery)["http.response.status_code"] != "200" {
		t.Errorf("delivery attributes: %v", attrs(delivery))
	}

	// The receiver saw the same trace everywhere: traceparent, X-Request-Id and the envelope.
	got := receivedSoFar()
	if len(got) != 3 {
		t.Fatalf("the receiver got %d events, want 3 (two gates, one completion)", len(got))
	}
	for _, g := range got {
		if !strings.HasPrefix(g.traceparent, "00-"+traceID+"-") {
			t.Errorf("%s: traceparent %q, not the trace %s", g.hookType, g.traceparent, traceID)
		}
		if g.env.TraceID == nil || *g.env.TraceID != traceID || g.requestID != traceID {
			t.Errorf("%s: envelope traceId %v, X-Request-Id %q; want %s", g.hookType, g.env.TraceID, g.requestID, traceID)
		}
	}
	// The delivery's traceparent names its attempt's span, the gates' their hook calls'.
	if last := got[len(got)-1]; last.hookType != "agent_completion" || !strings.Contains(last.traceparent, delivery.SpanContext().SpanID().String()) {
		t.Errorf("delivery traceparent %q does not name the attempt's span %s", last.traceparent, delivery.SpanContext().SpanID())
	}
}

// A cron tick starts a trace of its own: the firing is its root span, and the pre_scheduled_task
// hook call, the agent run (with its model call and agent_completion delivery) and the
// post_scheduled_task delivery are in it. Every receiver sees that trace in traceparent, in
// X-Request-Id and as the envelope's traceId, and the task run records it.
func TestScheduledFiringIsOneTrace(t *testing.T) {
	rec := record(t)
	recv, receivedSoFar := newReceiver(t, func(dispatcher.Envelope) string { return `{"decision":"allow"}` })

	env := agenttest.New(t, storagetest.SQLite(t), agenttest.Options{Script: `{"scripts":[{"match":"*","steps":[{"text":"the report"}]}]}`})
	for _, ht := range []string{"pre_scheduled_task", "post_scheduled_task", "agent_completion"} {
		env.Hook(t, `{"hookName":"`+ht+`","hookType":"`+ht+`","dispatchConfig":{"url":"`+recv.URL+`"}}`)
	}
	s := scheduler.New(env.DB, env.Runtime, env.Dispatcher, slog.New(slog.DiscardHandler), scheduler.Config{PollEvery: 200 * time.Millisecond})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	task, err := s.Create(context.Background(), scheduler.Task{TaskName: "nightly report", Cron: "@every 1s", Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}

	// The first firing whose spans have ended, up to its post_scheduled_task delivery.
	var firing sdktrace.ReadOnlySpan
	all := rec.until(t, "firing with its post_scheduled_task delivery", func(all []sdktrace.ReadOnlySpan) bool {
		for _, f := range all {
			if f.Name() != "task firing" || attrs(f)["hookd.task.status"] != "succeeded" {
				continue
			}
			in := func(name string) bool {
				return slices.ContainsFunc(all, func(sp sdktrace.ReadOnlySpan) bool {
					return sp.Name() == name && sp.SpanContext().TraceID() == f.SpanContext().TraceID()
				})
			}
			if in("deliver post_scheduled_task") && in("run") { // a run's span may end after its firing's
				firing = f
				return true
			}
		}
		return false
	})
	traceID := firing.SpanContext().TraceID().String()
	if firing.Parent().IsValid() {
		t.Errorf("the firing span has a parent %s: a tick starts a new trace", firing.Parent().SpanID())
	}
	if at := attrs(firing); at["hookd.task.id"] != strconv.FormatInt(task.ID, 10) || at["hookd.task.fire_kind"] != "schedule" {
		t.Errorf("firing span attributes: %v", at)
	}
	tr := treeOf(t, all, traceID)
	one, childOf := tr.one, tr.childOf
	childOf(one("hook pre_scheduled_task"), firing)
	run := one("run")
	childOf(run, firing)
	childOf(one("model call"), run)
	// agent_completion is queued before post_scheduled_task, but its attempt may end later.
	for _, sp := range rec.until(t, "agent_completion delivery in the firing's trace", func(all []sdktrace.ReadOnlySpan) bool {
		return slices.ContainsFunc(all, func(sp sdktrace.ReadOnlySpan) bool {
			return sp.Name() == "deliver agent_completion" && sp.SpanContext().TraceID().String() == traceID
		})
	}) {
		if sp.Name() == "deliver agent_completion" && sp.SpanContext().TraceID().String() == traceID {
			childOf(sp, run)
		}
	}
	post := one("deliver post_scheduled_task")
	childOf(post, firing)

	runs, err := s.Runs(context.Background(), storage.TaskRunFilter{TaskID: task.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(runs, func(r storage.TaskRun) bool { return r.TraceID == traceID }) {
		t.Errorf("no task run records the trace %s", traceID)
	}
	got := receivedSoFar()
	seen := map[string]bool{}
	for _, g := range got {
		if g.env.TraceID == nil || *g.env.TraceID != traceID {
			continue // another tick's
		}
		seen[g.hookType] = true
		if !strings.HasPrefix(g.traceparent, "00-"+traceID+"-") || g.requestID != traceID {
			t.Errorf("%s: traceparent %q, X-Request-Id %q; want the trace %s", g.hookType, g.traceparent, g.requestID, traceID)
		}
	}
	if !seen["pre_scheduled_task"] || !seen["post_scheduled_task"] || !seen["agent_completion"] {
		t.Errorf("envelopes carrying the firing's trace: %v; want pre_scheduled_task, post_scheduled_task, agent_completion", seen)
	}
}

// tree is a trace's ended spans by name, with the checks the tests make of them.
type tree struct {
	t      *testing.T
	all    []sdktrace.ReadOnlySpan
	byName map[string][]sdktrace.ReadOnlySpan
}

// treeOf keeps the spans of all that are in trace traceID ("" keeps every one).
func treeOf(t *testing.T, all []sdktrace.ReadOnlySpan, traceID string) tree {
	tr := tree{t: t, all: all, byName: map[string][]sdktrace.ReadOnlySpan{}}
	for _, sp := range all {
		if traceID == "" || sp.SpanContext().TraceID().String() == traceID {
			tr.byName[sp.Name()] = append(tr.byName[sp.Name()], sp)
		}
	}
	return tr
}

// one is the single span called name.
func (tr tree) one(name string) sdktrace.ReadOnlySpan {
	tr.t.Helper()
	if len(tr.byName[name]) != 1 {
		tr.t.Fatalf("%d spans %q, want 1; spans: %v", len(tr.byName[name]), name, names(tr.all))
	}
	return tr.byName[name][0]
}

// childOf checks that sp's parent is parent.
func (tr tree) childOf(sp, parent sdktrace.ReadOnlySpan) {
	tr.t.Helper()
	if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
		tr.t.Errorf("span %q: parent %s, want %q (%s)", sp.Name(), sp.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name()
	}
	return out
}

func attrs(sp sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range sp.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// Logs written with a span's context carry its trace and span ids.
func TestLogsCarryTheTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "x")
	defer span.End()
	var buf bytes.Buffer
	log := slogJSON(&buf)
	log.InfoContext(ctx, "with")
	log.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"trace_id":"`+span.SpanContext().TraceID().String()+`"`) ||
		!strings.Contains(lines[0], `"span_id":"`+span.SpanContext().SpanID().String()+`"`) {
		t.Errorf("no trace in %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("a trace without a span: %s", lines[1])
	}
}

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, nil)))
}
