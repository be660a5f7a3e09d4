package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// Error codes of task firings, besides the runtime's (agent.Code*).
const (
	codeSessionBusy = "SESSION_BUSY"       // the reused session still has a live run
	codeSuspended   = "RUN_SUSPENDED"      // the run paused: the firing ends when the run does
	codeShutdown    = "SHUTDOWN_INTERRUPT" // the scheduler stopped before the run ended
	codeAbandoned   = "ABANDONED"          // the scheduler died (or went silent) before the run ended
	codeAgent       = "AGENT_MISMATCH"     // the task's agentId is not its principal's (the keys changed since)
)

// firing is one claimed firing on its way: pre hook, agent run, post hook. Its goroutine owns it.
type firing struct {
	task  storage.Task // as it was when the firing was claimed
	run   storage.TaskRun
	start time.Time
	// started, when set, receives the firing once its run started or it ended without one.
	started chan storage.TaskRun
	done    bool // finish ran (or is running)
	// endSpan ends the firing's span (tracing.StartFiring) once finish has recorded the end.
	endSpan func(status, errorCode string, failed bool)
}

func (f *firing) end(status, code, msg string) {
	f.run.Status, f.run.ErrorCode, f.run.ErrorMessage = status, code, msg
}

func (f *firing) notify() {
	if f.started != nil {
		f.started <- f.run
		f.started = nil
	}
}

// boundSession is the session a reuseSession task's runs go to, once its first run created it.
func boundSession(t storage.Task) *int64 {
	if t.ReuseSession {
		return t.SessionID
	}
	return nil
}

// sessionKey is the client session key of the firing's run: for a reused session, the key of
// the session the task is bound to; else, and for the run that binds one, the firing's own (its
// task_runs id: a trace id is the caller's when a run-now call carried a traceparent, and two
// firings in one trace would share a session). A fixed key for the binding run would find the
// session of the task's former principal after the task changed hands (principals without an
// API key share one user), which the change had unbound.
func (s *Scheduler) sessionKey(ctx context.Context, f *firing) (string, error) {
	key := "scheduled-task-" + strconv.FormatInt(f.task.ID, 10)
	if f.task.ReuseSession && f.task.SessionID != nil {
		sess, err := s.db.GetSession(ctx, *f.task.SessionID)
		switch {
		case err == nil:
			return sess.Key, nil
		case !errors.Is(err, storage.ErrNotFound):
			return "", err
		}
	}
	return key + "-run-" + strconv.FormatInt(f.run.ID, 10), nil
}

// execute takes a claimed firing to its end. A panic anywhere in it (a hook, the runtime) ends
// the firing as failed; the scheduler goes on.
func (s *Scheduler) execute(ctx context.Context, f *firing) {
	f.start = time.Now()
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "task firing panicked", "taskId", f.task.ID, "taskRunId", f.run.ID, "panic", p)
			if f.done {
				return
			}
			f.end(storage.TaskRunFailed, agent.CodeInternal, fmt.Sprintf("internal error: %v", p))
			s.finish(ctx, f)
		}
	}()
	requestID, ok := s.begin(ctx, f)
	if !ok {
		s.finish(ctx, f)
		return
	}
	f.notify()
	s.await(ctx, f, requestID)
	s.finish(ctx, f)
}

