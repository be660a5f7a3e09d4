// Package scheduler fires scheduled agent tasks: at each tick of a task's cron schedule it asks
// the pre_scheduled_task hooks, starts an agent run (trigger source scheduled_task), waits for it
// to end and reports it through post_scheduled_task.
//
// The database is the clock's memory and the arbiter: every task row holds its next firing, and a
// firing is claimed by moving that value on in the same transaction that records the firing, so
// of several daemons on one database exactly one fires each tick, a restart knows which ticks it
// missed, and a running firing blocks the next one whichever daemon runs it. robfig/cron supplies
// the parser and the schedules; the timing loop is ours, because its in-memory state must follow
// the database rather than lead it.
package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// Runtime is what the scheduler needs of the agent runtime.
type Runtime interface {
	StartRun(ctx context.Context, req agent.StartRequest) (agent.RunInfo, error)
	Subscribe(ctx context.Context, requestID string, after int64) (<-chan agent.Event, error)
}

// Hooks is what the scheduler needs of the dispatcher.
type Hooks interface {
	Intercept(ctx context.Context, ev dispatcher.Event) (dispatcher.Decision, error)
	ObserveEnding(ctx context.Context, ev dispatcher.Event, end storage.TaskRunEnd) error
}

var (
	_ Runtime = (*agent.Runtime)(nil)
	_ Hooks   = (*dispatcher.Dispatcher)(nil)
)

// Config tunes the scheduler; zero values take the defaults.
type Config struct {
	// UserFor names the runtime user a task's runs belong to (so that user sees them through the
	// chat APIs); default "local" for every task.
	UserFor func(principalID *int64) string
	// AgentFor is the agent a task of the principal runs as, given the task's agentId, or why
	// that agentId is not the principal's to name (config.Auth.TaskAgent); default: agentId.
	AgentFor func(principalID, agentID *int64) (*int64, error)
	// Now is the clock schedules are computed with; default time.Now.
	Now func() time.Time
	// PollEvery is how often the scheduler looks for task changes made by other daemons, renews
	// the lease of its running firings and ends those whose daemon died; default 2 s.
	PollEvery time.Duration
	// Lease is how long a running firing survives its daemon's silence; default 1 min.
	Lease time.Duration
	// MisfireGrace is how late a tick may be found and still fire as usual; later than that it
	// was missed (no scheduler ran) and the task's catchUp decides; default 10 s.
	MisfireGrace time.Duration
	// Owner names this scheduler in the firings it records; default host/pid/random.
	Owner string
}

// ErrStopped is returned by RunNow once the scheduler is stopping.
var ErrStopped = errors.New("scheduler: stopped")

// errStopping is the cause given to firings in flight when Stop interrupts them.
var errStopping = errors.New("the scheduler is stopping")

// Scheduler fires the tasks of one database. Its methods are safe for concurrent use.
type Scheduler struct {
	db    *storage.DB
	rt    Runtime
	hooks Hooks
	log   *slog.Logger
	cfg   Config

	// reloadMu serializes reloads so an older snapshot never replaces a newer one.
	reloadMu sync.Mutex
	// mu guards entries and version: Reload writes them, the loop reads them and moves nexts.
	mu      sync.Mutex
	entries map[int64]*entry
	version string

	wake chan struct{} // to the loop: the entries changed

	loopCtx  context.Context
	stopLoop context.CancelFunc
	loopDone chan struct{} // nil until Start

	jobCtx   context.Context // ends when Stop interrupts the firings in flight
	stopJobs context.CancelCauseFunc
	jobsMu   sync.Mutex // guards stopping against jobs.Add, and following
	stopping bool
	// following are the suspended firings (task_runs ids) this scheduler follows to their run's
	// end: a firing is followed once however often it is found.
	following map[int64]bool
	jobs      sync.WaitGroup
	inflight  atomic.Int64 // firings running on this scheduler

	startOnce sync.Once
	stopOnce  sync.Once
}

// entry is the loop's view of one enabled task: when it fires next, as the database said.
type entry struct {
	id        int64
	cron      string
	sched     cron.Schedule
	catchUp   bool
	next      time.Time // the task's next_run_at
	notBefore time.Time // after a failed claim: wait until then before trying again
}

func (e *entry) due() time.Time {
	if e.notBefore.After(e.next) {
		return e.notBefore
	}
	return e.next
}

