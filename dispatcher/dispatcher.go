// Package dispatcher sends lifecycle events to the hooks registered for them. Interceptive points
// (user_message, pre_tool_use, pre_scheduled_task) wait for allow / deny / modify; observational
// points are written to a durable outbox and delivered by workers with retries.
package dispatcher

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Settings tune the dispatcher; zero values take the documented defaults.
type Settings struct {
	Retry                   RetryPolicy
	Breaker                 breaker.Settings
	InterceptiveConcurrency int // concurrent interceptive calls; over it a call resolves by failureMode
	ObservationalInFlight   int // deliveries in flight; over it rows wait in the outbox
	// Transport carries every outbound request; it should be the SSRF guard's.
	Transport http.RoundTripper
	Version   string
	// Lease is how long a claimed delivery stays claimed before the rescuer returns it to the
	// queue; it must exceed the longest hook timeout.
	Lease time.Duration
	// Metrics is where the dispatcher registers its metrics (see metrics.go); nil: none.
	Metrics prometheus.Registerer
	// DecisionDurability is DurabilitySync (the default) or DurabilityBatched.
	DecisionDurability string
	// Retention prunes finished deliveries and old decisions; zero keeps them.
	Retention Retention
	// RecordArguments keeps a decision's tool arguments or user input in its log row, besides
	// their hash.
	RecordArguments bool
	// Writer bounds the database writer's cycles; zero values take the defaults.
	Writer WriterLimits
}

// RetryPolicy is the observational retry ladder: a fast tier truncated by a hook's maxRetries, then
// the minute ladder, each delay jittered by ±Jitter.
type RetryPolicy struct {
	Fast   []time.Duration
	Ladder []time.Duration
	Jitter float64
}

// DefaultRetry is the source document's ladder.
var DefaultRetry = RetryPolicy{
	Fast:   []time.Duration{1500 * time.Millisecond, 3 * time.Second, 6 * time.Second},
	Ladder: []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute},
	Jitter: 0.25,
}

// delay is the wait before the next attempt after `done` attempts; ok is false when the ladder is
// spent.
func (p RetryPolicy) delay(done, maxRetries int) (time.Duration, bool) {
	fast := p.Fast[:min(max(maxRetries, 0), len(p.Fast))]
	i := done - 1
	var d time.Duration
	switch {
	case i < len(fast):
		d = fast[i]
	case i-len(fast) < len(p.Ladder):
		d = p.Ladder[i-len(fast)]
	default:
		return 0, false
	}
	if p.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + p.Jitter*(2*rand.Float64()-1)))
	}
	return d, true
}

// maxRetryAfter caps how long a receiver's Retry-After can push a delivery out.
const maxRetryAfter = 30 * time.Minute

// Dispatcher runs hooks. Its methods are safe for concurrent use.
type Dispatcher struct {
	db       *storage.DB
	reg      *Registry
	log      *slog.Logger
	set      Settings
	send     *sender
	breakers *breaker.Set
	metrics  *metrics // nil: no metrics

	deadlines callDeadlines // the timeoutMs of every hook call in flight

	interceptInFlight atomic.Int64  // bulkhead: interceptive calls in flight, at most InterceptiveConcurrency
	deliverySlots     chan struct{} // bulkhead: one token per delivery in flight

	// The database writers (writer.go): route names the committer of each kind of write, nil for
	// a kind written directly.
	writers []*committer
	route   [numWriteKinds]*committer
	wake    chan struct{} // to the claimer: work may be due
	// mayBeDue says pending rows may be due that no worker has: rows written while every slot was
	// busy, retries, rescued rows. The claim loop runs its query only then (or on its timer).
	mayBeDue atomic.Bool
	started  atomic.Bool // Start has returned the rows a crash left claimed: hand-offs may begin

	bulkheadRejected atomic.Int64

	runCtx    context.Context // ends when Stop begins: no new claims
	stopClaim context.CancelFunc
	sendCtx   context.Context // ends when the shutdown bound passes: in-flight requests abort
	stopSend  context.CancelFunc
	claimers  sync.WaitGroup
	inflight  sync.WaitGroup
	stopOnce  sync.Once
}

