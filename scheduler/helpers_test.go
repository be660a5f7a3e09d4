package scheduler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is one daemon's worth of parts on a real database: the hook registry, the real dispatcher
// and an agent runtime over the scripted model.
type env struct {
	t    *testing.T
	db   *storage.DB
	reg  *dispatcher.Registry
	disp *dispatcher.Dispatcher
	rt   *agent.Runtime
}

func newEnv(t *testing.T, db *storage.DB, script string) *env {
	t.Helper()
	return newEnvWith(t, db, script, agent.Config{})
}

// newEnvWith is newEnv with the runtime's config (its Owner is set).
func newEnvWith(t *testing.T, db *storage.DB, script string, cfg agent.Config) *env {
	t.Helper()
	cfg.Owner = storage.NewTSIDString()
	ae := agenttest.New(t, db, agenttest.Options{Script: script,
		Config: cfg,
		Dispatcher: dispatcher.Settings{Retry: dispatcher.RetryPolicy{Fast: []time.Duration{100 * time.Millisecond},
			Ladder: []time.Duration{time.Second}}}})
	return &env{t: t, db: db, reg: ae.Hooks, disp: ae.Dispatcher, rt: ae.Runtime}
}

// testConfig polls fast so cross-daemon changes show within a test's patience.
func testConfig() scheduler.Config {
	return scheduler.Config{PollEvery: 200 * time.Millisecond, UserFor: userFor}
}

func userFor(p *int64) string {
	if p != nil && *p == principal {
		return "user-10001"
	}
	return "local"
}

const (
	principal = int64(1001)
	agentID   = int64(5001)
)

// scheduler builds and starts a scheduler over the env's runtime and dispatcher; it stops before
// them at the end of the test.
func (e *env) scheduler(cfg scheduler.Config) *scheduler.Scheduler {
	e.t.Helper()
	s := scheduler.New(e.db, e.rt, e.disp, quiet(), cfg)
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Stop)
	return s
}

func (e *env) hook(t dispatcher.HookType, url string) {
	e.t.Helper()
	if _, err := e.reg.Create(context.Background(), dispatcher.Hook{HookName: string(t) + " receiver", HookType: t,
		DispatchConfig: dispatcher.DispatchConfig{URL: url}}); err != nil {
		e.t.Fatal(err)
	}
}

// receiver is a webhook endpoint that records every envelope and answers interceptive calls with
// answer (nil: allow).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(env dispatcher.Envelope) string
}

type received struct {
	env dispatcher.Envelope
	ctx map[string]any // the context as sent, to tell null from absent
}

func newReceiver(t *testing.T, answer func(dispatcher.Envelope) string) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var env dispatcher.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var c map[string]any
		_ = json.Unmarshal(env.Context, &c)
		r.mu.Lock()
		dup := slices.ContainsFunc(r.got, func(g received) bool { return g.env.EventID == env.EventID })
		if !dup { // a retried delivery carries the same eventId
			r.got = append(r.got, received{env: env, ctx: c})
		}
		answer := r.answer
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if answer != nil && env.HookType == dispatcher.PreScheduledTask {
			_, _ = io.WriteString(w, answer(env))
			return
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) of(t dispatcher.HookType) []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, g := range r.got {
		if g.env.HookType == t {
			out = append(out, g)
		}
	}
	return out
}

// byTrace finds the event of type t of one firing.
func (r *receiver) byTrace(t dispatcher.HookType, traceID string) *received {
	for _, g := range r.of(t) {
		if g.env.TraceID != nil && *g.env.TraceID == traceID {
			return &g
		}
	}
	return nil
}

func taskIDOf(env dispatcher.Envelope) int64 {
	var c dispatcher.PreScheduledTaskContext
	_ = json.Unmarshal(env.Context, &c)
	return c.TaskID
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// history is the task's firings, oldest first.
func history(t *testing.T, s *scheduler.Scheduler, id int64) []storage.TaskRun {
	t.Helper()
	runs, err := s.Runs(context.Background(), storage.TaskRunFilter{TaskID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(runs)
	return runs
}

func count(runs []storage.TaskRun, status string) int {
	n := 0
	for _, r := range runs {
		if r.Status == status {
			n++
		}
	}
	return n
}

// fired drops the firings skipped because the one before still ran.
func fired(runs []storage.TaskRun) []storage.TaskRun {
	var out []storage.TaskRun
	for _, r := range runs {
		if r.Status != storage.TaskRunSkipped {
			out = append(out, r)
		}
	}
	return out
}

func create(t *testing.T, s *scheduler.Scheduler, task scheduler.Task) scheduler.Task {
	t.Helper()
	out, err := s.Create(context.Background(), task)
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	return out
}

// disable stops a task firing and waits until its firings in flight ended.
func disable(t *testing.T, s *scheduler.Scheduler, task scheduler.Task) {
	t.Helper()
	off := false
	task.Enabled = &off
	if _, err := s.Replace(context.Background(), task.ID, task); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "firings in flight to end", func() bool {
		return count(history(t, s, task.ID), storage.TaskRunRunning) == 0
	})
}

func ptr[T any](v T) *T { return &v }

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
