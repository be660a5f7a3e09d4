package dispatcher

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callDeadlines bounds hook calls by their timeoutMs with one timer for every call in flight,
// instead of one per call (context.WithDeadline). Arming a runtime timer that is due before any
// other on its P wakes the network poller (a syscall and a thread wake-up); on the interceptive
// hot path that was about half a microsecond of a loopback decision. Here a call's deadline joins
// a heap, and the shared timer is re-armed only when the new deadline is the earliest one; a
// call that ends leaves the timer alone. When the timer fires it cancels every call past its
// deadline and re-arms for the next.
type callDeadlines struct {
	mu    sync.Mutex
	calls deadlineHeap
	timer *time.Timer
	armed time.Time // when the timer fires; zero when it is not armed
}

// callCtx is a hook call's context: cancelled when the call ends, when its parent ends, or with a
// hookTimeout cause at its deadline. It reports the deadline as context.WithDeadline does (the
// dialer budgets by it), and DeadlineExceeded once it has passed.
type callCtx struct {
	context.Context // the cancelable context; its Value answers for it and its Cause is the cause
	deadline        time.Time
	cancel          context.CancelCauseFunc
	cause           hookTimeout
	index           int         // in the heap; -1 once out of it
	expired         atomic.Bool // the deadline cancelled it
}

func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *callCtx) Err() error {
	err := c.Context.Err()
	if err != nil && c.expired.Load() && context.Cause(c.Context) == error(&c.cause) {
		return context.DeadlineExceeded
	}
	return err
}

// start returns the context of a call to h beginning at now; end must be called when the call
// ends.
func (q *callDeadlines) start(parent context.Context, h *Hook, now time.Time) *callCtx {
	timeout := time.Duration(h.DispatchConfig.TimeoutMs) * time.Millisecond
	inner, cancel := context.WithCancelCause(parent)
	c := &callCtx{Context: inner, deadline: now.Add(timeout), cancel: cancel,
		cause: hookTimeout{hook: h.HookName, timeout: timeout}}
	q.mu.Lock()
	heap.Push(&q.calls, c)
	if q.armed.IsZero() || c.deadline.Before(q.armed) {
		q.arm(c.deadline)
	}
	q.mu.Unlock()
	return c
}

// end takes c out of the heap and cancels it; the timer stays armed for whatever is next.
func (q *callDeadlines) end(c *callCtx) {
	q.mu.Lock()
	if c.index >= 0 {
		heap.Remove(&q.calls, c.index)
	}
	q.mu.Unlock()
	c.cancel(nil)
}

// arm sets the timer to fire at when; q.mu is held.
func (q *callDeadlines) arm(when time.Time) {
	q.armed = when
	d := time.Until(when)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
		return
	}
	q.timer.Reset(d)
}

// fire cancels the calls past their deadline and re-arms the timer for the earliest other one.
func (q *callDeadlines) fire() {
	var due []*callCtx
	q.mu.Lock()
	now := time.Now()
	for len(q.calls) > 0 && !q.calls[0].deadline.After(now) {
		due = append(due, heap.Pop(&q.calls).(*callCtx))
	}
	q.armed = time.Time{}
	if len(q.calls) > 0 {
		q.arm(q.calls[0].deadline)
	}
	q.mu.Unlock()
	for _, c := range due {
		c.expired.Store(true)
		c.cancel(&c.cause)
	}
}

// deadlineHeap orders calls by deadline.
type deadlineHeap []*callCtx

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *deadlineHeap) Push(x any) {
	c := x.(*callCtx)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.index = -1
	return c
}
