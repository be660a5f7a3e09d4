package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Task is a scheduled agent task as stored. The schedule itself (cron) is the scheduler's to
// parse; storage keeps the next firing it computed, which every daemon on the database shares.
type Task struct {
	ID           int64
	Name         string
	Cron         string
	Input        string
	AgentID      *int64
	PrincipalID  *int64
	ReuseSession bool
	Enabled      bool
	CatchUp      bool
	SessionID    *int64    // the session a reuseSession task is bound to, once its first run created it
	NextRunAt    time.Time // zero: the schedule never fires again
	LastRunAt    time.Time // the last firing that ran (not skipped); zero: never
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

type taskRow struct {
	ID           int64 `gorm:"primaryKey"`
	TaskName     string
	Cron         string
	Input        string
	AgentID      *int64
	PrincipalID  *int64
	ReuseSession bool
	Enabled      bool
	CatchUp      bool
	SessionID    *int64
	NextRunAt    int64
	LastRunAt    int64
	CreatedAt    int64 `gorm:"autoCreateTime:false"`
	UpdatedAt    int64 `gorm:"autoUpdateTime:false"`
}

func (taskRow) TableName() string { return "tasks" }

func (r taskRow) plain() Task {
	return Task{ID: r.ID, Name: r.TaskName, Cron: r.Cron, Input: r.Input, AgentID: r.AgentID, PrincipalID: r.PrincipalID,
		ReuseSession: r.ReuseSession, Enabled: r.Enabled, CatchUp: r.CatchUp, SessionID: r.SessionID,
		NextRunAt: fromMs(r.NextRunAt), LastRunAt: fromMs(r.LastRunAt), CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}
}

// CreateTask inserts t and sets its ID and times.
func (db *DB) CreateTask(ctx context.Context, t *Task) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	t.CreatedAt, t.UpdatedAt = now, now
	row := taskRow{TaskName: t.Name, Cron: t.Cron, Input: t.Input, AgentID: t.AgentID, PrincipalID: t.PrincipalID,
		ReuseSession: t.ReuseSession, Enabled: t.Enabled, CatchUp: t.CatchUp, NextRunAt: ms(t.NextRunAt),
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	if err := db.w.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("storage: create task: %w", err)
	}
	t.ID = row.ID
	return nil
}

// GetTask reads one task; ErrNotFound if there is none.
func (db *DB) GetTask(ctx context.Context, id int64) (Task, error) {
	var row taskRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Task{}, ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("storage: get task %d: %w", id, err)
	}
	return row.plain(), nil
}

// TaskFilter pages ListTasks; zero values do not filter.
type TaskFilter struct {
	AfterID int64 // only tasks with a larger id
	Limit   int   // 0: all
}

// ListTasks returns the tasks of f, by id.
func (db *DB) ListTasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	var rows []taskRow
	q := db.r.WithContext(ctx).Order("id")
	if f.AfterID != 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	if f.Limit > 0 {
		q = q.Limit(f.Limit)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list tasks: %w", err)
	}
	out := make([]Task, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// UpdateTask replaces the definition of task t.ID and its next firing; the bound session, the
// last firing and the creation time stay. ErrNotFound if there is no such task.
func (db *DB) UpdateTask(ctx context.Context, t *Task) error {
	now := time.Now().UnixMilli()
	// The bound session is its principal's: a task given to another principal (or none) lets go
	// of it in the same statement, whose CASE reads the row as it was, so its next firing is not
	// announced in the former owner's session.
	keep := gorm.Expr("CASE WHEN principal_id IS NULL THEN session_id END")
	if t.PrincipalID != nil {
		keep = gorm.Expr("CASE WHEN principal_id = ? THEN session_id END", *t.PrincipalID)
	}
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Every edit moves updated_at on, by a millisecond when it came within the last one's (or
		// a replica's clock runs behind): the schedulers' version (TasksVersion) sums it.
		res := tx.Model(&taskRow{}).Where("id = ?", t.ID).Updates(map[string]any{
			"task_name": t.Name, "cron": t.Cron, "input": t.Input, "agent_id": t.AgentID, "principal_id": t.PrincipalID,
			"reuse_session": t.ReuseSession, "enabled": t.Enabled, "catch_up": t.CatchUp, "next_run_at": ms(t.NextRunAt),
			"updated_at": gorm.Expr("CASE WHEN updated_at >= ? THEN updated_at + 1 ELSE ? END", now, now), "session_id": keep,
		})
		if err := oneRow(res, "update task %d", t.ID); err != nil {
			return err
		}
		var at int64
		if err := tx.Model(&taskRow{}).Where("id = ?", t.ID).Pluck("updated_at", &at).Error; err != nil {
			return fmt.Errorf("storage: update task %d: %w", t.ID, err)
		}
		t.UpdatedAt = time.UnixMilli(at).UTC()
		return nil
	})
}

