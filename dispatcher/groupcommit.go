package dispatcher

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/storage"
)

// writeKind is what a queued write holds. Each kind has a queue of its own and a cycle takes one
// request of each kind in turn, so a burst of one kind (a run streaming deltas, a flood of
// Observe calls) cannot starve the others out of a cycle.
type writeKind int

const (
	writeOutbox    writeKind = iota // new deliveries (Observe); the caller waits
	writeOutcome                    // a finished attempt's outcome; nobody waits
	writeDecision                   // decision log rows; the caller waits in sync durability
	writeRunEvents                  // run events; the run's event writer waits
	numWriteKinds
)

var writeKindNames = [numWriteKinds]string{"outbox", "outcome", "decision", "run_event"}

// WriterLimits bound the write cycles (config: writer.*).
type WriterLimits struct {
	// MaxRows is the most rows one cycle (one transaction) takes, give or take one request.
	MaxRows int
	// MaxTime bounds a cycle by time: it takes no more rows than the recent cost per row (the
	// commit's fixed part aside) says fit in MaxTime (at least minCycleRows), so that a caller arriving during a cycle waits for
	// short commits, not for one that swallowed every row queued. 0: rows alone bound it. Only
	// SQLite's shared writer uses it (writer.go).
	MaxTime time.Duration
	// MaxDelay is how long rows that nobody waits for (outcomes, batched decisions) may gather
	// before their cycle begins, when nothing else is queued. A cycle holding a row somebody
	// waits for begins at once: while one commit runs, the next batch gathers by itself.
	MaxDelay time.Duration
	// Queue is how many requests each kind's queue holds; past it a submitter waits.
	Queue int
}

// Defaults of WriterLimits.
const (
	DefaultWriterMaxRows  = 2000
	DefaultWriterMaxTime  = 2 * time.Millisecond
	DefaultWriterMaxDelay = 10 * time.Millisecond
	DefaultWriterQueue    = 4096
)

func (l WriterLimits) withDefaults() WriterLimits {
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultWriterMaxRows
	}
	if l.MaxTime < 0 {
		l.MaxTime = 0
	} else if l.MaxTime == 0 {
		l.MaxTime = DefaultWriterMaxTime
	}
	if l.MaxDelay < 0 {
		l.MaxDelay = 0
	} else if l.MaxDelay == 0 {
		l.MaxDelay = DefaultWriterMaxDelay
	}
	if l.Queue <= 0 {
		l.Queue = DefaultWriterQueue
	}
	return l
}

// writeReq is one caller's rows, of one kind.
type writeReq struct {
	kind       writeKind
	deliveries []storage.Delivery
	outcomes   []storage.Outcome
	decisions  []storage.Decision
	// subjects are the decisions' subjects while their digests are still to be worked out (in the
	// writer's cycle, for batched decisions): see digestSubjects.
	subjects []subject
	events   storage.RunEventAppend
	// taskRunEnd (outbox requests only) is a firing's end, committed with the deliveries that
	// report it (ObserveEnding).
	taskRunEnd *storage.TaskRunEnd
	done       chan error // nil: nobody waits
}

func (r *writeReq) rows() int {
	return len(r.deliveries) + len(r.outcomes) + len(r.decisions) + len(r.events.Events)
}

// committer is a single writer that makes rows durable in shared transactions: whatever queued
// while one cycle committed goes into the next, so throughput does not fall to one fsync per row,
// and a caller that waits is released when the commit holding its rows returns. On SQLite one
// committer takes every kind (one connection writes, so one transaction a cycle is the most that
// can be shared); on PostgreSQL each kind has its own, and they commit concurrently.
type committer struct {
	lim WriterLimits
	// write commits one cycle and answers every request's done; it returns the part of the
	// cycle's time that does not grow with its rows (the COMMIT, its fsync), or 0.
	write  func([]*writeReq) time.Duration
	queues [numWriteKinds]chan *writeReq
	queued [numWriteKinds]atomic.Int64 // rows waiting, per kind: the queue length metric
	wake   chan struct{}               // one token: something was queued
	// cycle is held by whoever runs a cycle: the writer goroutine from its take to the end of its
	// commit (its gathering included), or a sync decision committing its own rows while the writer
	// is idle (submit). So cycles never overlap, and rows are taken and committed in one order.
	cycle sync.Mutex
	// rowCost is the running estimate of a cycle's time per row (ns), which MaxTime divides; 0
	// until the first cycle. Guarded by cycle.
	rowCost float64
	// gathering is set while the writer waits for more rows that nobody waits for (MaxDelay):
	// such a row then joins the queue without waking it. Guarded by gatherMu.
	gathering bool
	gatherMu  sync.Mutex

	mu      sync.RWMutex // held for reading while a request is handed over, or committed by its caller
	closed  [numWriteKinds]bool
	closing chan struct{}
	stopped bool
	done    chan struct{}
}

