package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testURL = "https://receiver.example/hook"

// noResp is a realistic "no response" error as returned by http.Client.Do.
var noResp = &url.Error{Op: "Post", URL: testURL, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}

// statusError is what the dispatcher returns for a non-2xx answer: the
// endpoint responded, so it must count as a success for the breaker.
type statusError struct{ code int }

func (e statusError) Error() string { return fmt.Sprintf("receiver answered HTTP %d", e.code) }

func mustAcquire(t *testing.T, s *Set, u string) func(error) {
	t.Helper()
	done, err := s.Acquire(u)
	if err != nil {
		t.Fatalf("Acquire(%s): unexpected %v", u, err)
	}
	return done
}

func status(t *testing.T, s *Set, u string) Status {
	t.Helper()
	for _, st := range s.States() {
		if st.URL == u {
			return st
		}
	}
	t.Fatalf("no status for %s", u)
	return Status{}
}

func trip(t *testing.T, s *Set, u string, n int) {
	t.Helper()
	for range n {
		mustAcquire(t, s, u)(noResp)
	}
}

// waitProbe sleeps until the open breaker for u allows a probe.
func waitProbe(t *testing.T, s *Set, u string) {
	t.Helper()
	until := s.OpenUntil(u)
	if until.IsZero() {
		t.Fatalf("OpenUntil(%s) is zero, breaker not open", u)
	}
	time.Sleep(time.Until(until) + 2*time.Millisecond)
}

func TestDefaults(t *testing.T) {
	s := New(Settings{})
	if s.settings.ConsecutiveFailures != 5 || s.settings.OpenFor != 30*time.Second {
		t.Fatalf("defaults = %+v", s.settings)
	}
	trip(t, s, testURL, 4)
	if st := status(t, s, testURL); st.State != StateClosed {
		t.Fatalf("open after 4 failures with default threshold 5: %+v", st)
	}
	trip(t, s, testURL, 1)
	if st := status(t, s, testURL); st.State != StateOpen {
		t.Fatalf("not open after 5 failures: %+v", st)
	}
}

func TestTripsAfterNConsecutiveFailures(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 3, OpenFor: time.Minute})
	for i := 1; i <= 2; i++ {
		mustAcquire(t, s, testURL)(noResp)
		st := status(t, s, testURL)
		if st.State != StateClosed || st.ConsecutiveFailures != uint32(i) || st.OpenedAt != nil {
			t.Fatalf("after %d failures: %+v", i, st)
		}
		if !s.OpenUntil(testURL).IsZero() {
			t.Fatalf("OpenUntil non-zero while closed")
		}
	}
	before := time.Now()
	mustAcquire(t, s, testURL)(noResp)
	after := time.Now()

	start := time.Now()
	done, err := s.Acquire(testURL)
	if !errors.Is(err, ErrOpen) || err != ErrOpen || done != nil {
		t.Fatalf("Acquire while open = (%v, %v), want ErrOpen", done != nil, err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("Acquire while open took %v, want immediate", d)
	}

	st := status(t, s, testURL)
	if st.State != StateOpen || st.ConsecutiveFailures != 3 || st.OpenedAt == nil {
		t.Fatalf("status after trip: %+v", st)
	}
	if st.OpenedAt.Before(before) || st.OpenedAt.After(after) {
		t.Fatalf("openedAt %v not within [%v, %v]", st.OpenedAt, before, after)
	}
	if got, want := s.OpenUntil(testURL), st.OpenedAt.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("OpenUntil = %v, want %v", got, want)
	}
}

func TestResponseResetsConsecutiveCount(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 3, OpenFor: time.Minute})
	for _, outcome := range []error{statusError{503}, nil, statusError{404}, errors.New("netguard: address not allowed")} {
		trip(t, s, testURL, 2)
		mustAcquire(t, s, testURL)(outcome) // endpoint answered (or our side failed): success
		st := status(t, s, testURL)
		if st.State != StateClosed || st.ConsecutiveFailures != 0 {
			t.Fatalf("after 2 failures + %v: %+v", outcome, st)
		}
	}
	trip(t, s, testURL, 2)
	if st := status(t, s, testURL); st.State != StateClosed {
		t.Fatalf("tripped before threshold: %+v", st)
	}
	trip(t, s, testURL, 1)
	if st := status(t, s, testURL); st.State != StateOpen {
		t.Fatalf("not tripped after 3 consecutive: %+v", st)
	}
}