// New builds a scheduler; call Start to fire tasks. Task CRUD works before Start.
func New(db *storage.DB, rt Runtime, hooks Hooks, log *slog.Logger, cfg Config) *Scheduler {
	if cfg.UserFor == nil {
		cfg.UserFor = func(*int64) string { return "local" }
	}
	if cfg.AgentFor == nil {
		cfg.AgentFor = func(_, agent *int64) (*int64, error) { return agent, nil }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 2 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	cfg.Lease = max(cfg.Lease, 5*cfg.PollEvery)
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = 10 * time.Second
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		cfg.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	s := &Scheduler{db: db, rt: rt, hooks: hooks, log: log, cfg: cfg, entries: map[int64]*entry{},
		wake: make(chan struct{}, 1), following: map[int64]bool{}}
	s.loopCtx, s.stopLoop = context.WithCancel(context.Background())
	s.jobCtx, s.stopJobs = context.WithCancelCause(context.Background())
	return s
}

func (s *Scheduler) now() time.Time { return s.cfg.Now() }

// Start ends the firings a dead daemon left running, loads the schedules and starts firing.
func (s *Scheduler) Start(ctx context.Context) error {
	err := errors.New("scheduler: already started")
	s.startOnce.Do(func() {
		err = s.start(ctx)
	})
	return err
}

func (s *Scheduler) start(ctx context.Context) error {
	staleBefore := s.now().Add(-s.cfg.Lease)
	if s.db.Dialect() == storage.SQLite {
		// One process owns a SQLite file, so whatever it left running died with it.
		staleBefore = s.now().Add(time.Hour)
	}
	if err := s.rescue(ctx, staleBefore); err != nil {
		return err
	}
	if err := s.followAllSuspended(ctx); err != nil {
		return err
	}
	if err := s.Reload(ctx); err != nil {
		return err
	}
	s.loopDone = make(chan struct{})
	go s.loop()
	return nil
}

// Stop stops firing, interrupts the firings in flight (their agent runs go on in the runtime;
// the firings are recorded as interrupted) and waits for them to be recorded. It is idempotent.
func (s *Scheduler) Stop() {
	s.stopOnce.Do(func() {
		s.stopLoop()
		s.startOnce.Do(func() {}) // a Start after Stop does nothing
		if s.loopDone != nil {
			<-s.loopDone
		}
		s.jobsMu.Lock()
		s.stopping = true
		s.jobsMu.Unlock()
		s.stopJobs(errStopping)
		s.jobs.Wait()
	})
}

// Reload rebuilds the schedules from the database. Task changes made through this scheduler
// reload at once; those of other daemons are noticed by the poll.
func (s *Scheduler) Reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	// The version is read first: a change landing between the two reads makes the next poll
	// reload again rather than be missed.
	version, err := s.db.TasksVersion(ctx)
	if err != nil {
		return err
	}
	tasks, err := s.db.ListTasks(ctx, storage.TaskFilter{})
	if err != nil {
		return err
	}
	entries := make(map[int64]*entry, len(tasks))
	for _, t := range tasks {
		if e := s.entryOf(t); e != nil {
			entries[t.ID] = e
		}
	}
	s.mu.Lock()
	s.entries, s.version = entries, version
	s.mu.Unlock()
	s.poke()
	return nil
}

// entryOf is the loop's entry for t, or nil when t does not fire.
func (s *Scheduler) entryOf(t storage.Task) *entry {
	if !t.Enabled || t.NextRunAt.IsZero() {
		return nil
	}
	sched, err := parser.Parse(t.Cron)
	if err != nil { // validated on the way in; a bad row is skipped, not fatal
		s.log.Error("task skipped: bad cron", "taskId", t.ID, "cron", t.Cron, "err", err)
		return nil
	}
	return &entry{id: t.ID, cron: t.Cron, sched: sched, catchUp: t.CatchUp, next: t.NextRunAt}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop fires due ticks. It is the only goroutine that claims scheduled ticks; firings run on
// goroutines of their own so a slow run never delays another task's tick.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	poll := time.NewTicker(s.cfg.PollEvery)
	defer poll.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.fireDue()
		timer.Reset(s.untilNext())
		select {
		case <-s.loopCtx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		case <-poll.C:
			s.poll()
		}
	}
}

// untilNext is how long the loop may sleep before a tick is due.
func (s *Scheduler) untilNext() time.Duration {
	now := s.now()
	wait := time.Hour
	s.mu.Lock()
	for _, e := range s.entries {
		wait = min(wait, e.due().Sub(now))
	}
	s.mu.Unlock()
	return max(wait, 0)
}

