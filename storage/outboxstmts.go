package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"gorm.io/gorm"
)

// chunkLogs is how many sizes of multi-row statement the SQLite outbox keeps: 1, 2, 4, … 64 rows.
const chunkLogs = 7

// outboxStmts are the outbox's writes on SQLite (new deliveries, completions, attempt records),
// prepared once on the writer connection; the inserts in one statement per power-of-two number of
// rows. A cycle's rows go in as a few chunks (7 rows: 4 + 2 + 1) and nothing is compiled on the
// way. Each statement is a call into C during which the Go scheduler may give the writer's P to
// another goroutine, and the writer waits for one when the call returns: a row at a time, with
// three statements prepared per cycle (about 25 calls a cycle at 16 observers), a trace of 20,000
// events had the writer waiting 1.9 s for a P against 1.3 s of Go code run. nil on PostgreSQL,
// which keeps its own multi-row statements (one round trip a batch).
type outboxStmts struct {
	maxID, update    *sql.Stmt
	insertD, insertA [chunkLogs]*sql.Stmt // by log2 of the rows
}

// deliveryColumns are what enqueue writes; the others start at their defaults. The id is given:
// the rows of a multi-row INSERT are numbered in the transaction from lastIDSQL, so no id is read
// back per row and none depends on SQLite's choice.
const deliveryColumns = `id, event_id, hook_id, hook_type, hook_name, occurred_at, trace_id, trace_parent,
	session_id, principal_id, agent_id, context, status, next_attempt_at, lease_until, created_at, updated_at`

// lastIDSQL is the largest id deliveries has ever held. The table is AUTOINCREMENT, so an id is
// never used twice, even once its row is deleted: sqlite_sequence keeps the largest, and an
// explicit id above it moves it on as an assigned one would.
const lastIDSQL = `SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'deliveries'), 0),
	COALESCE((SELECT MAX(id) FROM deliveries), 0))`

const attemptColumns = `delivery_id, attempt, dispatched_at, status_code, error_class, error, latency_ms, response_body`

// prepareOutbox prepares the outbox's statements on the writer. It runs at Open, before any
// transaction: the writer has one connection, which a transaction holds, so a statement prepared
// on the pool inside one would wait for it forever. Should the connection be replaced, each
// statement is prepared again on the new one the first time a transaction uses it (Tx.StmtContext).
func prepareOutbox(ctx context.Context, w *sql.DB) (*outboxStmts, error) {
	s := &outboxStmts{}
	ps := []toPrepare{{&s.maxID, lastIDSQL}, {&s.update, completeSQL}}
	for k := range chunkLogs {
		ps = append(ps, toPrepare{&s.insertD[k], insertSQL("deliveries", deliveryColumns, 17, 1<<k)},
			toPrepare{&s.insertA[k], insertSQL("delivery_attempts", attemptColumns, 8, 1<<k)})
	}
	if err := prepareAll(ctx, w, "outbox", ps); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *outboxStmts) close() {
	if s != nil {
		closeAll(append(append([]*sql.Stmt{s.maxID, s.update}, s.insertD[:]...), s.insertA[:]...))
	}
}

// toPrepare is a statement to prepare on the writer, and where to keep it.
type toPrepare struct {
	stmt **sql.Stmt
	sql  string
}

// prepareAll prepares ps on the writer w (see prepareOutbox for why on w, at Open); when one
// fails it closes those prepared before it.
func prepareAll(ctx context.Context, w *sql.DB, what string, ps []toPrepare) error {
	for i, p := range ps {
		var err error
		if *p.stmt, err = w.PrepareContext(ctx, p.sql); err != nil {
			for _, q := range ps[:i] {
				(*q.stmt).Close()
			}
			return fmt.Errorf("storage: prepare %s statements: %w", what, err)
		}
	}
	return nil
}

func closeAll(stmts []*sql.Stmt) {
	for _, st := range stmts {
		if st != nil {
			st.Close()
		}
	}
}

