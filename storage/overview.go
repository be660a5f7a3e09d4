package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/hookdtype"
)

// MinuteCounts is one minute of the decision log: interceptive hook calls by outcome.
type MinuteCounts struct {
	Minute          time.Time `json:"minute"`
	Allow           int64     `json:"allow"`
	Deny            int64     `json:"deny"`
	Modify          int64     `json:"modify"`
	Ask             int64     `json:"ask"`
	Other           int64     `json:"other"`
	FromFailureMode int64     `json:"fromFailureMode"`
}

// Overview is what the console's first page shows: the decision log per minute over a window,
// the outbox by status and the asks waiting for a person.
type Overview struct {
	Since     time.Time      `json:"since"`
	PerMinute []MinuteCounts `json:"perMinute"`
	Decisions struct {
		Total           int64 `json:"total"`
		Deny            int64 `json:"deny"`
		FromFailureMode int64 `json:"fromFailureMode"`
	} `json:"decisions"`
	// Deliveries counts outbox rows by status, and the paused ones (pending, of a disabled hook)
	// under "paused" instead of "pending".
	Deliveries       map[string]int64 `json:"deliveries"`
	PendingApprovals int64            `json:"pendingApprovals"`
}

// ReadOverview sums the decision log since since, minute by minute (every minute present, empty
// ones as zeros), and counts deliveries by status and the pending asks.
func (db *DB) ReadOverview(ctx context.Context, since, now time.Time) (Overview, error) {
	since = since.Truncate(time.Minute)
	o := Overview{Since: since, Deliveries: map[string]int64{}}
	for m := since; !m.After(now); m = m.Add(time.Minute) {
		o.PerMinute = append(o.PerMinute, MinuteCounts{Minute: m.UTC()})
	}
	r := db.r.WithContext(ctx)
	rows, err := r.Raw(`SELECT minute, outcome, from_failure_mode, n FROM decision_minutes WHERE minute >= ?`,
		since.UnixMilli()/60000).Rows()
	if err != nil {
		return o, fmt.Errorf("storage: overview of decisions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var minute, n int64
		var outcome string
		var fromFM bool
		if err := rows.Scan(&minute, &outcome, &fromFM, &n); err != nil {
			return o, fmt.Errorf("storage: overview of decisions: %w", err)
		}
		i := int((minute*60000 - since.UnixMilli()) / 60000)
		if i < 0 || i >= len(o.PerMinute) {
			continue // a row written after now was read
		}
		m := &o.PerMinute[i]
		switch outcome {
		case "allow":
			m.Allow += n
		case "deny":
			m.Deny += n
			o.Decisions.Deny += n
		case "modify":
			m.Modify += n
		case "ask":
			m.Ask += n
		default:
			m.Other += n
		}
		if fromFM {
			m.FromFailureMode += n
			o.Decisions.FromFailureMode += n
		}
		o.Decisions.Total += n
	}
	if err := rows.Err(); err != nil {
		return o, fmt.Errorf("storage: overview of decisions: %w", err)
	}
	st, err := r.Raw(`SELECT status, COUNT(*) FROM deliveries GROUP BY status`).Rows()
	if err != nil {
		return o, fmt.Errorf("storage: overview of deliveries: %w", err)
	}
	defer st.Close()
	for st.Next() {
		var status string
		var n int64
		if err := st.Scan(&status, &n); err != nil {
			return o, fmt.Errorf("storage: overview of deliveries: %w", err)
		}
		o.Deliveries[status] = n
	}
	if err := st.Err(); err != nil {
		return o, fmt.Errorf("storage: overview of deliveries: %w", err)
	}
	// A disabled hook's queued deliveries are pending but paused: shown apart.
	var paused int64
	if err := r.Raw(`SELECT COUNT(*) FROM deliveries WHERE status = ? AND paused`, StatusPending).Scan(&paused).Error; err != nil {
		return o, fmt.Errorf("storage: overview of paused deliveries: %w", err)
	}
	if paused > 0 {
		o.Deliveries["paused"] = paused
		o.Deliveries[StatusPending] -= paused
	}
	err = r.Raw(`SELECT COUNT(*) FROM asks WHERE status = ? AND kind = ? AND `+askOpen, AskPending, AskConfirm, time.Now().UnixMilli()).
		Scan(&o.PendingApprovals).Error
	if err != nil {
		return o, fmt.Errorf("storage: overview of asks: %w", err)
	}
	return o, nil
}

// AskFilter selects pending permission asks for an approvals inbox.
type AskFilter struct {
	// Users, when not nil, keeps the asks of these users only (a reviewer's inbox).
	Users []string
	// After is the cursor of the previous page ("" for the first).
	After string
	Limit int
}

// PendingAsks lists the permission asks waiting for a person, oldest first, and the cursor of the
// next page ("" on the last).
func (db *DB) PendingAsks(ctx context.Context, f AskFilter) ([]Ask, string, error) {
	if f.Users != nil && len(f.Users) == 0 {
		return nil, "", nil
	}
	limit := cmpLimit(f.Limit)
	// An ask past its expiresAt is no longer waiting, even before the sweep marks it expired.
	q := db.r.WithContext(ctx).Where("status = ? AND kind = ?", AskPending, AskConfirm).Where(askOpen, time.Now().UnixMilli()).
		Order("created_at, ask_id").Limit(limit + 1)
	if f.Users != nil {
		q = q.Where("user_id IN ?", f.Users)
	}
	if f.After != "" {
		at, id, ok := strings.Cut(f.After, ".")
		ms, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return nil, "", hookdtype.Invalid("cursor", "not a cursor this list gave")
		}
		q = q.Where("created_at > ? OR (created_at = ? AND ask_id > ?)", ms, ms, id)
	}
	var rows []askRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("storage: pending asks: %w", err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = strconv.FormatInt(last.CreatedAt, 10) + "." + last.AskID
	}
	out := make([]Ask, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, next, nil
}

// DecisionsAfter returns the decision rows after id afterID, oldest first (a live tail), of a
// hookType and an outcome when they are set.
func (db *DB) DecisionsAfter(ctx context.Context, afterID int64, hookType, outcome string, limit int) ([]Decision, error) {
	q := db.r.WithContext(ctx).Where("id > ?", afterID).Order("id").Limit(cmpLimit(limit))
	if hookType != "" {
		q = q.Where("hook_type = ?", hookType)
	}
	if outcome != "" {
		q = q.Where("outcome = ?", outcome)
	}
	var rows []decisionRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: decisions after %d: %w", afterID, err)
	}
	out := make([]Decision, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// LastDecisionID is the id of the newest decision row: of the last one retention removed when it
// removed them all (it removes the oldest only, so a row kept is newer than any removed), 0 when
// there never was one. A stream's cursor up to it is a row the log had.
func (db *DB) LastDecisionID(ctx context.Context) (int64, error) {
	var id int64
	if err := db.r.WithContext(ctx).Raw(`SELECT COALESCE(MAX(id), (SELECT pruned_through FROM decision_chain WHERE id = 1), 0)
		FROM decisions`).Scan(&id).Error; err != nil {
		return 0, fmt.Errorf("storage: last decision: %w", err)
	}
	return id, nil
}

// minuteKey is one cell of the decision_minutes rollup.
type minuteKey struct {
	minute  int64
	outcome string
	fromFM  bool
}
