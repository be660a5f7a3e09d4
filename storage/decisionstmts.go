package storage

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
)

// decisionStmts are the decision log's writes on SQLite, prepared once on the writer connection
// (at Open, for the reason prepareOutbox gives): the chain's tail read and move, the inserts in
// one statement per power-of-two number of rows, and the per-minute rollup. A sync decision's
// cycle then compiles nothing: before, it prepared four statements, each a call into C that
// cost CPU on the writer's path and a chance for the scheduler to take the writer's P away.
type decisionStmts struct {
	tail, moveTail, count *sql.Stmt
	insert                [chunkLogs]*sql.Stmt // by log2 of the rows
}

// countSQL adds n to one (minute, outcome, fromFailureMode) of the rollup the overview reads.
const countSQL = `INSERT INTO decision_minutes (minute, outcome, from_failure_mode, n) VALUES (?, ?, ?, ?)
	ON CONFLICT (minute, outcome, from_failure_mode) DO UPDATE SET n = decision_minutes.n + excluded.n`

func prepareDecisions(ctx context.Context, w *sql.DB) (*decisionStmts, error) {
	s := &decisionStmts{}
	ps := []toPrepare{{&s.tail, `SELECT hash FROM decision_tail WHERE id = 1`},
		{&s.moveTail, `UPDATE decision_tail SET hash = ? WHERE id = 1`}, {&s.count, countSQL}}
	for k := range chunkLogs {
		ps = append(ps, toPrepare{&s.insert[k], insertSQL("decisions", decisionCols, numDecisionCols, 1<<k)})
	}
	if err := prepareAll(ctx, w, "decision log", ps); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *decisionStmts) close() {
	if s != nil {
		closeAll(append([]*sql.Stmt{s.tail, s.moveTail, s.count}, s.insert[:]...))
	}
}

// append links ds on from the chain's tail and writes them, the tail moved to the last one and
// the rollup counted, within tx.
func (s *decisionStmts) append(ctx context.Context, tx *sql.Tx, ds []Decision) error {
	var prev string
	if err := tx.StmtContext(ctx, s.tail).QueryRowContext(ctx).Scan(&prev); err != nil {
		return fmt.Errorf("read the chain's tail: %w", err)
	}
	tail := link(ds, prev)
	args := make([]any, 0, numDecisionCols<<min(bits.Len(uint(len(ds)))-1, chunkLogs-1))
	if err := chunks(len(ds), func(lo, k int) error {
		args = args[:0]
		for i := lo; i < lo+1<<k; i++ {
			args = decisionArgs(args, &ds[i])
		}
		_, err := tx.StmtContext(ctx, s.insert[k]).ExecContext(ctx, args...)
		return err
	}); err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, s.moveTail).ExecContext(ctx, tail); err != nil {
		return fmt.Errorf("move the chain's tail: %w", err)
	}
	counts := map[minuteKey]int64{}
	for i := range ds {
		counts[minuteKey{ms(ds[i].CreatedAt) / 60000, ds[i].Outcome, ds[i].FromFailureMode}]++
	}
	count := tx.StmtContext(ctx, s.count)
	for k, n := range counts {
		if _, err := count.ExecContext(ctx, k.minute, k.outcome, k.fromFM, n); err != nil {
			return fmt.Errorf("count decisions by minute: %w", err)
		}
	}
	return nil
}
