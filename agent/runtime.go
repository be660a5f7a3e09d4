// Package agent runs agents: a ReAct loop (model call → thinking / text / tool calls → tool
// results → … → answer) that calls the dispatcher at every lifecycle point and emits one
// canonical stream of events, persisted per run so any client can catch up.
//
// The API the chat dialects use:
//
//	rt.StartRun(ctx, req)            start a turn; returns the run's ids at once
//	rt.Follow(ctx, user, id, n)      every event after seq n: stored ones, then live ones
//	rt.Subscribe(ctx, requestID, n)  the same as a channel, for the runtime's own readers
//	rt.Run / rt.Session / rt.History look-ups, always scoped to the calling user
//	rt.Cancel(requestID)             stop a run; it ends INTERRUPTED
//	rt.Reply(ctx, user, id, r)       a paused run's answers, client-side outputs and input, checked
//	                                 whole before any is kept
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// Hooks is what the runtime needs of the dispatcher.
type Hooks interface {
	Intercept(ctx context.Context, ev dispatcher.Event) (dispatcher.Decision, error)
	Observe(ctx context.Context, ev dispatcher.Event) ([]string, error)
	// RecordAnswer puts a person's answer to a chain's ask on the decision log.
	RecordAnswer(ctx context.Context, ev dispatcher.Event, a dispatcher.PersonAnswer) error
}

// Config tunes the runtime.
type Config struct {
	MaxIters    int   // model calls per run; default 10
	TokenBudget int64 // tokens per run; 0 = none
	// ContextTokens, when set, is the largest model request (estimated, compact.go): a larger
	// one is preceded by the model summarising the older conversation (CONTEXT_COMPACTING).
	ContextTokens int64
	AgentName     string // default "assistant"
	ModelName     string // reported in agent_completion when a run names none
	// ModelRetries is how often a retryable model error is retried; ModelBackoff the first wait
	// (doubling, capped at 30 s; a provider's Retry-After wins when longer).
	ModelRetries int
	ModelBackoff time.Duration
	// Owner names this process among replicas.
	Owner string
	// DefaultBehavior is what happens to a call of a tool that writes or executes when no
	// permission rule matches: ask (default) or allow. Read-only tools are always allowed.
	DefaultBehavior string
	// AskTimeout is how long a confirmation or a client-side tool may take before the call is
	// denied ("等待超时"); SweepEvery how often that is checked.
	AskTimeout time.Duration
	SweepEvery time.Duration
	// Metrics receives the runtime's metrics; nil records none.
	Metrics prometheus.Registerer
	// RunLease is, on PostgreSQL, how long a running run survives its owner's silence before
	// another replica suspends it (the owner renews it every RunLease/5); default 15 s.
	RunLease time.Duration
}

// Runtime runs agents. Its methods are safe for concurrent use.
type Runtime struct {
	db    *storage.DB
	hooks Hooks
	model model.Model
	tools *tools.Registry
	ws    *tools.Workspaces
	log   *slog.Logger
	cfg   Config
	elog  *eventLog
	m     *metrics

	mu   sync.Mutex
	live map[int64]*run // runs executing in this process
	wg   sync.WaitGroup

	stopSweep    context.CancelFunc
	shutdownOnce sync.Once

	hub          *hub // wakes the readers of runs (follow.go)
	stopReplicas context.CancelFunc
	replicas     sync.WaitGroup
}

// New builds a runtime; call Start before StartRun.
func New(db *storage.DB, hooks Hooks, m model.Model, reg *tools.Registry, ws *tools.Workspaces, log *slog.Logger, cfg Config) *Runtime {
	if cfg.MaxIters <= 0 {
		cfg.MaxIters = 10
	}
	if cfg.AgentName == "" {
		cfg.AgentName = "assistant"
	}
	if cfg.ModelRetries <= 0 {
		cfg.ModelRetries = 3
	}
	if cfg.ModelBackoff <= 0 {
		cfg.ModelBackoff = 500 * time.Millisecond
	}
	if cfg.DefaultBehavior == "" {
		cfg.DefaultBehavior = BehaviorAsk
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = 10 * time.Minute
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Second
	}
	if cfg.RunLease <= 0 {
		cfg.RunLease = DefaultRunLease
	}
	rt := &Runtime{db: db, hooks: hooks, model: m, tools: reg, ws: ws, log: log, cfg: cfg,
		live: map[int64]*run{}, m: newMetrics(cfg.Metrics), hub: newHub()}
	rt.elog = newEventLog(db, hooks, log, cfg.Owner, rt.hub.wake)
	return rt
}

