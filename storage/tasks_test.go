package storage_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A task's bound session is its principal's: an update that keeps the principal keeps it, one
// that gives the task to another principal, or to none, lets it go (its next firing would be
// announced in the former owner's session).
func TestTaskSessionStaysWithItsPrincipal(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		p1, p2 := int64(1001), int64(1002)
		task := storage.Task{Name: "t", Cron: "@daily", Input: "x", PrincipalID: &p1, ReuseSession: true, Enabled: true,
			NextRunAt: time.Now().Add(time.Hour)}
		if err := db.CreateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		for i, step := range []struct {
			bind      bool
			principal *int64
			kept      bool
		}{
			{true, &p1, true}, {false, &p2, false}, {true, &p2, true}, {false, nil, false}, {true, nil, true}, {false, &p1, false},
		} {
			if step.bind {
				if err := db.BindTaskSession(ctx, task.ID, task.PrincipalID, 70+int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			task.PrincipalID = step.principal
			if err := db.UpdateTask(ctx, &task); err != nil {
				t.Fatal(err)
			}
			got, _ := db.GetTask(ctx, task.ID)
			if kept := got.SessionID != nil && *got.SessionID == 70+int64(i); kept != step.kept || (!step.kept && got.SessionID != nil) {
				t.Errorf("step %d (principal %v): session %v, want kept %v", i, step.principal, got.SessionID, step.kept)
			}
		}
	})
}

// Every edit changes the version, whatever the time of the edits before it: a replica whose
// clock runs ahead edited one task, then another replica edited a second one earlier by its
// clock. The version took the latest edit time, so the second edit went unseen by the other
// schedulers (a task enabled there never fired on them) until some later edit.
func TestTasksVersionSeesEveryEdit(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		var last storage.Task
		for range 2 {
			last = storage.Task{Name: "t", Cron: "@daily", Input: "x", Enabled: true, NextRunAt: time.Now().Add(time.Hour)}
			if err := db.CreateTask(ctx, &last); err != nil {
				t.Fatal(err)
			}
		}
		// The first task, edited by a replica whose clock runs an hour ahead.
		ahead := `UPDATE tasks SET updated_at = updated_at + 3600000 WHERE id < ?`
		if err := storage.Exec(ctx, db, ahead, last.ID); err != nil {
			t.Fatal(err)
		}
		before, err := db.TasksVersion(ctx)
		last.Enabled = false
		if err == nil {
			err = db.UpdateTask(ctx, &last)
		}
		if after, _ := db.TasksVersion(ctx); err != nil || after == before {
			t.Fatalf("an edit left the version %s: %v", after, err)
		}
	})
}

func TestTaskCRUD(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		agent, principal := int64(5001), int64(1001)
		next := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
		task := storage.Task{Name: "每日财报生成", Cron: "0 9 * * *", Input: "生成财报", AgentID: &agent, PrincipalID: &principal,
			ReuseSession: true, Enabled: true, CatchUp: true, NextRunAt: next}
		if err := db.CreateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		v1, _ := db.TasksVersion(ctx)
		got, err := db.GetTask(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != task.Name || *got.AgentID != agent || *got.PrincipalID != principal || !got.ReuseSession ||
			!got.Enabled || !got.CatchUp || !got.NextRunAt.Equal(next) || !got.LastRunAt.IsZero() || got.SessionID != nil {
			t.Fatalf("round trip: %+v", got)
		}
		if err := db.BindTaskSession(ctx, task.ID, task.PrincipalID, 77); err != nil {
			t.Fatal(err)
		}
		if v, _ := db.TasksVersion(ctx); v != v1 {
			t.Fatal("binding a session changed the version")
		}
		time.Sleep(2 * time.Millisecond)
		task.Input, task.CatchUp, task.AgentID = "new input", false, nil
		if err := db.UpdateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		got, _ = db.GetTask(ctx, task.ID)
		if got.Input != "new input" || got.CatchUp || got.AgentID != nil || got.SessionID == nil || *got.SessionID != 77 {
			t.Fatalf("update: %+v", got)
		}
		if v, _ := db.TasksVersion(ctx); v == v1 {
			t.Fatal("update did not change the version")
		}
		list, err := db.ListTasks(ctx, storage.TaskFilter{})
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %+v", err, list)
		}
		if err := db.DeleteTask(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetTask(ctx, task.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		if err := db.DeleteTask(ctx, task.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if err := db.UpdateTask(ctx, &task); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("update deleted: %v", err)
		}
	})
}

