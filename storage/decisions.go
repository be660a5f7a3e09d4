package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Decision is one interceptive hook call as an auditor reads it: who was asked (the hook), about
// what (the subject), for whom (session, principal, agent), what was enforced and why. Rows form a
// hash chain: PrevHash is the Hash of the row before, Hash covers every other field, so an edited
// or deleted row is found by VerifyDecisions.
type Decision struct {
	ID           int64  `json:"id"`
	DecisionID   string `json:"decisionId"` // shared by the hooks of one chain
	EventID      string `json:"eventId"`
	HookID       int64  `json:"hookId"`
	HookName     string `json:"hookName"`
	HookPriority int    `json:"hookPriority"`
	HookType     string `json:"hookType"`
	// RuleName is the policy rule that decided; empty for webhooks and a policy's default.
	RuleName    string  `json:"ruleName,omitempty"`
	SessionID   *int64  `json:"sessionId"`
	PrincipalID *int64  `json:"principalId"`
	AgentID     *int64  `json:"agentId"`
	TraceID     *string `json:"traceId"`
	// The subject: the tool call (name, call id, SHA-256 of the canonical arguments), or the
	// SHA-256 of the user's input, or the scheduled task. Subject holds the arguments or input
	// themselves only when decisions.recordArguments is on.
	ToolName    string  `json:"toolName,omitempty"`
	ToolCallID  string  `json:"toolCallId,omitempty"`
	TaskID      *int64  `json:"taskId,omitempty"`
	SubjectHash string  `json:"subjectHash"`
	Subject     *string `json:"subject,omitempty"`
	// Outcome is what was enforced: allow, deny, modify, or error when the chain ended in an error
	// the caller got instead of a decision (Error says which, e.g. a modifiedValue that is not
	// JSON arguments): the call did not go ahead.
	Outcome         string    `json:"outcome"`
	Reason          string    `json:"reason,omitempty"`
	ModifiedHash    string    `json:"modifiedHash,omitempty"` // SHA-256 of the modifiedValue
	FromFailureMode bool      `json:"fromFailureMode"`
	BreakerState    string    `json:"breakerState"` // of the hook URL's breaker when it was asked
	StatusCode      int       `json:"statusCode"`
	Error           string    `json:"error,omitempty"`
	LatencyMs       int64     `json:"latencyMs"`
	CreatedAt       time.Time `json:"createdAt"`
	// AgentKind is the coding agent whose own hook this decided (claude-code, codex, gemini-cli,
	// cursor: /v1/agents/{kind}/hooks); empty for hookd's own runtime and the dispatch API.
	AgentKind string `json:"agentKind,omitempty"`
	PrevHash  string `json:"prevHash"`
	Hash      string `json:"hash"`
}

// Decision outcomes that are not a receiver's answer.
const OutcomeError = "error"

type decisionRow struct {
	ID              int64 `gorm:"primaryKey"`
	DecisionID      string
	EventID         string
	HookID          int64
	HookName        string
	HookPriority    int
	HookType        string
	RuleName        string
	SessionID       *int64
	PrincipalID     *int64
	AgentID         *int64
	TraceID         *string
	ToolName        string
	ToolCallID      string
	TaskID          *int64
	SubjectHash     string
	Subject         *string
	Outcome         string
	Reason          string
	ModifiedHash    string
	FromFailureMode bool
	BreakerState    string
	StatusCode      int
	Error           string
	LatencyMs       int64
	CreatedAt       int64 `gorm:"autoCreateTime:false"`
	AgentKind       string
	PrevHash        string
	Hash            string
}

func (decisionRow) TableName() string { return "decisions" }

func (r decisionRow) plain() Decision {
	return Decision{ID: r.ID, DecisionID: r.DecisionID, EventID: r.EventID, HookID: r.HookID, HookName: r.HookName,
		HookPriority: r.HookPriority, HookType: r.HookType, RuleName: r.RuleName, SessionID: r.SessionID, PrincipalID: r.PrincipalID,
		AgentID: r.AgentID, TraceID: r.TraceID, ToolName: r.ToolName, ToolCallID: r.ToolCallID, TaskID: r.TaskID,
		SubjectHash: r.SubjectHash, Subject: r.Subject, Outcome: r.Outcome, Reason: r.Reason,
		ModifiedHash: r.ModifiedHash, FromFailureMode: r.FromFailureMode, BreakerState: r.BreakerState,
		StatusCode: r.StatusCode, Error: r.Error, LatencyMs: r.LatencyMs, CreatedAt: fromMs(r.CreatedAt),
		AgentKind: r.AgentKind, PrevHash: r.PrevHash, Hash: r.Hash}
}

