package agent

import "github.com/prometheus/client_golang/prometheus"

// metrics of the runtime; nil fields (no registerer) record nothing.
type metrics struct {
	active     prometheus.Gauge
	runs       *prometheus.CounterVec   // outcome
	modelCalls *prometheus.HistogramVec // model, result
	tokens     *prometheus.CounterVec   // model, kind
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return &metrics{}
	}
	m := &metrics{
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookd_runs_active",
			Help: "Agent runs executing in this process."}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_runs_total",
			Help: "Agent runs that ended or paused, by outcome (completed, failed, interrupted, suspended)."}, []string{"outcome"}),
		modelCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hookd_model_call_seconds",
			Help: "Model call latency by model and result (ok, error).", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)},
			[]string{"model", "result"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_model_tokens_total",
			Help: "Tokens used by model calls, by model and kind (input, output, cached, reasoning)."}, []string{"model", "kind"}),
	}
	reg.MustRegister(m.active, m.runs, m.modelCalls, m.tokens)
	return m
}

func (m *metrics) runStarted() {
	if m.active != nil {
		m.active.Inc()
	}
}

func (m *metrics) runStopped() {
	if m.active != nil {
		m.active.Dec()
	}
}

func (m *metrics) runEnded(outcome string) {
	if m.runs != nil {
		m.runs.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) modelCall(model string, seconds float64, ok bool, u Usage) {
	if m.modelCalls == nil {
		return
	}
	if model == "" {
		model = "unknown"
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	m.modelCalls.WithLabelValues(model, result).Observe(seconds)
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens, "cached": u.CachedTokens, "reasoning": u.ReasoningTokens} {
		if n > 0 {
			m.tokens.WithLabelValues(model, kind).Add(float64(n))
		}
	}
}
