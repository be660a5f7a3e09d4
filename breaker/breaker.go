// Package breaker keeps one circuit breaker per webhook callback URL.
//
// Rule implemented (from the platform spec): several consecutive "no response"
// failures (timeout / network / connection error) trip a short break, then a
// single probe tests recovery; while open, interceptive hooks short-circuit to
// their failureMode. Receiving an HTTP response (including 4xx / 5xx) proves
// the endpoint alive and does not count as a failure.
//
// The breakers are sony/gobreaker/v2 TwoStepCircuitBreakers configured with
// ReadyToTrip on ConsecutiveFailures, Timeout = OpenFor and MaxRequests = 1.
package breaker

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Default settings applied by New for zero fields.
const (
	DefaultConsecutiveFailures uint32 = 5
	DefaultOpenFor                    = 30 * time.Second
)

// State names reported by States and OnStateChange.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half-open"
)

// ErrOpen is returned by Acquire while the breaker for a URL is open, and in
// half-open state when the single probe is already out (gobreaker's
// ErrOpenState and ErrTooManyRequests are both reported as ErrOpen).
var ErrOpen = errors.New("breaker: open")

// Settings configures every breaker of a Set.
type Settings struct {
	// ConsecutiveFailures is the number of consecutive no-response failures
	// that trips the breaker. Zero means DefaultConsecutiveFailures (5).
	ConsecutiveFailures uint32
	// OpenFor is how long a tripped breaker stays open before letting a single
	// probe through. Zero (or negative) means DefaultOpenFor (30s).
	OpenFor time.Duration
}

// Status is the JSON-friendly state of one URL's breaker (GET /api/breakers).
type Status struct {
	URL   string `json:"url"`
	State string `json:"state"` // closed | open | half-open
	// ConsecutiveFailures is the number of consecutive no-response outcomes
	// reported for this URL (reset by any outcome that got an HTTP response).
	// Unlike gobreaker's internal Counts it is not cleared on state changes, so
	// an open breaker shows the failures that tripped it.
	ConsecutiveFailures uint32 `json:"consecutiveFailures"`
	// OpenedAt is when the breaker last opened; set while open or half-open,
	// nil while closed.
	OpenedAt *time.Time `json:"openedAt"`
	// HalfOpenAt is when an open breaker lets its next probe through; set only while open.
	HalfOpenAt *time.Time `json:"halfOpenAt,omitempty"`
}

// Set holds one breaker per callback URL. It is safe for concurrent use.
// Breakers are created lazily on the first Acquire for a URL.
//
// Entries are never evicted: the keys are the callback URLs of registered
// hooks, so the set is bounded by the hook registry in practice. Do not feed
// it arbitrary, caller-controlled URLs (that would be an unbounded map).
type Set struct {
	settings Settings

	mu      sync.RWMutex
	entries map[string]*entry

	hook atomic.Pointer[func(url string, from, to string)]
}

type transition struct{ from, to string }

type entry struct {
	url string
	cb  *gobreaker.TwoStepCircuitBreaker[struct{}]

	// mu guards the fields below. It is taken inside gobreaker's
	// OnStateChange callback (i.e. while gobreaker holds its own lock), so
	// gobreaker methods must never be called while holding mu.
	mu       sync.Mutex
	openedAt time.Time
	pending  []transition // transitions not yet delivered to the hook
	flushing bool         // a goroutine is delivering pending transitions

	failures   atomic.Uint32 // consecutive no-response outcomes
	hasPending atomic.Bool   // len(pending) > 0, readable without mu: flush's fast path
}

// New returns an empty Set. Zero fields of s take their defaults.
func New(s Settings) *Set {
	if s.ConsecutiveFailures == 0 {
		s.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if s.OpenFor <= 0 {
		s.OpenFor = DefaultOpenFor
	}
	return &Set{settings: s, entries: make(map[string]*entry)}
}

// OnStateChange registers fn to be called on every state transition of any
// URL's breaker (replacing a previous hook; nil removes it). fn is called
// outside gobreaker's lock and outside the Set's locks, so it may call back
// into the Set. Transitions of one URL are delivered in order; fn should be
// quick (it runs on the goroutine of the Acquire/done/States call that
// observed the transition).
func (s *Set) OnStateChange(fn func(url string, from, to string)) {
	if fn == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&fn)
}

// Acquire asks to send one request to url. If allowed, the caller must call
// done exactly once with the outcome error of the HTTP exchange:
//   - nil, or any error for which IsNoResponse is false (the endpoint
//     answered, or the failure is on our side), counts as a success and
//     resets the consecutive-failure count;
//   - IsNoResponse(err) errors count as failures;
//   - context.Canceled (our own shutdown / caller cancellation, see
//     IsNoResponse) is ignored: neither success nor failure. A cancelled
//     half-open probe frees the probe slot.
//
// Extra calls to done are ignored. If the breaker is open, or half-open with
// the probe already out, Acquire returns ErrOpen immediately.
func (s *Set) Acquire(url string) (done func(err error), err error) {
	e := s.get(url)
	cbDone, err := e.cb.Allow()
	s.flush(e)
	if err != nil {
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			return nil, ErrOpen
		}
		return nil, err
	}
	var once atomic.Bool
	return func(err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		cbDone(err)
		switch {
		case isExcluded(err):
		case IsNoResponse(err):
			e.failures.Add(1)
		default:
			if e.failures.Load() != 0 {
				e.failures.Store(0)
			}
		}
		s.flush(e)
	}, nil
}

