package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// PermissionRule says what to do with tool calls that match it.
type PermissionRule struct {
	ID          int64      `json:"id"`
	ToolName    string     `json:"toolName"`
	RuleContent string     `json:"ruleContent"`
	Behavior    string     `json:"behavior"` // allow | deny | ask
	Source      string     `json:"source"`
	Scope       string     `json:"scope"`    // session | user | global
	ScopeKey    string     `json:"scopeKey"` // the session id or user id it is scoped to; "" for global
	ExpiresAt   *time.Time `json:"expiresAt"`
	CreatedAt   time.Time  `json:"createdAt"`
}

type ruleRow struct {
	ID          int64 `gorm:"primaryKey"`
	ToolName    string
	RuleContent string
	Behavior    string
	Source      string
	Scope       string
	ScopeKey    string
	ExpiresAt   int64
	CreatedAt   int64 `gorm:"autoCreateTime:false"`
}

func (ruleRow) TableName() string { return "permission_rules" }

func (r ruleRow) plain() PermissionRule {
	p := PermissionRule{ID: r.ID, ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior,
		Source: r.Source, Scope: r.Scope, ScopeKey: r.ScopeKey, CreatedAt: fromMs(r.CreatedAt)}
	if r.ExpiresAt != 0 {
		t := fromMs(r.ExpiresAt)
		p.ExpiresAt = &t
	}
	return p
}

// AddRules stores rules and sets their ids.
func (db *DB) AddRules(ctx context.Context, rules []*PermissionRule) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, r := range rules {
			row := ruleRow{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior, Source: r.Source,
				Scope: r.Scope, ScopeKey: r.ScopeKey, CreatedAt: now.UnixMilli()}
			if r.ExpiresAt != nil {
				row.ExpiresAt = r.ExpiresAt.UnixMilli()
			}
			if err := tx.Create(&row).Error; err != nil {
				return fmt.Errorf("storage: add rule: %w", err)
			}
			r.ID, r.CreatedAt = row.ID, now
		}
		return nil
	})
}