// DeleteTask removes a task; ErrNotFound if there is none. Its run history stays for the record.
func (db *DB) DeleteTask(ctx context.Context, id int64) error {
	res := db.w.WithContext(ctx).Where("id = ?", id).Delete(&taskRow{})
	return oneRow(res, "delete task %d", id)
}

// BindTaskSession records the session a reuseSession task's runs share, made by a run of
// principalID's. It does not change the tasks' version: the schedule is the same. A task given to
// another principal since that run was claimed is left as it is: the session is its former
// principal's, which the change let go of (see UpdateTask).
func (db *DB) BindTaskSession(ctx context.Context, taskID int64, principalID *int64, sessionID int64) error {
	q := db.w.WithContext(ctx).Model(&taskRow{}).Where("id = ?", taskID)
	if principalID == nil {
		q = q.Where("principal_id IS NULL")
	} else {
		q = q.Where("principal_id = ?", *principalID)
	}
	if err := q.Update("session_id", sessionID).Error; err != nil {
		return fmt.Errorf("storage: bind session of task %d: %w", taskID, err)
	}
	return nil
}

// TasksVersion changes whenever a task is added, changed or removed, by this process or another
// sharing the database, so a scheduler can tell its schedules are stale with one cheap query.
// Firings (next_run_at, last_run_at) do not change it. It sums the edit times rather than taking
// the latest: the replicas' clocks differ, and an edit stamped earlier than one before it (on
// another task) would leave the latest as it was, unseen by the other schedulers.
func (db *DB) TasksVersion(ctx context.Context) (string, error) {
	var v struct{ N, SumUpdated, SumID int64 }
	err := db.r.WithContext(ctx).Raw(`SELECT COUNT(*) AS n, COALESCE(SUM(updated_at), 0) AS sum_updated,
		COALESCE(SUM(id), 0) AS sum_id FROM tasks`).Scan(&v).Error
	if err != nil {
		return "", fmt.Errorf("storage: tasks version: %w", err)
	}
	return strconv.FormatInt(v.N, 10) + ":" + strconv.FormatInt(v.SumUpdated, 10) + ":" + strconv.FormatInt(v.SumID, 10), nil
}

// Task run statuses. running is the only one that changes; the others are final.
const (
	TaskRunRunning     = "running"
	TaskRunSucceeded   = "succeeded"
	TaskRunFailed      = "failed"
	TaskRunSkipped     = "skipped"     // not run: still running, or missed while down with catchUp=false
	TaskRunDenied      = "denied"      // a pre_scheduled_task hook said no
	TaskRunInterrupted = "interrupted" // the daemon stopped (or died) before the run ended
	TaskRunSuspended   = "suspended"   // the agent run paused (an ask, an external tool); the firing takes the run's outcome when it ends
)

// What fired a task.
const (
	FireSchedule = "schedule" // a tick of the schedule, on time
	FireCatchUp  = "catch_up" // a tick missed while no scheduler ran, fired once on the next start
	FireManual   = "manual"   // POST /api/tasks/{id}/run
)

