package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/storage"
)

// newWriters builds the committers and the route from each kind of write to its committer. On
// SQLite one connection does every write, so one committer takes every kind and a cycle is one
// transaction, one fsync, for all of them. On PostgreSQL writes run concurrently on a pool: the
// outbox, the outcomes and the decision log each keep a committer (and so their batching), and
// run events go straight to the database (AppendRunEvents).
func (d *Dispatcher) newWriters() {
	lim := d.set.Writer.withDefaults()
	if d.db.Dialect() == storage.SQLite {
		c := newCommitter(lim, []writeKind{writeOutbox, writeOutcome, writeDecision, writeRunEvents}, d.commitCycle)
		d.writers = []*committer{c}
		d.route = [numWriteKinds]*committer{c, c, c, c}
		return
	}
	// No time bound there: it keeps commits short for a decision queued behind other kinds' rows,
	// and here each kind has its own; a cycle's fixed cost (its round trips) would only shrink the
	// batches (completions then fell behind the claim lease: TestReplicas).
	lim.MaxTime = 0
	for _, k := range []writeKind{writeOutbox, writeOutcome, writeDecision} {
		c := newCommitter(lim, []writeKind{k}, d.commitCycle)
		d.writers = append(d.writers, c)
		d.route[k] = c
	}
}

// registerWriterMetrics exports the write queues' lengths:
//
//	hookd_write_queue_rows{kind}   rows queued for a write cycle: outbox, outcome, decision, run_event
func (d *Dispatcher) registerWriterMetrics(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for k := range numWriteKinds {
		c := d.route[k]
		if c == nil {
			continue
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookd_write_queue_rows",
			Help:        "Rows queued for the database writer's next cycles, by kind (outbox, outcome, decision, run_event).",
			ConstLabels: prometheus.Labels{"kind": writeKindNames[k]}},
			func() float64 { return float64(c.queuedRows(k)) }))
	}
}

// commitCycle writes one cycle's requests in one transaction. New outbox rows are handed to idle
// delivery slots right here, marked claimed in the same transaction, and their deliveries start
// once it has committed (persist, then announce); rows with no free slot are written pending for
// the claim loop. If the shared transaction fails, each kind is retried in a transaction of its
// own, so one kind's failure is not every caller's.
func (d *Dispatcher) commitCycle(reqs []*writeReq) {
	var b storage.WriteBatch
	for _, r := range reqs {
		switch r.kind {
		case writeOutbox:
			b.Deliveries = append(b.Deliveries, r.deliveries...)
		case writeOutcome:
			b.Outcomes = append(b.Outcomes, r.outcomes...)
		case writeDecision:
			r.digestSubjects(d.set.RecordArguments)
			b.Decisions = append(b.Decisions, r.decisions...)
		case writeRunEvents:
			if len(r.events.Events) > 0 {
				b.RunEvents = append(b.RunEvents, r.events)
			}
		}
	}
	handed := d.handOff(&b)
	var errs [numWriteKinds]error
	if err := d.db.Commit(context.Background(), &b); err != nil {
		errs = d.commitApart(&b, err)
	}
	if errs[writeOutbox] == nil {
		// Counted before any caller is answered: Stop's barrier may be one of them, and it waits
		// for the deliveries in flight once answered.
		d.inflight.Add(len(handed))
	}
	// The callers first: they wait, and what they do next is queue the next cycle's rows. The
	// deliveries started below then queue behind them, not in front.
	ev := 0
	for _, r := range reqs {
		if r.kind == writeRunEvents && len(r.events.Events) > 0 {
			r.events.Dropped = b.RunEvents[ev].Dropped
			ev++
		}
		if r.done != nil {
			r.done <- errs[r.kind]
		}
	}
	if errs[writeOutbox] != nil {
		d.log.Error("outbox commit failed", "rows", len(b.Deliveries), "err", errs[writeOutbox])
		for range handed {
			<-d.deliverySlots
		}
	} else {
		for _, i := range handed {
			go d.deliver(b.Deliveries[i])
		}
		if len(handed) < len(b.Deliveries) {
			d.mayBeDue.Store(true) // no slot was free for some: the claim loop takes them
			d.poke()
		}
	}
	if err := errs[writeOutcome]; err != nil {
		// The rows stay claimed; the rescuer hands them out again when the lease ends.
		d.log.Error("recording delivery outcomes failed", "count", len(b.Outcomes), "err", err)
	} else {
		for _, o := range b.Outcomes {
			if o.Status == storage.StatusPending {
				d.mayBeDue.Store(true)
				d.poke()
				break
			}
		}
	}
	if err := errs[writeDecision]; err != nil {
		d.log.Error("decision log write failed", "entries", len(b.Decisions), "err", err)
	}
}

// handOff claims, for this process's idle delivery slots, as many of b's new rows as there are
// free slots, and returns their indexes. No hand-off before Start (whose rescue would take them
// back) or once Stop has begun.
func (d *Dispatcher) handOff(b *storage.WriteBatch) []int {
	if len(b.Deliveries) == 0 || !d.started.Load() || d.runCtx.Err() != nil {
		return nil
	}
	var handed []int
	for i := range b.Deliveries {
		select {
		case d.deliverySlots <- struct{}{}:
			b.Deliveries[i].Status = storage.StatusDelivering
			handed = append(handed, i)
		default:
			b.Deliveries[i].Status = storage.StatusPending
		}
	}
	if len(handed) > 0 {
		b.ClaimedUntil = time.Now().Add(d.set.Lease)
	}
	return handed
}

// commitApart writes each kind of b in a transaction of its own after the shared one failed with
// err, and returns each kind's error.
func (d *Dispatcher) commitApart(b *storage.WriteBatch, err error) [numWriteKinds]error {
	var errs [numWriteKinds]error
	parts := [numWriteKinds]storage.WriteBatch{
		writeOutbox:    {Deliveries: b.Deliveries, ClaimedUntil: b.ClaimedUntil},
		writeOutcome:   {Outcomes: b.Outcomes},
		writeDecision:  {Decisions: b.Decisions},
		writeRunEvents: {RunEvents: b.RunEvents},
	}
	n := 0
	for k := range parts {
		if !parts[k].Empty() {
			n++
		}
	}
	if n <= 1 {
		for k := range errs {
			errs[k] = err
		}
		return errs
	}
	for k := range parts {
		errs[k] = d.db.Commit(context.Background(), &parts[k])
	}
	return errs
}

// AppendRunEvents makes run events durable (agent runs): on SQLite in the writer's next cycle,
// beside the outbox and the decision log, returning once that cycle has committed; on PostgreSQL,
// or once the writer has stopped, directly.
func (d *Dispatcher) AppendRunEvents(ctx context.Context, owner string, evs []storage.RunEvent) (dropped int, err error) {
	c := d.route[writeRunEvents]
	if c == nil || len(evs) == 0 {
		return d.db.AppendRunEvents(ctx, owner, evs)
	}
	r := &writeReq{kind: writeRunEvents, events: storage.RunEventAppend{Owner: owner, Events: evs}, done: make(chan error, 1)}
	if err := c.submit(ctx, r); errors.Is(err, ErrStopped) {
		return d.db.AppendRunEvents(ctx, owner, evs)
	} else if err != nil {
		return 0, err
	}
	return r.events.Dropped, nil
}