func TestCanceledIsIgnored(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 3, OpenFor: 50 * time.Millisecond})
	canceled := &url.Error{Op: "Post", URL: testURL, Err: context.Canceled}

	// Closed: cancellation neither resets nor increments the count.
	trip(t, s, testURL, 2)
	mustAcquire(t, s, testURL)(canceled)
	if st := status(t, s, testURL); st.State != StateClosed || st.ConsecutiveFailures != 2 {
		t.Fatalf("after cancel: %+v", st)
	}
	trip(t, s, testURL, 1)
	if st := status(t, s, testURL); st.State != StateOpen {
		t.Fatalf("want open: %+v", st)
	}

	// Half-open: a cancelled probe frees the slot for another probe.
	waitProbe(t, s, testURL)
	mustAcquire(t, s, testURL)(canceled)
	if st := status(t, s, testURL); st.State != StateHalfOpen {
		t.Fatalf("want half-open after cancelled probe: %+v", st)
	}
	mustAcquire(t, s, testURL)(nil)
	if st := status(t, s, testURL); st.State != StateClosed {
		t.Fatalf("want closed after successful probe: %+v", st)
	}
}

func TestSingleProbeThenClose(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 2, OpenFor: 50 * time.Millisecond})
	trip(t, s, testURL, 2)
	if _, err := s.Acquire(testURL); err != ErrOpen {
		t.Fatalf("want ErrOpen, got %v", err)
	}
	waitProbe(t, s, testURL)

	// Many concurrent callers: exactly one probe gets through.
	const n = 16
	var (
		wg      sync.WaitGroup
		granted atomic.Int32
		denied  atomic.Int32
		probe   = make(chan func(error), n)
		startCh = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startCh
			done, err := s.Acquire(testURL)
			switch {
			case err == nil:
				granted.Add(1)
				probe <- done
			case err == ErrOpen:
				denied.Add(1)
			default:
				t.Errorf("unexpected error %v", err)
			}
		}()
	}
	close(startCh)
	wg.Wait()
	if granted.Load() != 1 || denied.Load() != n-1 {
		t.Fatalf("granted=%d denied=%d, want 1/%d", granted.Load(), denied.Load(), n-1)
	}
	st := status(t, s, testURL)
	if st.State != StateHalfOpen || st.OpenedAt == nil {
		t.Fatalf("during probe: %+v", st)
	}
	if !s.OpenUntil(testURL).IsZero() {
		t.Fatalf("OpenUntil non-zero while half-open")
	}
	// Still exactly one probe while it is out.
	if _, err := s.Acquire(testURL); err != ErrOpen {
		t.Fatalf("second Acquire during probe: %v, want ErrOpen", err)
	}

	(<-probe)(statusError{500}) // an HTTP answer, even a 500, proves it alive
	st = status(t, s, testURL)
	if st.State != StateClosed || st.OpenedAt != nil || st.ConsecutiveFailures != 0 {
		t.Fatalf("after successful probe: %+v", st)
	}
	for range 3 {
		mustAcquire(t, s, testURL)(nil)
	}
}

func TestProbeFailureReopens(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 2, OpenFor: 50 * time.Millisecond})
	trip(t, s, testURL, 2)
	first := *status(t, s, testURL).OpenedAt
	waitProbe(t, s, testURL)

	done := mustAcquire(t, s, testURL)
	done(noResp)
	done(nil) // extra calls are ignored

	st := status(t, s, testURL)
	if st.State != StateOpen || st.OpenedAt == nil || !st.OpenedAt.After(first) || st.ConsecutiveFailures != 3 {
		t.Fatalf("after failed probe: %+v (first opened %v)", st, first)
	}
	if _, err := s.Acquire(testURL); err != ErrOpen {
		t.Fatalf("want ErrOpen after failed probe, got %v", err)
	}
	if until := s.OpenUntil(testURL); !until.Equal(st.OpenedAt.Add(50 * time.Millisecond)) {
		t.Fatalf("OpenUntil = %v, want openedAt+50ms", until)
	}
	// And it recovers on the next successful probe.
	waitProbe(t, s, testURL)
	mustAcquire(t, s, testURL)(nil)
	if st := status(t, s, testURL); st.State != StateClosed {
		t.Fatalf("want closed: %+v", st)
	}
}