// TaskRun is one firing of a task: its history entry, and while it runs the claim that keeps any
// other firing of the task (on any daemon) from running beside it.
type TaskRun struct {
	ID          int64     `json:"id"`
	TaskID      int64     `json:"taskId"`
	Kind        string    `json:"trigger"`
	ScheduledAt time.Time `json:"scheduledAt"`
	Status      string    `json:"status"`
	// Reason says why a firing was skipped or denied.
	Reason    string  `json:"reason,omitempty"`
	Input     string  `json:"input"` // what the agent was (or would have been) given, after any modify
	TraceID   string  `json:"traceId"`
	RequestID *string `json:"requestId"` // the agent run; null when none was started
	SessionID *int64  `json:"sessionId"`
	// DecisionID is the decision log's row of the firing's pre_scheduled_task decision; null when
	// no hook was asked.
	DecisionID   *string    `json:"decisionId"`
	ErrorCode    string     `json:"errorCode,omitempty"`
	ErrorMessage string     `json:"errorMessage,omitempty"`
	Output       string     `json:"output,omitempty"` // the run's final answer
	DurationMs   int64      `json:"durationMs"`
	Owner        string     `json:"owner"` // the scheduler that fired it
	StartedAt    time.Time  `json:"startedAt"`
	FinishedAt   *time.Time `json:"finishedAt"`
	// The task as the firing was claimed with (empty for firings recorded before migration 31),
	// and the firing's last sign of life (its lease).
	TaskName    string    `json:"-"`
	PrincipalID *int64    `json:"-"`
	AgentID     *int64    `json:"-"`
	HeartbeatAt time.Time `json:"-"`
}

type taskRunRow struct {
	ID           int64 `gorm:"primaryKey"`
	TaskID       int64
	Kind         string
	ScheduledAt  int64
	Status       string
	Reason       string
	Input        string
	TraceID      string
	RequestID    *string
	SessionID    *int64
	DecisionID   *string
	ErrorCode    string
	ErrorMessage string
	Output       string
	DurationMs   int64
	Owner        string
	StartedAt    int64
	FinishedAt   int64
	HeartbeatAt  int64
	TaskName     string
	PrincipalID  *int64
	AgentID      *int64
}

func (taskRunRow) TableName() string { return "task_runs" }

func (r taskRunRow) plain() TaskRun {
	out := TaskRun{ID: r.ID, TaskID: r.TaskID, Kind: r.Kind, ScheduledAt: fromMs(r.ScheduledAt), Status: r.Status,
		Reason: r.Reason, Input: r.Input, TraceID: r.TraceID, RequestID: r.RequestID, SessionID: r.SessionID,
		DecisionID: r.DecisionID, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, Output: r.Output, DurationMs: r.DurationMs, Owner: r.Owner,
		StartedAt: fromMs(r.StartedAt), TaskName: r.TaskName, PrincipalID: r.PrincipalID, AgentID: r.AgentID,
		HeartbeatAt: fromMs(r.HeartbeatAt)}
	if r.FinishedAt != 0 {
		t := fromMs(r.FinishedAt)
		out.FinishedAt = &t
	}
	return out
}

// TaskFire asks to fire a task once.
type TaskFire struct {
	TaskID      int64
	Kind        string
	ScheduledAt time.Time
	// Expect is the next_run_at the caller saw; the claim fails when it changed (another daemon
	// fired that tick, or the task was edited). Next replaces it. Manual firings leave both zero:
	// they do not move the schedule.
	Expect, Next time.Time
	// Cron is the schedule Next was computed from; the claim fails when the task's changed.
	Cron string
	// Skip, when set, records the firing as skipped for this reason instead of running it.
	Skip    string
	Owner   string
	TraceID string
	At      time.Time // now, by the caller's clock
}

// ErrTaskChanged is returned by ClaimTaskFire when the task's next firing is no longer the one
// the caller expected: another scheduler fired it, or the task was edited, disabled or deleted.
var ErrTaskChanged = errors.New("storage: task changed since it was read")

