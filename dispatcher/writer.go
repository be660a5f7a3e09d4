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
// the claim loop. If the shared transaction fails, each request is retried in a transaction of
// its own (commitApart), so one caller's failure is not every caller's.
func (d *Dispatcher) commitCycle(reqs []*writeReq) time.Duration {
	var b storage.WriteBatch
	// The rows' slices are sized once: a batched cycle of a few hundred decisions grew its slice a
	// dozen times, most of what the writer allocated.
	var deliveries, decisions int
	for _, r := range reqs {
		deliveries, decisions = deliveries+len(r.deliveries), decisions+len(r.decisions)
	}
	if deliveries > 0 {
		b.Deliveries = make([]storage.Delivery, 0, deliveries)
	}
	if decisions > 0 {
		b.Decisions = make([]storage.Decision, 0, decisions)
	}
	spans := make([][2]int, len(reqs)) // each request's rows in b's slice of its kind
	for i, r := range reqs {
		switch r.kind {
		case writeOutbox:
			spans[i] = [2]int{len(b.Deliveries), len(b.Deliveries) + len(r.deliveries)}
			b.Deliveries = append(b.Deliveries, r.deliveries...)
			if r.taskRunEnd != nil {
				b.TaskRunEnds = append(b.TaskRunEnds, *r.taskRunEnd)
			}
		case writeOutcome:
			spans[i] = [2]int{len(b.Outcomes), len(b.Outcomes) + len(r.outcomes)}
			b.Outcomes = append(b.Outcomes, r.outcomes...)
		case writeDecision:
			r.digestSubjects(d.set.RecordArguments)
			spans[i] = [2]int{len(b.Decisions), len(b.Decisions) + len(r.decisions)}
			b.Decisions = append(b.Decisions, r.decisions...)
		case writeRunEvents:
			spans[i] = [2]int{len(b.RunEvents), len(b.RunEvents)}
			if len(r.events.Events) > 0 {
				b.RunEvents = append(b.RunEvents, r.events)
				spans[i][1]++
			}
		}
	}
	handed := d.handOff(&b)
	errs := make([]error, len(reqs))
	if err := d.db.Commit(context.Background(), &b); err != nil {
		var uncertain *storage.UncertainCommitError
		if errors.As(err, &uncertain) {
			// The rows may be in: written again they could be stored twice. Every caller is told.
			for i := range errs {
				errs[i] = err
			}
		} else {
			d.commitApart(reqs, spans, &b, err, errs)
		}
	}
	var failed [numWriteKinds]int
	var firstErr [numWriteKinds]error
	for i, r := range reqs {
		if errs[i] != nil {
			failed[r.kind] += r.rows()
			// A firing another scheduler ended first is its caller's answer, not a fault.
			if firstErr[r.kind] == nil && !errors.Is(errs[i], storage.ErrTaskRunChanged) {
				firstErr[r.kind] = errs[i]
			}
		}
	}
	// A handed row is delivered when its request committed; the slots of the others are freed.
	start := handed
	if failed[writeOutbox] > 0 {
		start = nil
		for _, j := range handed {
			if i := requestOf(reqs, spans, j); errs[i] == nil {
				start = append(start, j)
			} else {
				<-d.deliverySlots
			}
		}
	}
	// Counted before any caller is answered: Stop's barrier may be one of them, and it waits
	// for the deliveries in flight once answered.
	d.inflight.Add(len(start))
	// The callers first: they wait, and what they do next is queue the next cycle's rows. The
	// deliveries started below then queue behind them, not in front.
	for i, r := range reqs {
		if r.kind == writeRunEvents && spans[i][1] > spans[i][0] {
			r.events.Dropped = b.RunEvents[spans[i][0]].Dropped
		}
		if r.done != nil {
			r.done <- errs[i]
		}
	}
	for _, j := range start {
		go d.deliver(b.Deliveries[j])
	}
	if len(handed) < len(b.Deliveries) && failed[writeOutbox] < len(b.Deliveries) {
		d.mayBeDue.Store(true) // no slot was free for some: the claim loop takes them
		d.poke()
	}
	if err := firstErr[writeOutbox]; err != nil {
		d.log.Error("outbox commit failed", "rows", failed[writeOutbox], "err", err)
	}
	if err := firstErr[writeOutcome]; err != nil {
		// The rows stay claimed; the rescuer hands them out again when the lease ends.
		d.log.Error("recording delivery outcomes failed", "count", failed[writeOutcome], "err", err)
	}
	if failed[writeOutcome] < len(b.Outcomes) {
		for _, o := range b.Outcomes {
			if o.Status == storage.StatusPending {
				d.mayBeDue.Store(true)
				d.poke()
				break
			}
		}
	}
	if err := firstErr[writeDecision]; err != nil {
		d.log.Error("decision log write failed", "entries", failed[writeDecision], "err", err)
	}
	if err := firstErr[writeRunEvents]; err != nil {
		d.log.Error("run events write failed", "events", failed[writeRunEvents], "err", err)
	}
	return b.Committed
}