// begin asks the pre_scheduled_task hooks and starts the agent run; ok is false when the firing
// ended before a run existed (its status says why).
func (s *Scheduler) begin(ctx context.Context, f *firing) (requestID string, ok bool) {
	t := &f.task
	// Stored before the keys changed, a task may name an agent its principal no longer is.
	agentID, err := s.cfg.AgentFor(t.PrincipalID, t.AgentID)
	if err != nil {
		// Reported without an agent: the one stored may be another principal's, whose hooks are
		// not to hear of this principal's task.
		t.AgentID = nil
		f.end(storage.TaskRunFailed, codeAgent, "agentId: "+err.Error())
		return "", false
	}
	t.AgentID = agentID
	dec, err := s.hooks.Intercept(ctx, dispatcher.Event{HookType: dispatcher.PreScheduledTask, TraceID: f.run.TraceID,
		SessionID: boundSession(f.task), PrincipalID: t.PrincipalID, AgentID: t.AgentID,
		Context: &dispatcher.PreScheduledTaskContext{TaskID: t.ID, TaskName: t.Name},
		Enforce: dispatcher.RefuseAsk("nobody can be asked at a scheduled firing")})
	if dec.DecisionID != "" {
		f.run.DecisionID = &dec.DecisionID
	}
	switch {
	case ctx.Err() != nil:
		f.end(storage.TaskRunInterrupted, codeShutdown, context.Cause(ctx).Error())
		return "", false
	case err != nil:
		f.end(storage.TaskRunFailed, agent.CodeInternal, "pre_scheduled_task hook: "+err.Error())
		return "", false
	case dec.Decision == dispatcher.Deny:
		reason := dec.Reason
		if reason == "" {
			reason = "denied by a pre_scheduled_task hook"
		}
		f.end(storage.TaskRunDenied, agent.CodeHookDenied, reason)
		f.run.Reason = reason
		return "", false
	case dec.Decision == dispatcher.Modify && dec.ModifiedValue != nil:
		f.run.Input = *dec.ModifiedValue
	}
	key, err := s.sessionKey(ctx, f)
	if err != nil {
		f.end(storage.TaskRunFailed, agent.CodeInternal, "reading the task's session: "+err.Error())
		return "", false
	}
	info, err := s.rt.StartRun(ctx, agent.StartRequest{UserID: s.cfg.UserFor(t.PrincipalID), PrincipalID: t.PrincipalID,
		AgentID: t.AgentID, SessionKey: key, Input: f.run.Input, TriggerSource: dispatcher.SourceScheduled,
		TraceID: f.run.TraceID})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		f.end(storage.TaskRunInterrupted, codeShutdown, context.Cause(ctx).Error())
		return "", false
	case errors.Is(err, agent.ErrSessionBusy):
		f.end(storage.TaskRunFailed, codeSessionBusy, "the task's session still has a live run (suspended or running)")
		return "", false
	default:
		f.end(storage.TaskRunFailed, agent.CodeInternal, "starting the run: "+err.Error())
		return "", false
	}
	f.run.RequestID, f.run.SessionID = &info.RequestID, &info.SessionID
	wctx := context.WithoutCancel(ctx)
	if t.ReuseSession && (t.SessionID == nil || *t.SessionID != info.SessionID) {
		if err := s.db.BindTaskSession(wctx, t.ID, t.PrincipalID, info.SessionID); err != nil {
			s.log.WarnContext(ctx, "binding the task's session failed", "taskId", t.ID, "err", err)
		}
	}
	// Recorded now so the run can be followed live (platform stream by requestId) while it runs.
	if err := s.db.UpdateTaskRun(wctx, &f.run); err != nil {
		s.log.WarnContext(ctx, "recording the task firing's run failed", "taskId", t.ID, "taskRunId", f.run.ID, "err", err)
	}
	return info.RequestID, true
}

// await follows the run until it ends or pauses.
func (s *Scheduler) await(ctx context.Context, f *firing, requestID string) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.rt.Subscribe(sctx, requestID, 0)
	if err != nil {
		f.end(storage.TaskRunFailed, agent.CodeInternal, "following the run: "+err.Error())
		return
	}
	for ev := range events {
		if ev.Source != "" {
			continue // a subagent's events, forwarded into this run
		}
		switch {
		case ev.Kind == agent.KindResult && ev.Result != nil:
			f.run.Output = ev.Result.Text
		case ev.Kind == agent.KindRunEnded && ev.End != nil:
			f.end(endOf(ev.End))
			return
		case ev.Kind == agent.KindSuspended && ev.Suspend != nil:
			msg := "the run is suspended (" + ev.Suspend.Reason + ")"
			if ev.Suspend.Message != "" {
				msg += ": " + ev.Suspend.Message
			}
			f.end(storage.TaskRunSuspended, codeSuspended, msg)
			return
		}
	}
	if ctx.Err() != nil {
		f.end(storage.TaskRunInterrupted, codeShutdown, context.Cause(ctx).Error()+"; the run goes on in the runtime")
		return
	}
	f.end(storage.TaskRunFailed, agent.CodeInternal, "the run's event stream ended before the run did")
}

// endOf is the firing's status, error code and message for how its run ended.
func endOf(end *agent.EndInfo) (status, code, msg string) {
	switch end.Outcome {
	case agent.OutcomeCompleted:
		return storage.TaskRunSucceeded, "", ""
	case agent.OutcomeInterrupted:
		return storage.TaskRunInterrupted, agent.CodeInterrupted, "the run was stopped"
	}
	code = end.ErrorCode
	if code == "" {
		code = agent.CodeInternal
	}
	return storage.TaskRunFailed, code, end.ErrorMessage
}

