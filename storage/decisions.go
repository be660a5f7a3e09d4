package storage

import (
	"context"
	"fmt"
	"time"
)

// Decision is one interceptive hook call: who was asked, what it answered, and whether the answer
// came from the hook's failureMode instead of the receiver.
type Decision struct {
	ID         int64  `json:"id"`
	DecisionID string `json:"decisionId"` // shared by the hooks of one chain
	EventID    string `json:"eventId"`
	HookID     int64  `json:"hookId"`
	HookName   string `json:"hookName"`
	HookType   string `json:"hookType"`
	// RuleName is the policy rule that decided; empty for webhooks and a policy's default.
	RuleName        string    `json:"ruleName,omitempty"`
	SessionID       *int64    `json:"sessionId"`
	TraceID         *string   `json:"traceId"`
	Outcome         string    `json:"outcome"`
	Reason          string    `json:"reason,omitempty"`
	FromFailureMode bool      `json:"fromFailureMode"`
	StatusCode      int       `json:"statusCode"`
	Error           string    `json:"error,omitempty"`
	LatencyMs       int64     `json:"latencyMs"`
	CreatedAt       time.Time `json:"createdAt"`
}

type decisionRow struct {
	ID              int64 `gorm:"primaryKey"`
	DecisionID      string
	EventID         string
	HookID          int64
	HookName        string
	HookType        string
	RuleName        string
	SessionID       *int64
	TraceID         *string
	Outcome         string
	Reason          string
	FromFailureMode bool
	StatusCode      int
	Error           string
	LatencyMs       int64
	CreatedAt       int64 `gorm:"autoCreateTime:false"`
}

func (decisionRow) TableName() string { return "decisions" }

// InsertDecisions appends to the decision log in one transaction. Every interceptive call adds a
// row, so this goes to database/sql without gorm's reflection and without reading ids back: on a
// busy daemon its CPU is taken from the calls waiting for a decision.
func (db *DB) InsertDecisions(ctx context.Context, ds []Decision) error {
	if len(ds) == 0 {
		return nil
	}
	w, _ := db.w.DB() // always a *sql.DB here: Open made it
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: insert %d decisions: %w", len(ds), err)
	}
	defer tx.Rollback() // a no-op after Commit
	const cols, chunk = 15, 200
	for i := 0; i < len(ds); i += chunk {
		part := ds[i:min(i+chunk, len(ds))]
		q := append(make([]byte, 0, 256+len(part)*cols*5), `INSERT INTO decisions (decision_id, event_id, hook_id, hook_name,
			hook_type, session_id, trace_id, outcome, reason, from_failure_mode, status_code, error, latency_ms,
			created_at, rule_name) VALUES `...)
		args := make([]any, 0, len(part)*cols)
		for j, d := range part {
			if j > 0 {
				q = append(q, ',')
			}
			q = append(db.appendParams(append(q, '('), len(args)+1, cols), ')')
			args = append(args, d.DecisionID, d.EventID, d.HookID, d.HookName, d.HookType, d.SessionID, d.TraceID,
				d.Outcome, d.Reason, d.FromFailureMode, d.StatusCode, d.Error, d.LatencyMs, ms(d.CreatedAt), d.RuleName)
		}
		if _, err := tx.ExecContext(ctx, string(q), args...); err != nil {
			return fmt.Errorf("storage: insert %d decisions: %w", len(ds), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storage: insert %d decisions: %w", len(ds), err)
	}
	return nil
}

// DecisionFilter narrows ListDecisions; zero values do not filter.
type DecisionFilter struct {
	HookType   string
	SessionID  *int64
	DecisionID string
	BeforeID   int64
	Limit      int
}

// ListDecisions returns decision log entries newest first.
func (db *DB) ListDecisions(ctx context.Context, f DecisionFilter) ([]Decision, error) {
	q := db.r.WithContext(ctx).Order("id DESC").Limit(cmpLimit(f.Limit))
	if f.HookType != "" {
		q = q.Where("hook_type = ?", f.HookType)
	}
	if f.SessionID != nil {
		q = q.Where("session_id = ?", *f.SessionID)
	}
	if f.DecisionID != "" {
		q = q.Where("decision_id = ?", f.DecisionID)
	}
	if f.BeforeID != 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	var rows []decisionRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list decisions: %w", err)
	}
	out := make([]Decision, len(rows))
	for i, r := range rows {
		out[i] = Decision{ID: r.ID, DecisionID: r.DecisionID, EventID: r.EventID, HookID: r.HookID, HookName: r.HookName,
			HookType: r.HookType, RuleName: r.RuleName, SessionID: r.SessionID, TraceID: r.TraceID, Outcome: r.Outcome, Reason: r.Reason,
			FromFailureMode: r.FromFailureMode, StatusCode: r.StatusCode, Error: r.Error, LatencyMs: r.LatencyMs,
			CreatedAt: fromMs(r.CreatedAt)}
	}
	return out, nil
}