// Start recovers runs a crash left running: they are suspended (SHUTDOWN_INTERRUPT) so a client
// can resume them; nothing they emitted is lost. On SQLite that is every running run (one process
// owns the file); on PostgreSQL only those of this Owner: other replicas' runs are recovered when
// their lease runs out (see replicas.go).
func (rt *Runtime) Start(ctx context.Context) error {
	runs, err := rt.db.RunsByStatus(ctx, storage.RunRunning)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if rt.db.Dialect() == storage.Postgres && r.Owner != rt.cfg.Owner {
			continue // another replica's
		}
		if err := rt.recoverRun(ctx, r); err != nil {
			return err
		}
		rt.log.Warn("run left running by a crash is suspended", "requestId", r.RequestID)
	}
	// A run whose last answer or result was kept just before a crash waits for nobody: the
	// resume that followed the answer went with the process. tryResume goes on with one that
	// waits for nothing more, and leaves every other pause as it is.
	suspended, err := rt.db.RunsByStatus(ctx, storage.RunSuspended)
	if err != nil {
		return err
	}
	for _, r := range suspended {
		rt.tryResume(context.WithoutCancel(ctx), r.ID)
	}
	sctx, cancel := context.WithCancel(context.Background())
	rt.stopSweep = cancel
	go every(sctx, rt.cfg.SweepEvery, rt.sweep)
	go every(sctx, followPoll, rt.poll)
	rt.startReplicas()
	return nil
}

// Shutdown suspends every live run (SHUTDOWN_INTERRUPT, to be resumed after the restart), waits
// for them to wind down (until ctx ends), then flushes the event log.
func (rt *Runtime) Shutdown(ctx context.Context) {
	rt.shutdownOnce.Do(func() { rt.shutdown(ctx) })
}

func (rt *Runtime) shutdown(ctx context.Context) {
	if rt.stopSweep != nil {
		rt.stopSweep()
	}
	rt.mu.Lock()
	for _, r := range rt.live {
		r.cancel(errShutdown)
	}
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	// The leases are kept until the runs have wound down, so no replica takes over a run that
	// is still pausing here.
	if rt.stopReplicas != nil {
		rt.stopReplicas()
		rt.replicas.Wait()
	}
	rt.elog.stop(ctx)
}

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

var (
	errShutdown = errors.New("daemon shutting down")
	errStopped  = errors.New("stopped by the user")
)

// StartRequest asks for a run.
type StartRequest struct {
	UserID      string
	PrincipalID *int64
	AgentID     *int64
	// SessionKey is the client's session id; a new key starts a new session.
	SessionKey string
	Input      string
	Images     []string
	// Model and Temperature override the configured model for this run.
	Model       string
	Temperature *float64
	// TriggerSource is human_message (default), scheduled_task, api_call or internal.
	TriggerSource   string
	ChannelType     string
	ChannelProvider string
	BizKey          string
	UserNickname    string
	TraceID         string
	TraceParent     string // the span that started the run (W3C traceparent); set by StartRun
	ParentTurnID    *string
	// ExternalTools are tools the client declares and runs itself: calls to them pause the run
	// until the client posts their results.
	ExternalTools []model.ToolSpec
	// MaxIters caps the model calls of this run below the configured cap (0: the configured one);
	// NoTools offers the model no tools (a single-answer mode).
	MaxIters int
	NoTools  bool
	// TokenBudget caps the tokens of this run below agent.tokenBudget (0: the configured one): a
	// subagent gets what its parent has left, so that spawning does not multiply the budget.
	TokenBudget int64
	// ParentSessionID and Depth are set for a subagent's run.
	ParentSessionID *int64
	Depth           int
}

// ErrSessionBusy is returned by StartRun when the session already has a run in progress.
var ErrSessionBusy = storage.ErrSessionBusy