func (s *Scheduler) fireDue() {
	now := s.now()
	var due []entry
	s.mu.Lock()
	for _, e := range s.entries {
		if !e.due().After(now) {
			due = append(due, *e)
		}
	}
	s.mu.Unlock()
	for _, e := range due {
		if s.loopCtx.Err() != nil {
			return
		}
		s.fireSafely(e, now)
	}
}

func (s *Scheduler) fireSafely(e entry, now time.Time) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("firing a task panicked", "taskId", e.id, "panic", p)
			s.backOff(e.id, now)
		}
	}()
	s.fire(e, now)
}

// fire claims the tick e.next of a task and, when it is this scheduler's to run, runs it.
func (s *Scheduler) fire(e entry, now time.Time) {
	f := storage.TaskFire{TaskID: e.id, Kind: storage.FireSchedule, ScheduledAt: e.next, Expect: e.next,
		Next: nextAfter(e.sched, e.next, now, s.cfg.MisfireGrace), Cron: e.cron, Owner: s.cfg.Owner, At: now}
	if late := now.Sub(e.next); late > s.cfg.MisfireGrace {
		if e.catchUp {
			f.Kind = storage.FireCatchUp
		} else {
			f.Skip = fmt.Sprintf("missed: due at %s while no scheduler ran, and catchUp is false",
				e.next.UTC().Format(time.RFC3339))
		}
	}
	// A tick is the root of its own trace: the pre hook, the run and the post hook are in it.
	ctx, endSpan := tracing.StartFiring(s.loopCtx, e.id, string(f.Kind))
	f.TraceID = traceID(ctx)
	run, task, err := s.db.ClaimTaskFire(ctx, f)
	switch {
	case errors.Is(err, storage.ErrTaskChanged), errors.Is(err, storage.ErrNotFound):
		endSpan("not claimed", "", false)
		s.refresh(e.id, now) // another daemon fired it, or the task changed
		return
	case err != nil:
		endSpan("not claimed", "", true)
		if s.loopCtx.Err() == nil {
			s.log.ErrorContext(ctx, "claiming a task firing failed", "taskId", e.id, "err", err)
		}
		s.backOff(e.id, now)
		return
	}
	s.advance(e.id, e.next, f.Next)
	if run.Status != storage.TaskRunRunning {
		endSpan(run.Status, "", false)
		s.log.InfoContext(ctx, "task firing skipped", "taskId", e.id, "scheduledAt", e.next, "reason", run.Reason)
		return
	}
	if f.Kind == storage.FireCatchUp {
		s.log.InfoContext(ctx, "catching up a missed task firing", "taskId", e.id, "scheduledAt", e.next)
	}
	s.launch(ctx, &firing{task: task, run: run, endSpan: endSpan})
}

// traceID is the id a firing's envelopes and run carry: its trace's, or without one (tracing
// off and no caller's traceparent) a fresh id of hookd's own.
func traceID(ctx context.Context) string {
	return cmp.Or(tracing.TraceID(ctx), storage.NewTSIDString())
}

