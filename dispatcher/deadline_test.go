package dispatcher

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestCallDeadlines: each call's context ends at its own deadline, with a hookTimeout cause and
// DeadlineExceeded, whatever order deadlines arrive in and however calls end; a call that ends in
// time is cancelled (Canceled) and leaves the others alone; the context reports its deadline as
// context.WithDeadline does, and ends with its parent.
func TestCallDeadlines(t *testing.T) {
	var q callDeadlines
	hook := func(ms int) *Hook {
		return &Hook{HookName: "h", DispatchConfig: DispatchConfig{TimeoutMs: ms}}
	}

	t.Run("expiry", func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 10))
		const n = 40
		type call struct {
			ctx     *callCtx
			end     func()
			expires bool
		}
		calls := make([]call, n)
		start := time.Now()
		for i := range calls {
			// Deadlines between 50 and 250 ms, in random order; half the calls end early.
			ms := 50 + r.IntN(200)
			ctx := q.start(context.Background(), hook(ms), time.Now())
			end := func() { q.end(ctx) }
			calls[i] = call{ctx, end, i%2 == 0}
			if d, ok := ctx.Deadline(); !ok || d.Sub(start) < time.Duration(ms)*time.Millisecond-time.Millisecond {
				t.Fatalf("deadline %v %v for a %d ms call", d, ok, ms)
			}
		}
		for _, c := range calls {
			if !c.expires {
				c.end()
				if !errors.Is(c.ctx.Err(), context.Canceled) || context.Cause(c.ctx) != context.Canceled {
					t.Fatalf("ended call: %v, cause %v", c.ctx.Err(), context.Cause(c.ctx))
				}
			}
		}
		for _, c := range calls {
			if !c.expires {
				continue
			}
			select {
			case <-c.ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("a call outlived its deadline")
			}
			if late := time.Since(c.ctx.deadline); late < 0 {
				t.Fatalf("ended %s before its deadline", -late)
			}
			cause := context.Cause(c.ctx)
			var ht *hookTimeout
			if c.ctx.Err() != context.DeadlineExceeded || !errors.As(cause, &ht) || !errors.Is(cause, context.DeadlineExceeded) {
				t.Fatalf("expired call: err %v, cause %v", c.ctx.Err(), cause)
			}
			if cause.Error() != `hook "h" timeout `+ht.timeout.String()+`: context deadline exceeded` {
				t.Fatalf("cause text %q", cause.Error())
			}
			c.end() // after expiry: harmless
			if c.ctx.Err() != context.DeadlineExceeded {
				t.Fatalf("end after expiry changed the error to %v", c.ctx.Err())
			}
		}
		q.mu.Lock()
		left := len(q.calls)
		q.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d calls left in the heap", left)
		}
	})

	t.Run("earlier deadline re-arms", func(t *testing.T) {
		long := q.start(context.Background(), hook(60000), time.Now())
		endLong := func() { q.end(long) }
		defer endLong()
		short := q.start(context.Background(), hook(100), time.Now())
		endShort := func() { q.end(short) }
		defer endShort()
		select {
		case <-short.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the short call waited for the long one's timer")
		}
		if long.Err() != nil {
			t.Fatalf("the long call ended too: %v", long.Err())
		}
	})

	t.Run("parent", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		ctx := q.start(parent, hook(60000), time.Now())
		end := func() { q.end(ctx) }
		defer end()
		boom := errors.New("caller gone")
		cancel(boom)
		<-ctx.Done()
		if ctx.Err() != context.Canceled || context.Cause(ctx) != boom {
			t.Fatalf("parent cancelled: %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		// A parent deadline earlier than the hook's is the one reported.
		pd := time.Now().Add(time.Second)
		parent2, cancel2 := context.WithDeadline(context.Background(), pd)
		defer cancel2()
		ctx2 := q.start(parent2, hook(60000), time.Now())
		end2 := func() { q.end(ctx2) }
		defer end2()
		if d, ok := ctx2.Deadline(); !ok || !d.Equal(pd) {
			t.Fatalf("deadline %v, want the parent's %v", d, pd)
		}
	})

	t.Run("net/http child contexts", func(t *testing.T) {
		// The transport derives its own context; it must end when the call's does.
		ctx := q.start(context.Background(), hook(100), time.Now())
		end := func() { q.end(ctx) }
		defer end()
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		<-child.Done()
		if !errors.Is(context.Cause(child), context.DeadlineExceeded) {
			t.Fatalf("child cause %v", context.Cause(child))
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				ctx := q.start(context.Background(), hook(100+i%3), time.Now())
				end := func() { q.end(ctx) }
				if i%2 == 0 {
					end()
					return
				}
				<-ctx.Done()
				end()
			})
		}
		wg.Wait()
	})
}