func newCommitter(lim WriterLimits, kinds []writeKind, write func([]*writeReq) time.Duration) *committer {
	c := &committer{lim: lim, write: write, wake: make(chan struct{}, 1), closing: make(chan struct{}),
		done: make(chan struct{})}
	for _, k := range kinds {
		c.queues[k] = make(chan *writeReq, lim.Queue)
	}
	go c.run()
	return c
}

// submit queues r. When r has a done channel it returns once r's rows are committed (or their
// write failed), whatever ctx says once they are queued: that wait is what makes a caller's
// answer a promise. ErrStopped once r's kind is closed.
//
// A sync decision that finds no cycle running commits the cycle itself, with whatever else is
// queued: handing it to the writer goroutine and being woken by it again would cost two wake-ups,
// which on a busy 2-core machine were most of a sync decision's time beyond its commit. The other
// kinds still hand over: a run's event writer that committed on its own goroutine held up the
// loop and the subscribers it had just woken, which wait on its processor while it is in the
// database (5 % fewer deltas/s, measured).
func (c *committer) submit(ctx context.Context, r *writeReq) error {
	c.mu.RLock()
	if c.closed[r.kind] {
		c.mu.RUnlock()
		return ErrStopped
	}
	if r.kind == writeDecision && r.done != nil && c.cycle.TryLock() {
		reqs, rows, _ := c.take([]*writeReq{r}, r.rows(), true)
		c.flush(reqs, rows)
		c.cycle.Unlock()
		c.mu.RUnlock()
		return <-r.done
	}
	err := c.enqueue(ctx, r)
	c.mu.RUnlock()
	if err != nil || r.done == nil {
		return err
	}
	return <-r.done
}

func (c *committer) enqueue(ctx context.Context, r *writeReq) error {
	n := int64(r.rows())
	c.queued[r.kind].Add(n)
	select {
	case c.queues[r.kind] <- r:
	default:
		// The queue is full. A writer gathering rows nobody waits for is not taking any until
		// woken: wake it, so that the room this waits for is made now, not at the gathering's end.
		select {
		case c.wake <- struct{}{}:
		default:
		}
		select {
		case c.queues[r.kind] <- r:
		case <-ctx.Done():
			c.queued[r.kind].Add(-n)
			return ctx.Err()
		}
	}
	if r.done == nil {
		c.gatherMu.Lock()
		gathering := c.gathering
		c.gatherMu.Unlock()
		if gathering {
			return nil // the writer takes it when its gathering ends: no need to wake it per row
		}
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// setGathering says whether the writer is gathering rows nobody waits for (see gathering).
func (c *committer) setGathering(on bool) {
	c.gatherMu.Lock()
	c.gathering = on
	c.gatherMu.Unlock()
}

// closeKind refuses new requests of kind k and returns once those already queued are committed.
func (c *committer) closeKind(k writeKind) {
	c.mu.Lock()
	already := c.closed[k] || c.stopped
	c.closed[k] = true
	c.mu.Unlock()
	if already {
		return
	}
	barrier := &writeReq{kind: k, done: make(chan error, 1)} // no rows: answered by the cycle after the queued ones
	_ = c.enqueue(context.Background(), barrier)
	<-barrier.done
}

// close refuses every request, commits the queued ones and returns when the writer is gone.
func (c *committer) close() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		c.closed = [numWriteKinds]bool{true, true, true, true}
		close(c.closing)
	}
	c.mu.Unlock()
	<-c.done
}

// queuedRows is how many rows of kind k wait for a cycle.
func (c *committer) queuedRows(k writeKind) int64 { return c.queued[k].Load() }

// minCycleRows is the fewest rows MaxTime lets a cycle take.
const minCycleRows = 16