func TestPerURLIsolationAndStatesSorted(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 1, OpenFor: time.Minute})
	mustAcquire(t, s, "https://c.example/")(nil)
	mustAcquire(t, s, "https://a.example/")(noResp)
	mustAcquire(t, s, "https://b.example/")(statusError{502})

	if _, err := s.Acquire("https://a.example/"); err != ErrOpen {
		t.Fatalf("a should be open: %v", err)
	}
	mustAcquire(t, s, "https://b.example/")(nil)

	states := s.States()
	if len(states) != 3 {
		t.Fatalf("states = %+v", states)
	}
	want := []struct {
		url, state string
		opened     bool
	}{
		{"https://a.example/", StateOpen, true},
		{"https://b.example/", StateClosed, false},
		{"https://c.example/", StateClosed, false},
	}
	for i, w := range want {
		st := states[i]
		if st.URL != w.url || st.State != w.state || (st.OpenedAt != nil) != w.opened {
			t.Fatalf("states[%d] = %+v, want %+v", i, st, w)
		}
	}
	if !s.OpenUntil("https://unknown.example/").IsZero() {
		t.Fatal("OpenUntil of unknown URL should be zero")
	}
	if len(s.States()) != 3 {
		t.Fatal("OpenUntil must not create breakers")
	}

	b, err := json.Marshal(states[:2])
	if err != nil {
		t.Fatal(err)
	}
	var decoded []map[string]any
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded[0]["state"] != "open" || decoded[0]["consecutiveFailures"] != float64(1) || decoded[0]["openedAt"] == nil {
		t.Fatalf("json = %s", b)
	}
	if v, ok := decoded[1]["openedAt"]; !ok || v != nil {
		t.Fatalf("closed breaker should have openedAt:null, json = %s", b)
	}
}

func TestOnStateChange(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 1, OpenFor: 50 * time.Millisecond})
	var (
		mu  sync.Mutex
		got []string
	)
	s.OnStateChange(func(u, from, to string) {
		// Calling back into the Set from the hook must not deadlock.
		_ = s.States()
		_ = s.OpenUntil(u)
		mu.Lock()
		got = append(got, from+"->"+to)
		mu.Unlock()
	})
	mustAcquire(t, s, testURL)(noResp) // closed -> open
	waitProbe(t, s, testURL)
	done := mustAcquire(t, s, testURL) // open -> half-open
	done(noResp)                       // half-open -> open
	waitProbe(t, s, testURL)
	_ = s.States()                  // observing the expiry moves open -> half-open
	mustAcquire(t, s, testURL)(nil) // half-open -> closed
	mustAcquire(t, s, testURL)(nil) // no transition

	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transitions = %v, want %v", got, want)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := New(Settings{ConsecutiveFailures: 3, OpenFor: 5 * time.Millisecond})
	var changes atomic.Int64
	s.OnStateChange(func(string, string, string) { changes.Add(1) })
	urls := []string{"https://a.example/", "https://b.example/", "https://c.example/"}
	outcomes := []error{nil, noResp, statusError{500}, noResp, noResp}

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				u := urls[(g+i)%len(urls)]
				if done, err := s.Acquire(u); err == nil {
					done(outcomes[(g*7+i)%len(outcomes)])
				} else if err != ErrOpen {
					t.Errorf("unexpected %v", err)
				}
				if i%50 == 0 {
					_ = s.States()
					_ = s.OpenUntil(u)
				}
			}
		}()
	}
	wg.Wait()
	if len(s.States()) != len(urls) {
		t.Fatalf("states = %+v", s.States())
	}
	if changes.Load() == 0 {
		t.Fatal("expected some state changes")
	}
}

func TestRetainDropsURLs(t *testing.T) {
	s := New(Settings{})
	for _, u := range []string{"http://a", "http://b", "http://c"} {
		done, err := s.Acquire(u)
		if err != nil {
			t.Fatal(err)
		}
		done(nil)
	}
	s.Retain(func(u string) bool { return u != "http://b" })
	var got []string
	for _, st := range s.States() {
		got = append(got, st.URL)
	}
	if len(got) != 2 || got[0] != "http://a" || got[1] != "http://c" {
		t.Fatalf("after Retain: %v", got)
	}
	if _, err := s.Acquire("http://b"); err != nil || len(s.States()) != 3 {
		t.Fatalf("a dropped URL comes back on its next Acquire: %v %d", err, len(s.States()))
	}
}