// chainForm is the canonical form a row's hash covers: every field but the database id (the
// order is the chain's), in this order, as encoding/json writes it.
type chainForm struct {
	DecisionID      string  `json:"decisionId"`
	EventID         string  `json:"eventId"`
	HookID          int64   `json:"hookId"`
	HookName        string  `json:"hookName"`
	HookPriority    int     `json:"hookPriority"`
	HookType        string  `json:"hookType"`
	RuleName        string  `json:"ruleName,omitempty"` // omitted when empty: rows of webhooks hash as before
	SessionID       *int64  `json:"sessionId"`
	PrincipalID     *int64  `json:"principalId"`
	AgentID         *int64  `json:"agentId"`
	TraceID         *string `json:"traceId"`
	ToolName        string  `json:"toolName"`
	ToolCallID      string  `json:"toolCallId"`
	TaskID          *int64  `json:"taskId"`
	SubjectHash     string  `json:"subjectHash"`
	Subject         *string `json:"subject"`
	Outcome         string  `json:"outcome"`
	Reason          string  `json:"reason"`
	ModifiedHash    string  `json:"modifiedHash"`
	FromFailureMode bool    `json:"fromFailureMode"`
	BreakerState    string  `json:"breakerState"`
	StatusCode      int     `json:"statusCode"`
	Error           string  `json:"error"`
	LatencyMs       int64   `json:"latencyMs"`
	CreatedAt       int64   `json:"createdAt"` // epoch ms, as stored
	// AgentKind is left out when empty, so the rows from before it existed keep their hashes.
	AgentKind string `json:"agentKind,omitempty"`
	PrevHash  string `json:"prevHash"`
}

// chainHash is the SHA-256 (hex) of d's canonical form.
func chainHash(d *Decision) string {
	b, _ := json.Marshal(chainForm{DecisionID: d.DecisionID, EventID: d.EventID, HookID: d.HookID,
		HookName: d.HookName, HookPriority: d.HookPriority, HookType: d.HookType, RuleName: d.RuleName, SessionID: d.SessionID,
		PrincipalID: d.PrincipalID, AgentID: d.AgentID, TraceID: d.TraceID, ToolName: d.ToolName,
		ToolCallID: d.ToolCallID, TaskID: d.TaskID, SubjectHash: d.SubjectHash, Subject: d.Subject,
		Outcome: d.Outcome, Reason: d.Reason, ModifiedHash: d.ModifiedHash, FromFailureMode: d.FromFailureMode,
		BreakerState: d.BreakerState, StatusCode: d.StatusCode, Error: d.Error, LatencyMs: d.LatencyMs,
		CreatedAt: ms(d.CreatedAt), AgentKind: d.AgentKind, PrevHash: d.PrevHash}) // a struct of plain fields: Marshal cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// chainLock serialises the chain's writers across PostgreSQL replicas: each append reads the last
// hash and must not be interleaved with another's. (SQLite has one writer connection.) The lock is
// taken per schema: databases that hold several hookd schemas do not wait for each other.
const chainLock = `SELECT pg_advisory_xact_lock(hashtext(current_schema()), 4867002)`

// chainTail is the hash the next appended row links to: the last row's, or where pruning cut the
// chain when every row is gone; "" for a new log.
func (db *DB) chainTail(ctx context.Context, tx *sql.Tx) (string, error) {
	if db.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, chainLock); err != nil {
			return "", err
		}
	}
	var h string
	err := tx.QueryRowContext(ctx, `SELECT hash FROM decisions ORDER BY id DESC LIMIT 1`).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, `SELECT pruned_hash FROM decision_chain WHERE id = 1`).Scan(&h)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
	}
	return h, err
}

// InsertDecisions appends to the decision log in one transaction, linking each row to the one
// before. Every interceptive call adds a row, so this goes to database/sql without gorm's
// reflection and without reading ids back: on a busy daemon its CPU is taken from the calls
// waiting for a decision. ds get their PrevHash and Hash.
func (db *DB) InsertDecisions(ctx context.Context, ds []Decision) error {
	return db.Commit(ctx, &WriteBatch{Decisions: ds})
}

const decisionInsert = `INSERT INTO decisions (decision_id, event_id, hook_id, hook_name, hook_priority, hook_type,
	session_id, principal_id, agent_id, trace_id, tool_name, tool_call_id, task_id, subject_hash, subject, outcome, reason,
	modified_hash, from_failure_mode, breaker_state, status_code, error, latency_ms, created_at, agent_kind, prev_hash, hash,
	rule_name) VALUES `

