package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Grafana dashboard and the alerting rules in docs/monitoring query only metrics the daemon
// exports: every hookd_* name in them is a family the running daemon's /metrics shows.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+
		"\nauth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}\nwebhooks: {allowPrivateNetworks: true}\n")
	d := startDaemon(t, cfg)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer recv.Close()
	// One interceptive call: the receiver's breaker exists from then on.
	if st := d.call("POST", "/api/hooks", `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d", st)
	}
	if st := d.call("POST", "/api/hooks/dispatch", `{"hookType":"pre_tool_use","sessionId":1,"context":{"toolName":"t","toolCallId":"c1","arguments":{}}}`, nil); st != 200 {
		t.Fatalf("dispatch: %d", st)
	}
	exported := families(t, d)

	used := map[string][]string{} // metric → where
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	readMonitoring(t, "grafana-dashboard.json", &dash)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricNames(tg.Expr) {
				used[m] = append(used[m], "dashboard panel "+p.Title)
			}
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring", "prometheus-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("prometheus-alerts.yml: %v", err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			for _, m := range metricNames(r.Expr) {
				used[m] = append(used[m], "alert "+r.Alert)
			}
		}
	}
	if len(dash.Panels) == 0 || alerts < 5 || len(used) == 0 {
		t.Fatalf("%d panels, %d alerts, %d metrics: nothing to check", len(dash.Panels), alerts, len(used))
	}
	for m, where := range used {
		if !exported[m] {
			t.Errorf("%s (used by %s) is not exported by the daemon", m, strings.Join(where, ", "))
		}
	}
}

// families are the metric names /metrics declares, a histogram's series names included.
func families(t *testing.T, d *daemon) map[string]bool {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url("/metrics"), nil)
	req.Header.Set("Authorization", "Bearer adm-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %v %v", err, resp)
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
			if f[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[f[2]+s] = true
				}
			}
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bhookd_[a-z0-9_]+`)

func metricNames(expr string) []string { return metricName.FindAllString(expr, -1) }

func readMonitoring(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