// requestOf is the index of the outbox request whose rows (spans) hold delivery j of the cycle.
func requestOf(reqs []*writeReq, spans [][2]int, j int) int {
	for i, r := range reqs {
		if r.kind == writeOutbox && spans[i][0] <= j && j < spans[i][1] {
			return i
		}
	}
	panic("dispatcher: a delivery of no request of its cycle")
}

// retryApart are the pauses before each further try of rows nobody waits for (outcomes, batched
// decisions): their callers acted on them already, so a commit that failed on a passing fault (a
// connection lost, a busy database) is tried again before the rows are given up, loudly.
var retryApart = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	400 * time.Millisecond, 800 * time.Millisecond}

// commitApart writes each of a cycle's requests in a transaction of its own after the shared
// one (b) failed with err, and sets errs[i] to request i's error: one request's rows (a value the
// database refuses, say) fail that caller alone. A request alone in the cycle has had its try.
// spans[i] are request i's rows in b's slice of its kind.
func (d *Dispatcher) commitApart(reqs []*writeReq, spans [][2]int, b *storage.WriteBatch, err error, errs []error) {
	part := func(i int) *storage.WriteBatch {
		s := spans[i]
		switch reqs[i].kind {
		case writeOutbox:
			part := &storage.WriteBatch{Deliveries: b.Deliveries[s[0]:s[1]], ClaimedUntil: b.ClaimedUntil}
			if e := reqs[i].taskRunEnd; e != nil {
				part.TaskRunEnds = []storage.TaskRunEnd{*e}
			}
			return part
		case writeOutcome:
			return &storage.WriteBatch{Outcomes: b.Outcomes[s[0]:s[1]]}
		case writeDecision:
			return &storage.WriteBatch{Decisions: b.Decisions[s[0]:s[1]]}
		}
		return &storage.WriteBatch{RunEvents: b.RunEvents[s[0]:s[1]]}
	}
	var uncertain *storage.UncertainCommitError
	retried := func(r *writeReq, err error) bool {
		return r.done == nil && (r.kind == writeOutcome || r.kind == writeDecision) && !errors.As(err, &uncertain)
	}
	for i := range reqs {
		if len(reqs) == 1 {
			errs[i] = err
		} else {
			errs[i] = d.db.Commit(context.Background(), part(i))
		}
	}
	// Rows nobody waits for are tried again in rounds, all of the cycle's at once, so a database
	// that keeps refusing them holds the writer for one ladder a cycle (about 1.5 s), not one a
	// request; a Stop whose deadline has passed ends the rounds.
	var stopped <-chan struct{}
	if d.sendCtx != nil {
		stopped = d.sendCtx.Done()
	}
	for try, pause := range retryApart {
		var again []int
		for i, r := range reqs {
			if errs[i] != nil && retried(r, errs[i]) {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return
		}
		d.log.Warn("write failed; trying again", "requests", len(again), "try", try+1, "in", pause, "err", errs[again[0]])
		select {
		case <-time.After(pause):
		case <-stopped:
			return
		}
		for _, i := range again {
			errs[i] = d.db.Commit(context.Background(), part(i))
		}
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