// decisionArgs appends d's values in decisionInsert's column order.
func decisionArgs(args []any, d *Decision) []any {
	return append(args, d.DecisionID, d.EventID, d.HookID, d.HookName, d.HookPriority, d.HookType,
		d.SessionID, d.PrincipalID, d.AgentID, d.TraceID, d.ToolName, d.ToolCallID, d.TaskID, d.SubjectHash,
		d.Subject, d.Outcome, d.Reason, d.ModifiedHash, d.FromFailureMode, d.BreakerState, d.StatusCode,
		d.Error, d.LatencyMs, ms(d.CreatedAt), d.AgentKind, d.PrevHash, d.Hash, d.RuleName)
}

// insertDecisions appends ds to the chain within tx.
func (db *DB) insertDecisions(ctx context.Context, tx *sql.Tx, ds []Decision) error {
	prev, err := db.chainTail(ctx, tx)
	if err != nil {
		return err
	}
	for i := range ds {
		ds[i].PrevHash = prev
		ds[i].Hash = chainHash(&ds[i])
		prev = ds[i].Hash
	}
	const cols, chunk = 27, 200
	if db.dialect == SQLite {
		// One prepared row statement run per row: SQLite has no round trips to save, and compiling
		// a multi-row statement anew for each cycle's row count cost more than the rows' inserts.
		stmt, err := tx.PrepareContext(ctx, string(db.appendParams(append([]byte(decisionInsert), '('), 1, cols+1))+")")
		if err != nil {
			return err
		}
		defer stmt.Close()
		args := make([]any, 0, cols+1)
		for i := range ds {
			if _, err := stmt.ExecContext(ctx, decisionArgs(args[:0], &ds[i])...); err != nil {
				return err
			}
		}
		return db.countMinutes(ctx, tx, ds)
	}
	for i := 0; i < len(ds); i += chunk {
		part := ds[i:min(i+chunk, len(ds))]
		q := append(make([]byte, 0, 512+len(part)*cols*5), decisionInsert...)
		args := make([]any, 0, len(part)*(cols+1))
		for j := range part {
			if j > 0 {
				q = append(q, ',')
			}
			q = append(db.appendParams(append(q, '('), len(args)+1, cols+1), ')')
			args = decisionArgs(args, &part[j])
		}
		if _, err := tx.ExecContext(ctx, string(q), args...); err != nil {
			return err
		}
	}
	return db.countMinutes(ctx, tx, ds)
}

// DecisionFilter narrows ListDecisions; zero values do not filter.
type DecisionFilter struct {
	HookType    string
	HookID      int64
	SessionID   *int64
	PrincipalID *int64
	ToolName    string
	Outcome     string
	DecisionID  string
	Since       time.Time // created at or after
	Until       time.Time // created before
	BeforeID    int64     // pages backwards: only rows with a smaller id
	Limit       int
}

// ListDecisions returns decision log entries newest first.
func (db *DB) ListDecisions(ctx context.Context, f DecisionFilter) ([]Decision, error) {
	q := db.r.WithContext(ctx).Order("id DESC").Limit(cmpLimit(f.Limit))
	if f.HookType != "" {
		q = q.Where("hook_type = ?", f.HookType)
	}
	if f.HookID != 0 {
		q = q.Where("hook_id = ?", f.HookID)
	}
	if f.SessionID != nil {
		q = q.Where("session_id = ?", *f.SessionID)
	}
	if f.PrincipalID != nil {
		q = q.Where("principal_id = ?", *f.PrincipalID)
	}
	if f.ToolName != "" {
		q = q.Where("tool_name = ?", f.ToolName)
	}
	if f.Outcome != "" {
		q = q.Where("outcome = ?", f.Outcome)
	}
	if f.DecisionID != "" {
		q = q.Where("decision_id = ?", f.DecisionID)
	}

	if !f.Since.IsZero() {
		q = q.Where("created_at >= ?", ms(f.Since))
	}
	if !f.Until.IsZero() {
		q = q.Where("created_at < ?", ms(f.Until))
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
		out[i] = r.plain()
	}
	return out, nil
}

// ChainReport is what VerifyDecisions found.
type ChainReport struct {
	OK bool `json:"ok"`
	// Checked counts the chained rows read; Unchained the older rows written before the log was
	// chained, which prove nothing.
	Checked   int64 `json:"checked"`
	Unchained int64 `json:"unchained"`
	// PrunedThrough is the newest row retention removed (0: none); the oldest kept row links to it.
	PrunedThrough int64 `json:"prunedThrough"`
	// BrokenID is the first row where the chain breaks, and Problem says how.
	BrokenID         int64  `json:"brokenId,omitempty"`
	BrokenDecisionID string `json:"brokenDecisionId,omitempty"`
	Problem          string `json:"problem,omitempty"`
}