// RulesFor returns the unexpired rules that apply to a call in a session of a user: the
// session's, the user's and the global ones.
func (db *DB) RulesFor(ctx context.Context, sessionID int64, userID string, now time.Time) ([]PermissionRule, error) {
	var rows []ruleRow
	err := db.r.WithContext(ctx).Where(`(expires_at = 0 OR expires_at > ?) AND (
		(scope = 'session' AND scope_key = ?) OR (scope = 'user' AND scope_key = ?) OR scope = 'global')`,
		now.UnixMilli(), fmt.Sprint(sessionID), userID).Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("storage: rules: %w", err)
	}
	out := make([]PermissionRule, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// RuleFilter narrows ListRules; zero values do not filter.
type RuleFilter struct {
	Scope, ScopeKey string
	AfterID         int64 // pages forwards: only rules with a larger id
	Limit           int   // 0: all
}

// ListRules lists the rules of f, by id.
func (db *DB) ListRules(ctx context.Context, f RuleFilter) ([]PermissionRule, error) {
	q := db.r.WithContext(ctx).Order("id")
	if f.Scope != "" {
		q = q.Where("scope = ?", f.Scope)
	}
	if f.ScopeKey != "" {
		q = q.Where("scope_key = ?", f.ScopeKey)
	}
	if f.AfterID != 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	if f.Limit > 0 {
		q = q.Limit(f.Limit)
	}
	var rows []ruleRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list rules: %w", err)
	}
	out := make([]PermissionRule, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// DeleteRule revokes a rule; ErrNotFound if there is none.
func (db *DB) DeleteRule(ctx context.Context, id int64) error {
	res := db.w.WithContext(ctx).Where("id = ?", id).Delete(&ruleRow{})
	return oneRow(res, "delete rule %d", id)
}

// Ask states.
const (
	AskPending  = "pending"
	AskApproved = "approved"
	AskDenied   = "denied"
	AskExpired  = "expired"
)

// Ask kinds: a confirmation a person gives, or the result of a tool the client runs itself.
const (
	AskConfirm  = "confirm"
	AskExternal = "external"
)

// Ask is something a suspended run waits for: a person's decision on a tool call, bound to the
// exact arguments asked about (ArgsHash), or a client-side tool's result. Each is answered once.
// It keeps the call it is about (ToolName, Arguments), so nobody reads the run's events for it.
type Ask struct {
	AskID     string
	Kind      string
	RunID     int64
	UserID    string
	CallID    string
	ToolName  string
	Arguments string
	ArgsHash  string
	// Reason says who asked for a person: the permission rule, or the hook or policy that answered
	// ask (what the approvals inbox shows).
	Reason     string
	Status     string
	Answer     []byte // the answer as the agent recorded it (JSON)
	ExpiresAt  time.Time
	CreatedAt  time.Time
	AnsweredAt time.Time
}

type askRow struct {
	AskID      string `gorm:"primaryKey"`
	Kind       string
	RunID      int64
	UserID     string
	CallID     string
	ToolName   string
	Arguments  string
	ArgsHash   string
	Reason     string
	Status     string
	Answer     string
	ExpiresAt  int64
	CreatedAt  int64 `gorm:"autoCreateTime:false"`
	AnsweredAt int64
}

func (askRow) TableName() string { return "asks" }

func (r askRow) plain() Ask {
	return Ask{AskID: r.AskID, Kind: r.Kind, RunID: r.RunID, UserID: r.UserID, CallID: r.CallID, ToolName: r.ToolName,
		Arguments: r.Arguments, ArgsHash: r.ArgsHash, Reason: r.Reason, Status: r.Status, Answer: []byte(r.Answer), ExpiresAt: fromMs(r.ExpiresAt),
		CreatedAt: fromMs(r.CreatedAt), AnsweredAt: fromMs(r.AnsweredAt)}
}

// beforeAddAsks and afterAddAsks, when set, run in AddAsks before the asks are written and once
// they are. Only a test build sets them (commithold.go).
var beforeAddAsks, afterAddAsks func(n int)

// AddAsks stores pending asks.
func (db *DB) AddAsks(ctx context.Context, asks []Ask) error {
	if len(asks) == 0 {
		return nil
	}
	if beforeAddAsks != nil {
		beforeAddAsks(len(asks))
	}
	now := time.Now().UnixMilli()
	rows := make([]askRow, len(asks))
	for i, a := range asks {
		rows[i] = askRow{AskID: a.AskID, Kind: a.Kind, RunID: a.RunID, UserID: a.UserID, CallID: a.CallID, ToolName: a.ToolName,
			Arguments: a.Arguments, ArgsHash: a.ArgsHash, Reason: a.Reason, Status: AskPending, ExpiresAt: ms(a.ExpiresAt), CreatedAt: now}
	}
	if err := db.w.WithContext(ctx).Create(&rows).Error; err != nil {
		return fmt.Errorf("storage: add asks: %w", err)
	}
	if afterAddAsks != nil {
		afterAddAsks(len(asks))
	}
	db.announce(TopicAsks)
	return nil
}

// GetAsk reads an ask; ErrNotFound if there is none.
func (db *DB) GetAsk(ctx context.Context, askID string) (Ask, error) {
	var r askRow
	err := db.w.WithContext(ctx).Where("ask_id = ?", askID).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Ask{}, ErrNotFound
	}
	if err != nil {
		return Ask{}, fmt.Errorf("storage: get ask: %w", err)
	}
	return r.plain(), nil
}

// RunAsks lists a run's asks in a state ("" = all).
func (db *DB) RunAsks(ctx context.Context, runID int64, status string) ([]Ask, error) {
	q := db.w.WithContext(ctx).Where("run_id = ?", runID).Order("created_at, ask_id")
	if status != "" {
		q = q.Where("status = ?", status)
	}
	var rows []askRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: asks of run %d: %w", runID, err)
	}
	out := make([]Ask, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// ErrAlreadyAnswered is returned when an ask was answered (or expired) before.
var ErrAlreadyAnswered = errors.New("already answered")

// askOpen is the condition of a pending ask whose time has not run out at ? (ms): one without
// an expiry, or one that expires later.
const askOpen = "(expires_at = 0 OR expires_at > ?)"

// ExpiredAsks lists pending asks whose time ran out.
func (db *DB) ExpiredAsks(ctx context.Context, now time.Time) ([]Ask, error) {
	var rows []askRow
	if err := db.r.WithContext(ctx).Where("status = ? AND expires_at > 0 AND expires_at <= ?", AskPending, now.UnixMilli()).
		Order("expires_at").Limit(500).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: expired asks: %w", err)
	}
	out := make([]Ask, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// AnswerAsk moves a pending ask to status with the answer, exactly once: a second answer gets
// ErrAlreadyAnswered. An answer that comes after the ask's expiresAt is refused as expired, even
// before the sweep has marked it so: the time a person had is the time the ask gave.
func (db *DB) AnswerAsk(ctx context.Context, askID, status string, answer []byte) error {
	now := time.Now().UnixMilli()
	q := db.w.WithContext(ctx).Model(&askRow{}).Where("ask_id = ? AND status = ?", askID, AskPending)
	if status != AskExpired {
		q = q.Where(askOpen, now)
	}
	res := q.Updates(map[string]any{"status": status, "answer": string(answer), "answered_at": now})
	if res.Error != nil {
		return fmt.Errorf("storage: answer ask: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		a, err := db.GetAsk(ctx, askID)
		if err != nil {
			return err
		}
		if a.Status == AskPending { // its time ran out; the sweep will say so
			return &AskClosedError{AskID: askID, Status: AskExpired}
		}
		return &AskClosedError{AskID: askID, Status: a.Status}
	}
	db.announce(TopicAsks)
	return nil
}

// AskClosedError is an answer to an ask that is no longer pending: answered, or expired (its
// time ran out, or its run ended). It is ErrAlreadyAnswered to errors.Is.
type AskClosedError struct{ AskID, Status string }

func (e *AskClosedError) Error() string {
	if e.Status == AskExpired {
		return "expired: its time ran out, or its run ended, before an answer came"
	}
	return "already answered"
}

func (e *AskClosedError) Is(target error) bool { return target == ErrAlreadyAnswered }

// RunInput is supplementary input a user appended to a running run.
type RunInput struct {
	ID        int64
	RunID     int64
	InputID   string
	Content   string
	CreatedAt time.Time
}

type runInputRow struct {
	ID        int64 `gorm:"primaryKey"`
	RunID     int64
	InputID   string
	Content   string
	Consumed  bool
	CreatedAt int64 `gorm:"autoCreateTime:false"`
}

func (runInputRow) TableName() string { return "run_inputs" }

// AddRunInput queues supplementary input for a run.
func (db *DB) AddRunInput(ctx context.Context, in *RunInput) error {
	row := runInputRow{RunID: in.RunID, InputID: in.InputID, Content: in.Content, CreatedAt: time.Now().UnixMilli()}
	if err := db.w.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("storage: add run input: %w", err)
	}
	in.ID, in.CreatedAt = row.ID, fromMs(row.CreatedAt)
	return nil
}

// TakeRunInputs marks a run's unconsumed inputs consumed and returns them in order.
func (db *DB) TakeRunInputs(ctx context.Context, runID int64) ([]RunInput, error) {
	var out []RunInput
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []runInputRow
		if err := tx.Where("run_id = ? AND consumed = ?", runID, false).Order("id").Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			if err := tx.Model(&runInputRow{}).Where("id = ?", r.ID).Update("consumed", true).Error; err != nil {
				return err
			}
			out = append(out, RunInput{ID: r.ID, RunID: r.RunID, InputID: r.InputID, Content: r.Content, CreatedAt: fromMs(r.CreatedAt)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: take run inputs: %w", err)
	}
	return out, nil
}
