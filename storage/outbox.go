package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Delivery states. pending rows wait for next_attempt_at; delivering rows are claimed by a worker
// until lease_until; delivered, failed (a final 4xx/3xx) and dead (retries spent) are final but
// can be redelivered by hand.
const (
	StatusPending    = "pending"
	StatusDelivering = "delivering"
	StatusDelivered  = "delivered"
	StatusFailed     = "failed"
	StatusDead       = "dead"
)

// Delivery is one observational event queued for one hook.
type Delivery struct {
	ID          int64     `json:"id"`
	EventID     string    `json:"eventId"`
	HookID      int64     `json:"hookId"`
	HookType    string    `json:"hookType"`
	HookName    string    `json:"hookName"`
	OccurredAt  time.Time `json:"occurredAt"`
	TraceID     *string   `json:"traceId"`
	TraceParent string    `json:"-"` // the span that queued it (W3C traceparent); "" without one
	SessionID   *int64    `json:"sessionId"`
	PrincipalID *int64    `json:"principalId"`
	AgentID     *int64    `json:"agentId"`
	Context     []byte    `json:"-"`
	Status      string    `json:"status"`
	// Paused marks a pending delivery whose hook is disabled: it is not attempted until the hook
	// is enabled again.
	Paused         bool      `json:"paused"`
	Attempts       int       `json:"attempts"`
	NextAttemptAt  time.Time `json:"nextAttemptAt,omitzero"` // zero (absent): no attempt is planned
	LastStatusCode int       `json:"lastStatusCode"`
	LastError      string    `json:"lastError"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// leaseUntil identifies this claim: a completion applies only to the claim it came from.
	leaseUntil int64
}

// Attempt is one HTTP exchange of a delivery.
type Attempt struct {
	DeliveryID   int64     `json:"-"`
	Attempt      int       `json:"attempt"`
	DispatchedAt time.Time `json:"dispatchedAt"`
	StatusCode   int       `json:"statusCode"`
	ErrorClass   string    `json:"errorClass,omitempty"`
	Error        string    `json:"error,omitempty"`
	LatencyMs    int64     `json:"latencyMs"`
	ResponseBody string    `json:"responseBody,omitempty"`
}

// Outcome is what a worker learned from one claim: the delivery's new state and, when a request
// went out, the attempt to record.
type Outcome struct {
	Delivery      Delivery // as claimed
	Status        string
	Attempts      int
	NextAttemptAt time.Time
	StatusCode    int
	Error         string
	Attempt       *Attempt
}

type deliveryRow struct {
	ID             int64 `gorm:"primaryKey"`
	EventID        string
	HookID         int64
	HookType       string
	HookName       string
	OccurredAt     int64
	TraceID        *string
	TraceParent    string
	SessionID      *int64
	PrincipalID    *int64
	AgentID        *int64
	Context        string
	Status         string
	Paused         bool
	Attempts       int
	NextAttemptAt  int64
	LeaseUntil     int64
	LastStatusCode int
	LastError      string
	CreatedAt      int64 `gorm:"autoCreateTime:false"`
	UpdatedAt      int64 `gorm:"autoUpdateTime:false"`
}

func (deliveryRow) TableName() string { return "deliveries" }

type attemptRow struct {
	ID           int64 `gorm:"primaryKey"`
	DeliveryID   int64
	Attempt      int
	DispatchedAt int64
	StatusCode   int
	ErrorClass   string
	Error        string
	LatencyMs    int64
	ResponseBody string
}

func (attemptRow) TableName() string { return "delivery_attempts" }

// newAttemptRow is attemptRow without its id: inserting it needs no RETURNING, and no id is read
// back per row.
type newAttemptRow struct {
	DeliveryID   int64
	Attempt      int
	DispatchedAt int64
	StatusCode   int
	ErrorClass   string
	Error        string
	LatencyMs    int64
	ResponseBody string
}

func (newAttemptRow) TableName() string { return "delivery_attempts" }

func (r deliveryRow) plain() Delivery {
	return Delivery{ID: r.ID, EventID: r.EventID, HookID: r.HookID, HookType: r.HookType, HookName: r.HookName,
		OccurredAt: fromMs(r.OccurredAt), TraceID: r.TraceID, TraceParent: r.TraceParent, SessionID: r.SessionID, PrincipalID: r.PrincipalID,
		AgentID: r.AgentID, Context: []byte(r.Context), Status: r.Status, Paused: r.Paused, Attempts: r.Attempts,
		NextAttemptAt: fromMs(r.NextAttemptAt), LastStatusCode: r.LastStatusCode, LastError: r.LastError,
		CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt), leaseUntil: r.LeaseUntil}
}

// EnqueueDeliveries inserts pending deliveries in one transaction: once it returns they survive
// a crash.
func (db *DB) EnqueueDeliveries(ctx context.Context, ds []Delivery) error {
	return db.Commit(ctx, &WriteBatch{Deliveries: ds})
}

// enqueue inserts ds: pending, or, for those whose Status is StatusDelivering when leaseUntil is
// set, claimed by this process until leaseUntil (their worker is handed the row in memory: no claim query follows).
func (db *DB) enqueue(ctx context.Context, tx *gorm.DB, ds []Delivery, leaseUntil time.Time) error {
	now := time.Now().UnixMilli()
	rows := make([]deliveryRow, len(ds))
	for i, d := range ds {
		next := ms(d.NextAttemptAt)
		if next == 0 {
			next = now
		}
		rows[i] = deliveryRow{EventID: d.EventID, HookID: d.HookID, HookType: d.HookType, HookName: d.HookName,
			OccurredAt: ms(d.OccurredAt), TraceID: d.TraceID, TraceParent: d.TraceParent, SessionID: d.SessionID, PrincipalID: d.PrincipalID,
			AgentID: d.AgentID, Context: string(d.Context), Status: StatusPending, NextAttemptAt: next,
			CreatedAt: now, UpdatedAt: now}
		if d.Status == StatusDelivering && !leaseUntil.IsZero() {
			rows[i].Status, rows[i].LeaseUntil = StatusDelivering, ms(leaseUntil)
		}
	}
	var err error
	if db.dialect == SQLite {
		err = db.outbox.enqueue(ctx, tx, rows)
	} else {
		err = tx.CreateInBatches(rows, 200).Error
	}
	if err != nil {
		return fmt.Errorf("storage: enqueue %d deliveries: %w", len(rows), err)
	}
	for i := range ds {
		ds[i].ID, ds[i].Status, ds[i].leaseUntil = rows[i].ID, rows[i].Status, rows[i].LeaseUntil
		ds[i].NextAttemptAt, ds[i].CreatedAt, ds[i].UpdatedAt = fromMs(rows[i].NextAttemptAt), fromMs(now), fromMs(now)
	}
	return nil
}

// ClaimDeliveries marks up to n due pending deliveries as delivering until now+lease and returns
// them. It is one statement: no lock outlives it, and on PostgreSQL concurrent claimers skip each
// other's rows instead of waiting.
func (db *DB) ClaimDeliveries(ctx context.Context, now time.Time, n int, lease time.Duration) ([]Delivery, error) {
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var rows []deliveryRow
	err := db.w.WithContext(ctx).Raw(`UPDATE deliveries SET status = ?, lease_until = ?, updated_at = ?
		WHERE id IN (SELECT id FROM deliveries WHERE status = ? AND paused = ? AND next_attempt_at <= ?
			ORDER BY next_attempt_at, id LIMIT ?`+lock+`)
		RETURNING *`, StatusDelivering, ms(now.Add(lease)), ms(now), StatusPending, false, ms(now), n).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("storage: claim deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// ClaimDelivery claims one delivery by id whatever its state, unless a worker holds it now or its
// hook is disabled; used to redeliver by hand. ErrNotFound if there is none, *HookDisabledError if
// its hook is disabled (the row is left as it was: a pending one stays paused), ErrBusy if it is
// in flight. The hook's state is read in the claim's own statement, so a redelivery never slips
// past a disable that has committed (UpdateHook pauses in the same transaction).
func (db *DB) ClaimDelivery(ctx context.Context, id int64, now time.Time, lease time.Duration) (Delivery, error) {
	var rows []deliveryRow
	err := db.w.WithContext(ctx).Raw(`UPDATE deliveries SET status = ?, lease_until = ?, updated_at = ?
		WHERE id = ? AND (status <> ? OR lease_until < ?) AND NOT `+hookDisabled+` RETURNING *`,
		StatusDelivering, ms(now.Add(lease)), ms(now), id, StatusDelivering, ms(now), false).Scan(&rows).Error
	if err != nil {
		return Delivery{}, fmt.Errorf("storage: claim delivery %d: %w", id, err)
	}
	if len(rows) == 0 {
		return Delivery{}, db.whyNotClaimed(ctx, id)
	}
	return rows[0].plain(), nil
}

// whyNotClaimed says why ClaimDelivery claimed nothing: no such row, its hook is disabled, or a
// worker holds it.
func (db *DB) whyNotClaimed(ctx context.Context, id int64) error {
	var found []struct {
		HookID   int64
		Disabled bool
	}
	err := db.r.WithContext(ctx).Raw(`SELECT hook_id, `+hookDisabled+` AS disabled FROM deliveries WHERE id = ?`,
		false, id).Scan(&found).Error
	switch {
	case err != nil:
		return fmt.Errorf("storage: claim delivery %d: %w", id, err)
	case len(found) == 0:
		return ErrNotFound
	case found[0].Disabled:
		return &HookDisabledError{DeliveryID: id, HookID: found[0].HookID}
	}
	return ErrBusy
}

// ErrBusy is returned when a row is held by someone else right now.
var ErrBusy = errors.New("busy")

// HookDisabledError is a delivery that cannot be claimed by hand because its hook is disabled:
// its queued deliveries are paused until the hook is enabled again.
type HookDisabledError struct{ DeliveryID, HookID int64 }

func (e *HookDisabledError) Error() string {
	return fmt.Sprintf("storage: delivery %d: hook %d is disabled", e.DeliveryID, e.HookID)
}

// ExtendClaim moves the lease of d's claim on to until, so that a request that may take longer
// than the claim lease left is not handed to a second worker while it is in flight. It applies
// only while the claim is still d's (false otherwise: another worker has the row, and this one
// must not send it); on success d carries the new lease, which its completion must name.
func (db *DB) ExtendClaim(ctx context.Context, d *Delivery, until time.Time) (bool, error) {
	res := db.w.WithContext(ctx).Exec(`UPDATE deliveries SET lease_until = ? WHERE id = ? AND status = ? AND lease_until = ?`,
		ms(until), d.ID, StatusDelivering, d.leaseUntil)
	if res.Error != nil {
		return false, fmt.Errorf("storage: extend the claim of delivery %d: %w", d.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return false, nil
	}
	d.leaseUntil = ms(until)
	return true, nil
}

// ClaimedUntil is when d's claim runs out; zero for a row that is not claimed.
func (d Delivery) ClaimedUntil() time.Time {
	if d.leaseUntil == 0 {
		return time.Time{}
	}
	return fromMs(d.leaseUntil)
}

// CompleteDeliveries records the outcomes of claims in one transaction. An outcome whose claim was
// lost (its lease expired and the row was claimed again) is skipped, so two workers never both
// decide a delivery's fate.
func (db *DB) CompleteDeliveries(ctx context.Context, outs []Outcome) error {
	return db.Commit(ctx, &WriteBatch{Outcomes: outs})
}

func (db *DB) complete(ctx context.Context, tx *gorm.DB, outs []Outcome) error {
	now := time.Now().UnixMilli()
	var err error
	if db.dialect == SQLite {
		err = db.outbox.complete(ctx, tx, outs, now)
	} else {
		err = completeAtOnce(tx, outs, now)
	}
	if err != nil {
		return fmt.Errorf("storage: complete %d deliveries: %w", len(outs), err)
	}
	attempts := make([]newAttemptRow, 0, len(outs))
	for _, o := range outs {
		if a := o.Attempt; a != nil {
			attempts = append(attempts, newAttemptRow{DeliveryID: o.Delivery.ID, Attempt: a.Attempt,
				DispatchedAt: ms(a.DispatchedAt), StatusCode: a.StatusCode, ErrorClass: a.ErrorClass,
				Error: a.Error, LatencyMs: a.LatencyMs, ResponseBody: a.ResponseBody})
		}
	}
	if len(attempts) == 0 {
		return nil
	}
	if db.dialect == SQLite {
		err = db.outbox.attempts(ctx, tx, attempts)
	} else {
		err = tx.CreateInBatches(attempts, 200).Error
	}
	if err != nil {
		return fmt.Errorf("storage: record attempts: %w", err)
	}
	return nil
}

// hookDisabled holds for a delivery whose hook is disabled (one parameter: false). A delivery that
// goes back to pending takes its hook's state at that moment, so an attempt in flight while the
// hook was disabled pauses too.
const hookDisabled = `EXISTS (SELECT 1 FROM hooks WHERE hooks.id = deliveries.hook_id AND hooks.enabled = ?)`

// completeAtOnce updates the whole batch in one statement: on PostgreSQL a round trip per row would
// make the batch slow enough that a crash loses many recorded outcomes.
func completeAtOnce(tx *gorm.DB, outs []Outcome, now int64) error {
	var values strings.Builder
	args := make([]any, 0, len(outs)*7+2)
	for i, o := range outs {
		if i > 0 {
			values.WriteString(", ")
		}
		values.WriteString("(CAST(? AS BIGINT), CAST(? AS BIGINT), ?, CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS INTEGER), ?)")
		args = append(args, o.Delivery.ID, o.Delivery.leaseUntil, o.Status, o.Attempts, ms(o.NextAttemptAt), o.StatusCode, o.Error)
	}
	args = append(args, now, StatusPending, false, StatusDelivering)
	return tx.Exec(`WITH v (id, lease, status, attempts, next_at, code, err) AS (VALUES `+values.String()+`)
		UPDATE deliveries SET status = v.status, attempts = v.attempts, next_attempt_at = v.next_at,
			lease_until = 0, last_status_code = v.code, last_error = v.err, updated_at = ?,
			paused = (v.status = ? AND `+hookDisabled+`)
		FROM v WHERE deliveries.id = v.id AND deliveries.status = ? AND deliveries.lease_until = v.lease`, args...).Error
}

// RescueDeliveries returns deliveries whose claim lease ran out (their worker died) to pending.
func (db *DB) RescueDeliveries(ctx context.Context, now time.Time) (int64, error) {
	res := db.w.WithContext(ctx).Exec(`UPDATE deliveries SET status = ?, lease_until = 0, updated_at = ?
		WHERE status = ? AND lease_until < ?`, StatusPending, ms(now), StatusDelivering, ms(now))
	if res.Error != nil {
		return 0, fmt.Errorf("storage: rescue deliveries: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// NextDue is when the earliest pending delivery that is not paused falls due; ok is false when
// none is pending.
func (db *DB) NextDue(ctx context.Context) (t time.Time, ok bool, err error) {
	var v *int64
	err = db.r.WithContext(ctx).Raw(`SELECT MIN(next_attempt_at) FROM deliveries WHERE status = ? AND paused = ?`,
		StatusPending, false).Scan(&v).Error
	if err != nil || v == nil {
		return time.Time{}, false, err
	}
	return fromMs(*v), true, nil
}

// DeliveryFilter narrows ListDeliveries; zero values do not filter.
type DeliveryFilter struct {
	HookID  int64
	EventID string
	Status  string
	// BeforeID pages backwards: only rows with a smaller id.
	BeforeID int64
	Limit    int
}

// ListDeliveries returns deliveries newest first.
func (db *DB) ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	q := db.r.WithContext(ctx).Order("id DESC").Limit(cmpLimit(f.Limit))
	if f.HookID != 0 {
		q = q.Where("hook_id = ?", f.HookID)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.BeforeID != 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	var rows []deliveryRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}

// GetDelivery reads one delivery; ErrNotFound if there is none.
func (db *DB) GetDelivery(ctx context.Context, id int64) (Delivery, error) {
	var r deliveryRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Delivery{}, ErrNotFound
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("storage: get delivery %d: %w", id, err)
	}
	return r.plain(), nil
}

// Attempts returns the attempts of the given deliveries, in order, keyed by delivery id.
func (db *DB) Attempts(ctx context.Context, deliveryIDs []int64) (map[int64][]Attempt, error) {
	out := map[int64][]Attempt{}
	if len(deliveryIDs) == 0 {
		return out, nil
	}
	var rows []attemptRow
	if err := db.r.WithContext(ctx).Where("delivery_id IN ?", deliveryIDs).Order("delivery_id, attempt, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list attempts: %w", err)
	}
	for _, r := range rows {
		out[r.DeliveryID] = append(out[r.DeliveryID], Attempt{DeliveryID: r.DeliveryID, Attempt: r.Attempt,
			DispatchedAt: fromMs(r.DispatchedAt), StatusCode: r.StatusCode, ErrorClass: r.ErrorClass,
			Error: r.Error, LatencyMs: r.LatencyMs, ResponseBody: r.ResponseBody})
	}
	return out, nil
}

// DeleteDelivery removes a delivery and its attempts; ErrNotFound if there is none, ErrBusy while
// a worker holds it.
func (db *DB) DeleteDelivery(ctx context.Context, id int64) error {
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec(`DELETE FROM deliveries WHERE id = ? AND (status <> ? OR lease_until < ?)`,
			id, StatusDelivering, time.Now().UnixMilli())
		if res.Error != nil {
			return fmt.Errorf("storage: delete delivery %d: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			if _, err := db.GetDelivery(ctx, id); err != nil {
				return err
			}
			return ErrBusy
		}
		return deleteAttempts(tx, []int64{id})
	})
	return err
}

func deleteAttempts(tx *gorm.DB, ids []int64) error {
	if err := tx.Exec(`DELETE FROM delivery_attempts WHERE delivery_id IN ?`, ids).Error; err != nil {
		return fmt.Errorf("storage: delete attempts: %w", err)
	}
	return nil
}

// PurgeFilter chooses the finished deliveries PurgeDeliveries removes.
type PurgeFilter struct {
	Statuses []string  // final states only: delivered, failed, dead
	HookID   int64     // 0: any hook
	Before   time.Time // finished before; zero: any time
}

// PurgeDeliveries removes up to batch deliveries matching f, with their attempts, in one short
// transaction, and returns how many went; callers repeat it until it returns fewer than batch, so
// the writer is never held for long.
func (db *DB) PurgeDeliveries(ctx context.Context, f PurgeFilter, batch int) (int64, error) {
	for _, st := range f.Statuses {
		if st != StatusDelivered && st != StatusFailed && st != StatusDead {
			return 0, fmt.Errorf("storage: purge deliveries: %q is not a final state", st)
		}
	}
	q := db.r.WithContext(ctx).Model(&deliveryRow{}).Where("status IN ?", f.Statuses).Limit(batch)
	if f.HookID != 0 {
		q = q.Where("hook_id = ?", f.HookID)
	}
	if f.Before.IsZero() {
		q = q.Order("id")
	} else {
		// updated_at never precedes created_at: the indexed created_at bounds the scan.
		q = q.Where("created_at < ? AND updated_at < ?", ms(f.Before), ms(f.Before)).Order("created_at")
	}
	var ids []int64
	if err := q.Pluck("id", &ids).Error; err != nil {
		return 0, fmt.Errorf("storage: purge deliveries: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A row redelivered since it was read is no longer final: it stays.
		var gone []int64
		if err := tx.Raw(`DELETE FROM deliveries WHERE id IN ? AND status IN ? RETURNING id`, ids, f.Statuses).
			Scan(&gone).Error; err != nil {
			return fmt.Errorf("storage: purge deliveries: %w", err)
		}
		n = int64(len(gone))
		if n == 0 {
			return nil
		}
		return deleteAttempts(tx, gone)
	})
	return n, err
}

// OutboxStats is the backlog: how many deliveries are pending or in flight, and when the oldest
// pending one fell due.
func (db *DB) OutboxStats(ctx context.Context) (depth int64, oldestDue time.Time, err error) {
	var v struct {
		N      int64
		Oldest *int64
	}
	err = db.r.WithContext(ctx).Raw(`SELECT COUNT(*) AS n, MIN(CASE WHEN status = ? THEN next_attempt_at END) AS oldest
		FROM deliveries WHERE status IN (?, ?)`, StatusPending, StatusPending, StatusDelivering).Scan(&v).Error
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("storage: outbox stats: %w", err)
	}
	if v.Oldest != nil {
		oldestDue = fromMs(*v.Oldest)
	}
	return v.N, oldestDue, nil
}

func cmpLimit(n int) int {
	if n <= 0 || n > 1000 {
		return 100
	}
	return n
}