// insertSQL is a multi-row INSERT of rows rows of cols columns.
func insertSQL(table, columns string, cols, rows int) string {
	tuple := "(" + strings.Repeat("?, ", cols-1) + "?)"
	var q strings.Builder
	q.WriteString("INSERT INTO " + table + " (" + columns + ") VALUES ")
	for i := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(tuple)
	}
	return q.String()
}

// chunks calls f for consecutive runs [lo, lo + 1<<k) that cover n rows, largest first, with k
// below chunkLogs.
func chunks(n int, f func(lo, k int) error) error {
	for lo := 0; lo < n; {
		k := min(bits.Len(uint(n-lo))-1, chunkLogs-1)
		if err := f(lo, k); err != nil {
			return err
		}
		lo += 1 << k
	}
	return nil
}

// inTx runs stmt, prepared on the writer, inside tx.
func inTx(ctx context.Context, tx *gorm.DB, stmt *sql.Stmt) (*sql.Stmt, error) {
	stx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return nil, errors.New("storage: the transaction is not a *sql.Tx")
	}
	return stx.StmtContext(ctx, stmt), nil
}

func execInTx(ctx context.Context, tx *gorm.DB, stmt *sql.Stmt, args []any) error {
	st, err := inTx(ctx, tx, stmt)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = st.ExecContext(ctx, args...)
	return err
}

// enqueue inserts rows and sets their ids.
func (s *outboxStmts) enqueue(ctx context.Context, tx *gorm.DB, rows []deliveryRow) error {
	if len(rows) == 0 {
		return nil
	}
	st, err := inTx(ctx, tx, s.maxID)
	if err != nil {
		return err
	}
	var last int64
	err = st.QueryRowContext(ctx).Scan(&last)
	st.Close()
	if err != nil {
		return err
	}
	args := make([]any, 0, 17<<min(bits.Len(uint(len(rows)))-1, chunkLogs-1))
	return chunks(len(rows), func(lo, k int) error {
		args = args[:0]
		for i := lo; i < lo+1<<k; i++ {
			r := &rows[i]
			r.ID = last + 1 + int64(i)
			args = append(args, r.ID, r.EventID, r.HookID, r.HookType, r.HookName, r.OccurredAt, r.TraceID,
				r.TraceParent, r.SessionID, r.PrincipalID, r.AgentID, r.Context, r.Status, r.NextAttemptAt,
				r.LeaseUntil, r.CreatedAt, r.UpdatedAt)
		}
		return execInTx(ctx, tx, s.insertD[k], args)
	})
}

// completeSQL records one outcome. Unlike the inserts it runs a row at a time: SQLite's UPDATE …
// FROM (VALUES …) (completeAtOnce's statement) materialises the values and cost about half as much
// again per row in the CPU profile as this one run per row.
const completeSQL = `UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?, lease_until = 0,
	last_status_code = ?, last_error = ?, updated_at = ?, paused = (? = ? AND ` + hookDisabled + `)
	WHERE id = ? AND status = ? AND lease_until = ?`

// complete records outs; one whose claim was lost (its row is no longer delivering under that
// lease) changes nothing.
func (s *outboxStmts) complete(ctx context.Context, tx *gorm.DB, outs []Outcome, now int64) error {
	st, err := inTx(ctx, tx, s.update)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, o := range outs {
		if _, err := st.ExecContext(ctx, o.Status, o.Attempts, ms(o.NextAttemptAt), o.StatusCode, o.Error, now,
			o.Status, StatusPending, false, o.Delivery.ID, StatusDelivering, o.Delivery.leaseUntil); err != nil {
			return err
		}
	}
	return nil
}

// attempts inserts attempt records.
func (s *outboxStmts) attempts(ctx context.Context, tx *gorm.DB, rows []newAttemptRow) error {
	var args []any
	return chunks(len(rows), func(lo, k int) error {
		args = args[:0]
		for _, a := range rows[lo : lo+1<<k] {
			args = append(args, a.DeliveryID, a.Attempt, a.DispatchedAt, a.StatusCode, a.ErrorClass, a.Error,
				a.LatencyMs, a.ResponseBody)
		}
		return execInTx(ctx, tx, s.insertA[k], args)
	})
}
