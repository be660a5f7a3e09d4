package dispatcher

import (
	"context"
	"sync"
	"time"
)

// groupCommit is a single writer that makes items durable in shared transactions: whatever
// queued while one write ran goes into the next, so throughput does not fall to one fsync per
// item, and a caller that waits learns when its items are committed. The outbox and the decision
// log each run one; any other table written on a hot path can run the same.
type groupCommit[T any] struct {
	write func(context.Context, []T) error
	after func(n int, err error) // after each write; nil: nothing
	max   int                    // items per write, give or take one request
	// linger, when set, is how long the writer waits for more after the first item of a write,
	// unless maxItems are already queued: for callers that do not wait, fewer and larger
	// transactions cost less CPU.
	linger time.Duration

	queue   chan commitReq[T]
	full    chan struct{} // a lingering writer's wake-up: a whole write is queued
	mu      sync.RWMutex  // held for reading while a request is handed over
	closed  bool
	closing chan struct{}
	done    chan struct{}
}

type commitReq[T any] struct {
	items []T
	done  chan error // nil: nobody waits
}

func newGroupCommit[T any](max, queue int, linger time.Duration, write func(context.Context, []T) error, after func(int, error)) *groupCommit[T] {
	g := &groupCommit[T]{write: write, after: after, max: max, linger: linger,
		queue: make(chan commitReq[T], queue), full: make(chan struct{}, 1),
		closing: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g
}

// submit hands items to the writer. With wait it returns once they are committed (or the write
// failed), whatever ctx says once they are handed over: that wait is what makes a caller's answer
// a promise. Without wait it returns at once. ErrStopped once close has begun.
func (g *groupCommit[T]) submit(ctx context.Context, items []T, wait bool) error {
	r := commitReq[T]{items: items}
	if wait {
		r.done = make(chan error, 1)
	}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return ErrStopped
	}
	select {
	case g.queue <- r:
	case <-ctx.Done():
		g.mu.RUnlock()
		return ctx.Err()
	}
	g.mu.RUnlock()
	if g.linger > 0 && len(g.queue) >= g.max {
		select {
		case g.full <- struct{}{}:
		default:
		}
	}
	if !wait {
		return nil
	}
	return <-r.done
}

// close refuses new items, writes the queued ones and returns when the writer is gone.
func (g *groupCommit[T]) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.closing)
	}
	g.mu.Unlock()
	<-g.done
}

func (g *groupCommit[T]) run() {
	defer close(g.done)
	var reqs []commitReq[T]
	var items []T
	add := func(r commitReq[T]) { reqs, items = append(reqs, r), append(items, r.items...) }
	flush := func() {
		err := g.write(context.Background(), items)
		for _, r := range reqs {
			if r.done != nil {
				r.done <- err
			}
		}
		if g.after != nil {
			g.after(len(items), err)
		}
		clear(reqs) // drop the references the next write reuses the arrays over
		clear(items)
		reqs, items = reqs[:0], items[:0]
	}
	// take moves what is queued into the write, up to max items; only this goroutine receives.
	take := func() {
		for len(items) < g.max {
			select {
			case r := <-g.queue:
				add(r)
			default:
				return
			}
		}
	}
	var linger *time.Timer
	if g.linger > 0 {
		linger = time.NewTimer(g.linger)
		linger.Stop()
	}
	for {
		select {
		case r := <-g.queue:
			add(r)
			if linger != nil && len(g.queue) < g.max-1 {
				select { // a stale signal from the previous turn
				case <-g.full:
				default:
				}
				linger.Reset(g.linger)
				select {
				case <-linger.C:
				case <-g.full:
				case <-g.closing: // write what is there; the next turn drains the rest
				}
				linger.Stop()
			}
			take()
			flush()
		case <-g.closing:
			for {
				take()
				if len(items) == 0 {
					return
				}
				flush()
			}
		}
	}
}