// cycleRows is how many rows the next cycle may take: MaxRows, or fewer when MaxTime says so.
func (c *committer) cycleRows() int {
	if c.lim.MaxTime <= 0 || c.rowCost <= 0 {
		return c.lim.MaxRows
	}
	return min(c.lim.MaxRows, max(minCycleRows, int(float64(c.lim.MaxTime)/c.rowCost)))
}

// take moves queued requests into reqs; waiting tells whether one of them has a caller waiting.
// Decisions come first, all of them up to MaxRows: each holds an interceptive call, and the time
// bound is not theirs to pay (it would split concurrent decisions over several commits). Then the
// other kinds, one request of each in turn, until the cycle's rows (cycleRows) — but at least one
// of each kind that waits, so a flood of decisions slows the others and never stops them. The
// caller holds c.cycle.
func (c *committer) take(reqs []*writeReq, rows int, waiting bool) ([]*writeReq, int, bool) {
	recv := func(k int) bool {
		select {
		case r := <-c.queues[k]:
			n := r.rows()
			c.queued[k].Add(-int64(n))
			reqs, rows = append(reqs, r), rows+n
			waiting = waiting || r.done != nil
			return true
		default:
			return false
		}
	}
	if c.queues[writeDecision] != nil {
		for rows < c.lim.MaxRows && recv(int(writeDecision)) {
		}
	}
	limit := c.cycleRows()
	for first := true; first || rows < limit; first = false {
		got := false
		for k := range c.queues {
			if c.queues[k] == nil || k == int(writeDecision) || (!first && rows >= limit) {
				continue
			}
			got = recv(k) || got
		}
		if !got {
			break
		}
	}
	return reqs, rows, waiting
}

// flush commits one cycle's requests, rows in all, and answers them. The caller holds c.cycle.
func (c *committer) flush(reqs []*writeReq, rows int) {
	start := time.Now()
	fixed := c.write(reqs)
	if rows > 0 {
		// The cost per row beyond the commit's fixed part: MaxTime bounds what the rows add to a
		// commit, which a cycle's size can change. Were the fixed part shared out, a commit whose
		// fsync alone takes MaxTime would keep every cycle at minCycleRows, and callers would wait
		// for many small commits instead of one (a weighted average, so one slow cycle does not
		// halve the next).
		cost := rowCostOf(time.Since(start), fixed, rows)
		if c.rowCost == 0 {
			c.rowCost = cost
		} else {
			c.rowCost = 0.8*c.rowCost + 0.2*cost
		}
	}
}

// rowCostOf is a cycle's cost per row (ns): its time but the fixed part, over its rows.
func rowCostOf(took, fixed time.Duration, rows int) float64 {
	return float64(max(took-fixed, 0)) / float64(rows)
}

func (c *committer) run() {
	defer close(c.done)
	var reqs []*writeReq
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	for {
		c.cycle.Lock()
		var rows int
		var waiting bool
		reqs, rows, waiting = c.take(reqs, 0, false)
		if len(reqs) == 0 {
			c.cycle.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.closing:
				c.cycle.Lock()
				defer c.cycle.Unlock()
				for {
					var n int
					if reqs, n, _ = c.take(reqs[:0], 0, false); len(reqs) == 0 {
						return
					}
					c.flush(reqs, n)
				}
			}
		}
		if !waiting && rows < c.cycleRows() && c.lim.MaxDelay > 0 {
			// Nobody waits for these rows: gather more for a while, unless somebody comes who
			// does. Rows nobody waits for join the queue meanwhile without waking the writer.
			c.setGathering(true)
			delay.Reset(c.lim.MaxDelay)
		gather:
			for !waiting && rows < c.cycleRows() {
				select {
				case <-c.wake:
					reqs, rows, waiting = c.take(reqs, rows, waiting)
				case <-delay.C:
					break gather
				case <-c.closing:
					break gather
				}
			}
			delay.Stop()
			c.setGathering(false)
			reqs, rows, _ = c.take(reqs, rows, waiting) // those that came without a wake-up
		}
		c.flush(reqs, rows)
		c.cycle.Unlock()
		if waiting {
			// The callers just released are on this goroutine's processor, where the next thing
			// each does is queue its next rows. Stepping aside lets them do so before the next
			// take, instead of the next cycle starting with whatever came meanwhile and their
			// rows waiting for the one after (measured: 10 % more events/s at 16 observers, 28 %
			// at 64).
			runtime.Gosched()
		}
		clear(reqs) // drop the references the next cycle reuses the array over
		reqs = reqs[:0]
	}
}