// nextAfter is the tick after t, skipping those already past by more than grace (a late tick
// fires once): one less late than that still fires as usual, as MisfireGrace says, rather than
// being skipped with the missed ones before it (a daily 09:00 task whose daemon came back at
// 09:00:03 after a weekend down ran on Monday too).
func nextAfter(sched cron.Schedule, t, now time.Time, grace time.Duration) time.Time {
	n := sched.Next(t)
	if !n.IsZero() && !n.After(now) {
		n = sched.Next(later(t, now.Add(-grace)))
	}
	return n
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// advance moves the entry on after its tick was claimed, unless a reload already replaced it.
func (s *Scheduler) advance(id int64, from, to time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[id]
	if e == nil || !e.next.Equal(from) {
		return
	}
	if to.IsZero() {
		delete(s.entries, id)
		return
	}
	e.next, e.notBefore = to, time.Time{}
}

// backOff keeps the loop from retrying a failing claim at once.
func (s *Scheduler) backOff(id int64, now time.Time) {
	s.mu.Lock()
	if e := s.entries[id]; e != nil {
		e.notBefore = now.Add(s.cfg.PollEvery)
	}
	s.mu.Unlock()
}

// refresh rereads one task after a claim found it changed.
func (s *Scheduler) refresh(id int64, now time.Time) {
	t, err := s.db.GetTask(s.loopCtx, id)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		s.backOff(id, now)
		return
	}
	var e *entry
	if err == nil {
		e = s.entryOf(t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e == nil {
		delete(s.entries, id)
		return
	}
	if old := s.entries[id]; old != nil && old.next.Equal(e.next) && old.cron == e.cron {
		e.notBefore = now.Add(s.cfg.PollEvery) // the claim failed on a tick the database still has
	}
	s.entries[id] = e
}

// poll notices other daemons' task changes, renews this scheduler's leases and ends the firings
// of daemons that died.
func (s *Scheduler) poll() {
	ctx := s.loopCtx
	s.mu.Lock()
	seen := s.version
	s.mu.Unlock()
	if v, err := s.db.TasksVersion(ctx); err == nil && v != seen {
		if err := s.Reload(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("task schedules reload failed", "err", err)
		}
	}
	now := s.now()
	if s.inflight.Load() > 0 {
		// On SQLite too: nobody else reads the lease there, but a firing the daemon dies in is
		// reported with its duration up to its last heartbeat.
		if err := s.db.TouchTaskRuns(ctx, s.cfg.Owner, now); err != nil && ctx.Err() == nil {
			s.log.Warn("renewing task firing leases failed", "err", err)
		}
	}
	if s.db.Dialect() == storage.SQLite {
		return // one process per file: Start ended whatever a dead one left running
	}
	if err := s.rescue(ctx, now.Add(-s.cfg.Lease)); err != nil && ctx.Err() == nil {
		s.log.Warn("ending abandoned task firings failed", "err", err)
	}
	// Firings another daemon recorded suspended: it may be gone before their runs end.
	if err := s.followAllSuspended(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("finding suspended task firings failed", "err", err)
	}
}

// launch runs a claimed firing on its own goroutine; when the scheduler is already stopping the
// firing is recorded as interrupted instead.
// launch runs f on a goroutine of its own, in traced's trace (the firing's span).
func (s *Scheduler) launch(traced context.Context, f *firing) bool {
	s.jobsMu.Lock()
	if s.stopping {
		s.jobsMu.Unlock()
		f.start = time.Now()
		f.end(storage.TaskRunInterrupted, codeShutdown, errStopping.Error())
		s.finish(tracing.Carry(context.Background(), traced), f)
		return false
	}
	s.jobs.Add(1)
	s.inflight.Add(1)
	s.jobsMu.Unlock()
	go func() {
		defer s.jobs.Done()
		defer s.inflight.Add(-1)
		defer func() {
			if p := recover(); p != nil { // execute recovers its own; this guards the guard
				s.log.ErrorContext(traced, "task firing panicked", "taskId", f.task.ID, "panic", p)
			}
		}()
		s.execute(tracing.Carry(s.jobCtx, traced), f)
	}()
	return true
}

// RunNow fires task id at once, outside its schedule. It returns when the firing's agent run has
// started (with its requestId) or the firing ended before one did (skipped: still running;
// denied; failed); the run goes on in the background.
func (s *Scheduler) RunNow(ctx context.Context, id int64) (storage.TaskRun, error) {
	s.jobsMu.Lock()
	stopping := s.stopping
	s.jobsMu.Unlock()
	if stopping {
		return storage.TaskRun{}, ErrStopped
	}
	now := s.now()
	// In the trace of the request that asked for it.
	tctx, endSpan := tracing.StartFiring(ctx, id, string(storage.FireManual))
	run, task, err := s.db.ClaimTaskFire(tctx, storage.TaskFire{TaskID: id, Kind: storage.FireManual, ScheduledAt: now,
		Owner: s.cfg.Owner, TraceID: traceID(tctx), At: now})
	if err != nil {
		endSpan("not claimed", "", !errors.Is(err, storage.ErrNotFound))
		return storage.TaskRun{}, err
	}
	if run.Status != storage.TaskRunRunning {
		endSpan(run.Status, "", false)
		return run, nil
	}
	started := make(chan storage.TaskRun, 1)
	f := &firing{task: task, run: run, started: started, endSpan: endSpan}
	if !s.launch(tctx, f) {
		return f.run, ErrStopped
	}
	select {
	case r := <-started:
		return r, nil
	case <-ctx.Done():
		return run, ctx.Err()
	}
}
