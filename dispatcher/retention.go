package dispatcher

import (
	"context"
	"time"

	"github.com/hookd/hookd/storage"
)

// Retention is how long finished deliveries and decision log rows are kept; zero keeps them.
type Retention struct {
	Deliveries time.Duration
	Decisions  time.Duration
	// Every is how often the pruner runs (a minute by default).
	Every time.Duration
}

// pruneBatch is how many rows one pruning transaction removes: small, so the writer (on SQLite,
// the one connection every write waits for) is never held for long.
const pruneBatch = 500

// retentionLoop prunes what retention no longer keeps, until Stop.
func (d *Dispatcher) retentionLoop() {
	defer d.claimers.Done()
	r := d.set.Retention
	if r.Deliveries <= 0 && r.Decisions <= 0 {
		return
	}
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		d.prune(d.runCtx, time.Now())
		select {
		case <-d.runCtx.Done():
			return
		case <-t.C:
		}
	}
}

// prune removes, in batches, the finished deliveries and the decisions older than retention
// allows at now.
func (d *Dispatcher) prune(ctx context.Context, now time.Time) {
	r := d.set.Retention
	if r.Deliveries > 0 {
		f := storage.PurgeFilter{Statuses: []string{storage.StatusDelivered, storage.StatusFailed, storage.StatusDead},
			Before: now.Add(-r.Deliveries)}
		d.pruneAll(ctx, "deliveries", func() (int64, error) { return d.db.PurgeDeliveries(ctx, f, pruneBatch) })
	}
	if r.Decisions > 0 {
		cutoff := now.Add(-r.Decisions)
		d.pruneAll(ctx, "decisions", func() (int64, error) { return d.db.PruneDecisions(ctx, cutoff, pruneBatch) })
	}
}

func (d *Dispatcher) pruneAll(ctx context.Context, what string, batch func() (int64, error)) {
	var total int64
	for ctx.Err() == nil {
		n, err := batch()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("retention: pruning failed", "table", what, "err", err)
			}
			break
		}
		total += n
		if n < pruneBatch {
			break
		}
	}
	if total > 0 {
		d.log.Info("retention: pruned old rows", "table", what, "rows", total)
	}
}
