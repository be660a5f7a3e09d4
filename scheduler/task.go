package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Task is a scheduled agent task in the shape of the admin API. SessionID, NextRunAt, LastRunAt
// and the times are output only: a new task that sets the first three is refused (they read like
// settings: run in that session, first at that time), and a replace ignores the times but
// createdAt, so that a task read with GET goes back with PUT unchanged however far it ran
// meanwhile; createdAt never changes and sessionId only as hookd binds or lets go of the session,
// so a replace that names another createdAt, or a session other than the task's, is refused.
type Task struct {
	ID       int64  `json:"id,omitempty"`
	TaskName string `json:"taskName"`
	Cron     string `json:"cron"`
	Input    string `json:"input"`
	AgentID  *int64 `json:"agentId"`
	// PrincipalID is who the task acts for: the envelope's principalId, and (through
	// Config.UserFor) the user whose chat APIs see its runs.
	PrincipalID *int64 `json:"principalId"`
	// ReuseSession: every run goes to one session bound to the task; else each run gets a new one.
	ReuseSession bool  `json:"reuseSession"`
	Enabled      *bool `json:"enabled,omitempty" strict:"nonnull"` // default true; null is refused, not read as it
	// CatchUp: a firing missed while no scheduler ran is run once at the next start; else skipped.
	CatchUp   bool       `json:"catchUp"`
	SessionID *int64     `json:"sessionId"`
	NextRunAt *time.Time `json:"nextRunAt"`
	LastRunAt *time.Time `json:"lastRunAt"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// The cron syntax: five fields, an optional leading seconds field, an optional CRON_TZ= (or
// TZ=) prefix, and descriptors (@yearly … @hourly, @every <duration>).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule in the syntax tasks accept.
func ParseCron(spec string) (cron.Schedule, error) { return parser.Parse(spec) }

const maxTaskName = 200

func invalid(field, format string, args ...any) error {
	return &hookdtype.ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// normalize validates t, fills in defaults and returns its parsed schedule; the error names the
// first bad field.
func (t *Task) normalize(now time.Time) (cron.Schedule, error) {
	t.TaskName = strings.TrimSpace(t.TaskName)
	switch {
	case t.TaskName == "":
		return nil, invalid("taskName", "is required")
	case utf8.RuneCountInString(t.TaskName) > maxTaskName:
		return nil, invalid("taskName", "is longer than %d characters", maxTaskName)
	case strings.ContainsFunc(t.TaskName, unicode.IsControl):
		// Shown in the console and sent as the hooks' taskName, where a newline or an escape
		// sequence would pass for other text (hookName's rule).
		return nil, invalid("taskName", "must not contain control characters (a newline, a tab, an escape, …)")
	}
	t.Cron = strings.TrimSpace(t.Cron)
	if t.Cron == "" {
		return nil, invalid("cron", "is required (e.g. \"0 9 * * *\", \"*/10 * * * * *\", \"@every 1h\", \"CRON_TZ=Asia/Shanghai 0 9 * * 1-5\")")
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if zone, ok := strings.CutPrefix(t.Cron, prefix); ok && (zone == "" || zone[0] == ' ' || zone[0] == '\t') {
			// The parser reads an empty zone as UTC: a CRON_TZ=$ZONE with ZONE unset would fire
			// at UTC times, not the daemon's.
			return nil, invalid("cron", "%s names no time zone; give one (%sAsia/Shanghai) or leave the prefix out for the daemon's", prefix, prefix)
		}
	}
	sched, err := parser.Parse(t.Cron)
	if err != nil {
		return nil, invalid("cron", "%v", err)
	}
	if err := stepsWithin(t.Cron); err != nil {
		return nil, err
	}
	if _, every, ok := strings.Cut(t.Cron, "@every "); ok {
		// The parser turns any interval under 1 s into 1 s: -5s, a typo, would fire every second.
		d, err := time.ParseDuration(strings.TrimSpace(every))
		switch {
		case err == nil && d <= 0:
			return nil, invalid("cron", "@every needs a positive interval, not %s", strings.TrimSpace(every))
		case err == nil && d > time.Second && d%time.Second != 0:
			// The parser drops the fraction: @every 1500ms would fire every second.
			return nil, invalid("cron", "@every %s: intervals are whole seconds (the fraction would be dropped); write %s or %s",
				strings.TrimSpace(every), d.Truncate(time.Second), d.Truncate(time.Second)+time.Second)
		}
	}
	if sched.Next(now).IsZero() {
		return nil, invalid("cron", "%q never fires", t.Cron)
	}
	switch {
	case strings.TrimSpace(t.Input) == "":
		return nil, invalid("input", "is required: it is the user message each run starts with")
	case strings.IndexByte(t.Input, 0) >= 0:
		// PostgreSQL's text cannot hold it: the task would be stored on SQLite and not there.
		return nil, invalid("input", "must not contain a NUL character")
	}
	if t.AgentID != nil && *t.AgentID <= 0 {
		return nil, invalid("agentId", "must be a positive integer")
	}
	if t.PrincipalID != nil && *t.PrincipalID <= 0 {
		return nil, invalid("principalId", "must be a positive integer")
	}
	if t.Enabled == nil {
		on := true
		t.Enabled = &on
	}
	return sched, nil
}

// normalize is t.normalize with the task's agent made the one its principal runs as.
func (s *Scheduler) normalize(t *Task, now time.Time) (cron.Schedule, error) {
	sched, err := t.normalize(now)
	if err != nil {
		return nil, err
	}
	if t.AgentID, err = s.cfg.AgentFor(t.PrincipalID, t.AgentID); err != nil {
		return nil, invalid("agentId", "%v", err)
	}
	return sched, nil
}

func (t *Task) row(now time.Time, sched cron.Schedule) storage.Task {
	row := storage.Task{ID: t.ID, Name: t.TaskName, Cron: t.Cron, Input: t.Input, AgentID: t.AgentID,
		PrincipalID: t.PrincipalID, ReuseSession: t.ReuseSession, Enabled: *t.Enabled, CatchUp: t.CatchUp}
	if row.Enabled {
		row.NextRunAt = sched.Next(now)
	}
	return row
}

func fromRow(r storage.Task) Task {
	enabled := r.Enabled
	t := Task{ID: r.ID, TaskName: r.Name, Cron: r.Cron, Input: r.Input, AgentID: r.AgentID, PrincipalID: r.PrincipalID,
		ReuseSession: r.ReuseSession, Enabled: &enabled, CatchUp: r.CatchUp, NextRunAt: timePtr(r.NextRunAt),
		LastRunAt: timePtr(r.LastRunAt), CreatedAt: timePtr(r.CreatedAt), UpdatedAt: timePtr(r.UpdatedAt)}
	if r.ReuseSession {
		t.SessionID = r.SessionID
	}
	if !r.Enabled {
		t.NextRunAt = nil
	}
	return t
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// cronFields are the fields of a schedule with seconds, as the parser bounds them.
var cronFields = []struct {
	name, unit, cycle string
	size              int
}{
	{"second", "seconds", "minute", 60}, {"minute", "minutes", "hour", 60}, {"hour", "hours", "day", 24},
	{"day-of-month", "days", "month", 31}, {"month", "months", "year", 12}, {"day-of-week", "days", "week", 7},
}

// stepsWithin refuses a step larger than its field's range (*/90 in the minute field): the
// parser takes it, but only the first value of each cycle fires, so it reads as an interval the
// field cannot hold (every 90 minutes) and runs hourly instead.
func stepsWithin(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "CRON_TZ=") || strings.HasPrefix(fields[0], "TZ=")) {
		fields = fields[1:]
	}
	if len(fields) == 0 || len(fields) > len(cronFields) || strings.HasPrefix(fields[0], "@") {
		return nil // a descriptor, or what the parser has refused already
	}
	kinds := cronFields[len(cronFields)-len(fields):] // five fields have no seconds
	for i, field := range fields {
		k := kinds[i]
		for part := range strings.SplitSeq(field, ",") {
			_, step, ok := strings.Cut(part, "/")
			if n, err := strconv.Atoi(step); ok && err == nil && n > k.size {
				return invalid("cron", "%s in the %s field: a step over %d fires only at the first %s of each %s, not every %d %s (@every gives any interval)",
					part, k.name, k.size, strings.TrimSuffix(k.unit, "s"), k.cycle, n, k.unit)
			}
		}
	}
	return nil
}

// Create validates and stores a new task; its schedule takes effect at once.
func (s *Scheduler) Create(ctx context.Context, t Task) (Task, error) {
	switch {
	case t.SessionID != nil:
		return Task{}, invalid("sessionId", "is set by hookd: the session a task with reuseSession made at its first run; leave it out")
	case t.NextRunAt != nil:
		return Task{}, invalid("nextRunAt", "is set by hookd from cron; leave it out (a task runs at once with POST /api/tasks/{id}/run)")
	case t.LastRunAt != nil:
		return Task{}, invalid("lastRunAt", "is set by hookd when the task runs; leave it out")
	}
	now := s.now()
	sched, err := s.normalize(&t, now)
	if err != nil {
		return Task{}, err
	}
	row := t.row(now, sched)
	if err := s.db.CreateTask(ctx, &row); err != nil {
		return Task{}, err
	}
	s.reloadAfterWrite(ctx)
	return fromRow(row), nil
}

// Replace validates t and stores it as task id; the next firing is computed anew from the
// (possibly new) schedule, and it takes effect at once.
func (s *Scheduler) Replace(ctx context.Context, id int64, t Task) (Task, error) {
	stored, err := s.Get(ctx, id)
	if err != nil {
		return Task{}, err
	}
	if err := hookdtype.SameCreatedAt(t.CreatedAt, stored.CreatedAt); err != nil {
		return Task{}, err
	}
	if err := sameSession(t.SessionID, stored.SessionID); err != nil {
		return Task{}, err
	}
	now := s.now()
	sched, err := s.normalize(&t, now)
	if err != nil {
		return Task{}, err
	}
	t.ID = id
	row := t.row(now, sched)
	if err := s.db.UpdateTask(ctx, &row); err != nil {
		return Task{}, err
	}
	s.reloadAfterWrite(ctx)
	return s.Get(ctx, id)
}

// sameSession refuses a replace that names a session (sent) other than the task's (stored): it
// reads like "run in that session", which hookd does not do, and the bound session changes only
// when a first run binds one (null before: null is always accepted) or the task goes to another
// principal, so an honest GET then PUT names the task's own.
func sameSession(sent, stored *int64) error {
	switch {
	case sent == nil, stored != nil && *sent == *stored:
		return nil
	case stored == nil:
		return invalid("sessionId", "%d, but the task has no bound session; sessionId is set by hookd (leave it out or send it as GET shows it)", *sent)
	}
	return invalid("sessionId", "%d, but the task's session is %d; sessionId is set by hookd (leave it out or send it as GET shows it)", *sent, *stored)
}

// Delete removes a task; its history stays.
func (s *Scheduler) Delete(ctx context.Context, id int64) error {
	if err := s.db.DeleteTask(ctx, id); err != nil {
		return err
	}
	s.reloadAfterWrite(ctx)
	return nil
}

// Get reads one task; storage.ErrNotFound if there is none.
func (s *Scheduler) Get(ctx context.Context, id int64) (Task, error) {
	row, err := s.db.GetTask(ctx, id)
	if err != nil {
		return Task{}, err
	}
	return fromRow(row), nil
}

// List returns the tasks of f, by id.
func (s *Scheduler) List(ctx context.Context, f storage.TaskFilter) ([]Task, error) {
	rows, err := s.db.ListTasks(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Task, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Runs returns the firings of task f.TaskID, newest first, also after the task was deleted;
// storage.ErrNotFound when there is no such task and it never fired.
func (s *Scheduler) Runs(ctx context.Context, f storage.TaskRunFilter) ([]storage.TaskRun, error) {
	_, gone := s.db.GetTask(ctx, f.TaskID)
	if gone != nil && !errors.Is(gone, storage.ErrNotFound) {
		return nil, gone
	}
	runs, err := s.db.ListTaskRuns(ctx, f)
	if err != nil || gone == nil || len(runs) > 0 {
		return runs, err
	}
	// A deleted task's history stays readable, for the record; ErrNotFound only for an id that
	// never fired (or never was).
	fired, err := s.db.ListTaskRuns(ctx, storage.TaskRunFilter{TaskID: f.TaskID, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(fired) == 0 {
		return nil, gone
	}
	return runs, nil
}

func (s *Scheduler) reloadAfterWrite(ctx context.Context) {
	if err := s.Reload(ctx); err != nil {
		s.log.Warn("task schedules reload failed; the next poll retries", "err", err)
	}
}
