package dispatcher

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/storage"
)

// Prometheus metrics of the dispatcher, registered on Settings.Metrics. Labels are bounded: the
// hook type (eight values), outcome enums, and, for breaker state only, the receiver URL (one per
// registered hook's URL). No event, session or trace ids.
//
//	hookd_deliveries_total{hook_type,outcome}          observational attempts by result: delivered,
//	                                                   retry, failed, dead, snoozed (breaker open: no
//	                                                   attempt made, due again when it half-opens)
//	hookd_delivery_attempt_seconds{hook_type}          latency of each delivery attempt
//	hookd_dead_deliveries_total                        deliveries that went dead
//	hookd_decisions_total{hook_type,outcome}           interceptive hook calls by verdict: allow,
//	                                                   deny, modify (failureMode ones included)
//	hookd_decision_fallbacks_total{hook_type,failure_mode}
//	                                                   calls the failureMode decided (allow, deny)
//	hookd_decision_seconds{hook_type}                  latency of each interceptive hook call
//	hookd_bulkhead_rejections_total{kind}              interceptive: calls refused by the bulkhead
//	                                                   (failureMode decided); observational: claim
//	                                                   turns skipped with every delivery slot busy
//	hookd_observe_seconds                              Observe calls that queued deliveries, until
//	                                                   their group commit
//	hookd_breaker_state{url}                           0 closed, 1 half-open, 2 open (read at scrape)
//	hookd_outbox_depth                                 deliveries pending or in flight (read at scrape)
//	hookd_outbox_oldest_due_seconds                    how long the oldest due pending delivery has
//	                                                   been waiting; 0 when none is overdue
//	hookd_write_queue_rows{kind}                       rows queued for the writer's next cycles:
//	                                                   outbox, outcome, decision, run_event (writer.go)
type metrics struct {
	deliveries  [len(typeIndex)][numDeliveryOutcomes]prometheus.Counter
	attemptSecs [len(typeIndex)]prometheus.Observer
	dead        prometheus.Counter
	decisions   [len(typeIndex)][numDecisionOutcomes]prometheus.Counter
	fallbacks   [len(typeIndex)][numDecisionOutcomes]prometheus.Counter
	decideSecs  [len(typeIndex)]prometheus.Observer
	rejected    [2]prometheus.Counter // interceptive, observational
	observeSecs prometheus.Observer
}

// typeIndex orders the hook types for the metric tables (HookTypes' order).
var typeIndex = [...]HookType{UserMessage, PreToolUse, PreScheduledTask,
	PostToolUse, SessionStart, AgentCompletion, PostLLMCall, PostScheduledTask}

func hookTypeIndex(t HookType) int {
	switch t {
	case UserMessage:
		return 0
	case PreToolUse:
		return 1
	case PreScheduledTask:
		return 2
	case PostToolUse:
		return 3
	case SessionStart:
		return 4
	case AgentCompletion:
		return 5
	case PostLLMCall:
		return 6
	case PostScheduledTask:
		return 7
	}
	return -1
}

// Delivery outcomes, as hookd_deliveries_total labels them.
const (
	deliveryDelivered = iota
	deliveryRetry
	deliveryFailed
	deliveryDead
	deliverySnoozed
	numDeliveryOutcomes
)

var deliveryOutcomes = [numDeliveryOutcomes]string{"delivered", "retry", "failed", "dead", "snoozed"}

const numDecisionOutcomes = 4

var decisionOutcomes = [numDecisionOutcomes]string{Allow, Deny, Modify, Ask}

func decisionIndex(d string) int {
	switch d {
	case Allow:
		return 0
	case Deny:
		return 1
	case Modify:
		return 2
	case Ask:
		return 3
	}
	return -1
}

// Latency buckets: a hook call or attempt runs from a loopback millisecond to the 60 s timeout
// bound; a group commit from a fraction of a millisecond to seconds under load.
var (
	callBuckets   = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	commitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// outboxStatsTimeout bounds the database query behind the outbox gauges at scrape time.
const outboxStatsTimeout = 2 * time.Second

// newMetrics registers the dispatcher's metrics on reg; nil when reg is nil (no metrics, and no
// cost on the hot paths). Every series of a valid label combination exists from the start, at
// zero, and the hot paths only touch series resolved here.
func newMetrics(reg prometheus.Registerer, db *storage.DB, breakers func() []breaker.Status, log *slog.Logger) *metrics {
	if reg == nil {
		return nil
	}
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_deliveries_total",
		Help: "Observational delivery attempts by hook type and outcome: delivered, retry (another attempt scheduled), " +
			"failed (final answer), dead (retries spent or hook deleted), snoozed (breaker open, no attempt made)."},
		[]string{"hook_type", "outcome"})
	attemptSecs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hookd_delivery_attempt_seconds",
		Help: "Latency of observational delivery attempts, by hook type.", Buckets: callBuckets}, []string{"hook_type"})
	dead := prometheus.NewCounter(prometheus.CounterOpts{Name: "hookd_dead_deliveries_total",
		Help: "Observational deliveries that went dead."})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_decisions_total",
		Help: "Interceptive hook calls by hook type and verdict (allow, deny, modify), failureMode verdicts included."},
		[]string{"hook_type", "outcome"})
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_decision_fallbacks_total",
		Help: "Interceptive hook calls decided by the hook's failureMode (allow, deny): failure, timeout, open breaker, full bulkhead."},
		[]string{"hook_type", "failure_mode"})
	decideSecs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hookd_decision_seconds",
		Help: "Latency of interceptive hook calls, by hook type.", Buckets: callBuckets}, []string{"hook_type"})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_bulkhead_rejections_total",
		Help: "Bulkhead rejections: interceptive calls resolved by failureMode because the bulkhead was full; " +
			"observational claim turns skipped because every delivery slot was busy."}, []string{"kind"})
	observeSecs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookd_observe_seconds",
		Help: "Latency of Observe calls that queued deliveries, group commit included.", Buckets: commitBuckets})
	reg.MustRegister(deliveries, attemptSecs, dead, decisions, fallbacks, decideSecs, rejected, observeSecs,
		&breakerCollector{breakers: breakers}, &outboxCollector{db: db, log: log})

	m := &metrics{dead: dead, observeSecs: observeSecs,
		rejected: [2]prometheus.Counter{rejected.WithLabelValues("interceptive"), rejected.WithLabelValues("observational")}}
	for i, t := range typeIndex {
		if t.Interceptive() {
			m.decideSecs[i] = decideSecs.WithLabelValues(string(t))
			for j, o := range decisionOutcomes {
				m.decisions[i][j] = decisions.WithLabelValues(string(t), o)
			}
			m.fallbacks[i][0] = fallbacks.WithLabelValues(string(t), Allow)
			m.fallbacks[i][1] = fallbacks.WithLabelValues(string(t), Deny)
			continue
		}
		m.attemptSecs[i] = attemptSecs.WithLabelValues(string(t))
		for j, o := range deliveryOutcomes {
			m.deliveries[i][j] = deliveries.WithLabelValues(string(t), o)
		}
	}
	return m
}

