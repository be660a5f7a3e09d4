package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Session is a conversation of one user, known to clients by its key.
type Session struct {
	ID          int64
	UserID      string
	Key         string
	PrincipalID *int64
	AgentID     *int64
	ParentID    *int64 // the session a subagent was spawned from
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

type sessionRow struct {
	ID          int64 `gorm:"primaryKey"`
	UserID      string
	SessionKey  string
	PrincipalID *int64
	AgentID     *int64
	ParentID    *int64
	CreatedAt   int64 `gorm:"autoCreateTime:false"`
	UpdatedAt   int64 `gorm:"autoUpdateTime:false"`
}

func (sessionRow) TableName() string { return "sessions" }

func (r sessionRow) plain() Session {
	return Session{ID: r.ID, UserID: r.UserID, Key: r.SessionKey, PrincipalID: r.PrincipalID, AgentID: r.AgentID,
		ParentID: r.ParentID, CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}
}

// EnsureSession returns the session (userID, key), creating it when it does not exist; created
// says which. Sessions of different users never meet: the key is scoped by the user.
func (db *DB) EnsureSession(ctx context.Context, s Session) (Session, bool, error) {
	now := time.Now().UnixMilli()
	row := sessionRow{UserID: s.UserID, SessionKey: s.Key, PrincipalID: s.PrincipalID, AgentID: s.AgentID,
		ParentID: s.ParentID, CreatedAt: now, UpdatedAt: now}
	res := db.w.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return Session{}, false, fmt.Errorf("storage: create session: %w", res.Error)
	}
	created := res.RowsAffected == 1
	var got sessionRow
	if err := db.w.WithContext(ctx).Where("user_id = ? AND session_key = ?", s.UserID, s.Key).Take(&got).Error; err != nil {
		return Session{}, false, fmt.Errorf("storage: read session: %w", err)
	}
	return got.plain(), created, nil
}

// GetSession reads a session by id; ErrNotFound if there is none.
func (db *DB) GetSession(ctx context.Context, id int64) (Session, error) {
	var r sessionRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("storage: get session %d: %w", id, err)
	}
	return r.plain(), nil
}

// FindSession reads the session (userID, key); ErrNotFound if there is none.
func (db *DB) FindSession(ctx context.Context, userID, key string) (Session, error) {
	var r sessionRow
	err := db.r.WithContext(ctx).Where("user_id = ? AND session_key = ?", userID, key).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("storage: find session: %w", err)
	}
	return r.plain(), nil
}

// Message is one stored message; Body is the agent's JSON.
type Message struct {
	ID        int64
	SessionID int64
	RunID     *int64
	Role      string
	Body      []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

type messageRow struct {
	ID        int64 `gorm:"primaryKey"`
	SessionID int64
	RunID     *int64
	Role      string
	Body      string
	CreatedAt int64 `gorm:"autoCreateTime:false"`
	UpdatedAt int64 `gorm:"autoUpdateTime:false"`
}

func (messageRow) TableName() string { return "messages" }

func (r messageRow) plain() Message {
	return Message{ID: r.ID, SessionID: r.SessionID, RunID: r.RunID, Role: r.Role, Body: []byte(r.Body),
		CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}
}

// AddMessages inserts messages in one transaction and sets their ids.
func (db *DB) AddMessages(ctx context.Context, msgs []*Message) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, m := range msgs {
			if m.CreatedAt.IsZero() {
				m.CreatedAt = now
			}
			m.UpdatedAt = m.CreatedAt
			row := messageRow{SessionID: m.SessionID, RunID: m.RunID, Role: m.Role, Body: string(m.Body),
				CreatedAt: ms(m.CreatedAt), UpdatedAt: ms(m.UpdatedAt)}
			if err := tx.Create(&row).Error; err != nil {
				return fmt.Errorf("storage: add message: %w", err)
			}
			m.ID = row.ID
		}
		return nil
	})
}

// GetMessage reads one message; ErrNotFound if there is none.
func (db *DB) GetMessage(ctx context.Context, id int64) (Message, error) {
	var r messageRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Message{}, ErrNotFound
	}
	if err != nil {
		return Message{}, fmt.Errorf("storage: get message %d: %w", id, err)
	}
	return r.plain(), nil
}