// ClaimTaskFire records a firing and advances the task's schedule in one transaction, so that of
// several schedulers on one database exactly one fires each tick. The firing is recorded as
// running, or as skipped when f.Skip says so or when another firing of the task still runs
// (reason "still running"). It returns the firing and the task as it is now; ErrTaskChanged
// when the tick is not the caller's to fire, ErrNotFound when the task does not exist.
func (db *DB) ClaimTaskFire(ctx context.Context, f TaskFire) (TaskRun, Task, error) {
	var run taskRunRow
	var task taskRow
	recorded := true
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The update locks the task's row (PostgreSQL), so claims of one task queue here and each
		// sees the firings committed before it.
		var res *gorm.DB
		if f.Kind == FireManual {
			res = tx.Exec(`UPDATE tasks SET next_run_at = next_run_at WHERE id = ?`, f.TaskID)
		} else {
			res = tx.Exec(`UPDATE tasks SET next_run_at = ? WHERE id = ? AND enabled = ? AND next_run_at = ? AND cron = ?`,
				ms(f.Next), f.TaskID, true, ms(f.Expect), f.Cron)
		}
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			if err := tx.Where("id = ?", f.TaskID).Take(&task).Error; errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrNotFound
			}
			return ErrTaskChanged
		}
		if err := tx.Where("id = ?", f.TaskID).Take(&task).Error; err != nil {
			return err
		}
		at := ms(f.At)
		run = taskRunRow{TaskID: f.TaskID, Kind: f.Kind, ScheduledAt: ms(f.ScheduledAt), Status: TaskRunRunning,
			Input: task.Input, TraceID: f.TraceID, Owner: f.Owner, StartedAt: at, HeartbeatAt: at,
			TaskName: task.TaskName, PrincipalID: task.PrincipalID, AgentID: task.AgentID}
		if f.Skip != "" {
			run.Status, run.Reason = TaskRunSkipped, f.Skip
		} else {
			var busy int64
			if err := tx.Model(&taskRunRow{}).Where("task_id = ? AND status = ?", f.TaskID, TaskRunRunning).Count(&busy).Error; err != nil {
				return err
			}
			if busy > 0 {
				run.Status, run.Reason = TaskRunSkipped, "still running"
			}
		}
		if run.Status != TaskRunRunning {
			run.FinishedAt = at
		}
		res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&run)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			// This tick is already recorded (a clock skewed between daemons, an edit that
			// rescheduled onto it): the schedule still moves on, so it is not retried forever.
			recorded = false
			return nil
		}
		return nil // last_run_at moves when the firing's run starts (UpdateTaskRun): a denied one never ran
	})
	if errors.Is(err, ErrTaskChanged) || errors.Is(err, ErrNotFound) {
		return TaskRun{}, Task{}, err
	}
	if err != nil {
		return TaskRun{}, Task{}, fmt.Errorf("storage: claim firing of task %d: %w", f.TaskID, err)
	}
	if !recorded {
		return TaskRun{}, Task{}, ErrTaskChanged
	}
	return run.plain(), task.plain(), nil
}

// UpdateTaskRun writes what a running firing learned (its input, run, session) and, once
// r.Status is final, how it ended. It applies only while the firing is still running: ErrNotFound
// when a rescuer declared it abandoned meanwhile.
func (db *DB) UpdateTaskRun(ctx context.Context, r *TaskRun) error {
	fields := taskRunFields(r)
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&taskRunRow{}).Where("id = ? AND status = ?", r.ID, TaskRunRunning).Updates(fields)
		if err := oneRow(res, "update task run %d", r.ID); err != nil || r.RequestID == nil {
			return err
		}
		// A firing with an agent run actually ran: the task's lastRunAt is its start.
		at := ms(r.StartedAt)
		return tx.Exec(`UPDATE tasks SET last_run_at = ? WHERE id = ? AND last_run_at < ?`, at, r.TaskID, at).Error
	})
}