func TestClaimTaskFire(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		t0 := time.Now().Truncate(time.Second).UTC()
		task := storage.Task{Name: "t", Cron: "@every 1s", Input: "go", Enabled: true, NextRunAt: t0}
		if err := db.CreateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		fire := func(expect time.Time, kind string) storage.TaskFire {
			return storage.TaskFire{TaskID: task.ID, Kind: kind, ScheduledAt: expect, Expect: expect, Next: expect.Add(time.Second),
				Cron: "@every 1s", Owner: "a", TraceID: storage.NewTSIDString(), At: time.Now()}
		}
		run, got, err := db.ClaimTaskFire(ctx, fire(t0, storage.FireSchedule))
		if err != nil {
			t.Fatal(err)
		}
		// Claimed is not run: lastRunAt moves once the firing's run starts (below).
		if run.Status != storage.TaskRunRunning || run.Input != "go" || !got.LastRunAt.IsZero() || !got.NextRunAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("claim: %+v %+v", run, got)
		}
		// The same tick again (another daemon that saw the same next_run_at): not its to fire.
		if _, _, err := db.ClaimTaskFire(ctx, fire(t0, storage.FireSchedule)); !errors.Is(err, storage.ErrTaskChanged) {
			t.Fatalf("second claim of one tick: %v", err)
		}
		// A schedule computed from another cron: refused.
		f := fire(t0.Add(time.Second), storage.FireSchedule)
		f.Cron = "@every 2s"
		if _, _, err := db.ClaimTaskFire(ctx, f); !errors.Is(err, storage.ErrTaskChanged) {
			t.Fatalf("claim with a stale cron: %v", err)
		}
		// The next tick while the first still runs: recorded as skipped.
		skipped, _, err := db.ClaimTaskFire(ctx, fire(t0.Add(time.Second), storage.FireSchedule))
		if err != nil || skipped.Status != storage.TaskRunSkipped || skipped.Reason != "still running" || skipped.FinishedAt == nil {
			t.Fatalf("overlapping tick: %v %+v", err, skipped)
		}
		manual, _, err := db.ClaimTaskFire(ctx, storage.TaskFire{TaskID: task.ID, Kind: storage.FireManual, ScheduledAt: time.Now(), At: time.Now()})
		if err != nil || manual.Status != storage.TaskRunSkipped {
			t.Fatalf("manual while running: %v %+v", err, manual)
		}
		// The run ends; the next tick runs.
		rid, sid := "REQ1", int64(9)
		run.Status, run.RequestID, run.SessionID, run.Output, run.DurationMs = storage.TaskRunSucceeded, &rid, &sid, "done", 42
		fin := time.Now()
		run.FinishedAt = &fin
		if err := db.UpdateTaskRun(ctx, &run); err != nil {
			t.Fatal(err)
		}
		if task, err := db.GetTask(ctx, task.ID); err != nil || !task.LastRunAt.Equal(run.StartedAt) {
			t.Fatalf("lastRunAt after the run: %v, want %v (%v)", task.LastRunAt, run.StartedAt, err)
		}
		if err := db.UpdateTaskRun(ctx, &run); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a final run changed again: %v", err)
		}
		run2, _, err := db.ClaimTaskFire(ctx, fire(t0.Add(2*time.Second), storage.FireCatchUp))
		if err != nil || run2.Status != storage.TaskRunRunning || run2.Kind != storage.FireCatchUp {
			t.Fatalf("claim after the end: %v %+v", err, run2)
		}
		// A daemon that went silent: its running firing is ended by the rescuer, not by a touch.
		if err := db.TouchTaskRuns(ctx, "a", time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		stale, err := db.StaleTaskRuns(ctx, time.Now().Add(-time.Minute))
		if err != nil || len(stale) != 1 || stale[0].ID != run2.ID || stale[0].TaskName != task.Name {
			t.Fatalf("stale: %v %+v", err, stale)
		}
		// Its end applies only while it is still stale: a daemon that renewed its lease meanwhile
		// is alive, and nothing of the batch is written.
		end := stale[0]
		end.Status, end.ErrorCode = storage.TaskRunInterrupted, "ABANDONED"
		fin2 := time.Now()
		end.FinishedAt = &fin2
		if err := db.Commit(ctx, &storage.WriteBatch{TaskRunEnds: []storage.TaskRunEnd{{Run: &end, From: storage.TaskRunRunning,
			StaleBefore: time.Now().Add(-2 * time.Hour)}}}); !errors.Is(err, storage.ErrTaskRunChanged) {
			t.Fatalf("the end of a firing renewed since: %v", err)
		}
		if err := db.Commit(ctx, &storage.WriteBatch{TaskRunEnds: []storage.TaskRunEnd{{Run: &end, From: storage.TaskRunRunning,
			StaleBefore: time.Now().Add(-time.Minute)}}}); err != nil {
			t.Fatalf("rescue: %v", err)
		}
		if err := db.Commit(ctx, &storage.WriteBatch{TaskRunEnds: []storage.TaskRunEnd{{Run: &end, From: storage.TaskRunRunning}}}); !errors.Is(err, storage.ErrTaskRunChanged) {
			t.Fatalf("a firing ended twice: %v", err)
		}
		runs, err := db.ListTaskRuns(ctx, storage.TaskRunFilter{TaskID: task.ID})
		if err != nil || len(runs) != 4 {
			t.Fatalf("history: %v %d", err, len(runs))
		}
		if runs[0].ID != run2.ID || runs[0].Status != storage.TaskRunInterrupted || runs[0].ErrorCode != "ABANDONED" {
			t.Fatalf("rescued run: %+v", runs[0])
		}
		first, _ := db.GetTaskRun(ctx, run.ID)
		if first.Status != storage.TaskRunSucceeded || *first.RequestID != "REQ1" || *first.SessionID != 9 || first.Output != "done" ||
			first.DurationMs != 42 || first.FinishedAt == nil {
			t.Fatalf("finished run: %+v", first)
		}
		if only, _ := db.ListTaskRuns(ctx, storage.TaskRunFilter{TaskID: task.ID, Status: storage.TaskRunSkipped}); len(only) != 2 {
			t.Fatalf("filter by status: %d", len(only))
		}
		// Disabled and deleted tasks do not fire.
		task.Enabled, task.NextRunAt = false, t0.Add(3*time.Second)
		if err := db.UpdateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ClaimTaskFire(ctx, fire(t0.Add(3*time.Second), storage.FireSchedule)); !errors.Is(err, storage.ErrTaskChanged) {
			t.Fatalf("disabled task fired: %v", err)
		}
		if err := db.DeleteTask(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.ClaimTaskFire(ctx, fire(t0.Add(3*time.Second), storage.FireSchedule)); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("deleted task fired: %v", err)
		}
	})
}