// runSpec is what a run was asked to do, persisted so it can be resumed.
type runSpec struct {
	StartRequest
	SessionID          int64  `json:"sessionId"`
	NewSession         bool   `json:"newSession"`
	UserMessageID      int64  `json:"userMessageId"`
	AssistantMessageID int64  `json:"assistantMessageId"`
	ReplyID            string `json:"replyId"`
	StartedAt          time.Time
}

// StartRun creates the session if needed, records the run and its user message, and starts the
// loop. It returns once the run exists; its events follow through Subscribe.
func (rt *Runtime) StartRun(ctx context.Context, req StartRequest) (RunInfo, error) {
	if req.UserID == "" || req.SessionKey == "" {
		return RunInfo{}, errors.New("agent: userId and sessionKey are required")
	}
	if req.TriggerSource == "" {
		req.TriggerSource = dispatcher.SourceHuman
	}
	req.TraceID, req.TraceParent = tracing.Inherit(ctx, req.TraceID)
	sess, created, err := rt.db.EnsureSession(ctx, storage.Session{UserID: req.UserID, Key: req.SessionKey,
		PrincipalID: req.PrincipalID, AgentID: req.AgentID, ParentID: req.ParentSessionID})
	if err != nil {
		return RunInfo{}, err
	}
	spec := runSpec{StartRequest: req, SessionID: sess.ID, NewSession: created, ReplyID: newUUID(), StartedAt: time.Now().UTC()}
	rec := storage.Run{RequestID: storage.NewTSIDString(), ReplyID: spec.ReplyID, SessionID: sess.ID, UserID: req.UserID,
		Status: storage.RunRunning, Owner: rt.cfg.Owner}
	rec.Spec = mustJSON(spec)
	if err := rt.db.CreateRun(ctx, &rec); err != nil {
		return RunInfo{}, err
	}
	user := &storage.Message{SessionID: sess.ID, RunID: &rec.ID, Role: model.RoleUser}
	user.Body = mustJSON(userBody{Text: req.Input, Images: req.Images})
	asst := &storage.Message{SessionID: sess.ID, RunID: &rec.ID, Role: model.RoleAssistant, Body: []byte(`{}`)}
	if err := rt.db.AddMessages(ctx, []*storage.Message{user, asst}); err != nil {
		rec.Status, rec.ErrorCode, rec.ErrorMessage = storage.RunFailed, CodeInternal, err.Error()
		_ = rt.db.UpdateRun(context.WithoutCancel(ctx), &rec)
		return RunInfo{}, err
	}
	spec.UserMessageID, spec.AssistantMessageID = user.ID, asst.ID
	rec.Spec = mustJSON(spec)
	if err := rt.db.UpdateRun(ctx, &rec); err != nil {
		return RunInfo{}, err
	}
	info := RunInfo{RequestID: rec.RequestID, ReplyID: spec.ReplyID, SessionID: sess.ID, SessionKey: sess.Key, UserID: req.UserID,
		UserMessageID: user.ID, AssistantMessageID: asst.ID, AgentName: rt.cfg.AgentName, NewSession: created,
		ParentTurnID: req.ParentTurnID}
	r := rt.newRun(rec, spec, runState{})
	r.emit(Event{Kind: KindRunStarted, Run: &info})
	rt.launch(r, func(r *run) { r.execute() })
	return info, nil
}

// launch runs fn for r on its own goroutine, tracked by the runtime.
func (rt *Runtime) launch(r *run, fn func(*run)) {
	r.ctx = tracing.StartRun(r.ctx, r.spec.TraceParent, r.rec.RequestID)
	rt.mu.Lock()
	rt.live[r.rec.ID] = r
	rt.mu.Unlock()
	rt.wg.Add(1)
	rt.m.runStarted()
	go func() {
		defer rt.wg.Done()
		defer rt.m.runStopped()
		defer tracing.End(r.ctx)
		defer func() {
			if p := recover(); p != nil {
				rt.log.ErrorContext(r.ctx, "run panicked", "requestId", r.rec.RequestID, "panic", p)
				r.fail(CodeInternal, fmt.Sprintf("internal error: %v", p), false, false)
			}
			rt.forget(r)
		}()
		fn(r)
	}()
}

