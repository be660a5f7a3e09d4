package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
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

// InsertDecisions appends to the decision log in one transaction, linking each row to the one
// before. Every interceptive call adds a row, so this goes to database/sql without gorm's
// reflection and without reading ids back: on a busy daemon its CPU is taken from the calls
// waiting for a decision. ds get their PrevHash and Hash.
func (db *DB) InsertDecisions(ctx context.Context, ds []Decision) error {
	return db.Commit(ctx, &WriteBatch{Decisions: ds})
}

// link chains ds on from prev, in order, and returns the new tail: the last one's hash.
func link(ds []Decision, prev string) string {
	for i := range ds {
		ds[i].PrevHash = prev
		ds[i].Hash = chainHash(&ds[i])
		prev = ds[i].Hash
	}
	return prev
}

// insertDecisions appends ds to the chain within tx, from the tail it reads there. On PostgreSQL
// FOR UPDATE takes the tail row's lock, which orders the replicas' appends: a READ COMMITTED read
// that had to wait for it returns the version the previous holder committed. (SQLite's writer
// holds the database's write lock from BEGIN: decisionStmts.append.)
func (db *DB) insertDecisions(ctx context.Context, tx *sql.Tx, ds []Decision) error {
	if db.dialect == SQLite {
		return db.decisionStmts.append(ctx, tx, ds)
	}
	var prev string
	if err := tx.QueryRowContext(ctx, `SELECT hash FROM decision_tail WHERE id = 1 FOR UPDATE`).Scan(&prev); err != nil {
		return fmt.Errorf("read the chain's tail: %w", err)
	}
	appended, err := appendChained(ctx, tx, ds, prev)
	if err == nil && !appended {
		err = errors.New("the chain's tail moved while its row was locked")
	}
	return err
}

// decisionCols are the columns an append writes, in the order of decisionArgs.
const decisionCols = `decision_id, event_id, hook_id, hook_name, hook_priority, hook_type, session_id,
	principal_id, agent_id, trace_id, tool_name, tool_call_id, task_id, subject_hash, subject, outcome, reason,
	modified_hash, from_failure_mode, breaker_state, status_code, error, latency_ms, created_at, agent_kind,
	prev_hash, hash, rule_name`

const numDecisionCols = 28

// decisionArgs appends d's values in decisionCols' order.
func decisionArgs(args []any, d *Decision) []any {
	return append(args, d.DecisionID, d.EventID, d.HookID, d.HookName, d.HookPriority, d.HookType,
		d.SessionID, d.PrincipalID, d.AgentID, d.TraceID, d.ToolName, d.ToolCallID, d.TaskID, d.SubjectHash,
		d.Subject, d.Outcome, d.Reason, d.ModifiedHash, d.FromFailureMode, d.BreakerState, d.StatusCode,
		d.Error, d.LatencyMs, ms(d.CreatedAt), d.AgentKind, d.PrevHash, d.Hash, d.RuleName)
}

// appendStmt appends a batch on PostgreSQL in one statement: it moves the tail from $2 to $1 (the
// last row's hash) and inserts the rows, one array per column in decisionCols' order, with their
// per-minute counts, only if the tail was $2: on the version the statement's snapshot sees, and,
// when another append has moved the row since, again on the newest version once its lock is free
// (READ COMMITTED re-checks an UPDATE's WHERE there). So an append linked to a tail another
// replica has moved writes nothing, and takes no ids: the rows are numbered after the check, in
// the chain's order. It returns a row when it appended. The text does not change with the batch's size, so each connection
// prepares it once. Sent alone it is its own transaction: one round trip.
const appendStmt = `WITH tail AS (
		UPDATE decision_tail SET hash = $1 WHERE id = 1 AND hash = $2 RETURNING id
	), added AS (
		INSERT INTO decisions (` + decisionCols + `)
		SELECT ` + decisionCols + ` FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::int[],
			$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[],
			$15::bigint[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::boolean[],
			$22::text[], $23::int[], $24::text[], $25::bigint[], $26::bigint[], $27::text[], $28::text[],
			$29::text[], $30::text[]) WITH ORDINALITY AS r(` + decisionCols + `, ord)
		WHERE EXISTS (SELECT FROM tail) ORDER BY ord
		RETURNING created_at, outcome, from_failure_mode
	), counted AS (
		INSERT INTO decision_minutes (minute, outcome, from_failure_mode, n)
		SELECT created_at / 60000, outcome, from_failure_mode, COUNT(*) FROM added
		GROUP BY created_at / 60000, outcome, from_failure_mode
		ON CONFLICT (minute, outcome, from_failure_mode) DO UPDATE SET n = decision_minutes.n + excluded.n
	)
	SELECT id FROM tail`

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// appendChained links ds on from prev and appends them with appendStmt on PostgreSQL; false when
// the tail was no longer prev, and nothing was written.
func appendChained(ctx context.Context, ex execer, ds []Decision, prev string) (bool, error) {
	res, err := ex.ExecContext(ctx, appendStmt, appendArgs(ds, prev)...)
	if err != nil {
		return false, err
	}
	appended, err := res.RowsAffected()
	return appended == 1, err
}