// decided counts one interceptive hook call; fallback says its failureMode decided.
func (m *metrics) decided(t HookType, outcome string, fallback bool, took time.Duration) {
	if m == nil {
		return
	}
	i, j := hookTypeIndex(t), decisionIndex(outcome)
	if i < 0 || m.decideSecs[i] == nil {
		return
	}
	m.decideSecs[i].Observe(took.Seconds())
	if j < 0 {
		return
	}
	m.decisions[i][j].Inc()
	if fallback && j < 2 {
		m.fallbacks[i][j].Inc()
	}
}

// delivered counts the outcome of one delivery turn (an attempt, or a snooze on an open breaker).
func (m *metrics) delivered(t string, outcome int) {
	if m == nil {
		return
	}
	if outcome == deliveryDead {
		m.dead.Inc()
	}
	if i := hookTypeIndex(HookType(t)); i >= 0 && m.attemptSecs[i] != nil {
		m.deliveries[i][outcome].Inc()
	}
}

// attempted records the latency of one delivery attempt.
func (m *metrics) attempted(t string, took time.Duration) {
	if m == nil {
		return
	}
	if i := hookTypeIndex(HookType(t)); i >= 0 && m.attemptSecs[i] != nil {
		m.attemptSecs[i].Observe(took.Seconds())
	}
}

func (m *metrics) bulkheadRejected(interceptive bool) {
	if m == nil {
		return
	}
	if interceptive {
		m.rejected[0].Inc()
	} else {
		m.rejected[1].Inc()
	}
}

func (m *metrics) observed(took time.Duration) {
	if m != nil {
		m.observeSecs.Observe(took.Seconds())
	}
}

// deliveryOutcome names what became of a delivery after one turn.
func deliveryOutcome(out storage.Outcome) int {
	switch {
	case out.Status == storage.StatusDelivered:
		return deliveryDelivered
	case out.Status == storage.StatusDead:
		return deliveryDead
	case out.Status == storage.StatusFailed:
		return deliveryFailed
	case out.Attempt == nil: // pending without an attempt: the breaker was open
		return deliverySnoozed
	default:
		return deliveryRetry
	}
}

var breakerStateDesc = prometheus.NewDesc("hookd_breaker_state",
	"Circuit breaker state per receiver URL (query string removed): 0 closed, 1 half-open, 2 open.", []string{"url"}, nil)

// breakerCollector reads the breakers at scrape time: those of URLs hooks use that have been called
// since the start (Dispatcher.calledBreakers).
type breakerCollector struct{ breakers func() []breaker.Status }

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerStateDesc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	// URLs that differ only in their query string (which may hold a credential, so it is left
	// out) share a series: the worst state among them.
	states := map[string]float64{}
	var order []string
	for _, s := range c.breakers() {
		v := 0.0
		switch s.State {
		case breaker.StateHalfOpen:
			v = 1
		case breaker.StateOpen:
			v = 2
		}
		u := metricURL(s.URL)
		old, seen := states[u]
		if !seen {
			order = append(order, u)
		}
		states[u] = max(old, v)
	}
	for _, u := range order {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, states[u], u)
	}
}

// metricURL is a callback URL as a label: without query string and fragment.
func metricURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid"
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
	return u.String()
}

var (
	outboxDepthDesc = prometheus.NewDesc("hookd_outbox_depth",
		"Observational deliveries pending or in flight.", nil, nil)
	outboxOldestDesc = prometheus.NewDesc("hookd_outbox_oldest_due_seconds",
		"How long the oldest due pending delivery has waited past its due time; 0 when none is overdue.", nil, nil)
)

// outboxCollector reads the outbox at scrape time; when the query fails or takes longer than
// outboxStatsTimeout the two gauges are left out of that scrape (and the failure logged) rather
// than failing the whole scrape.
type outboxCollector struct {
	db  *storage.DB
	log *slog.Logger
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxDepthDesc
	ch <- outboxOldestDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), outboxStatsTimeout)
	defer cancel()
	depth, oldest, err := c.db.OutboxStats(ctx)
	if err != nil {
		c.log.Warn("outbox metrics unavailable", "err", err)
		return
	}
	waited := 0.0
	if !oldest.IsZero() {
		waited = max(time.Since(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(outboxDepthDesc, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, waited)
}
