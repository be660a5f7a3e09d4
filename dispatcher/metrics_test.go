package dispatcher

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// metricValue reads one series of a gathered family: a counter's or gauge's value, a histogram's
// sample count; ok is false when the series does not exist.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// waitMetric waits until the series has the value (metrics move right after the work they count,
// which a test sees through the database or the receiver a moment earlier).
func waitMetric(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string, want float64) {
	t.Helper()
	var got float64
	var ok bool
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, ok = metricValue(t, g, name, labels); ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (exists %v), want %v", name, labels, got, ok, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// refusedURL is a loopback URL nothing listens on: every request fails without a response.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String() + "/hook?token=secret"
	l.Close()
	return u
}

// TestMetrics runs the dispatcher's scenarios against a real registry and checks that each one
// moved its metrics: decisions allowed, denied, decided by failureMode (a 500, an open breaker, a
// full bulkhead), observational deliveries delivered, retried, dead and snoozed, the breaker and
// outbox gauges read at scrape time, and label names kept to the bounded set.
func TestMetrics(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		reg := prometheus.NewRegistry()
		h := newHarness(t, db, Settings{Metrics: reg, InterceptiveConcurrency: 1,
			Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: time.Minute},
			Retry:   RetryPolicy{Fast: []time.Duration{20 * time.Millisecond}, Ladder: []time.Duration{}}})
		ctx := context.Background()

		// Every series of a valid combination exists from the start, at zero.
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "pre_tool_use", "outcome", "modify"), 0)
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "post_llm_call", "outcome", "dead"), 0)
		if _, ok := metricValue(t, reg, "hookd_decisions_total", lbl("hook_type", "post_tool_use", "outcome", "allow")); ok {
			t.Error("decision series for an observational hook type")
		}
		if n := testutil.CollectAndCount(reg, "hookd_outbox_depth", "hookd_outbox_oldest_due_seconds"); n != 2 {
			t.Errorf("outbox gauges: %d series, want 2", n)
		}

		answer := func(status int, body string) *recorder {
			return newRecorder(t, func(int, *http.Request, []byte) (int, string) { return status, body })
		}
		allow, deny, fail := answer(200, `{"decision":"allow"}`), answer(200, `{"decision":"deny","reason":"no"}`), answer(500, "")
		tool := func(name string) Event {
			return Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: name, Arguments: "{}"}}
		}
		intercept := func(ev Event, want string) {
			t.Helper()
			if dec, err := h.d.Intercept(ctx, ev); err != nil || dec.Decision != want {
				t.Fatalf("intercept %s: %+v %v, want %s", ev.HookType, dec, err, want)
			}
		}

		// allow
		h.add(Hook{HookName: "allow", HookType: PreToolUse, ToolNameMatch: "allowTool", DispatchConfig: DispatchConfig{URL: allow.srv.URL}})
		intercept(tool("allowTool"), Allow)
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "pre_tool_use", "outcome", "allow"), 1)
		waitMetric(t, reg, "hookd_decision_seconds", lbl("hook_type", "pre_tool_use"), 1)

		// deny
		h.add(Hook{HookName: "deny", HookType: UserMessage, DispatchConfig: DispatchConfig{URL: deny.srv.URL}})
		intercept(Event{HookType: UserMessage, Context: &UserMessageContext{UserInput: "hi"}}, Deny)
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "user_message", "outcome", "deny"), 1)
		waitMetric(t, reg, "hookd_decision_fallbacks_total", lbl("hook_type", "user_message", "failure_mode", "deny"), 0)

		// failureMode: a 500 answer
		h.add(Hook{HookName: "broken", HookType: PreScheduledTask, DispatchConfig: DispatchConfig{URL: fail.srv.URL, FailureMode: FailClosed}})
		intercept(Event{HookType: PreScheduledTask, Context: &PreScheduledTaskContext{TaskID: 1}}, Deny)
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "pre_scheduled_task", "outcome", "deny"), 1)
		waitMetric(t, reg, "hookd_decision_fallbacks_total", lbl("hook_type", "pre_scheduled_task", "failure_mode", "deny"), 1)

		// An open breaker: the first call finds nobody listening (one failure opens it here), the
		// second is refused by the breaker; both decided by failureMode ALLOW.
		down := refusedURL(t)
		h.add(Hook{HookName: "down", HookType: PreToolUse, ToolNameMatch: "downTool", DispatchConfig: DispatchConfig{URL: down}})
		intercept(tool("downTool"), Allow)
		intercept(tool("downTool"), Allow)
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "pre_tool_use", "outcome", "allow"), 3)
		waitMetric(t, reg, "hookd_decision_fallbacks_total", lbl("hook_type", "pre_tool_use", "failure_mode", "allow"), 2)
		downLabel := strings.TrimSuffix(down, "?token=secret")
		waitMetric(t, reg, "hookd_breaker_state", lbl("url", downLabel), 2)
		waitMetric(t, reg, "hookd_breaker_state", lbl("url", allow.srv.URL), 0)
		// An observational delivery to the open URL is snoozed, not attempted.
		h.add(Hook{HookName: "down audit", HookType: SessionStart, DispatchConfig: DispatchConfig{URL: down}})
		h.observeOne(Event{HookType: SessionStart, Context: &SessionStartContext{NewSession: true}})
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "session_start", "outcome", "snoozed"), 1)
		waitMetric(t, reg, "hookd_delivery_attempt_seconds", lbl("hook_type", "session_start"), 0)

		// A full bulkhead: one call holds the only slot, the next is decided by failureMode DENY.
		release := make(chan struct{})
		var releaseOnce sync.Once
		defer releaseOnce.Do(func() { close(release) })
		var slow *recorder
		slow = newRawRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) {
			select {
			case <-release:
			case <-slow.done:
			}
			w.Write([]byte(`{"decision":"allow"}`))
		})
		h.add(Hook{HookName: "slow", HookType: PreToolUse, ToolNameMatch: "slowTool",
			DispatchConfig: DispatchConfig{URL: slow.srv.URL, TimeoutMs: 30000, FailureMode: FailClosed}})
		held := make(chan error, 1)
		go func() {
			dec, err := h.d.Intercept(ctx, tool("slowTool"))
			if err == nil && dec.Decision != Allow {
				err = fmt.Errorf("held call: %+v", dec)
			}
			held <- err
		}()
		waitFor(t, 10*time.Second, "the held call to reach the receiver", func() bool { return slow.count() == 1 })
		intercept(tool("slowTool"), Deny)
		releaseOnce.Do(func() { close(release) })
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		waitMetric(t, reg, "hookd_bulkhead_rejections_total", lbl("kind", "interceptive"), 1)
		waitMetric(t, reg, "hookd_decision_fallbacks_total", lbl("hook_type", "pre_tool_use", "failure_mode", "deny"), 1)
		waitMetric(t, reg, "hookd_decisions_total", lbl("hook_type", "pre_tool_use", "outcome", "allow"), 4)

		// An observational delivery, delivered at once.
		h.add(Hook{HookName: "llm", HookType: PostLLMCall, DispatchConfig: DispatchConfig{URL: allow.srv.URL}})
		id := h.observeOne(Event{HookType: PostLLMCall, Context: &PostLLMCallContext{Model: "m"}})
		h.waitDelivery(id, 10*time.Second, "delivered", func(d storage.Delivery) bool { return d.Status == storage.StatusDelivered })
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "post_llm_call", "outcome", "delivered"), 1)
		waitMetric(t, reg, "hookd_delivery_attempt_seconds", lbl("hook_type", "post_llm_call"), 1)

		// A retry: 503 first, then delivered.
		flaky := newRecorder(t, func(n int, _ *http.Request, _ []byte) (int, string) {
			if n == 1 {
				return 503, ""
			}
			return 200, ""
		})
		h.add(Hook{HookName: "flaky", HookType: PostToolUse, DispatchConfig: DispatchConfig{URL: flaky.srv.URL}})
		id = h.observeOne(Event{HookType: PostToolUse, Context: &PostToolUseContext{ToolName: "t"}})
		h.waitDelivery(id, 10*time.Second, "delivered", func(d storage.Delivery) bool { return d.Status == storage.StatusDelivered })
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "post_tool_use", "outcome", "retry"), 1)
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "post_tool_use", "outcome", "delivered"), 1)
		waitMetric(t, reg, "hookd_delivery_attempt_seconds", lbl("hook_type", "post_tool_use"), 2)

		// Dead: a 500 every time, one retry allowed, no ladder.
		h.add(Hook{HookName: "dying", HookType: AgentCompletion, DispatchConfig: DispatchConfig{URL: fail.srv.URL, MaxRetries: ptr(1)}})
		id = h.observeOne(Event{HookType: AgentCompletion, Context: &AgentCompletionContext{Model: "m"}})
		h.waitDelivery(id, 10*time.Second, "dead", func(d storage.Delivery) bool { return d.Status == storage.StatusDead })
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "agent_completion", "outcome", "retry"), 1)
		waitMetric(t, reg, "hookd_deliveries_total", lbl("hook_type", "agent_completion", "outcome", "dead"), 1)
		waitMetric(t, reg, "hookd_dead_deliveries_total", nil, 1)

		// Observe latency: one sample per Observe that queued deliveries (four above).
		waitMetric(t, reg, "hookd_observe_seconds", nil, 4)

		// The outbox gauges read the database at scrape time: the snoozed delivery is still pending.
		depth, _, err := db.OutboxStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitMetric(t, reg, "hookd_outbox_depth", nil, float64(depth))
		if depth != 1 {
			t.Errorf("outbox depth %d, want 1 (the snoozed delivery)", depth)
		}
		if v, ok := metricValue(t, reg, "hookd_outbox_oldest_due_seconds", nil); !ok || v < 0 {
			t.Errorf("hookd_outbox_oldest_due_seconds = %v (exists %v)", v, ok)
		}

		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP hookd_dead_deliveries_total Observational deliveries that went dead.