// appendArgs links ds on from prev and returns appendStmt's arguments for them.
func appendArgs(ds []Decision, prev string) []any {
	tail := link(ds, prev)
	var cols [numDecisionCols][]any
	for c := range cols {
		cols[c] = make([]any, len(ds))
	}
	row := make([]any, 0, numDecisionCols)
	for i := range ds {
		for c, v := range decisionArgs(row[:0], &ds[i]) {
			cols[c][i] = v
		}
	}
	args := append(make([]any, 0, 2+numDecisionCols), tail, prev)
	for _, col := range cols {
		args = append(args, col)
	}
	return args
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
// or rewritten), and a log that stops short of the chain's tail (its newest rows deleted). The
// walk starts from where retention last cut the chain.
func (db *DB) VerifyDecisions(ctx context.Context) (ChainReport, error) {
	return db.VerifyDecisionsThrough(ctx, 0)
}

// VerifyDecisionsThrough is VerifyDecisions for the rows up to and including through (0: all):
// whether the record up to one row can be trusted.
func (db *DB) VerifyDecisionsThrough(ctx context.Context, through int64) (ChainReport, error) {
	// One snapshot for the whole walk: a prune (on any replica) that commits between reading the
	// anchor and reading the rows would otherwise show a chain that does not link, a false alarm
	// of tampering.
	var rep ChainReport
	err := db.r.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		rep, err = verifyChain(tx, through)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return rep, err
}

// afterVerifyPage, when set (by the tests), runs after each page verifyChain reads: where a
// concurrent prune would fall.
var afterVerifyPage func()

// verifyChain is VerifyDecisionsThrough's walk, read through tx.
func verifyChain(tx *gorm.DB, through int64) (ChainReport, error) {
	var rep ChainReport
	expect := ""
	// The whole log must reach the tail each append moves in its own transaction, read before the
	// walk so that rows appended meanwhile only come after it: a log whose newest rows were
	// deleted still links up, and only the tail shows it.
	var tail string
	var unchainedThrough int64 // the newest row from before the chain (migration 32)
	if err := tx.Raw(`SELECT hash, unchained_through FROM decision_tail WHERE id = 1`).Row().Scan(&tail, &unchainedThrough); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			rep.Problem = "the chain's tail row is missing: it was deleted"
			return rep, nil
		}
		return rep, fmt.Errorf("storage: verify decisions: read the chain's tail: %w", err)
	}
	newest := tail // the tail the whole log reaches, whatever through
	if through != 0 {
		tail = "" // rows appended after through are not this walk's
	}
	metTail := tail == ""
	var anchor struct {
		PrunedThrough int64
		PrunedHash    string
	}
	res := tx.Raw(`SELECT pruned_through, pruned_hash FROM decision_chain WHERE id = 1`).Scan(&anchor)
	if res.Error != nil {
		return rep, fmt.Errorf("storage: verify decisions: %w", res.Error)
	}
	if res.RowsAffected > 0 {
		rep.PrunedThrough, expect = anchor.PrunedThrough, anchor.PrunedHash
		metTail = metTail || anchor.PrunedHash == tail
	}
	chained := false
	var last Decision // the newest row checked
	var seen int64    // the newest row read, chained or not
	for after := int64(0); ; {
		var rows []decisionRow
		q := tx.Where("id > ?", after).Order("id").Limit(1000)
		if through > 0 {
			q = q.Where("id <= ?", through)
		}
		if err := q.Find(&rows).Error; err != nil {
			return rep, fmt.Errorf("storage: verify decisions: %w", err)
		}
		for _, r := range rows {
			d := r.plain()
			seen = d.ID
			if !chained && d.Hash == "" && expect == "" && d.ID <= unchainedThrough {
				rep.Unchained++ // written before the log was chained
				continue
			}
			chained = true
			broken := func(problem string) (ChainReport, error) {
				rep.BrokenID, rep.BrokenDecisionID, rep.Problem = d.ID, d.DecisionID, problem
				return rep, nil
			}
			if d.Hash == "" {
				return broken(fmt.Sprintf("row %d has no hash, but was written after the log was chained (after row %d): its hash was removed",
					d.ID, unchainedThrough))
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
			expect, last = d.Hash, d
			metTail = metTail || d.Hash == tail
			rep.Checked++
		}
		if afterVerifyPage != nil {
			afterVerifyPage()
		}
		if len(rows) < 1000 {
			if through != 0 && seen != through {
				// The record up to a row holds only if that row is in it: the walk up to a row
				// deleted with those after it links up, and the tail is not this walk's to check.
				return missingRow(rep, through, last, newest), nil
			}
			if through == 0 && tail == "" && rep.Checked > 0 {
				rep.BrokenID, rep.BrokenDecisionID = last.ID, last.DecisionID
				rep.Problem = fmt.Sprintf("the chain's tail is empty, but %d rows are chained: the tail was cleared", rep.Checked)
				return rep, nil
			}
			if !metTail {
				after := "every row was deleted"
				if last.ID != 0 {
					after = fmt.Sprintf("rows after row %d were deleted", last.ID)
				}
				rep.BrokenID, rep.BrokenDecisionID = last.ID, last.DecisionID
				rep.Problem = fmt.Sprintf("no row reaches the chain's tail %.12s…: %s, or the tail edited", tail, after)
				return rep, nil
			}
			rep.OK = true
			return rep, nil
		}
		after = rows[len(rows)-1].ID
	}
}

// missingRow is the report of a walk up to row through that did not find it: pruned by retention,
// past the newest row (last reaches the chain's tail, newest), or deleted.
func missingRow(rep ChainReport, through int64, last Decision, newest string) ChainReport {
	switch {
	case through <= rep.PrunedThrough:
		rep.Problem = fmt.Sprintf("row %d was pruned by retention (the log keeps the rows after row %d): there is nothing of it to verify",
			through, rep.PrunedThrough)
	case last.ID != 0 && last.Hash == newest && through > last.ID:
		rep.Problem = fmt.Sprintf("row %d is past the newest row, %d: there is no such row", through, last.ID)
	default:
		rep.BrokenID = through
		rep.Problem = fmt.Sprintf("row %d is not in the log: it was deleted, or no row ever had that id", through)
	}
	rep.OK = false
	return rep
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