// taskRunFields are the columns of r that a firing learns on its way and at its end. A hook's
// reason or modifiedValue and a model's output are brought to text's form: PostgreSQL refuses a
// NUL, and the end would fail to commit with the report it shares a transaction with. r is
// changed too, so that what the caller answers with is what was stored.
func taskRunFields(r *TaskRun) map[string]any {
	r.Reason, r.Input, r.ErrorMessage, r.Output = text(r.Reason), text(r.Input), text(r.ErrorMessage), text(r.Output)
	fields := map[string]any{"status": r.Status, "reason": r.Reason, "input": r.Input, "request_id": r.RequestID,
		"session_id": r.SessionID, "decision_id": r.DecisionID, "error_code": r.ErrorCode, "error_message": r.ErrorMessage,
		"output": r.Output, "duration_ms": r.DurationMs}
	if r.FinishedAt != nil {
		fields["finished_at"] = ms(*r.FinishedAt)
	}
	return fields
}

// TaskRunEnd is the end of a firing, written by Commit in the transaction that holds the
// deliveries reporting it (post_scheduled_task): a crash leaves both or neither, so no firing is
// recorded ended and never reported. It applies only while the firing is From (running or
// suspended) and, when StaleBefore is set, its lease was last renewed before then (a silent
// daemon's firing): otherwise the whole batch fails with ErrTaskRunChanged, and nothing of it is
// written (another scheduler ended the firing first, or its daemon is alive after all).
type TaskRunEnd struct {
	Run         *TaskRun
	From        string
	StaleBefore time.Time
}

// ErrTaskRunChanged: a TaskRunEnd whose firing was no longer what it expected.
var ErrTaskRunChanged = errors.New("storage: the task firing is no longer in the state its end expected")

func (db *DB) endTaskRun(tx *gorm.DB, e TaskRunEnd) error {
	q := tx.Model(&taskRunRow{}).Where("id = ? AND status = ?", e.Run.ID, e.From)
	if !e.StaleBefore.IsZero() {
		q = q.Where("heartbeat_at < ?", ms(e.StaleBefore))
	}
	res := q.Updates(taskRunFields(e.Run))
	if res.Error != nil {
		return fmt.Errorf("storage: end task run %d: %w", e.Run.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("task run %d: %w", e.Run.ID, ErrTaskRunChanged)
	}
	return nil
}

// StaleTaskRuns are the running firings whose lease was last renewed before staleBefore: their
// daemon died or went silent. The scheduler ends each with a TaskRunEnd that says so.
func (db *DB) StaleTaskRuns(ctx context.Context, staleBefore time.Time) ([]TaskRun, error) {
	var rows []taskRunRow
	if err := db.r.WithContext(ctx).Where("status = ? AND heartbeat_at < ?", TaskRunRunning, ms(staleBefore)).
		Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: stale task runs: %w", err)
	}
	out := make([]TaskRun, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// GetTaskRun reads one firing; ErrNotFound if there is none.
func (db *DB) GetTaskRun(ctx context.Context, id int64) (TaskRun, error) {
	var row taskRunRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return TaskRun{}, ErrNotFound
	}
	if err != nil {
		return TaskRun{}, fmt.Errorf("storage: get task run %d: %w", id, err)
	}
	return row.plain(), nil
}

// TaskRunFilter narrows ListTaskRuns; zero values do not filter.
type TaskRunFilter struct {
	TaskID   int64
	Status   string
	BeforeID int64 // pages backwards: only firings with a smaller id
	Limit    int   // default 100, at most 1000
}

// ListTaskRuns returns firings, newest first.
func (db *DB) ListTaskRuns(ctx context.Context, f TaskRunFilter) ([]TaskRun, error) {
	q := db.r.WithContext(ctx).Order("id DESC").Limit(cmpLimit(f.Limit))
	if f.TaskID != 0 {
		q = q.Where("task_id = ?", f.TaskID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.BeforeID != 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	var rows []taskRunRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list task runs: %w", err)
	}
	out := make([]TaskRun, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// TouchTaskRuns renews the lease of owner's running firings.
func (db *DB) TouchTaskRuns(ctx context.Context, owner string, at time.Time) error {
	err := db.w.WithContext(ctx).Model(&taskRunRow{}).Where("owner = ? AND status = ?", owner, TaskRunRunning).
		Update("heartbeat_at", ms(at)).Error
	if err != nil {
		return fmt.Errorf("storage: touch task runs: %w", err)
	}
	return nil
}