# TYPE hookd_dead_deliveries_total counter
hookd_dead_deliveries_total 1
`), "hookd_dead_deliveries_total"); err != nil {
			t.Error(err)
		}

		// Bounded labels only: no ids of any kind.
		allowed := map[string]bool{"hook_type": true, "outcome": true, "failure_mode": true, "kind": true, "url": true}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if !allowed[l.GetName()] {
						t.Errorf("%s has label %s", f.GetName(), l.GetName())
					}
					if strings.Contains(l.GetValue(), "secret") {
						t.Errorf("%s label %s=%q shows the URL's query", f.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
		if n := testutil.CollectAndCount(reg, "hookd_decisions_total"); n != 12 {
			t.Errorf("hookd_decisions_total: %d series, want 3 interceptive types x 4 outcomes", n)
		}
		if n := testutil.CollectAndCount(reg, "hookd_deliveries_total"); n != 25 {
			t.Errorf("hookd_deliveries_total: %d series, want 5 observational types x 5 outcomes", n)
		}
	})
}

// TestMetricsOptional: without a registerer the dispatcher registers nothing and still works
// (every other test runs that way); two dispatchers cannot share one registry by accident.
func TestMetricsOptional(t *testing.T) {
	db := storagetest.SQLite(t)
	reg := prometheus.NewRegistry()
	newHarness(t, db, Settings{Metrics: reg})
	defer func() {
		if recover() == nil {
			t.Error("a second dispatcher registered the same metrics on one registry")
		}
	}()
	newHarness(t, db, Settings{Metrics: reg})
}