// finish records how the firing ended and reports it through post_scheduled_task, in one commit
// (ObserveEnding): a crash leaves the firing running, for the rescue to end and report, never
// ended and unreported. A firing whose run paused is recorded suspended and not reported:
// post_scheduled_task is sent once the task has completed or failed (the source document's
// "执行完成或失败后"), which for a paused run is when it ends, after a person answered
// (followSuspended).
func (s *Scheduler) finish(ctx context.Context, f *firing) {
	f.done = true
	defer f.notify()
	if f.endSpan != nil {
		defer func() { f.endSpan(f.run.Status, f.run.ErrorCode, f.run.Status == storage.TaskRunFailed) }()
	}
	ctx = context.WithoutCancel(ctx)
	f.run.DurationMs = time.Since(f.start).Milliseconds()
	if f.run.Status == storage.TaskRunSuspended {
		if err := s.db.UpdateTaskRun(ctx, &f.run); err != nil {
			s.log.WarnContext(ctx, "recording a task firing suspended failed", "taskId", f.task.ID, "taskRunId", f.run.ID, "err", err)
			return
		}
		s.logEnd(ctx, f.run, "task firing suspended")
		s.followSuspended(f.task, f.run)
		return
	}
	now := s.now()
	f.run.FinishedAt = &now
	if err := s.report(ctx, f.task, f.run, storage.TaskRunEnd{Run: &f.run, From: storage.TaskRunRunning}); err != nil {
		s.log.WarnContext(ctx, "recording the end of a task firing failed; a rescue ends it", "taskId", f.task.ID,
			"taskRunId", f.run.ID, "err", err)
		return
	}
	s.logEnd(ctx, f.run, "task firing ended")
}

func (s *Scheduler) logEnd(ctx context.Context, run storage.TaskRun, msg string) {
	logArgs := []any{"taskId", run.TaskID, "taskRunId", run.ID, "status", run.Status, "durationMs", run.DurationMs}
	if run.ErrorCode != "" {
		logArgs = append(logArgs, "errorCode", run.ErrorCode, "errorMessage", run.ErrorMessage)
	}
	s.log.InfoContext(ctx, msg, logArgs...)
}

// followSuspended follows the run of a firing recorded suspended until the run ends, on a
// goroutine of its own, then records the run's outcome on the firing and reports it. Every
// scheduler of the database follows the suspended firings it knows of (its own, and at Start
// and on PostgreSQL's poll those of every daemon: the one that paused it may be gone); the row
// decides which one ends it (storage.TaskRunEnd), so it is reported once. Stop ends the
// following, not the firing: the next scheduler to start takes it up.
func (s *Scheduler) followSuspended(task storage.Task, run storage.TaskRun) {
	if run.RequestID == nil {
		return
	}
	s.jobsMu.Lock()
	if s.stopping || s.following[run.ID] {
		s.jobsMu.Unlock()
		return
	}
	s.following[run.ID] = true
	s.jobs.Add(1)
	s.jobsMu.Unlock()
	go func() {
		defer s.jobs.Done()
		defer func() {
			s.jobsMu.Lock()
			delete(s.following, run.ID)
			s.jobsMu.Unlock()
		}()
		s.awaitSuspended(s.jobCtx, task, run)
	}()
}

func (s *Scheduler) awaitSuspended(ctx context.Context, task storage.Task, run storage.TaskRun) {
	events, err := s.rt.Subscribe(ctx, *run.RequestID, 0)
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, agent.ErrNotFound) {
		run.Status, run.ErrorCode, run.ErrorMessage = storage.TaskRunFailed, agent.CodeInternal, "the firing's run is no longer stored"
		s.endSuspended(ctx, task, run)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "following a suspended task firing's run failed; the next start tries again",
				"taskId", run.TaskID, "taskRunId", run.ID, "err", err)
		}
		return
	}
	for ev := range events {
		switch {
		case ev.Source != "":
		case ev.Kind == agent.KindResult && ev.Result != nil:
			run.Output = ev.Result.Text
		case ev.Kind == agent.KindRunEnded && ev.End != nil:
			run.Status, run.ErrorCode, run.ErrorMessage = endOf(ev.End)
			s.endSuspended(ctx, task, run)
			return
		}
	}
	if ctx.Err() == nil {
		s.log.WarnContext(ctx, "a suspended task firing's run stream ended before the run did; the next start follows it again",
			"taskId", run.TaskID, "taskRunId", run.ID)
	}
}