// UpdateMessage replaces a message's body.
func (db *DB) UpdateMessage(ctx context.Context, id int64, body []byte) error {
	// One statement outside a transaction, like updateRun.
	res := db.w.WithContext(ctx).Exec(`UPDATE messages SET body = ?, updated_at = ? WHERE id = ?`,
		string(body), time.Now().UnixMilli(), id)
	return oneRow(res, "update message %d", id)
}

// Messages returns a session's messages in order; since, when not zero, keeps those created or
// updated at or after it.
func (db *DB) Messages(ctx context.Context, sessionID int64, since time.Time) ([]Message, error) {
	q := db.r.WithContext(ctx).Where("session_id = ?", sessionID).Order("id")
	if !since.IsZero() {
		q = q.Where("updated_at >= ?", since.UnixMilli())
	}
	var rows []messageRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: messages of session %d: %w", sessionID, err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// Run states. running and suspended are live (one per session); the others are final.
const (
	RunRunning     = "running"
	RunSuspended   = "suspended"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	RunInterrupted = "interrupted"
)

// ErrSessionBusy is returned when a session already has a live run.
var ErrSessionBusy = errors.New("session has a run in progress")

// Run is one agent run (a turn and whatever it takes to finish it, pauses included). Spec is what
// was asked; State is the runtime's resume point. Both are the agent's JSON.
type Run struct {
	ID           int64
	RequestID    string
	ReplyID      string // the turn id clients of some dialects know the run by
	SessionID    int64
	UserID       string
	Status       string
	Spec         []byte
	State        []byte
	ErrorCode    string
	ErrorMessage string
	Owner        string // the replica executing it
	// Control is a request for the owner from another replica: "stop" or "suspend" (RunControl*).
	Control string
	// LeaseUntil is how long the owner vouches for a running run (renewed every few seconds).
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

type runRow struct {
	ID           int64 `gorm:"primaryKey"`
	RequestID    string
	ReplyID      string
	SessionID    int64
	UserID       string
	Status       string
	Spec         string
	State        string
	ErrorCode    string
	ErrorMessage string
	Owner        string
	Control      string
	LeaseUntil   int64
	CreatedAt    int64 `gorm:"autoCreateTime:false"`
	UpdatedAt    int64 `gorm:"autoUpdateTime:false"`
}

func (runRow) TableName() string { return "runs" }

func (r runRow) plain() Run {
	return Run{ID: r.ID, RequestID: r.RequestID, ReplyID: r.ReplyID, SessionID: r.SessionID, UserID: r.UserID, Status: r.Status,
		Spec: []byte(r.Spec), State: []byte(r.State), ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage,
		Owner: r.Owner, Control: r.Control, LeaseUntil: fromMs(r.LeaseUntil), CreatedAt: fromMs(r.CreatedAt),
		UpdatedAt: fromMs(r.UpdatedAt)}
}

// CreateRun inserts a running run; ErrSessionBusy when the session already has a live one.
func (db *DB) CreateRun(ctx context.Context, r *Run) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	r.CreatedAt, r.UpdatedAt = now, now
	row := runRow{RequestID: r.RequestID, ReplyID: r.ReplyID, SessionID: r.SessionID, UserID: r.UserID, Status: r.Status, Spec: string(r.Spec),
		State: string(r.State), Owner: r.Owner, LeaseUntil: ms(r.LeaseUntil), CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	if err := db.w.WithContext(ctx).Create(&row).Error; err != nil {
		if isUniqueViolation(err) {
			return ErrSessionBusy
		}
		return fmt.Errorf("storage: create run: %w", err)
	}
	r.ID = row.ID
	return nil
}

func isUniqueViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505") ||
		strings.Contains(msg, "duplicate key")
}

// GetRun reads a run by request id; ErrNotFound if there is none.
func (db *DB) GetRun(ctx context.Context, requestID string) (Run, error) {
	var r runRow
	err := db.r.WithContext(ctx).Where("request_id = ?", requestID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("storage: get run %s: %w", requestID, err)
	}
	return r.plain(), nil
}

// RunByReply reads a run by its reply (turn) id; ErrNotFound if there is none.
func (db *DB) RunByReply(ctx context.Context, replyID string) (Run, error) {
	var r runRow
	err := db.r.WithContext(ctx).Where("reply_id = ?", replyID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || replyID == "" {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("storage: run of reply %s: %w", replyID, err)
	}
	return r.plain(), nil
}

// SessionRuns lists a session's runs, newest first.
func (db *DB) SessionRuns(ctx context.Context, sessionID int64, limit int) ([]Run, error) {
	var rows []runRow
	if err := db.r.WithContext(ctx).Where("session_id = ?", sessionID).Order("id DESC").Limit(cmpLimit(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: runs of session %d: %w", sessionID, err)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// RunsByID reads a run by its numeric id; ErrNotFound if there is none.
func (db *DB) RunsByID(ctx context.Context, id int64) (Run, error) {
	var r runRow
	err := db.w.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("storage: get run %d: %w", id, err)
	}
	return r.plain(), nil
}

// LiveRun returns the session's running or suspended run; ErrNotFound if there is none.
func (db *DB) LiveRun(ctx context.Context, sessionID int64) (Run, error) {
	var r runRow
	err := db.r.WithContext(ctx).Where("session_id = ? AND status IN ?", sessionID, []string{RunRunning, RunSuspended}).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("storage: live run of session %d: %w", sessionID, err)
	}
	return r.plain(), nil
}

// RunsByStatus lists runs in a state (e.g. those left running by a crash).
func (db *DB) RunsByStatus(ctx context.Context, status string) ([]Run, error) {
	var rows []runRow
	if err := db.r.WithContext(ctx).Where("status = ?", status).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: runs %s: %w", status, err)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// UpdateRun writes a run's status, spec, state and error, only if its status is still one of from
// (nil: any); ErrNotFound when it was not. This is how two writers racing on one run agree.
func (db *DB) UpdateRun(ctx context.Context, r *Run, from ...string) error {
	if len(from) > 0 {
		return db.updateRun(ctx, r, "id = ? AND status IN ?", r.ID, from)
	}
	return db.updateRun(ctx, r, "id = ?", r.ID)
}

// UpdateOwnedRun is UpdateRun for the replica executing r: it applies only while r is running
// and r.Owner still owns it; ErrNotFound when another replica took the run over (its owner's
// lease ran out) or it is no longer running.
func (db *DB) UpdateOwnedRun(ctx context.Context, r *Run) error {
	return db.updateRun(ctx, r, "id = ? AND status = ? AND owner = ?", r.ID, RunRunning, r.Owner)
}

// updateRun is one statement, outside any transaction: a replica frozen between two statements
// of a transaction would hold the row's lock and stall the replica taking its runs over.
func (db *DB) updateRun(ctx context.Context, r *Run, where string, args ...any) error {
	r.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	res := db.w.WithContext(ctx).Exec(`UPDATE runs SET status = ?, spec = ?, state = ?, error_code = ?, error_message = ?,
		owner = ?, updated_at = ? WHERE `+where, append([]any{r.Status, string(r.Spec), string(r.State), r.ErrorCode,
		r.ErrorMessage, r.Owner, r.UpdatedAt.UnixMilli()}, args...)...)
	return oneRow(res, "update run %d", r.ID)
}

// Transition says which run rows a TransitionRun may change: those whose status is From and,
// when Owner is set, whose owner is Owner (the replica executing a running run).
type Transition struct {
	From  string
	Owner string
}

// TransitionRun changes a run's status: it writes r (status, spec, state, error, owner) and
// appends the events that announce the change, both or neither, if the run still matches t;
// ErrNotFound when it does not (another writer changed it first, or another replica took it
// over). A reader that sees the events therefore always finds the status they announce.
//
// On PostgreSQL it is one statement (see updateRun), which also NOTIFYs the run's followers
// (ChannelRunEvents) when it commits; on SQLite one transaction.
func (db *DB) TransitionRun(ctx context.Context, r *Run, t Transition, evs []RunEvent) error {
	r.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	where, wargs := "id = ? AND status = ?", []any{r.ID, t.From}
	if t.Owner != "" {
		where, wargs = where+" AND owner = ?", append(wargs, t.Owner)
	}
	set := []any{r.Status, string(r.Spec), string(r.State), r.ErrorCode, r.ErrorMessage, r.Owner, r.UpdatedAt.UnixMilli()}
	const update = `UPDATE runs SET status = ?, spec = ?, state = ?, error_code = ?, error_message = ?, owner = ?, updated_at = ? WHERE `
	if db.dialect != Postgres {
		return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := oneRow(tx.Exec(update+where, append(set, wargs...)...), "transition run %d", r.ID); err != nil {
				return err
			}
			if len(evs) == 0 {
				return nil
			}
			rows := make([]runEventRow, len(evs))
			for i, e := range evs {
				rows[i] = runEventRow{RunID: r.ID, Seq: e.Seq, Body: string(e.Body)}
			}
			if err := tx.Create(rows).Error; err != nil {
				return fmt.Errorf("storage: transition run %d: events: %w", r.ID, err)
			}
			return nil
		})
	}
	args := append(set, wargs...)
	var values strings.Builder
	for i, e := range evs {
		if i > 0 {
			values.WriteString(", ")
		}
		values.WriteString("(CAST(? AS BIGINT), CAST(? AS TEXT))")
		args = append(args, e.Seq, string(e.Body))
	}
	ins := `SELECT 0 AS n`
	if len(evs) > 0 {
		ins = `INSERT INTO run_events (run_id, seq, body)
			SELECT u.id, v.seq, v.body FROM u, (VALUES ` + values.String() + `) AS v (seq, body)
			RETURNING 1`
	}
	args = append(args, payloadOf([]int64{r.ID}))
	var out struct{ N int64 }
	err := db.w.WithContext(ctx).Raw(`WITH u AS (`+update+where+` RETURNING id), ins AS (`+ins+`)
		SELECT n, CASE WHEN n > 0 THEN pg_notify(`+channelExpr(ChannelRunEvents)+`, ?)::text END AS notified
		FROM (SELECT COUNT(*) AS n FROM u) c, (SELECT COUNT(*) FROM ins) i`, args...).Scan(&out).Error
	if err != nil {
		return fmt.Errorf("storage: transition run %d: %w", r.ID, err)
	}
	if out.N == 0 {
		return ErrNotFound
	}
	return nil
}

// RunEvent is one persisted event of a run.
type RunEvent struct {
	RunID int64
	Seq   int64
	Body  []byte
}

type runEventRow struct {
	RunID int64 `gorm:"primaryKey;autoIncrement:false"`
	Seq   int64 `gorm:"primaryKey;autoIncrement:false"`
	Body  string
}

func (runEventRow) TableName() string { return "run_events" }

// AppendRunEvents inserts events (of any runs) and reports how many it did not write. A seq
// already stored stays as it is (a repeat must not wedge the caller's writer).
//
// On PostgreSQL only the events of runs whose owner is owner are written: a replica that was
// frozen for longer than its lease and lost a run to another one cannot interleave what it
// emitted before it noticed with the new owner's events. The insert is one statement (per 5,000
// events) that also NOTIFYs the run ids (ChannelRunEvents) to the replicas following them;
// PostgreSQL delivers it once the statement has committed. On SQLite (one process) the events
// go in one transaction and owner is not checked.
func (db *DB) AppendRunEvents(ctx context.Context, owner string, evs []RunEvent) (dropped int, err error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if db.dialect != Postgres {
		b := WriteBatch{RunEvents: []RunEventAppend{{Owner: owner, Events: evs}}}
		err := db.Commit(ctx, &b)
		return b.RunEvents[0].Dropped, err
	}
	// One statement per chunk, each its own transaction, notify included: no lock is held
	// between two round trips (see updateRun). A batch is at most a few thousand events.
	return db.appendRunEvents(db.w.WithContext(ctx), owner, evs)
}

// RunEventAppend is one AppendRunEvents call inside a WriteBatch; Commit sets Dropped.
type RunEventAppend struct {
	Owner   string
	Events  []RunEvent
	Dropped int
}

func (db *DB) appendRunEvents(g *gorm.DB, owner string, evs []RunEvent) (dropped int, err error) {
	if db.dialect != Postgres {
		rows := make([]runEventRow, len(evs))
		for i, e := range evs {
			rows[i] = runEventRow{RunID: e.RunID, Seq: e.Seq, Body: string(e.Body)}
		}
		res := g.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 300)
		if res.Error != nil {
			return 0, fmt.Errorf("storage: append %d run events: %w", len(evs), res.Error)
		}
		return len(evs) - int(res.RowsAffected), nil
	}
	const chunk = 5000 // 3 parameters a row, well below PostgreSQL's 65,535
	for i := 0; i < len(evs); i += chunk {
		part := evs[i:min(i+chunk, len(evs))]
		var values strings.Builder
		args := make([]any, 0, 3*len(part)+2)
		var ids []int64
		seen := map[int64]bool{}
		for j, e := range part {
			if j > 0 {
				values.WriteString(", ")
			}
			values.WriteString("(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT))")
			args = append(args, e.RunID, e.Seq, string(e.Body))
			if !seen[e.RunID] {
				seen[e.RunID] = true
				ids = append(ids, e.RunID)
			}
		}
		args = append(args, owner, payloadOf(ids))
		var out struct{ N int64 }
		err := g.Raw(`WITH ins AS (
				INSERT INTO run_events (run_id, seq, body)
				SELECT v.run_id, v.seq, v.body FROM (VALUES `+values.String()+`) AS v (run_id, seq, body)
				JOIN runs ON runs.id = v.run_id AND runs.owner = ?
				ON CONFLICT DO NOTHING
				RETURNING 1)
			SELECT n, CASE WHEN n > 0 THEN pg_notify(`+channelExpr(ChannelRunEvents)+`, ?)::text END AS notified
			FROM (SELECT COUNT(*) AS n FROM ins) c`, args...).Scan(&out).Error
		if err != nil {
			return dropped, fmt.Errorf("storage: append %d run events: %w", len(part), err)
		}
		dropped += len(part) - int(out.N)
	}
	return dropped, nil
}

// RunEvents returns up to limit events of a run with seq > after, in order.
func (db *DB) RunEvents(ctx context.Context, runID, after int64, limit int) ([]RunEvent, error) {
	rows, err := db.readers().QueryContext(ctx,
		`SELECT seq, body FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("storage: events of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []RunEvent
	for rows.Next() {
		e := RunEvent{RunID: runID}
		if err := rows.Scan(&e.Seq, &e.Body); err != nil {
			return nil, fmt.Errorf("storage: events of run %d: %w", runID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: events of run %d: %w", runID, err)
	}
	return out, nil
}

// LastRunSeq is the highest stored seq of a run (0 when none).
func (db *DB) LastRunSeq(ctx context.Context, runID int64) (int64, error) {
	var v *int64
	if err := db.w.WithContext(ctx).Raw(`SELECT MAX(seq) FROM run_events WHERE run_id = ?`, runID).Scan(&v).Error; err != nil {
		return 0, fmt.Errorf("storage: last seq of run %d: %w", runID, err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// RunHead is a run's identity and what tells its readers that it changed: its status and its
// last event. It is what following a run needs, without the run's state.
type RunHead struct {
	ID        int64
	RequestID string
	UserID    string
	Status    string
	LastSeq   int64 // 0 when it has no events
	UpdatedAt time.Time
}

// The reads every open stream makes (a run's head, its events) go to database/sql directly:
// gorm's allocations per query were most of what opening a stream cost (docs/benchmarks.md).
// Both drivers understand "$n" placeholders; lists of them are built by appendParams.

const runHeadSQL = `SELECT r.id, r.request_id, r.user_id, r.status, r.updated_at,
	COALESCE((SELECT MAX(e.seq) FROM run_events e WHERE e.run_id = r.id), 0)
	FROM runs r WHERE `

func scanRunHead(rows *sql.Rows) (RunHead, error) {
	var h RunHead
	var updated int64
	err := rows.Scan(&h.ID, &h.RequestID, &h.UserID, &h.Status, &updated, &h.LastSeq)
	h.UpdatedAt = fromMs(updated)
	return h, err
}

// RunHead reads the head of a run by request id; ErrNotFound if there is none.
func (db *DB) RunHead(ctx context.Context, requestID string) (RunHead, error) {
	heads, err := db.runHeads(ctx, runHeadSQL+`r.request_id = $1`, requestID)
	if err != nil {
		return RunHead{}, fmt.Errorf("storage: head of run %s: %w", requestID, err)
	}
	if len(heads) == 0 {
		return RunHead{}, ErrNotFound
	}
	return heads[0], nil
}

// RunHeads reads the heads of the runs with these ids (those that exist), in one query per
// thousand ids.
func (db *DB) RunHeads(ctx context.Context, ids []int64) ([]RunHead, error) {
	const chunk = 1000
	var out []RunHead
	for i := 0; i < len(ids); i += chunk {
		part := ids[i:min(i+chunk, len(ids))]
		q := append(make([]byte, 0, len(runHeadSQL)+16+6*len(part)), runHeadSQL+`r.id IN (`...)
		q = append(db.appendParams(q, 1, len(part)), ')')
		args := make([]any, len(part))
		for j, id := range part {
			args[j] = id
		}
		heads, err := db.runHeads(ctx, string(q), args...)
		if err != nil {
			return nil, fmt.Errorf("storage: heads of %d runs: %w", len(ids), err)
		}
		out = append(out, heads...)
	}
	return out, nil
}

func (db *DB) runHeads(ctx context.Context, q string, args ...any) ([]RunHead, error) {
	rows, err := db.readers().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunHead
	for rows.Next() {
		h, err := scanRunHead(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Control requests a replica records for the owner of a running run.
const (
	RunControlStop    = "stop"
	RunControlSuspend = "suspend"
)

// RequestRunControl asks the owner of a running run to stop or suspend it: it records the request
// on the run and, on PostgreSQL, wakes the owner with a NOTIFY once that is committed. A stop is
// never replaced by a suspend. ok is false when the run is not running.
func (db *DB) RequestRunControl(ctx context.Context, id int64, control string) (ok bool, err error) {
	const set = `UPDATE runs SET control = CASE WHEN control = ? THEN control ELSE ? END WHERE id = ? AND status = ?`
	var n int64
	if db.dialect == Postgres {
		// One statement (see updateRun); the NOTIFY goes out when it commits.
		var out struct{ N int64 }
		err = db.w.WithContext(ctx).Raw(`WITH u AS (`+set+` RETURNING id)
			SELECT n, CASE WHEN n > 0 THEN pg_notify(`+channelExpr(ChannelRunControl)+`, ?)::text END AS notified
			FROM (SELECT COUNT(*) AS n FROM u) c`, RunControlStop, control, id, RunRunning, payloadOf([]int64{id})).Scan(&out).Error
		n = out.N
	} else {
		res := db.w.WithContext(ctx).Exec(set, RunControlStop, control, id, RunRunning)
		err, n = res.Error, res.RowsAffected
	}
	if err != nil {
		return false, fmt.Errorf("storage: control run %d: %w", id, err)
	}
	return n > 0, nil
}

// RunControl reads the control request pending on a run ("" for none).
func (db *DB) RunControl(ctx context.Context, id int64) (string, error) {
	var v []string
	if err := db.r.WithContext(ctx).Raw(`SELECT control FROM runs WHERE id = ?`, id).Scan(&v).Error; err != nil {
		return "", fmt.Errorf("storage: control of run %d: %w", id, err)
	}
	if len(v) == 0 {
		return "", ErrNotFound
	}
	return v[0], nil
}

// ClearRunControl drops a run's control request if it is still control (a suspend request is
// spent once the run is suspended).
func (db *DB) ClearRunControl(ctx context.Context, id int64, control string) error {
	if err := db.w.WithContext(ctx).Exec(`UPDATE runs SET control = '' WHERE id = ? AND control = ?`, id, control).Error; err != nil {
		return fmt.Errorf("storage: clear control of run %d: %w", id, err)
	}
	return nil
}

// RunLease is a running run an owner renewed, with the control request pending on it.
type RunLease struct {
	ID      int64
	Control string
}

// RenewRunLeases extends the lease of owner's running runs until `until` and returns them.
func (db *DB) RenewRunLeases(ctx context.Context, owner string, until time.Time) ([]RunLease, error) {
	var out []RunLease
	err := db.w.WithContext(ctx).Raw(`UPDATE runs SET lease_until = ? WHERE owner = ? AND status = ? RETURNING id, control`,
		ms(until), owner, RunRunning).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("storage: renew run leases: %w", err)
	}
	return out, nil
}

// ExpiredRuns lists running runs whose owner went silent: their lease ran out before now and
// nobody wrote them for grace either (a run just claimed has no renewed lease yet).
func (db *DB) ExpiredRuns(ctx context.Context, now time.Time, grace time.Duration) ([]Run, error) {
	var rows []runRow
	err := db.w.WithContext(ctx).Where("status = ? AND lease_until < ? AND updated_at < ?", RunRunning, ms(now),
		ms(now.Add(-grace))).Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("storage: expired runs: %w", err)
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// TakeOverRun makes owner the owner of a running run that is still expired (as ExpiredRuns
// judges it) and gives it a lease until `until`; ErrNotFound when its owner renewed it or another
// replica took it first.
func (db *DB) TakeOverRun(ctx context.Context, id int64, owner string, now time.Time, grace time.Duration, until time.Time) error {
	res := db.w.WithContext(ctx).Exec(`UPDATE runs SET owner = ?, lease_until = ?, updated_at = ?
		WHERE id = ? AND status = ? AND lease_until < ? AND updated_at < ?`,
		owner, ms(until), ms(now), id, RunRunning, ms(now), ms(now.Add(-grace)))
	return oneRow(res, "take over run %d", id)
}
