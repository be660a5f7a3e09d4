package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/config"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const script = `{"scripts":[
 {"match":"original input","steps":[{"text":"answer to the original"}]},
 {"match":"modified input","steps":[{"text":"answer to the modified"}]},
 {"match":"second","steps":[{"text":"answer two"}]},
 {"match":"slow","steps":[{"text":"slow answer","delayMs":2500}]},
 {"match":"fatal","steps":[{"error":"fatal","text":"never"}]},
 {"match":"*","steps":[{"text":"default answer"}]}
]}`

// TestFiresOnTime: second-level schedules (a seconds field, and @every) fire at their ticks; each
// firing is an agent run of trigger source scheduled_task owned by the principal's user, stored
// so the chat APIs can replay it.
func TestFiresOnTime(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		completions := newReceiver(t, nil)
		e.hook(dispatcher.AgentCompletion, completions.srv.URL)
		s := e.scheduler(testConfig())
		a := create(t, s, scheduler.Task{TaskName: "every second", Cron: "*/1 * * * * *", Input: "hello",
			PrincipalID: ptr(principal), AgentID: ptr(agentID)})
		b := create(t, s, scheduler.Task{TaskName: "every 1s", Cron: "@every 1s", Input: "hello"})
		if a.NextRunAt == nil || a.LastRunAt != nil || !*a.Enabled {
			t.Fatalf("created task: %+v", a)
		}
		time.Sleep(3500 * time.Millisecond)
		disable(t, s, a)
		disable(t, s, b)
		for _, task := range []scheduler.Task{a, b} {
			runs := history(t, s, task.ID)
			// 3 or 4 ticks fall in 3.5 s; one more may come while the disables run.
			if n := count(runs, storage.TaskRunSucceeded); n < 2 || n > 5 || n != len(runs) {
				t.Fatalf("task %q: %d succeeded of %d firings in 3.5 s: %+v", task.TaskName, n, len(runs), runs)
			}
			for i, r := range runs {
				if r.ScheduledAt.Nanosecond() != 0 || r.Kind != storage.FireSchedule {
					t.Fatalf("firing %d not on a whole-second tick: %+v", i, r)
				}
				if late := r.StartedAt.Sub(r.ScheduledAt); late < 0 || late > time.Second {
					t.Fatalf("firing %d started %s after its tick", i, late)
				}
				if i > 0 && r.ScheduledAt.Sub(runs[i-1].ScheduledAt) != time.Second {
					t.Fatalf("ticks %s and %s are not a second apart", runs[i-1].ScheduledAt, r.ScheduledAt)
				}
				if r.RequestID == nil || r.Output != "default answer" || r.Input != "hello" || r.FinishedAt == nil {
					t.Fatalf("firing %d: %+v", i, r)
				}
			}
			got, _ := s.Get(context.Background(), task.ID)
			if got.LastRunAt == nil || !got.LastRunAt.Equal(runs[len(runs)-1].StartedAt) {
				t.Fatalf("lastRunAt %v, last firing %v", got.LastRunAt, runs[len(runs)-1].StartedAt)
			}
		}
		// The run belongs to the principal's user and replays from the runtime's store.
		r := history(t, s, a.ID)[0]
		stored, err := e.rt.Run(context.Background(), "user-10001", *r.RequestID)
		if err != nil || stored.Status != storage.RunCompleted {
			t.Fatalf("run as user-10001: %v %+v", err, stored)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		events, err := e.rt.Subscribe(ctx, *r.RequestID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []agent.Kind
		for ev := range events {
			kinds = append(kinds, ev.Kind)
		}
		if len(kinds) < 3 || kinds[0] != agent.KindRunStarted || kinds[len(kinds)-1] != agent.KindRunEnded {
			t.Fatalf("replayed events: %v", kinds)
		}
		eventually(t, 5*time.Second, "agent_completion of the first firing", func() bool {
			return completions.byTrace(dispatcher.AgentCompletion, r.TraceID) != nil
		})
		c := completions.byTrace(dispatcher.AgentCompletion, r.TraceID)
		if c.ctx["triggerSourceType"] != dispatcher.SourceScheduled || c.ctx["requestId"] != *r.RequestID ||
			*c.env.PrincipalID != principal || *c.env.AgentID != agentID {
			t.Fatalf("agent_completion of a scheduled run: %+v %v", c.env, c.ctx)
		}
	})
}

// TestPreHookDenyAndModify: a deny skips the run and records why; a modify replaces the input the
// agent sees.
func TestPreHookDenyAndModify(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		pre := newReceiver(t, func(env dispatcher.Envelope) string {
			var c dispatcher.PreScheduledTaskContext
			_ = json.Unmarshal(env.Context, &c)
			switch c.TaskName {
			case "deny me":
				return `{"decision":"deny","reason":"outside the approved window"}`
			case "deny me with a hint":
				// A hint no firing can show: the deny stands all the same, under the hook's
				// failureMode ALLOW.
				return `{"decision":"deny","reason":"outside the approved window","hint":"try again tomorrow"}`
			case "modify me":
				return `{"decision":"modify","modifiedValue":"modified input"}`
			}
			return `{"decision":"allow"}`
		})
		e.hook(dispatcher.PreScheduledTask, pre.srv.URL)
		s := e.scheduler(testConfig())
		deny := create(t, s, scheduler.Task{TaskName: "deny me", Cron: "@every 1s", Input: "original input"})
		hinted := create(t, s, scheduler.Task{TaskName: "deny me with a hint", Cron: "@every 1s", Input: "original input"})
		modify := create(t, s, scheduler.Task{TaskName: "modify me", Cron: "@every 1s", Input: "original input"})
		plain := create(t, s, scheduler.Task{TaskName: "leave me", Cron: "@every 1s", Input: "original input"})
		eventually(t, 10*time.Second, "two firings of each task", func() bool {
			return len(history(t, s, deny.ID)) >= 2 && len(history(t, s, hinted.ID)) >= 2 &&
				count(history(t, s, modify.ID), storage.TaskRunSucceeded) >= 2 &&
				count(history(t, s, plain.ID), storage.TaskRunSucceeded) >= 2
		})
		disable(t, s, deny)
		disable(t, s, hinted)
		disable(t, s, modify)
		disable(t, s, plain)
		for _, r := range append(history(t, s, deny.ID), history(t, s, hinted.ID)...) {
			if r.Status != storage.TaskRunDenied || r.Reason != "outside the approved window" || r.RequestID != nil ||
				r.ErrorCode != agent.CodeHookDenied || r.Input != "original input" || r.Output != "" {
				t.Fatalf("denied firing: %+v", r)
			}
		}
		// The hinted deny is on the record as the deny it was, the unusable hint named.
		rows, err := db.ListDecisions(context.Background(), storage.DecisionFilter{HookType: string(dispatcher.PreScheduledTask), Outcome: dispatcher.Deny})
		if err != nil {
			t.Fatal(err)
		}
		var hintedRows int
		for _, r := range rows {
			if r.FromFailureMode || r.Reason != "outside the approved window" {
				t.Fatalf("a denied firing's decision: %+v", r)
			}
			if r.Error != "" {
				hintedRows++
				if !strings.HasPrefix(r.Error, "hint: ") || !strings.Contains(r.Error, "the deny stands") {
					t.Fatalf("the flaw of a hinted deny: %q", r.Error)
				}
			}
		}
		if hintedRows < 2 {
			t.Fatalf("%d hinted denies on the record: %+v", hintedRows, rows)
		}
		// Each firing names the row of its pre_scheduled_task decision, which names its task.
		for _, task := range []scheduler.Task{deny, hinted, modify, plain} {
			for _, r := range history(t, s, task.ID) {
				if r.DecisionID == nil {
					t.Fatalf("a firing its hook decided names no decision: %+v", r)
				}
				got, err := db.ListDecisions(context.Background(), storage.DecisionFilter{DecisionID: *r.DecisionID})
				want := map[string]string{storage.TaskRunDenied: dispatcher.Deny, storage.TaskRunSucceeded: dispatcher.Allow}[r.Status]
				if task.ID == modify.ID {
					want = dispatcher.Modify
				}
				if err != nil || len(got) != 1 || got[0].Outcome != want || got[0].TaskID == nil || *got[0].TaskID != task.ID ||
					got[0].TraceID == nil || *got[0].TraceID != r.TraceID {
					t.Fatalf("the decision of firing %+v: %v %+v", r, err, got)
				}
			}
		}
		// A denied firing never ran: lastRunAt is the last that did, and the denied task has none.
		if got, err := s.Get(context.Background(), deny.ID); err != nil || got.LastRunAt != nil {
			t.Fatalf("lastRunAt of a task whose every firing was denied: %v %v", got.LastRunAt, err)
		}
		for _, r := range history(t, s, modify.ID) {
			if r.Status != storage.TaskRunSucceeded || r.Input != "modified input" || r.Output != "answer to the modified" {
				t.Fatalf("modified firing: %+v", r)
			}
		}
		for _, r := range history(t, s, plain.ID) {
			if r.Status != storage.TaskRunSucceeded || r.Input != "original input" || r.Output != "answer to the original" {
				t.Fatalf("allowed firing: %+v", r)
			}
		}
		// Every firing asked the hook first, with the task's id and name.
		for _, g := range pre.of(dispatcher.PreScheduledTask) {
			if g.ctx["taskName"] == nil || g.ctx["taskId"] == nil || len(g.ctx) != 2 {
				t.Fatalf("pre_scheduled_task context: %v", g.ctx)
			}
		}
	})
}

// TestHookTextWithNUL: a pre_scheduled_task answer whose reason or modifiedValue holds a NUL (or
// bytes that are not UTF-8) is a firing like any other: recorded denied or run, reported once,
// and the task free for its next firing. PostgreSQL's text refuses NUL, so the firing's end
// failed to commit, its report with it, and the task stayed running until its lease ran out.
func TestHookTextWithNUL(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		hooks := newReceiver(t, func(env dispatcher.Envelope) string {
			if strings.HasPrefix(*taskNameOf(env), "deny") {
				return `{"decision":"deny","reason":"out\u0000side"}`
			}
			return `{"decision":"modify","modifiedValue":"second\u0000 input"}`
		})
		e.hook(dispatcher.PreScheduledTask, hooks.srv.URL)
		e.hook(dispatcher.PostScheduledTask, hooks.srv.URL)
		s := e.scheduler(testConfig())
		for _, c := range []struct{ name, status, text string }{
			{"deny me", storage.TaskRunDenied, "out\uFFFDside"},
			{"modify me", storage.TaskRunSucceeded, "second\uFFFD input"},
		} {
			task := create(t, s, scheduler.Task{TaskName: c.name, Cron: "@yearly", Input: "original input"})
			for i := range 2 {
				if _, err := s.RunNow(context.Background(), task.ID); err != nil {
					t.Fatal(err)
				}
				eventually(t, 10*time.Second, c.name+" to end", func() bool {
					runs := history(t, s, task.ID)
					return len(runs) == i+1 && runs[i].FinishedAt != nil
				})
			}
			for _, r := range history(t, s, task.ID) {
				got := r.Reason
				if c.status == storage.TaskRunSucceeded {
					got = r.Input
				}
				if r.Status != c.status || got != c.text {
					t.Fatalf("%s: firing %+v", c.name, r)
				}
				eventually(t, 10*time.Second, c.name+" reported", func() bool {
					return hooks.byTrace(dispatcher.PostScheduledTask, r.TraceID) != nil
				})
			}
		}
	})
}

func taskNameOf(env dispatcher.Envelope) *string {
	var c dispatcher.PreScheduledTaskContext
	_ = json.Unmarshal(env.Context, &c)
	return &c.TaskName
}

// TestHookEnvelopes checks every field of pre/post_scheduled_task and the envelope's sessionId
// rules: reuseSession=true binds one session (null before the first run created it), false gives
// each run a new one; a denied or early-failed firing reports the bound session or null, and a
// null requestId.
func TestHookEnvelopes(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		var mu sync.Mutex
		seen := map[int64]int{}
		// The first two firings of each task are allowed, then every one is denied.
		hooks := newReceiver(t, func(env dispatcher.Envelope) string {
			mu.Lock()
			defer mu.Unlock()
			id := taskIDOf(env)
			seen[id]++
			if seen[id] > 2 {
				return `{"decision":"deny","reason":"quota used up"}`
			}
			return `{"decision":"allow"}`
		})
		e.hook(dispatcher.PreScheduledTask, hooks.srv.URL)
		e.hook(dispatcher.PostScheduledTask, hooks.srv.URL)
		s := e.scheduler(testConfig())
		reuse := create(t, s, scheduler.Task{TaskName: "每日财报生成", Cron: "@every 1s", Input: "hello", ReuseSession: true,
			PrincipalID: ptr(principal), AgentID: ptr(agentID)})
		fresh := create(t, s, scheduler.Task{TaskName: "fresh sessions", Cron: "@every 1s", Input: "hello",
			PrincipalID: ptr(principal), AgentID: ptr(agentID)})
		failing := create(t, s, scheduler.Task{TaskName: "failing", Cron: "@every 1s", Input: "fatal"})
		eventually(t, 10*time.Second, "three firings of each task", func() bool {
			return len(fired(history(t, s, reuse.ID))) >= 3 && len(fired(history(t, s, fresh.ID))) >= 3 &&
				len(history(t, s, failing.ID)) >= 1
		})
		for _, task := range []scheduler.Task{reuse, fresh, failing} {
			disable(t, s, task)
		}
		all := 0
		for _, task := range []scheduler.Task{reuse, fresh, failing} {
			all += len(fired(history(t, s, task.ID)))
		}
		eventually(t, 10*time.Second, "every post_scheduled_task delivery", func() bool {
			return len(hooks.of(dispatcher.PostScheduledTask)) == all
		})

		checkEnvelope := func(g *received, task scheduler.Task, r storage.TaskRun) {
			t.Helper()
			if g.env.SchemaVersion != "1.0" || g.env.EventID == "" || g.env.OccurredAt == 0 || g.env.DeliveryAttempt < 1 {
				t.Fatalf("envelope: %+v", g.env)
			}
			if (task.PrincipalID == nil) != (g.env.PrincipalID == nil) || (task.AgentID == nil) != (g.env.AgentID == nil) ||
				(g.env.PrincipalID != nil && *g.env.PrincipalID != principal) || (g.env.AgentID != nil && *g.env.AgentID != agentID) {
				t.Fatalf("principalId/agentId: %+v", g.env)
			}
			if g.ctx["taskId"] != float64(task.ID) || g.ctx["taskName"] != task.TaskName {
				t.Fatalf("task fields: %v", g.ctx)
			}
		}
		checkPost := func(task scheduler.Task, r storage.TaskRun, wantSession *int64) {
			t.Helper()
			g := hooks.byTrace(dispatcher.PostScheduledTask, r.TraceID)
			if g == nil {
				t.Fatalf("no post_scheduled_task for firing %+v", r)
			}
			checkEnvelope(g, task, r)
			for _, k := range []string{"taskId", "taskName", "succeeded", "errorMessage", "errorCode", "durationMs", "requestId"} {
				if _, ok := g.ctx[k]; !ok {
					t.Fatalf("post_scheduled_task context lacks %s: %v", k, g.ctx)
				}
			}
			if len(g.ctx) != 7 {
				t.Fatalf("post_scheduled_task context has extra fields: %v", g.ctx)
			}
			ok := r.Status == storage.TaskRunSucceeded
			if g.ctx["succeeded"] != ok || g.ctx["durationMs"] != float64(r.DurationMs) {
				t.Fatalf("succeeded/durationMs: %v for %+v", g.ctx, r)
			}
			if ok && (g.ctx["errorMessage"] != nil || g.ctx["errorCode"] != nil) {
				t.Fatalf("a success with an error: %v", g.ctx)
			}
			if !ok && (g.ctx["errorMessage"] != r.ErrorMessage || g.ctx["errorCode"] != r.ErrorCode || r.ErrorCode == "") {
				t.Fatalf("error fields: %v for %+v", g.ctx, r)
			}
			if r.RequestID == nil && g.ctx["requestId"] != nil || r.RequestID != nil && g.ctx["requestId"] != *r.RequestID {
				t.Fatalf("requestId: %v for %+v", g.ctx["requestId"], r)
			}
			if (wantSession == nil) != (g.env.SessionID == nil) || wantSession != nil && *wantSession != *g.env.SessionID {
				t.Fatalf("post sessionId %v, want %v (firing %+v)", g.env.SessionID, wantSession, r)
			}
		}
		checkPre := func(task scheduler.Task, r storage.TaskRun, wantSession *int64) {
			t.Helper()
			g := hooks.byTrace(dispatcher.PreScheduledTask, r.TraceID)
			if g == nil {
				t.Fatalf("no pre_scheduled_task for firing %+v", r)
			}
			checkEnvelope(g, task, r)
			if len(g.ctx) != 2 {
				t.Fatalf("pre_scheduled_task context: %v", g.ctx)
			}
			if (wantSession == nil) != (g.env.SessionID == nil) || wantSession != nil && *wantSession != *g.env.SessionID {
				t.Fatalf("pre sessionId %v, want %v (firing %+v)", g.env.SessionID, wantSession, r)
			}
		}

		// reuseSession=true: one session for every run, bound to the task.
		runs := fired(history(t, s, reuse.ID))
		if runs[0].Status != storage.TaskRunSucceeded || runs[1].Status != storage.TaskRunSucceeded || runs[2].Status != storage.TaskRunDenied {
			t.Fatalf("reuse firings: %+v", runs)
		}
		bound := runs[0].SessionID
		if bound == nil || *runs[1].SessionID != *bound || runs[2].SessionID != nil {
			t.Fatalf("reused session: %+v", runs)
		}
		got, _ := s.Get(context.Background(), reuse.ID)
		if got.SessionID == nil || *got.SessionID != *bound {
			t.Fatalf("task's bound session: %+v, want %d", got.SessionID, *bound)
		}
		// A replace may name the bound session (a task read with GET goes back as it is) or none;
		// another session is refused, and the binding stays.
		for _, sent := range []*int64{bound, nil} {
			g := got
			g.SessionID = sent
			if _, err := s.Replace(context.Background(), reuse.ID, g); err != nil {
				t.Fatalf("replace naming session %v: %v", sent, err)
			}
		}
		other := got
		other.SessionID = ptr(*bound + 1)
		want := fmt.Sprintf("sessionId: %d, but the task's session is %d; sessionId is set by hookd (leave it out or send it as GET shows it)", *bound+1, *bound)
		if _, err := s.Replace(context.Background(), reuse.ID, other); err == nil || err.Error() != want {
			t.Fatalf("replace naming another session: %v, want %s", err, want)
		}
		if g, _ := s.Get(context.Background(), reuse.ID); g.SessionID == nil || *g.SessionID != *bound {
			t.Fatalf("bound session after the replaces: %v, want %d", g.SessionID, *bound)
		}
		unbound := other
		unbound.ID = fresh.ID
		unbound.CreatedAt = nil
		if _, err := s.Replace(context.Background(), fresh.ID, unbound); err == nil ||
			!strings.HasPrefix(err.Error(), fmt.Sprintf("sessionId: %d, but the task has no bound session", *bound+1)) {
			t.Fatalf("replace naming a session of a task that has none: %v", err)
		}
		checkPre(reuse, runs[0], nil) // no session exists before the first run
		checkPre(reuse, runs[1], bound)
		checkPre(reuse, runs[2], bound)
		checkPost(reuse, runs[0], bound)
		checkPost(reuse, runs[1], bound)
		checkPost(reuse, runs[2], bound) // denied: the bound session
		if msgs, _ := e.rt.History(context.Background(), *bound, time.Time{}); len(msgs) != 4 {
			t.Fatalf("the reused session has %d messages, want 2 turns", len(msgs))
		}

		// reuseSession=false: a new session each run; null before a run and when none ran.
		runs = fired(history(t, s, fresh.ID))
		if runs[0].Status != storage.TaskRunSucceeded || runs[1].Status != storage.TaskRunSucceeded || runs[2].Status != storage.TaskRunDenied {
			t.Fatalf("fresh firings: %+v", runs)
		}
		if *runs[0].SessionID == *runs[1].SessionID || *runs[0].SessionID == *bound {
			t.Fatalf("fresh sessions repeat: %d %d", *runs[0].SessionID, *runs[1].SessionID)
		}
		for _, r := range runs[:3] {
			checkPre(fresh, r, nil)
			checkPost(fresh, r, r.SessionID) // runs[2]: denied, nil
		}
		if got, _ := s.Get(context.Background(), fresh.ID); got.SessionID != nil {
			t.Fatalf("a fresh-session task shows a bound session: %v", *got.SessionID)
		}

		// A run that fails: the run's error, with its requestId and session.
		runs = history(t, s, failing.ID)
		r := runs[0]
		if r.Status != storage.TaskRunFailed || r.ErrorCode != agent.CodeLLMError || r.RequestID == nil {
			t.Fatalf("failing firing: %+v", r)
		}
		checkPost(failing, r, r.SessionID)
	})
}

// TestNoOverlap: a run slower than the interval blocks the ticks that come while it runs; they
// are recorded as skipped.
func TestNoOverlap(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		s := e.scheduler(testConfig())
		task := create(t, s, scheduler.Task{TaskName: "slow", Cron: "@every 1s", Input: "slow"})
		eventually(t, 15*time.Second, "two slow runs", func() bool {
			return count(history(t, s, task.ID), storage.TaskRunSucceeded) >= 2
		})
		disable(t, s, task)
		runs := history(t, s, task.ID)
		var ran []storage.TaskRun
		for _, r := range runs {
			switch r.Status {
			case storage.TaskRunSucceeded:
				ran = append(ran, r)
			case storage.TaskRunSkipped:
				if r.Reason != "still running" || r.RequestID != nil {
					t.Fatalf("skipped firing: %+v", r)
				}
			default:
				t.Fatalf("unexpected firing: %+v", r)
			}
		}
		for i := 1; i < len(ran); i++ {
			if ran[i].StartedAt.Before(*ran[i-1].FinishedAt) {
				t.Fatalf("runs overlap: %+v and %+v", ran[i-1], ran[i])
			}
		}
		if count(runs, storage.TaskRunSkipped) < 2 {
			t.Fatalf("no tick was skipped while the slow run ran: %+v", runs)
		}
	})
}

// TestCatchUp: a tick missed while no scheduler ran is fired once at the next start when the
// task says catchUp, and recorded as skipped otherwise.
func TestCatchUp(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		// The first daemon lives a day in the past: its tasks' next firings are long gone now.
		cfg := testConfig()
		cfg.Now = func() time.Time { return time.Now().Add(-24 * time.Hour) }
		past := e.scheduler(cfg)
		catchUp := create(t, past, scheduler.Task{TaskName: "catch up", Cron: "@every 1h", Input: "hello", CatchUp: true})
		skip := create(t, past, scheduler.Task{TaskName: "skip", Cron: "@every 1h", Input: "hello"})
		past.Stop()
		if len(history(t, past, catchUp.ID))+len(history(t, past, skip.ID)) != 0 {
			t.Fatal("the past daemon fired")
		}

		s := e.scheduler(testConfig())
		eventually(t, 5*time.Second, "the missed ticks handled", func() bool {
			return count(history(t, s, catchUp.ID), storage.TaskRunSucceeded) == 1 && len(history(t, s, skip.ID)) == 1
		})
		time.Sleep(1500 * time.Millisecond) // nothing more may happen
		runs := history(t, s, catchUp.ID)
		if len(runs) != 1 || runs[0].Kind != storage.FireCatchUp || !runs[0].ScheduledAt.Equal(*catchUp.NextRunAt) {
			t.Fatalf("catch-up firings: %+v (missed tick %v)", runs, catchUp.NextRunAt)
		}
		runs = history(t, s, skip.ID)
		if len(runs) != 1 || runs[0].Status != storage.TaskRunSkipped || !strings.HasPrefix(runs[0].Reason, "missed") ||
			runs[0].RequestID != nil || !runs[0].ScheduledAt.Equal(*skip.NextRunAt) {
			t.Fatalf("skipped firings: %+v", runs)
		}
		for _, task := range []scheduler.Task{catchUp, skip} {
			got, _ := s.Get(context.Background(), task.ID)
			if got.NextRunAt == nil || time.Until(*got.NextRunAt) < 55*time.Minute {
				t.Fatalf("task %q next run %v, want about an hour from now", task.TaskName, got.NextRunAt)
			}
			if (got.LastRunAt != nil) != task.CatchUp {
				t.Fatalf("task %q lastRunAt %v", task.TaskName, got.LastRunAt)
			}
		}
	})
}

// TestCatchUpAfterDowntime: the same with real downtime. A task firing every second stops with
// its scheduler; the next scheduler fires the first missed tick once (catchUp) or records it
// skipped, and the ticks after the restart go on as usual.
func TestCatchUpAfterDowntime(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		cfg := testConfig()
		cfg.MisfireGrace = 500 * time.Millisecond
		first := e.scheduler(cfg)
		catchUp := create(t, first, scheduler.Task{TaskName: "catch up", Cron: "@every 1s", Input: "hello", CatchUp: true})
		skip := create(t, first, scheduler.Task{TaskName: "skip", Cron: "@every 1s", Input: "hello"})
		eventually(t, 5*time.Second, "a firing of each task", func() bool {
			return count(history(t, first, catchUp.ID), storage.TaskRunSucceeded) >= 1 &&
				count(history(t, first, skip.ID), storage.TaskRunSucceeded) >= 1
		})
		first.Stop()
		// The ticks from the first one the stopped scheduler left unfired to the restart are missed.
		missed := map[int64]time.Time{}
		for _, task := range []scheduler.Task{catchUp, skip} {
			got, _ := first.Get(context.Background(), task.ID)
			missed[task.ID] = *got.NextRunAt
		}
		time.Sleep(3 * time.Second)
		restarted := time.Now()
		second := e.scheduler(cfg)
		eventually(t, 5*time.Second, "the missed tick handled and a tick after it", func() bool {
			after := 0
			for _, r := range history(t, second, skip.ID) {
				if r.ScheduledAt.After(restarted) {
					after++
				}
			}
			return after >= 1
		})
		disable(t, second, catchUp)
		disable(t, second, skip)
		// The firings of ticks that fell in the downtime, but for one less than MisfireGrace late
		// at the restart, which fires as usual.
		inDowntime := func(id int64) []storage.TaskRun {
			var out []storage.TaskRun
			for _, r := range history(t, second, id) {
				if !r.ScheduledAt.Before(missed[id]) && r.ScheduledAt.Before(restarted.Add(-cfg.MisfireGrace)) {
					out = append(out, r)
				}
			}
			return out
		}
		if got := inDowntime(catchUp.ID); len(got) != 1 || got[0].Kind != storage.FireCatchUp || got[0].Status != storage.TaskRunSucceeded ||
			!got[0].ScheduledAt.Equal(missed[catchUp.ID]) {
			t.Fatalf("catchUp=true, firings of missed ticks: %+v", got)
		}
		if got := inDowntime(skip.ID); len(got) != 1 || got[0].Status != storage.TaskRunSkipped || !strings.HasPrefix(got[0].Reason, "missed") {
			t.Fatalf("catchUp=false, firings of missed ticks: %+v", got)
		}
		// After the restart every tick fires on schedule. One may find the catch-up firing still
		// running on a slow machine and be skipped for it (no overlap), which is not a miss.
		for _, id := range []int64{catchUp.ID, skip.ID} {
			for _, r := range history(t, second, id) {
				overlap := r.Status == storage.TaskRunSkipped && r.Reason == "still running"
				if r.ScheduledAt.After(restarted) && (r.Kind != storage.FireSchedule || (r.Status != storage.TaskRunSucceeded && !overlap)) {
					t.Fatalf("a tick after the restart: %+v", r)
				}
			}
		}
	})
}

// TestLiveEdits: a PUT takes effect at the next firing, with no restart; a task another daemon
// adds to the database is picked up by the poll.
func TestLiveEdits(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		s := e.scheduler(testConfig())
		task := create(t, s, scheduler.Task{TaskName: "edited", Cron: "@every 1s", Input: "first"})
		eventually(t, 5*time.Second, "a first firing", func() bool {
			return count(history(t, s, task.ID), storage.TaskRunSucceeded) >= 1
		})
		task.Cron, task.Input = "*/2 * * * * *", "second"
		edited, err := s.Replace(context.Background(), task.ID, task)
		if err != nil {
			t.Fatal(err)
		}
		if edited.NextRunAt == nil || edited.NextRunAt.Second()%2 != 0 {
			t.Fatalf("next run after the edit: %v", edited.NextRunAt)
		}
		editedAt := time.Now()
		eventually(t, 5*time.Second, "a firing after the edit", func() bool {
			for _, r := range history(t, s, task.ID) {
				if r.StartedAt.After(editedAt) && r.Status == storage.TaskRunSucceeded {
					return true
				}
			}
			return false
		})
		disable(t, s, task)
		for _, r := range history(t, s, task.ID) {
			if !r.StartedAt.After(editedAt) {
				continue
			}
			if r.Input != "second" || r.Output != "answer two" || r.ScheduledAt.Second()%2 != 0 {
				t.Fatalf("a firing after the edit used the old task: %+v", r)
			}
		}

		// Another daemon's change reaches this one through the version poll.
		other := storage.Task{Name: "from another daemon", Cron: "@every 1s", Input: "hello", Enabled: true,
			NextRunAt: time.Now().Truncate(time.Second).Add(time.Second)}
		if err := db.CreateTask(context.Background(), &other); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "a firing of the task created behind the scheduler's back", func() bool {
			return count(history(t, s, other.ID), storage.TaskRunSucceeded) >= 1
		})
		if err := s.Delete(context.Background(), other.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// panickyRuntime is a runtime that panics when asked to start a run.
type panickyRuntime struct{}

func (panickyRuntime) StartRun(context.Context, agent.StartRequest) (agent.RunInfo, error) {
	panic("boom")
}

func (panickyRuntime) Subscribe(context.Context, string, int64) (<-chan agent.Event, error) {
	panic("not reached")
}

// TestPanicDoesNotKillTheScheduler: a firing that panics ends as failed (and is reported); the
// scheduler goes on firing.
func TestPanicDoesNotKillTheScheduler(t *testing.T) {
	db := storagetest.SQLite(t)
	e := newEnv(t, db, script)
	post := newReceiver(t, nil)
	e.hook(dispatcher.PostScheduledTask, post.srv.URL)
	s := scheduler.New(db, panickyRuntime{}, e.disp, quiet(), testConfig())
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	task := create(t, s, scheduler.Task{TaskName: "panics", Cron: "@every 1s", Input: "hello"})
	eventually(t, 10*time.Second, "three failed firings", func() bool {
		return count(history(t, s, task.ID), storage.TaskRunFailed) >= 3
	})
	run, err := s.RunNow(context.Background(), task.ID)
	if err != nil {
		t.Fatalf("run now after panics: %v", err)
	}
	if run.Status != storage.TaskRunFailed && run.Status != storage.TaskRunSkipped {
		t.Fatalf("run now: %+v", run)
	}
	disable(t, s, task)
	for _, r := range history(t, s, task.ID) {
		if r.Status == storage.TaskRunSkipped {
			continue
		}
		if r.Status != storage.TaskRunFailed || r.ErrorCode != agent.CodeInternal || !strings.Contains(r.ErrorMessage, "boom") {
			t.Fatalf("panicked firing: %+v", r)
		}
	}
	eventually(t, 5*time.Second, "post_scheduled_task of a panicked firing", func() bool {
		p := post.of(dispatcher.PostScheduledTask)
		return len(p) > 0 && p[0].ctx["succeeded"] == false && strings.Contains(fmt.Sprint(p[0].ctx["errorMessage"]), "boom")
	})
}

// TestStopInterruptsAndRestarts: Stop is idempotent and waits for the firings in flight, which
// are recorded as interrupted; RunNow after Stop is refused.
func TestStopInterrupts(t *testing.T) {
	db := storagetest.SQLite(t)
	e := newEnv(t, db, script)
	s := e.scheduler(testConfig())
	task := create(t, s, scheduler.Task{TaskName: "slow", Cron: "@yearly", Input: "slow"})
	run, err := s.RunNow(context.Background(), task.ID)
	if err != nil || run.Status != storage.TaskRunRunning || run.RequestID == nil || run.Kind != storage.FireManual {
		t.Fatalf("run now: %v %+v", err, run)
	}
	again, err := s.RunNow(context.Background(), task.ID)
	if err != nil || again.Status != storage.TaskRunSkipped || again.Reason != "still running" {
		t.Fatalf("run now while running: %v %+v", err, again)
	}
	// Its lease is renewed on SQLite too, so a crash now would report how long it had run.
	eventually(t, 5*time.Second, "the running firing's heartbeat", func() bool {
		got, _ := db.GetTaskRun(context.Background(), run.ID)
		return got.HeartbeatAt.After(got.StartedAt)
	})
	s.Stop()
	s.Stop()
	r := history(t, s, task.ID)[0]
	if r.Status != storage.TaskRunInterrupted || r.ErrorCode != "SHUTDOWN_INTERRUPT" || *r.RequestID != *run.RequestID {
		t.Fatalf("firing in flight at stop: %+v", r)
	}
	if _, err := s.RunNow(context.Background(), task.ID); err != scheduler.ErrStopped {
		t.Fatalf("run now after stop: %v", err)
	}
}

// TestTwoSchedulersOneDatabase: two daemons (each its own runtime and dispatcher) on one
// PostgreSQL database fire a task exactly once per tick.
func TestTwoSchedulersOneDatabase(t *testing.T) {
	url := storagetest.PostgresURL(t)
	open := func() *storage.DB {
		db, err := storage.Open(context.Background(), url, storage.Options{Key: storagetest.Key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db1, db2 := open(), open()
	post := newReceiver(t, nil)
	e1 := newEnv(t, db1, script)
	e1.hook(dispatcher.PostScheduledTask, post.srv.URL)
	e2 := newEnv(t, db2, script)
	s1, s2 := e1.scheduler(testConfig()), e2.scheduler(testConfig())

	// Three tasks, so the two schedulers race for a dozen ticks.
	var tasks []scheduler.Task
	for i := range 3 {
		tasks = append(tasks, create(t, s1, scheduler.Task{TaskName: fmt.Sprintf("once per tick %d", i), Cron: "@every 1s", Input: "hello"}))
	}
	time.Sleep(4200 * time.Millisecond)
	for _, task := range tasks {
		disable(t, s1, task)
	}
	time.Sleep(500 * time.Millisecond) // s2 sees the change through its claim or its poll
	owners := map[string]int{}
	requests := map[string]bool{}
	for _, task := range tasks {
		runs := history(t, s2, task.ID)
		for i, r := range runs {
			owners[r.Owner]++
			if r.Status != storage.TaskRunSucceeded || r.RequestID == nil || requests[*r.RequestID] {
				t.Fatalf("task %d firing %d: %+v", task.ID, i, r)
			}
			requests[*r.RequestID] = true
			if i > 0 && r.ScheduledAt.Sub(runs[i-1].ScheduledAt) != time.Second {
				t.Fatalf("task %d: ticks not fired exactly once: %s then %s", task.ID, runs[i-1].ScheduledAt, r.ScheduledAt)
			}
		}
		if len(runs) < 3 || len(runs) > 6 { // 4 or 5 ticks in 4.2 s, one more while the disables run
			t.Fatalf("task %d: %d firings in 4.2 s of a task firing every second", task.ID, len(runs))
		}
	}
	t.Logf("%d ticks fired; by scheduler: %v", len(requests), owners)
	// Each firing made one agent run and one post_scheduled_task event.
	for id := range requests {
		if _, err := db1.GetRun(context.Background(), id); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	eventually(t, 5*time.Second, "a post_scheduled_task per firing", func() bool {
		return len(post.of(dispatcher.PostScheduledTask)) == len(requests)
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(post.of(dispatcher.PostScheduledTask)); n != len(requests) {
		t.Fatalf("%d post_scheduled_task events for %d firings", n, len(requests))
	}
}

// TestAbandonedFiring: a firing left running by a daemon that died stops blocking its task: on
// SQLite the next start ends it, on PostgreSQL the lease runs out while other daemons go on. It
// is reported like every claimed firing: post_scheduled_task, failed, ABANDONED.
func TestAbandonedFiring(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		post := newReceiver(t, nil)
		e.hook(dispatcher.PostScheduledTask, post.srv.URL)
		ctx := context.Background()
		task := storage.Task{Name: "orphaned", Cron: "@every 1s", Input: "hello", Enabled: true,
			NextRunAt: time.Now().Truncate(time.Second).Add(time.Second)}
		if err := db.CreateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		dead, _, err := db.ClaimTaskFire(ctx, storage.TaskFire{TaskID: task.ID, Kind: storage.FireManual, ScheduledAt: time.Now(),
			Owner: "a daemon that died", TraceID: "x", At: time.Now()})
		if err != nil || dead.Status != storage.TaskRunRunning {
			t.Fatalf("claim: %v %+v", err, dead)
		}
		cfg := testConfig()
		cfg.Lease = time.Second
		s := e.scheduler(cfg)
		eventually(t, 10*time.Second, "the orphaned firing ended and the task firing again", func() bool {
			return count(history(t, s, task.ID), storage.TaskRunSucceeded) >= 1
		})
		got, _ := db.GetTaskRun(ctx, dead.ID)
		if got.Status != storage.TaskRunInterrupted || got.ErrorCode != "ABANDONED" {
			t.Fatalf("orphaned firing: %+v", got)
		}
		eventually(t, 10*time.Second, "the orphaned firing's post_scheduled_task", func() bool {
			return post.byTrace(dispatcher.PostScheduledTask, "x") != nil
		})
		if c := post.byTrace(dispatcher.PostScheduledTask, "x").ctx; c["succeeded"] != false || c["errorCode"] != "ABANDONED" ||
			c["taskName"] != "orphaned" || c["taskId"] != float64(task.ID) {
			t.Fatalf("the orphaned firing's post_scheduled_task: %v", c)
		}
		if err := s.Delete(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSuspendedFiringEndsWithItsRun: a firing whose run pauses for a person is recorded
// suspended and reported by post_scheduled_task only once its run has ended, with the run's
// outcome ("定时任务执行完成或失败后"): the scheduler that paused it follows the run, and when it
// stopped meanwhile, the next one to start takes the firing up. Each firing is reported once.
func TestSuspendedFiringEndsWithItsRun(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		// A tool that writes asks its run's user first, as the daemon's default has it.
		e := newEnvWith(t, db, `{"scripts":[{"match":"write it","steps":[
			{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"r.md","content":"x"}}]},
			{"text":"written"}]}]}`, agent.Config{DefaultBehavior: agent.BehaviorAsk})
		post := newReceiver(t, nil)
		e.hook(dispatcher.PostScheduledTask, post.srv.URL)
		ctx := context.Background()
		cfg := testConfig()
		s := scheduler.New(db, e.rt, e.disp, quiet(), cfg)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		task := create(t, s, scheduler.Task{TaskName: "needs a person", Cron: "@yearly", Input: "write it", PrincipalID: ptr(principal)})
		// pause fires the task and returns its firing once recorded suspended, with the run's ask.
		pause := func(s *scheduler.Scheduler) (storage.TaskRun, string) {
			t.Helper()
			run, err := s.RunNow(ctx, task.ID)
			if err != nil || run.RequestID == nil {
				t.Fatalf("run now: %v %+v", err, run)
			}
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			events, err := e.rt.Subscribe(sctx, *run.RequestID, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ask string
			for ev := range events {
				if ev.Kind == agent.KindSuspended && ev.Suspend != nil && len(ev.Suspend.PendingCalls) == 1 {
					ask = ev.Suspend.PendingCalls[0].AskID
					break
				}
			}
			if ask == "" {
				t.Fatal("the run never asked")
			}
			eventually(t, 10*time.Second, "the firing recorded suspended", func() bool {
				got, _ := db.GetTaskRun(ctx, run.ID)
				return got.Status == storage.TaskRunSuspended
			})
			got, _ := db.GetTaskRun(ctx, run.ID)
			if got.ErrorCode != "RUN_SUSPENDED" || got.FinishedAt != nil || got.DecisionID != nil { // no hook decided it
				t.Fatalf("the suspended firing: %+v", got)
			}
			return got, ask
		}
		answer := func(run storage.TaskRun, ask string) {
			t.Helper()
			if err := e.rt.Answer(ctx, "user-10001", *run.RequestID, []agent.Answer{{AskID: ask, Approved: true}}); err != nil {
				t.Fatalf("answer the ask: %v", err)
			}
		}
		ended := func(run storage.TaskRun) storage.TaskRun {
			t.Helper()
			var got storage.TaskRun
			eventually(t, 20*time.Second, "the firing ended with its run", func() bool {
				got, _ = db.GetTaskRun(ctx, run.ID)
				return got.Status != storage.TaskRunSuspended
			})
			if got.Status != storage.TaskRunSucceeded || got.ErrorCode != "" || got.ErrorMessage != "" || got.Output != "written" ||
				got.FinishedAt == nil || got.DurationMs < run.DurationMs {
				t.Fatalf("the firing after its run ended: %+v", got)
			}
			eventually(t, 20*time.Second, "its post_scheduled_task", func() bool {
				return post.byTrace(dispatcher.PostScheduledTask, got.TraceID) != nil
			})
			g := post.byTrace(dispatcher.PostScheduledTask, got.TraceID)
			if g.env.PrincipalID == nil || *g.env.PrincipalID != principal {
				t.Fatalf("post_scheduled_task of a firing that paused names principal %v", g.env.PrincipalID)
			}
			c := g.ctx
			if c["taskName"] != "needs a person" || c["succeeded"] != true || c["errorCode"] != nil || c["errorMessage"] != nil || c["requestId"] != *run.RequestID ||
				c["taskId"] != float64(task.ID) || c["durationMs"] != float64(got.DurationMs) {
				t.Fatalf("post_scheduled_task of a firing that paused: %v (firing %+v)", c, got)
			}
			return got
		}

		// Answered while the scheduler that paused it runs: it follows the run to its end.
		first, ask := pause(s)
		answer(first, ask)
		ended(first)

		// Answered while no scheduler runs: the next ones to start follow it (two daemons here),
		// and the one that ends it reports it.
		second, ask := pause(s)
		s.Stop()
		answer(second, ask)
		// Renamed and moved to another principal meanwhile: the firing is reported as it ran.
		edited, err := db.GetTask(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		edited.Name, edited.PrincipalID = "renamed", ptr(int64(2002))
		if err := db.UpdateTask(ctx, &edited); err != nil {
			t.Fatal(err)
		}
		e.scheduler(cfg)
		e.scheduler(cfg)
		ended(second)

		// One report a firing: none was sent at a pause.
		if n := len(post.of(dispatcher.PostScheduledTask)); n != 2 {
			t.Fatalf("%d post_scheduled_task events for two firings", n)
		}
	})
}

// A task is the agent its principal's keys are: filled in when absent, refused when it names
// another principal's agent, and a firing of a task stored before the keys changed fails before
// any hook is asked rather than run as an agent its principal no longer is.
func TestTaskRunsAsItsPrincipalsAgent(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script)
		ctx := context.Background()
		auth := config.Auth{APIKeys: []config.APIKey{{Key: "k1", UserID: "user-10001", PrincipalID: principal, AgentID: agentID},
			{Key: "k2", UserID: "erin", PrincipalID: 1005, AgentID: 8}}}
		var mu sync.Mutex
		cfg := testConfig()
		cfg.AgentFor = func(p, a *int64) (*int64, error) {
			mu.Lock()
			defer mu.Unlock()
			return auth.TaskAgent(p, a)
		}
		post := newReceiver(t, func(dispatcher.Envelope) string { return "" })
		e.hook(dispatcher.PostScheduledTask, post.srv.URL)
		s := e.scheduler(cfg)
		task := create(t, s, scheduler.Task{TaskName: "t", Cron: "@daily", Input: "hello", PrincipalID: ptr(principal)})
		if task.AgentID == nil || *task.AgentID != agentID {
			t.Fatalf("agentId %v, want the key's %d filled in", task.AgentID, agentID)
		}
		for a, want := range map[int64]string{8: "agentId: 8 is the agent of another principal's API key (principal 1005)",
			9: "agentId: 9 is not principal 1001's agent: its API keys are bound to agent 5001"} {
			bad := task
			bad.AgentID = ptr(a)
			if _, err := s.Replace(ctx, task.ID, bad); err == nil || err.Error() != want {
				t.Errorf("agentId %d: %v, want %s", a, err, want)
			}
			bad.ID, bad.NextRunAt, bad.CreatedAt, bad.UpdatedAt = 0, nil, nil, nil
			if _, err := s.Create(ctx, bad); err == nil || err.Error() != want {
				t.Errorf("a new task with agentId %d: %v, want %s", a, err, want)
			}
		}
		mu.Lock()
		auth.APIKeys[0].AgentID = 6000 // the key now is another agent
		mu.Unlock()
		run, err := s.RunNow(ctx, task.ID)
		if err != nil || run.Status != storage.TaskRunFailed || run.ErrorCode != "AGENT_MISMATCH" ||
			run.ErrorMessage != "agentId: 5001 is not principal 1001's agent: its API keys are bound to agent 6000" || run.DecisionID != nil {
			t.Fatalf("a firing after the keys changed: %+v %v", run, err)
		}
		// Its report names no agent: the one the task names is no longer its principal's (it may be
		// another principal's), and its hooks are not told of this principal's task.
		eventually(t, 10*time.Second, "the failed firing's post_scheduled_task", func() bool {
			return post.byTrace(dispatcher.PostScheduledTask, run.TraceID) != nil
		})
		if g := post.byTrace(dispatcher.PostScheduledTask, run.TraceID); g.env.AgentID != nil {
			t.Fatalf("the report of a firing refused for its agent names agent %d", *g.env.AgentID)
		}
	})
}

// A reused session is its principal's: given to another principal (both without an API key, so
// one runtime user), the task's next firing makes a new session, and the ones after go on in it.
func TestReusedSessionChangesHands(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		_, s, task := reusingTask(t, db, "handed over")
		sessionOf := func() int64 { t.Helper(); return firingSession(t, s, task.ID) }
		first := sessionOf()
		if again := sessionOf(); again != first {
			t.Fatalf("the reused session changed: %d, then %d", first, again)
		}
		task.PrincipalID = ptr(int64(7002))
		var err error
		if task, err = s.Replace(context.Background(), task.ID, task); err != nil {
			t.Fatal(err)
		}
		handed := sessionOf()
		if handed == first {
			t.Fatalf("the task of principal 7002 ran in principal 7001's session %d", first)
		}
		if again := sessionOf(); again != handed {
			t.Fatalf("the new principal's session changed: %d, then %d", handed, again)
		}
	})
}

// A firing binds the session it made only to the task it ran for: a task given to another
// principal while its firing ran (here, while its pre_scheduled_task hook was asked) stays
// unbound, and its next firing does not go on in the former principal's session (both principals
// without an API key: one runtime user).
func TestTaskHandedOverWhileFiring(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, s, task := reusingTask(t, db, "handed over mid-firing")
		var once sync.Once
		rec := newReceiver(t, func(dispatcher.Envelope) string {
			once.Do(func() {
				handed := task
				handed.PrincipalID = ptr(int64(7002))
				if _, err := s.Replace(context.Background(), task.ID, handed); err != nil {
					t.Error(err)
				}
			})
			return `{"decision":"allow"}`
		})
		e.hook(dispatcher.PreScheduledTask, rec.srv.URL)
		sessionOf := func() int64 { t.Helper(); return firingSession(t, s, task.ID) }
		former := sessionOf() // principal 7001's run: the task changed hands while it started
		if got, err := s.Get(context.Background(), task.ID); err != nil || got.SessionID != nil {
			t.Fatalf("the task of principal 7002 is bound to principal 7001's session: %+v %v", got.SessionID, err)
		}
		if handed := sessionOf(); handed == former {
			t.Fatalf("the task of principal 7002 ran in principal 7001's session %d", former)
		}
	})
}

// firingSession fires the task now, waits for every firing of it to succeed, and returns the
// session the firing ran in.
func firingSession(t *testing.T, s *scheduler.Scheduler, id int64) int64 {
	t.Helper()
	run, err := s.RunNow(context.Background(), id)
	if err != nil || run.SessionID == nil {
		t.Fatalf("run now: %+v %v", run, err)
	}
	eventually(t, 10*time.Second, "the firing's end", func() bool {
		return count(history(t, s, id), storage.TaskRunSucceeded) == len(history(t, s, id))
	})
	return *run.SessionID
}

// reusingTask is a scheduler with a reuseSession task of principal 7001, which has no API key.
func reusingTask(t *testing.T, db *storage.DB, name string) (*env, *scheduler.Scheduler, scheduler.Task) {
	t.Helper()
	e := newEnv(t, db, script)
	s := e.scheduler(testConfig())
	return e, s, create(t, s, scheduler.Task{TaskName: name, Cron: "0 0 1 1 *", Input: "hello", ReuseSession: true, PrincipalID: ptr(int64(7001))})
}