// endSuspended records the end of a suspended firing and reports it, unless another scheduler
// following the same run ended it first.
func (s *Scheduler) endSuspended(ctx context.Context, task storage.Task, run storage.TaskRun) {
	ctx = context.WithoutCancel(ctx)
	now := s.now()
	run.FinishedAt = &now
	run.DurationMs = now.Sub(run.StartedAt).Milliseconds() // from the claim: the pause is the task's time too
	err := s.report(ctx, task, run, storage.TaskRunEnd{Run: &run, From: storage.TaskRunSuspended})
	switch {
	case errors.Is(err, storage.ErrTaskRunChanged):
	case err != nil:
		s.log.WarnContext(ctx, "recording the end of a suspended task firing failed; the next start tries again",
			"taskId", run.TaskID, "taskRunId", run.ID, "err", err)
	default:
		s.logEnd(ctx, run, "suspended task firing ended")
	}
}

// followAllSuspended follows every firing recorded suspended (followSuspended) that this
// scheduler does not follow yet, with the task it was claimed with (taskOf).
func (s *Scheduler) followAllSuspended(ctx context.Context) error {
	const page = 1000 // ListTaskRuns' most
	var before int64
	for {
		runs, err := s.db.ListTaskRuns(ctx, storage.TaskRunFilter{Status: storage.TaskRunSuspended, BeforeID: before, Limit: page})
		if err != nil {
			return err
		}
		for _, run := range runs {
			s.jobsMu.Lock()
			known := s.following[run.ID]
			s.jobsMu.Unlock()
			if !known { // checked first so the poll reads no task for the firings it follows already
				s.followSuspended(s.taskOf(ctx, run), run)
			}
		}
		if len(runs) < page {
			return nil
		}
		before = runs[len(runs)-1].ID
	}
}

// taskOf is the task run was claimed with: its name, principal and agent as the firing recorded
// them, its session binding as it is now (firings recorded before they were kept, and a deleted
// task's, take the task as it is now, or its id alone).
func (s *Scheduler) taskOf(ctx context.Context, run storage.TaskRun) storage.Task {
	task, err := s.db.GetTask(ctx, run.TaskID)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			s.log.ErrorContext(ctx, "reading the task of a firing failed", "taskId", run.TaskID, "taskRunId", run.ID, "err", err)
		}
		task = storage.Task{ID: run.TaskID}
	}
	if run.TaskName != "" {
		task.Name, task.PrincipalID, task.AgentID = run.TaskName, run.PrincipalID, run.AgentID
	}
	return task
}

// report sends post_scheduled_task for the firing run of task, with end (the firing's end)
// written in the same commit.
func (s *Scheduler) report(ctx context.Context, task storage.Task, run storage.TaskRun, end storage.TaskRunEnd) error {
	// The session actually used, else the task's bound one, else null.
	session := run.SessionID
	if session == nil {
		session = boundSession(task)
	}
	c := &dispatcher.PostScheduledTaskContext{TaskID: task.ID, TaskName: task.Name,
		Succeeded: run.Status == storage.TaskRunSucceeded, DurationMs: run.DurationMs, RequestID: run.RequestID}
	if !c.Succeeded {
		c.ErrorCode, c.ErrorMessage = optional(run.ErrorCode), optional(run.ErrorMessage)
	}
	return s.hooks.ObserveEnding(ctx, dispatcher.Event{HookType: dispatcher.PostScheduledTask, TraceID: run.TraceID,
		SessionID: session, PrincipalID: task.PrincipalID, AgentID: task.AgentID, Context: c}, end)
}

// rescue ends the running firings whose lease was last renewed before staleBefore (their daemon
// died or went silent) as interrupted, ABANDONED, their duration from the claim to their last
// heartbeat (the end itself is unknown), and reports each: every claimed firing is reported,
// these included. A firing whose daemon renewed its lease meanwhile is left alone.
func (s *Scheduler) rescue(ctx context.Context, staleBefore time.Time) error {
	runs, err := s.db.StaleTaskRuns(ctx, staleBefore)
	if err != nil {
		return err
	}
	ended := 0
	for _, run := range runs {
		now := s.now()
		run.Status, run.ErrorCode, run.ErrorMessage = storage.TaskRunInterrupted, codeAbandoned, "the scheduler running it stopped before the run ended"
		run.FinishedAt, run.DurationMs = &now, max(run.HeartbeatAt.Sub(run.StartedAt).Milliseconds(), 0)
		switch err := s.report(ctx, s.taskOf(ctx, run), run, storage.TaskRunEnd{Run: &run, From: storage.TaskRunRunning, StaleBefore: staleBefore}); {
		case errors.Is(err, storage.ErrTaskRunChanged):
		case err != nil:
			return err
		default:
			ended++
		}
	}
	if ended > 0 {
		s.log.Warn("task firings left running by a stopped daemon were ended", "count", ended)
	}
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
