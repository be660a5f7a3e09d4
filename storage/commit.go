package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// WriteBatch is everything one write cycle makes durable: new outbox rows (some handed to this
// process's workers at once, see ClaimedUntil), the outcomes of finished deliveries with their
// attempt records, decision log rows and run events. Commit writes it in one transaction, so on
// SQLite's single writer connection a cycle costs one fsync however many kinds of rows it holds.
type WriteBatch struct {
	// Deliveries are new outbox rows. Those whose Status is StatusDelivering are inserted claimed
	// until ClaimedUntil: their worker has them in memory and no claim query is needed; the others
	// are pending. Commit sets each one's ID (and its claim).
	Deliveries   []Delivery
	ClaimedUntil time.Time
	Outcomes     []Outcome
	// Decisions are appended to the chain in order; Commit sets their PrevHash and Hash.
	Decisions []Decision
	RunEvents []RunEventAppend
	// TaskRunEnds are firings' ends, written beside the deliveries that report them.
	TaskRunEnds []TaskRunEnd
	// Committed is set by Commit: how long the COMMIT itself took (on SQLite its fsync), the part
	// of a cycle's time that does not grow with its rows.
	Committed time.Duration
}

// Empty tells whether the batch holds nothing to write.
func (b *WriteBatch) Empty() bool {
	return len(b.Deliveries) == 0 && len(b.Outcomes) == 0 && len(b.Decisions) == 0 && len(b.RunEvents) == 0 &&
		len(b.TaskRunEnds) == 0
}

// UncertainCommitError is a Commit whose COMMIT itself failed (a connection lost during it, say):
// its rows may be in or not. Writing them again could store them twice.
type UncertainCommitError struct{ Err error }

func (e *UncertainCommitError) Error() string { return "storage: commit: " + e.Err.Error() }
func (e *UncertainCommitError) Unwrap() error { return e.Err }

// beforeCommit, when set, runs in Commit once b's rows are written and before COMMIT. Only a test
// build sets it (commithold.go).
var beforeCommit func(b *WriteBatch)

// Commit writes b in one transaction: when it returns nil every row of it survives a crash, and
// on an error none was written.
func (db *DB) Commit(ctx context.Context, b *WriteBatch) error {
	if b.Empty() {
		return nil
	}
	b.clean()
	if appended, err := db.appendAlone(ctx, b); appended || err != nil {
		return err
	}
	tx := db.w.WithContext(ctx).Begin()
	if tx.Error != nil {
		return fmt.Errorf("storage: begin: %w", tx.Error)
	}
	if err := db.writeBatch(ctx, tx, b); err != nil {
		tx.Rollback()
		return err
	}
	if beforeCommit != nil {
		beforeCommit(b)
	}
	committing := time.Now()
	err := tx.Commit().Error
	b.Committed = time.Since(committing)
	if err != nil {
		if len(b.Decisions) > 0 {
			db.tail.Store(nil) // it may have committed or not
		}
		return &UncertainCommitError{Err: err}
	}
	if len(b.Decisions) > 0 {
		db.keepTail(b.Decisions)
		db.announce(TopicDecisions)
	}
	return nil
}

// appendAlone commits a batch of decisions alone on PostgreSQL in one round trip, one statement
// that is its own transaction (appendStmt), instead of BEGIN, the tail's lock and read, the
// insert and COMMIT. The rows link to the tail this process last committed; when another replica
// has appended since, nothing is written, and Commit goes on to the transaction that locks and
// reads the tail. Not for a tail unknown yet, nor in a build that holds commits before COMMIT
// (commithold.go), which needs the transaction.
func (db *DB) appendAlone(ctx context.Context, b *WriteBatch) (bool, error) {
	prev := db.tail.Load()
	if db.dialect != Postgres || prev == nil || beforeCommit != nil || len(b.Decisions) == 0 ||
		len(b.Deliveries)+len(b.Outcomes)+len(b.RunEvents)+len(b.TaskRunEnds) > 0 {
		return false, nil
	}
	w, _ := db.w.DB()
	appended, err := appendChained(ctx, w, b.Decisions, *prev)
	var unsent *pgconn.ConnectError
	if errors.As(err, &unsent) {
		// No connection could be made (the database restarting, say): nothing was sent, so
		// nothing was written, and the rows may be written again like those of any failed commit.
		return false, fmt.Errorf("storage: insert %d decisions: %w", len(b.Decisions), err)
	}
	if err != nil {
		db.tail.Store(nil) // it may have committed or not
		return false, &UncertainCommitError{Err: fmt.Errorf("insert %d decisions: %w", len(b.Decisions), err)}
	}
	if appended {
		db.keepTail(b.Decisions)
		db.announce(TopicDecisions)
	}
	return appended, nil
}

func (db *DB) writeBatch(ctx context.Context, tx *gorm.DB, b *WriteBatch) error {
	if len(b.Deliveries) > 0 {
		if err := db.enqueue(ctx, tx, b.Deliveries, b.ClaimedUntil); err != nil {
			return err
		}
	}
	for _, e := range b.TaskRunEnds {
		if err := db.endTaskRun(tx, e); err != nil {
			return err
		}
	}
	if len(b.Outcomes) > 0 {
		if err := db.complete(ctx, tx, b.Outcomes); err != nil {
			return err
		}
	}
	if len(b.Decisions) > 0 {
		stx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return errors.New("storage: insert decisions: the transaction is not a *sql.Tx")
		}
		if err := db.insertDecisions(ctx, stx, b.Decisions); err != nil {
			return fmt.Errorf("storage: insert %d decisions: %w", len(b.Decisions), err)
		}
	}
	for i := range b.RunEvents {
		a := &b.RunEvents[i]
		n, err := db.appendRunEvents(tx, a.Owner, a.Events)
		if err != nil {
			return err
		}
		a.Dropped = n
	}
	return nil
}

// keepTail remembers the tail that committing ds made.
func (db *DB) keepTail(ds []Decision) {
	h := ds[len(ds)-1].Hash
	db.tail.Store(&h)
}
