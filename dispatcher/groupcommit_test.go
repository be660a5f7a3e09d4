package dispatcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
)

// heldCommitter is a committer whose writes are recorded and wait for the test: each cycle is
// reported on cycles, and returns once release has a token.
func heldCommitter(t *testing.T, lim WriterLimits) (c *committer, cycles chan []writeKind, release chan struct{}) {
	cycles, release = make(chan []writeKind, 16), make(chan struct{})
	c = newCommitter(lim, []writeKind{writeOutbox, writeOutcome, writeDecision, writeRunEvents}, func(reqs []*writeReq) time.Duration {
		kinds := make([]writeKind, 0, len(reqs))
		for _, r := range reqs {
			for range r.rows() {
				kinds = append(kinds, r.kind)
			}
		}
		cycles <- kinds
		<-release
		for _, r := range reqs {
			if r.done != nil {
				r.done <- nil
			}
		}
		return 0
	})
	t.Cleanup(func() {
		close(release)
		c.close()
	})
	return c, cycles, release
}

func count(kinds []writeKind, k writeKind) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

func oneEvent(k writeKind) *writeReq {
	switch k {
	case writeRunEvents:
		return &writeReq{kind: k, events: storage.RunEventAppend{Events: []storage.RunEvent{{RunID: 1, Seq: 1}}}}
	case writeDecision:
		return &writeReq{kind: k, decisions: []storage.Decision{{DecisionID: "d"}}}
	default:
		return &writeReq{kind: k, outcomes: []storage.Outcome{{}}}
	}
}