// OpenUntil returns when the open breaker for url will let a probe through.
// It returns the zero time if the breaker is closed, half-open (the probe
// decides; Acquire may still return ErrOpen while the probe is out) or
// unknown.
func (s *Set) OpenUntil(url string) time.Time {
	s.mu.RLock()
	e := s.entries[url]
	s.mu.RUnlock()
	if e == nil {
		return time.Time{}
	}
	st := e.cb.State() // lets gobreaker move open -> half-open if expired
	s.flush(e)
	if st != gobreaker.StateOpen {
		return time.Time{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.openedAt.IsZero() {
		return time.Time{}
	}
	// openedAt is taken right after gobreaker computed its expiry, so this is
	// never earlier than the moment gobreaker allows the probe.
	return e.openedAt.Add(s.settings.OpenFor)
}

// Retain drops the breaker of every URL for which keep is false: a URL no hook uses any more
// leaves States (and the metrics read from it). A request still in flight to a dropped URL ends
// on the dropped breaker; the next Acquire starts a fresh one.
func (s *Set) Retain(keep func(url string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for url := range s.entries {
		if !keep(url) {
			delete(s.entries, url)
		}
	}
}

// State names url's breaker now: StateClosed, StateOpen or StateHalfOpen (closed when unknown).
func (s *Set) State(url string) string {
	s.mu.RLock()
	e := s.entries[url]
	s.mu.RUnlock()
	if e == nil {
		return StateClosed
	}
	st := e.cb.State()
	s.flush(e)
	return stateName(st)
}

// States returns the status of every known URL's breaker, sorted by URL.
func (s *Set) States() []Status {
	s.mu.RLock()
	entries := make([]*entry, 0, len(s.entries))
	for _, e := range s.entries {
		entries = append(entries, e)
	}
	s.mu.RUnlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].url < entries[j].url })

	out := make([]Status, 0, len(entries))
	for _, e := range entries {
		st := e.cb.State()
		s.flush(e)
		e.mu.Lock()
		status := Status{URL: e.url, State: stateName(st), ConsecutiveFailures: e.failures.Load()}
		if st != gobreaker.StateClosed && !e.openedAt.IsZero() {
			t := e.openedAt
			status.OpenedAt = &t
		}
		if st == gobreaker.StateOpen && !e.openedAt.IsZero() {
			t := e.openedAt.Add(s.settings.OpenFor)
			status.HalfOpenAt = &t
		}
		e.mu.Unlock()
		out = append(out, status)
	}
	return out
}

func (s *Set) get(url string) *entry {
	s.mu.RLock()
	e := s.entries[url]
	s.mu.RUnlock()
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e = s.entries[url]; e != nil {
		return e
	}
	e = &entry{url: url}
	threshold := s.settings.ConsecutiveFailures
	e.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        url,
		MaxRequests: 1, // single probe in half-open
		Interval:    0, // never clear counts while closed: only consecutive failures matter
		Timeout:     s.settings.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			return !IsNoResponse(err)
		},
		IsExcluded: isExcluded,
		// Runs under gobreaker's mutex: only record, never call back into
		// the breaker, never run user code here.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			now := time.Now()
			e.mu.Lock()
			switch to {
			case gobreaker.StateOpen:
				e.openedAt = now
			case gobreaker.StateClosed:
				e.openedAt = time.Time{}
			}
			if s.hook.Load() != nil {
				e.pending = append(e.pending, transition{stateName(from), stateName(to)})
				e.hasPending.Store(true)
			}
			e.mu.Unlock()
		},
	})
	s.entries[url] = e
	return e
}

// flush delivers pending transitions of e to the hook, outside every lock.
// Only one goroutine delivers per entry at a time (so a URL's transitions
// arrive in order); others just leave their transitions queued for it.
func (s *Set) flush(e *entry) {
	if !e.hasPending.Load() {
		// Nothing queued: a transition queued by this goroutine's own call was stored before
		// this load; one queued by another goroutine is flushed by that goroutine.
		return
	}
	e.mu.Lock()
	if e.flushing {
		e.mu.Unlock()
		return
	}
	e.flushing = true
	for len(e.pending) > 0 {
		batch := e.pending
		e.pending = nil
		e.hasPending.Store(false)
		e.mu.Unlock()
		s.deliver(e, batch)
		e.mu.Lock()
	}
	e.flushing = false
	e.mu.Unlock()
}

func (s *Set) deliver(e *entry, batch []transition) {
	defer func() {
		if r := recover(); r != nil {
			// Do not leave the entry stuck in "flushing" if the hook panics.
			e.mu.Lock()
			e.flushing = false
			e.mu.Unlock()
			panic(r)
		}
	}()
	fn := s.hook.Load()
	if fn == nil {
		return
	}
	for _, t := range batch {
		(*fn)(e.url, t.from, t.to)
	}
}

func stateName(st gobreaker.State) string {
	switch st {
	case gobreaker.StateOpen:
		return StateOpen
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	default:
		return StateClosed
	}
}

// isExcluded reports outcomes that must not move the breaker either way:
// a request cancelled by us (shutdown) says nothing about the endpoint.
func isExcluded(err error) bool {
	return err != nil && !IsNoResponse(err) && errors.Is(err, context.Canceled)
}
