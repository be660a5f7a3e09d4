package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		ch := s.ended
		s.mu.Unlock()
		all := s.Ended()
		for _, sp := range all {
			if sp.Name() == name {
				return all
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no span %q ended; got %d spans", name, len(all))
		}
	}
}

// received is what the receiver got of one event.
type received struct {
	hookType, traceparent, requestID string
	env                              dispatcher.Envelope
}

const script = `{"scripts":[{"match":"/pay/","steps":[
 {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},
 {"toolCalls":[{"name":"workspace_list_files"}]},
 {"text":"done"}]}]}`

// One scripted turn — an allowed tool call, a denied one, and one delivery — is one trace: the
// client's, through the chat request, the run, its model calls, its hook calls and its tool call
// to the delivery attempt; and the receiver sees that trace in traceparent and in the envelope.
func TestTurnIsOneTrace(t *testing.T) {
	rec := &spans{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	var mu sync.Mutex
	var got []received
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env dispatcher.Envelope
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		got = append(got, received{string(env.HookType), r.Header.Get("traceparent"), r.Header.Get("X-Request-Id"), env})
		mu.Unlock()
		if env.HookType == dispatcher.PreToolUse && strings.Contains(string(env.Context), "workspace_list_files") {
			io.WriteString(w, `{"decision":"deny","reason":"not today"}`)
			return
		}
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer recv.Close()

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

	all := rec.await(t, "deliver agent_completion")
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range all {
		if sp.SpanContext().TraceID().String() != traceID {
			t.Errorf("span %q is in trace %s, not the client's %s", sp.Name(), sp.SpanContext().TraceID(), traceID)
		}
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans %q, want 1; spans: %v", len(byName[name]), name, names(all))
		}
		return byName[name][0]
	}
	childOf := func(sp, parent sdktrace.ReadOnlySpan) {
		t.Helper()
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q: parent %s, want %q (%s)", sp.Name(), sp.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
		}
	}
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
	mu.Lock()
	defer mu.Unlock()
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
