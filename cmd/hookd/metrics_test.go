package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads /metrics into name{labels} → value.
func scrape(t *testing.T, d *daemon) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url("/metrics"), nil)
	req.Header.Set("Authorization", "Bearer adm-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %v %v", err, resp)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sum adds the samples of a metric whose labels contain every given label.
func sum(m map[string]float64, name string, labels ...string) float64 {
	var total float64
	for k, v := range m {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// The metrics move as a scenario runs: runs, model calls and tokens, open streams, and (when the
// dispatcher exports them) deliveries and decisions.
func TestMetricsMove(t *testing.T) {
	dir := t.TempDir()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer recv.Close()
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks: {allowPrivateNetworks: true}
agent: {toolDefault: allow}
`, filepath.Join(dir, "hookd.db")))
	d := startDaemon(t, cfg)
	for _, typ := range []string{"pre_tool_use", "post_tool_use"} {
		d.call("POST", "/api/hooks", `{"hookName":"m","hookType":"`+typ+`","dispatchConfig":{"url":"`+recv.URL+`"}}`, nil)
	}
	before := scrape(t, d)
	if _, ok := before["go_goroutines"]; !ok {
		t.Fatal("no Go runtime metrics")
	}

	// Hold a stream open and see the gauge; then let it finish.
	req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"userInput":"整理任务 tasks"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(bearer(req))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %v %v", err, resp)
	}
	during := scrape(t, d)
	if sum(during, "hookd_sse_connections", `dialect="platform"`) != 1 {
		t.Fatalf("open platform streams: %v", sum(during, "hookd_sse_connections"))
	}
	readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" })

	var after map[string]float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		after = scrape(t, d)
		if sum(after, "hookd_runs_total", `outcome="completed"`) == 1 && sum(after, "hookd_sse_connections") == 0 &&
			(sum(after, "hookd_deliveries_total") > 0 || !has(after, "hookd_deliveries_total")) {
			break
		}
	}
	checks := []struct {
		what string
		got  float64
	}{
		{"completed runs", sum(after, "hookd_runs_total", `outcome="completed"`)},
		{"model calls", sum(after, "hookd_model_call_seconds_count", `result="ok"`)},
		{"input tokens", sum(after, "hookd_model_tokens_total", `kind="input"`)},
	}
	for _, c := range checks {
		if c.got <= 0 {
			t.Errorf("%s did not move (%v)", c.what, c.got)
		}
	}
	if sum(after, "hookd_runs_active") != 0 || sum(after, "hookd_sse_connections") != 0 {
		t.Errorf("gauges did not come back: active runs %v, streams %v", sum(after, "hookd_runs_active"), sum(after, "hookd_sse_connections"))
	}
	if has(after, "hookd_deliveries_total") {
		if sum(after, "hookd_deliveries_total", `hook_type="post_tool_use"`, `outcome="delivered"`) < 1 {
			t.Errorf("deliveries did not move")
		}
		if sum(after, "hookd_decisions_total", `hook_type="pre_tool_use"`, `outcome="allow"`) < 1 {
			t.Errorf("decisions did not move")
		}
	} else {
		t.Log("the dispatcher exports no metrics in this build")
	}
	// No event ids or session ids as labels: every label value comes from a small set.
	for k := range after {
		if strings.Contains(k, "eventId") || strings.Contains(k, "sessionId") || strings.Contains(k, "requestId") {
			t.Errorf("unbounded label in %s", k)
		}
	}
}

func has(m map[string]float64, name string) bool {
	for k := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			return true
		}
	}
	return false
}