// TestClaimTaskFireRace has many claimers race for the same ticks, as daemons sharing a database
// do: each tick is fired once, and never while another firing of the task runs.
func TestClaimTaskFireRace(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		t0 := time.Now().Truncate(time.Second).UTC()
		task := storage.Task{Name: "t", Cron: "@every 1s", Input: "go", Enabled: true, NextRunAt: t0}
		if err := db.CreateTask(ctx, &task); err != nil {
			t.Fatal(err)
		}
		const ticks, claimers = 5, 6
		for i := range ticks {
			at := t0.Add(time.Duration(i) * time.Second)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for range claimers {
				wg.Go(func() {
					run, _, err := db.ClaimTaskFire(ctx, storage.TaskFire{TaskID: task.ID, Kind: storage.FireSchedule,
						ScheduledAt: at, Expect: at, Next: at.Add(time.Second), Cron: "@every 1s", TraceID: "x", At: time.Now()})
					if errors.Is(err, storage.ErrTaskChanged) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					won++
					mu.Unlock()
					if run.Status == storage.TaskRunRunning {
						now := time.Now()
						run.Status, run.FinishedAt = storage.TaskRunSucceeded, &now
						if err := db.UpdateTaskRun(ctx, &run); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if won != 1 {
				t.Fatalf("tick %d claimed %d times", i, won)
			}
		}
		runs, _ := db.ListTaskRuns(ctx, storage.TaskRunFilter{TaskID: task.ID})
		if len(runs) != ticks {
			t.Fatalf("%d firings for %d ticks", len(runs), ticks)
		}
	})
}
