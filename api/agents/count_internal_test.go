package agents

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestCountEventAsVector: countEvent leaves in the registry what WithLabelValues on every count
// leaves, series for series: none before the first count, each pair counted as often, a point
// hookd does not list too.
func TestCountEventAsVector(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHandler(Deps{Metrics: reg})
	want := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_agent_hook_events_total"}, []string{"kind", "point"})
	// gather is the series of events: labels and count (their creation times differ).
	gather := func(g prometheus.Gatherer) map[string]float64 {
		t.Helper()
		mfs, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var series map[string]float64
		for _, mf := range mfs {
			if mf.GetName() != "hookd_agent_hook_events_total" {
				continue
			}
			series = map[string]float64{}
			for _, m := range mf.GetMetric() {
				series[labelsOf(m)] = m.GetCounter().GetValue()
			}
		}
		return series
	}
	wantReg := prometheus.NewRegistry()
	wantReg.MustRegister(want)
	if got := gather(reg); got != nil {
		t.Fatalf("series before any count: %v", got)
	}
	for _, labels := range [][2]string{{ClaudeCode, "pre_tool_use"}, {ClaudeCode, "none"}, {ClaudeCode, "pre_tool_use"},
		{Cursor, "post_tool_use"}, {Codex, "not-a-point"}, {Codex, "not-a-point"}, {GeminiCLI, "none"}} {
		h.countEvent(labels[0], labels[1])
		want.WithLabelValues(labels[0], labels[1]).Inc()
		if got, wanted := gather(reg), gather(wantReg); !reflect.DeepEqual(got, wanted) {
			t.Fatalf("after %v: got %v, want %v", labels, got, wanted)
		}
	}
}

func labelsOf(m *dto.Metric) string {
	var s string
	for _, l := range m.GetLabel() {
		s += l.GetName() + "=" + l.GetValue() + ","
	}
	return s
}