// VerifyDecisions walks the decision log oldest first and reports the first row whose content no
// longer matches its hash (edited) or whose predecessor is not the row before it (a row deleted
// or rewritten). The walk starts from where retention last cut the chain.
func (db *DB) VerifyDecisions(ctx context.Context) (ChainReport, error) {
	return db.VerifyDecisionsThrough(ctx, 0)
}

// VerifyDecisionsThrough is VerifyDecisions for the rows up to and including through (0: all):
// whether the record up to one row can be trusted.
func (db *DB) VerifyDecisionsThrough(ctx context.Context, through int64) (ChainReport, error) {
	var rep ChainReport
	expect := ""
	var anchor struct {
		PrunedThrough int64
		PrunedHash    string
	}
	res := db.r.WithContext(ctx).Raw(`SELECT pruned_through, pruned_hash FROM decision_chain WHERE id = 1`).Scan(&anchor)
	if res.Error != nil {
		return rep, fmt.Errorf("storage: verify decisions: %w", res.Error)
	}
	if res.RowsAffected > 0 {
		rep.PrunedThrough, expect = anchor.PrunedThrough, anchor.PrunedHash
	}
	chained := false
	for after := int64(0); ; {
		var rows []decisionRow
		q := db.r.WithContext(ctx).Where("id > ?", after).Order("id").Limit(1000)
		if through > 0 {
			q = q.Where("id <= ?", through)
		}
		if err := q.Find(&rows).Error; err != nil {
			return rep, fmt.Errorf("storage: verify decisions: %w", err)
		}
		for _, r := range rows {
			d := r.plain()
			if !chained && d.Hash == "" && expect == "" {
				rep.Unchained++ // written before the log was chained
				continue
			}
			chained = true
			broken := func(problem string) (ChainReport, error) {
				rep.BrokenID, rep.BrokenDecisionID, rep.Problem = d.ID, d.DecisionID, problem
				return rep, nil
			}
			if chainHash(&d) != d.Hash {
				return broken(fmt.Sprintf("row %d does not match its hash: it was edited", d.ID))
			}
			if d.PrevHash != expect {
				if rep.Checked == 0 && rep.PrunedThrough != 0 {
					return broken(fmt.Sprintf("row %d, the oldest kept, does not link to the last pruned row %d: rows were deleted or edited",
						d.ID, rep.PrunedThrough))
				}
				return broken(fmt.Sprintf("row %d does not link to the row before it: a row between them was deleted, or the one before rewritten", d.ID))
			}
			expect = d.Hash
			rep.Checked++
		}
		if len(rows) < 1000 {
			rep.OK = true
			return rep, nil
		}
		after = rows[len(rows)-1].ID
	}
}

// PruneDecisions removes up to batch of the oldest decisions created before cutoff, in one short
// transaction, and records the hash of the last one removed, which the oldest kept row links to.
// Only a prefix of the chain is removed, so it still verifies. It returns how many went.
func (db *DB) PruneDecisions(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
	var oldest []struct {
		ID        int64
		CreatedAt int64
		Hash      string
	}
	if err := db.r.WithContext(ctx).Raw(`SELECT id, created_at, hash FROM decisions ORDER BY id LIMIT ?`, batch).
		Scan(&oldest).Error; err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	n := 0
	for n < len(oldest) && oldest[n].CreatedAt < ms(cutoff) {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	last := oldest[n-1]
	w, _ := db.w.DB()
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	defer tx.Rollback()
	if db.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, chainLock); err != nil {
			return 0, fmt.Errorf("storage: prune decisions: %w", err)
		}
	}
	r, err := tx.ExecContext(ctx, `DELETE FROM decisions WHERE id <= `+db.param(1), last.ID)
	if err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	removed, _ := r.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM decision_minutes WHERE minute < `+db.param(1),
		last.CreatedAt/60000); err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	// The anchor only moves forward: a replica that read an older prefix must not move it back.
	if _, err := tx.ExecContext(ctx, `INSERT INTO decision_chain (id, pruned_through, pruned_hash)
		VALUES (1, `+db.param(1)+`, `+db.param(2)+`)
		ON CONFLICT (id) DO UPDATE SET pruned_through = excluded.pruned_through, pruned_hash = excluded.pruned_hash
		WHERE decision_chain.pruned_through < excluded.pruned_through`, last.ID, last.Hash); err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("storage: prune decisions: %w", err)
	}
	return removed, nil
}

// param is the i-th (from 1) placeholder of a statement built without gorm.
func (db *DB) param(i int) string { return string(db.appendParams(nil, i, 1)) }
