package storage

import (
	"context"
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
	res := db.w.WithContext(ctx).Model(&messageRow{}).Where("id = ?", id).
		Updates(map[string]any{"body": string(body), "updated_at": time.Now().UnixMilli()})
	if res.Error != nil {
		return fmt.Errorf("storage: update message %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
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
	CreatedAt    time.Time
	UpdatedAt    time.Time
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
	CreatedAt    int64 `gorm:"autoCreateTime:false"`
	UpdatedAt    int64 `gorm:"autoUpdateTime:false"`
}

func (runRow) TableName() string { return "runs" }

func (r runRow) plain() Run {
	return Run{ID: r.ID, RequestID: r.RequestID, ReplyID: r.ReplyID, SessionID: r.SessionID, UserID: r.UserID, Status: r.Status,
		Spec: []byte(r.Spec), State: []byte(r.State), ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage,
		Owner: r.Owner, CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}
}

// CreateRun inserts a running run; ErrSessionBusy when the session already has a live one.
func (db *DB) CreateRun(ctx context.Context, r *Run) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	r.CreatedAt, r.UpdatedAt = now, now
	row := runRow{RequestID: r.RequestID, ReplyID: r.ReplyID, SessionID: r.SessionID, UserID: r.UserID, Status: r.Status, Spec: string(r.Spec),
		State: string(r.State), Owner: r.Owner, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
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
	q := db.w.WithContext(ctx).Model(&runRow{}).Where("id = ?", r.ID)
	if len(from) > 0 {
		q = q.Where("status IN ?", from)
	}
	r.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	res := q.Updates(map[string]any{"status": r.Status, "spec": string(r.Spec), "state": string(r.State), "error_code": r.ErrorCode,
		"error_message": r.ErrorMessage, "owner": r.Owner, "updated_at": r.UpdatedAt.UnixMilli()})
	if res.Error != nil {
		return fmt.Errorf("storage: update run %d: %w", r.ID, res.Error)
	}
	if res.RowsAffected == 0 {
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

// AppendRunEvents inserts events (of any runs) in one transaction.
func (db *DB) AppendRunEvents(ctx context.Context, evs []RunEvent) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([]runEventRow, len(evs))
	for i, e := range evs {
		rows[i] = runEventRow{RunID: e.RunID, Seq: e.Seq, Body: string(e.Body)}
	}
	if err := db.w.WithContext(ctx).CreateInBatches(rows, 300).Error; err != nil {
		return fmt.Errorf("storage: append %d run events: %w", len(rows), err)
	}
	return nil
}

// RunEvents returns up to limit events of a run with seq > after, in order.
func (db *DB) RunEvents(ctx context.Context, runID, after int64, limit int) ([]RunEvent, error) {
	var rows []runEventRow
	err := db.r.WithContext(ctx).Where("run_id = ? AND seq > ?", runID, after).Order("seq").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("storage: events of run %d: %w", runID, err)
	}
	out := make([]RunEvent, len(rows))
	for i, r := range rows {
		out[i] = RunEvent{RunID: r.RunID, Seq: r.Seq, Body: []byte(r.Body)}
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
