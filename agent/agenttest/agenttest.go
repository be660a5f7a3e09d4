// Package agenttest builds a real agent runtime for tests of the packages around it: the
// scripted model, the real dispatcher on the given database, and the workspace tools.
package agenttest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/model/modeltest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// Options shape an Env; zero values are sensible for tests.
type Options struct {
	// Script is a scripted-model script (CONTRACT §4) as JSON.
	Script string
	// Model, when set, is the model instead of the script's (DroppingModel, an OpenAI-compatible
	// server of the test's own).
	Model model.Model
	// Config of the runtime. ModelBackoff defaults to 1ms and DefaultBehavior to allow, so
	// tests about something else neither wait nor ask.
	Config agent.Config
	// Dispatcher settings; Version defaults to "test".
	Dispatcher dispatcher.Settings
	// Tools added to the three workspace tools.
	Tools []tools.Tool
}

// Env is a started runtime and what it stands on; it stops when the test ends.
type Env struct {
	DB         *storage.DB
	Hooks      *dispatcher.Registry
	Dispatcher *dispatcher.Dispatcher
	Runtime    *agent.Runtime
	Tools      *tools.Registry
	Workspaces *tools.Workspaces

	model model.Model
	cfg   agent.Config
}

// DroppingModel is the OpenAI-compatible provider talking to a real server whose streams break
// off after each part but the last (modeltest.Dropping): every model call answers the parts
// joined, recovered from each break (LLM_AUTO_RECOVERING), and never calls a tool.
func DroppingModel(t testing.TB, parts ...string) model.Model {
	srv := modeltest.NewDropping(t, parts...)
	return model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Model: "dropping"})
}

// Quiet is a logger that discards.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// New starts a runtime on db.
func New(t testing.TB, db *storage.DB, o Options) *Env {
	t.Helper()
	ctx := context.Background()
	m := o.Model
	if m == nil {
		var sf model.ScriptFile
		if err := json.Unmarshal([]byte(o.Script), &sf); err != nil {
			t.Fatalf("agenttest: script: %v", err)
		}
		var err error
		if m, err = model.NewScripted(sf); err != nil {
			t.Fatalf("agenttest: script: %v", err)
		}
	}
	reg, err := dispatcher.NewRegistry(ctx, db, Quiet())
	if err != nil {
		t.Fatal(err)
	}
	if o.Dispatcher.Version == "" {
		o.Dispatcher.Version = "test"
	}
	disp := dispatcher.New(db, reg, Quiet(), o.Dispatcher)
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	treg := tools.NewRegistry(append([]tools.Tool{tools.NewWriteFile(), tools.NewReadFile(), tools.NewListFiles(), tools.NewSendAttachment()}, o.Tools...)...)
	cfg := o.Config
	if cfg.ModelBackoff == 0 {
		cfg.ModelBackoff = time.Millisecond
	}
	if cfg.DefaultBehavior == "" {
		cfg.DefaultBehavior = agent.BehaviorAllow
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		disp.Stop(c)
	})
	e := &Env{DB: db, Hooks: reg, Dispatcher: disp, Tools: treg, Workspaces: tools.NewWorkspaces(t.TempDir()), model: m, cfg: cfg}
	e.start(t)
	return e
}

// start starts a runtime on e's database, dispatcher, model and workspaces.
func (e *Env) start(t testing.TB) {
	t.Helper()
	rt := agent.New(e.DB, e.Dispatcher, e.model, e.Tools, e.Workspaces, Quiet(), e.cfg)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before the dispatcher's stop (cleanups run last first)
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(c)
	})
	e.Runtime = rt
}

// Restart shuts the runtime down (its live runs are suspended: SHUTDOWN_INTERRUPT) and starts a
// new one on the same database: what a daemon restart does to the agent.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	e.Runtime.Shutdown(c)
	cancel()
	e.start(t)
}

// Hook registers a hook given as the admin API's JSON.
func (e *Env) Hook(t testing.TB, spec string) dispatcher.Hook {
	t.Helper()
	var h dispatcher.Hook
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		t.Fatal(err)
	}
	out, err := e.Hooks.Create(context.Background(), h)
	if err != nil {
		t.Fatalf("agenttest: hook: %v", err)
	}
	return out
}

// WaitModelCall returns once the model call of the given step of run requestID has started.
func WaitModelCall(t testing.TB, rt *agent.Runtime, requestID string, step int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := rt.Subscribe(ctx, requestID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ev.Kind == agent.KindModelStarted && ev.Step == step {
			return
		}
	}
	t.Fatalf("no model call %d", step)
}