// New builds a dispatcher over db and the hooks of reg. Call Start to deliver.
func New(db *storage.DB, reg *Registry, log *slog.Logger, s Settings) *Dispatcher {
	if s.Retry.Fast == nil && s.Retry.Ladder == nil {
		s.Retry = DefaultRetry
	}
	if s.InterceptiveConcurrency <= 0 {
		s.InterceptiveConcurrency = 256
	}
	if s.ObservationalInFlight <= 0 {
		s.ObservationalInFlight = 1024
	}
	if s.Transport == nil {
		s.Transport = http.DefaultTransport
	}
	if s.Retention.Every <= 0 {
		s.Retention.Every = time.Minute
	}
	if s.DecisionDurability == "" {
		s.DecisionDurability = DurabilitySync
	}
	if s.Lease <= 0 {
		s.Lease = 2 * time.Duration(MaxTimeoutMs) * time.Millisecond
	}
	d := &Dispatcher{
		db: db, reg: reg, log: log, set: s,
		send:          newSender(s.Transport, s.Version),
		breakers:      breaker.New(s.Breaker),
		deliverySlots: make(chan struct{}, s.ObservationalInFlight),
		wake:          make(chan struct{}, 1),
	}
	d.metrics = newMetrics(s.Metrics, db, func() []breaker.Status { return d.calledBreakers(reg.usesURL) }, log)
	d.breakers.OnStateChange(func(url, from, to string) {
		log.Warn("breaker state changed", "url", hookdtype.RedactURL(url), "from", from, "to", to)
	})
	d.runCtx, d.stopClaim = context.WithCancel(context.Background())
	d.sendCtx, d.stopSend = context.WithCancel(context.Background())
	d.newWriters()
	d.registerWriterMetrics(s.Metrics)
	d.mayBeDue.Store(true)
	return d
}

// Start begins delivering queued events.
func (d *Dispatcher) Start(ctx context.Context) error {
	if d.db.Dialect() == storage.SQLite {
		// One process owns a SQLite file, so whatever it left in flight died with it.
		if _, err := d.db.RescueDeliveries(ctx, time.Now().Add(d.set.Lease+time.Hour)); err != nil {
			return err
		}
	}
	d.started.Store(true)
	d.claimers.Add(3)
	go d.claimLoop()
	go d.rescueLoop()
	go d.retentionLoop()
	return nil
}

// Stop stops claiming, lets deliveries in flight finish until ctx ends (then aborts them: their
// rows are reclaimed on the next start), and flushes every writer. Observe must not be called
// after Stop begins. Stop is idempotent.
func (d *Dispatcher) Stop(ctx context.Context) {
	d.stopOnce.Do(func() {
		d.route[writeOutbox].closeKind(writeOutbox) // queued rows committed and handed off first
		d.stopClaim()
		d.claimers.Wait()
		done := make(chan struct{})
		go func() { d.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			d.stopSend()
			<-done
		}
		for _, c := range d.writers {
			c.close()
		}
		d.stopSend()
	})
}

// Breakers lists one row per distinct receiver URL of the registered webhook hooks, enabled or
// not, by URL: GET /api/breakers promises every URL a hook uses, and breakers are made only at a
// URL's first call, so a URL not called since the start (a new hook, or any after a restart) is
// closed with no failures. A deleted hook's URL has no row.
func (d *Dispatcher) Breakers() []breaker.Status {
	urls, uses := d.reg.receivers()
	called := d.calledBreakers(uses)
	out := make([]breaker.Status, 0, len(urls))
	for _, url := range urls {
		for len(called) > 0 && called[0].URL < url {
			called = called[1:] // made for a URL of a newer snapshot than urls
		}
		if len(called) > 0 && called[0].URL == url {
			out = append(out, called[0])
			called = called[1:]
			continue
		}
		out = append(out, breaker.Status{URL: url, State: breaker.StateClosed})
	}
	return out
}

// calledBreakers lists, by URL, the breakers of the receiver URLs for which uses holds that have
// been called since the start: what hookd_breaker_state reports. The breakers of URLs no hook
// uses any more (a hook deleted, or moved to another URL) are dropped first, so neither the
// metrics nor Breakers keep them.
func (d *Dispatcher) calledBreakers(uses func(url string) bool) []breaker.Status {
	d.breakers.Retain(uses)
	return d.breakers.States()
}

// BulkheadRejected counts interceptive calls resolved by failureMode because the bulkhead was full.
func (d *Dispatcher) BulkheadRejected() int64 { return d.bulkheadRejected.Load() }

func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