// A burst of run events queued behind a commit does not keep decisions out of the next cycle,
// and a cycle takes at most MaxRows; the queue length is what waits.
func TestCommitterTakesKindsInTurn(t *testing.T) {
	c, cycles, release := heldCommitter(t, WriterLimits{MaxRows: 10, MaxDelay: -1, Queue: 100})
	ctx := context.Background()
	if err := c.submit(ctx, oneEvent(writeOutcome)); err != nil {
		t.Fatal(err)
	}
	if first := <-cycles; len(first) != 1 {
		t.Fatalf("first cycle %v", first)
	}
	for range 50 {
		if err := c.submit(ctx, oneEvent(writeRunEvents)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := c.submit(ctx, oneEvent(writeDecision)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.queuedRows(writeRunEvents); n != 50 {
		t.Fatalf("run events queued: %d, want 50", n)
	}
	release <- struct{}{}
	second := <-cycles
	if len(second) != 10 || count(second, writeDecision) != 3 || count(second, writeRunEvents) != 7 {
		t.Fatalf("second cycle %v: want the 3 decisions and 7 run events", second)
	}
	if n := c.queuedRows(writeRunEvents); n != 43 {
		t.Fatalf("run events queued after the second cycle: %d, want 43", n)
	}
	release <- struct{}{}
	for left := 43; left > 0; left -= 10 {
		if got := <-cycles; len(got) != min(left, 10) {
			t.Fatalf("cycle of %d rows with %d left", len(got), left)
		}
		release <- struct{}{}
	}
}

// A caller that waits returns only once the cycle holding its rows has been answered.
func TestCommitterReleasesAfterTheWrite(t *testing.T) {
	c, cycles, release := heldCommitter(t, WriterLimits{MaxRows: 10, MaxDelay: -1, Queue: 100})
	r := oneEvent(writeDecision)
	r.done = make(chan error, 1)
	returned := make(chan error, 1)
	go func() { returned <- c.submit(context.Background(), r) }()
	<-cycles // the write has begun and is held
	select {
	case err := <-returned:
		t.Fatalf("submit returned (%v) before its write did", err)
	default:
	}
	release <- struct{}{}
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
}

// The queue is bounded: past it a submitter waits, and gives up with its context.
func TestCommitterQueueIsBounded(t *testing.T) {
	c, cycles, release := heldCommitter(t, WriterLimits{MaxRows: 10, MaxDelay: -1, Queue: 2})
	ctx := context.Background()
	if err := c.submit(ctx, oneEvent(writeOutcome)); err != nil {
		t.Fatal(err)
	}
	<-cycles
	for range 2 {
		if err := c.submit(ctx, oneEvent(writeOutcome)); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.submit(cctx, oneEvent(writeOutcome)); !errors.Is(err, context.Canceled) {
		t.Fatalf("submit to a full queue: %v, want context.Canceled", err)
	}
	if n := c.queuedRows(writeOutcome); n != 2 {
		t.Fatalf("queued %d, want 2", n)
	}
	release <- struct{}{}
	if got := <-cycles; len(got) != 2 {
		t.Fatalf("cycle %v", got)
	}
	release <- struct{}{}
}

// Cycles never overlap: a caller that commits its own rows (the writer being idle) holds off the
// next cycle, and what was queued meanwhile goes into it.
func TestCommitterCyclesDoNotOverlap(t *testing.T) {
	c, cycles, release := heldCommitter(t, WriterLimits{MaxRows: 10, MaxDelay: -1, Queue: 100})
	submit := func(k writeKind) chan error {
		r := oneEvent(k)
		r.done = make(chan error, 1)
		returned := make(chan error, 1)
		go func() { returned <- c.submit(context.Background(), r) }()
		return returned
	}
	first := submit(writeDecision)
	if got := <-cycles; count(got, writeDecision) != 1 || len(got) != 1 {
		t.Fatalf("first cycle %v", got)
	}
	// Queued as a caller that found the cycle held queues it: the writer is woken, and must wait.
	second := oneEvent(writeRunEvents)
	second.done = make(chan error, 1)
	if err := c.enqueue(context.Background(), second); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-cycles:
		t.Fatalf("a cycle %v began while another was held", got)
	default:
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := <-cycles; count(got, writeRunEvents) != 1 || len(got) != 1 {
		t.Fatalf("second cycle %v", got)
	}
	release <- struct{}{}
	if err := <-second.done; err != nil {
		t.Fatal(err)
	}
}

// Rows nobody waits for gather without waking the writer per row, and all of them go into the
// cycle that a waiting caller ends the gathering with.
func TestCommitterGathersRowsNobodyWaitsFor(t *testing.T) {
	c, cycles, release := heldCommitter(t, WriterLimits{MaxRows: 100, MaxDelay: time.Hour, Queue: 100})
	ctx := context.Background()
	for range 4 {
		if err := c.submit(ctx, oneEvent(writeOutcome)); err != nil {
			t.Fatal(err)
		}
	}
	r := oneEvent(writeDecision)
	r.done = make(chan error, 1)
	returned := make(chan error, 1)
	go func() { returned <- c.submit(ctx, r) }()
	got := <-cycles
	if count(got, writeOutcome) != 4 || count(got, writeDecision) != 1 {
		t.Fatalf("cycle %v, want the 4 outcomes and the decision", got)
	}
	release <- struct{}{}
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
}

// TestCycleRowsLeaveTheFixedCostOut: writer.maxTime bounds what a cycle's rows add to its commit,
// not the commit's fixed part: a commit slower than maxTime by its fsync alone does not shrink
// the cycles to minCycleRows, where callers would wait for many small commits instead of one.
func TestCycleRowsLeaveTheFixedCostOut(t *testing.T) {
	c := &committer{lim: WriterLimits{MaxRows: 2000, MaxTime: 2 * time.Millisecond}}
	// A 5 ms fsync and 10 µs a row: 100 rows took 6 ms.
	c.rowCost = rowCostOf(6*time.Millisecond, 5*time.Millisecond, 100)
	if got := c.cycleRows(); got != 200 {
		t.Fatalf("cycles of %d rows, want 200 (2 ms of 10 µs rows)", got)
	}
	// All of a cycle's time its commit's own: the rows cost nothing, MaxRows bounds.
	c.rowCost = rowCostOf(6*time.Millisecond, 7*time.Millisecond, 100)
	if got := c.cycleRows(); got != 2000 {
		t.Fatalf("cycles of %d rows, want MaxRows", got)
	}
}

// TestGatheringMakesRoom: a writer gathering rows nobody waits for (writer.maxDelay) still takes
// them when a queue is full, so a writer of such rows waits for room, not for the gathering's end.
func TestGatheringMakesRoom(t *testing.T) {
	c := newCommitter(WriterLimits{MaxRows: 2000, MaxDelay: time.Hour, Queue: 1}, []writeKind{writeOutcome},
		func([]*writeReq) time.Duration { return 0 })
	t.Cleanup(c.close)
	queued := make(chan error)
	go func() {
		for range 4 {
			if err := c.submit(context.Background(), &writeReq{kind: writeOutcome, outcomes: make([]storage.Outcome, 1)}); err != nil {
				queued <- err
				return
			}
		}
		queued <- nil
	}()
	select {
	case err := <-queued:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writers of rows nobody waits for are held by a full queue while the writer gathers")
	}
}