// forget drops r from the live runs, unless a resume already registered a successor.
func (rt *Runtime) forget(r *run) {
	rt.mu.Lock()
	if rt.live[r.rec.ID] == r {
		delete(rt.live, r.rec.ID)
	}
	rt.mu.Unlock()
}

// Cancel stops a live run of this process: the current step ends and the run ends INTERRUPTED.
// It reports whether a run was stopped.
func (rt *Runtime) Cancel(requestID string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, r := range rt.live {
		if r.rec.RequestID == requestID {
			r.cancel(errStopped)
			return true
		}
	}
	return false
}

// ErrNotFound is returned for runs and sessions that do not exist or belong to another user.
var ErrNotFound = storage.ErrNotFound

// ownRun returns the stored run if it belongs to userID.
func (rt *Runtime) ownRun(ctx context.Context, userID, requestID string) (storage.Run, error) {
	r, err := rt.db.GetRun(ctx, requestID)
	if err != nil {
		return storage.Run{}, err
	}
	if r.UserID != userID {
		return storage.Run{}, ErrNotFound // another user's run does not exist for this one
	}
	return r, nil
}

// Final reports whether a run status is final (completed, failed or interrupted).
func Final(status string) bool { return isFinal(status) }

func isFinal(status string) bool {
	return status == storage.RunCompleted || status == storage.RunFailed || status == storage.RunInterrupted
}

// Workspace returns the directory of a session's workspace.
func (rt *Runtime) Workspace(sessionID int64) (string, error) { return rt.ws.Dir(sessionID) }

// Tools lists the tools the agent offers the model.
func (rt *Runtime) Tools() []tools.Spec { return rt.tools.Specs() }

// ResetContext makes the session's next runs start from a clean slate: the model no longer sees
// the messages before this point (they stay in the history).
func (rt *Runtime) ResetContext(ctx context.Context, sessionID int64) error {
	return rt.db.AddMessages(ctx, []*storage.Message{{SessionID: sessionID, Role: model.RoleSystem, Body: []byte(`{"reset":true}`)}})
}

// HistoryMessage is one message of a session as clients see it.
type HistoryMessage struct {
	ID        int64            `json:"id"`
	Role      string           `json:"role"`
	Text      string           `json:"text"`
	Thinking  string           `json:"thinking,omitempty"`
	ToolCalls []model.ToolCall `json:"toolCalls,omitempty"`
	Usage     *Usage           `json:"usage,omitempty"`
	RunID     string           `json:"runId,omitempty"`
	CreatedAt time.Time        `json:"createdAt"`
	UpdatedAt time.Time        `json:"updatedAt"`
}

// History returns a session's messages in order (since: only those changed at or after it).
func (rt *Runtime) History(ctx context.Context, sessionID int64, since time.Time) ([]HistoryMessage, error) {
	msgs, err := rt.db.Messages(ctx, sessionID, since)
	if err != nil {
		return nil, err
	}
	runs, err := rt.db.SessionRuns(ctx, sessionID, 1000)
	if err != nil {
		return nil, err
	}
	requestIDs := map[int64]string{}
	for _, r := range runs {
		requestIDs[r.ID] = r.RequestID
	}
	out := make([]HistoryMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == model.RoleSystem {
			continue // a context reset marker
		}
		h := HistoryMessage{ID: m.ID, Role: m.Role, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
		if m.RunID != nil {
			h.RunID = requestIDs[*m.RunID]
		}
		switch m.Role {
		case model.RoleUser:
			var b userBody
			if err := json.Unmarshal(m.Body, &b); err != nil {
				return nil, fmt.Errorf("%w: message %d of session %d: %v", ErrBadState, m.ID, sessionID, err)
			}
			h.Text = b.Text
		case model.RoleAssistant:
			var b assistantBody
			if err := json.Unmarshal(m.Body, &b); err != nil {
				return nil, fmt.Errorf("%w: message %d of session %d: %v", ErrBadState, m.ID, sessionID, err)
			}
			h.Text, h.Thinking, h.Usage = b.Text, b.Thinking, b.Usage
			h.ToolCalls = append(h.ToolCalls, b.SummarisedCalls...)
			for _, t := range b.Transcript {
				h.ToolCalls = append(h.ToolCalls, t.ToolCalls...)
			}
		}
		out = append(out, h)
	}
	return out, nil
}
