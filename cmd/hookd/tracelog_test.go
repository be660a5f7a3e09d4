package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// processLines are the messages a daemon logs for itself rather than for a request, a run, a
// firing or a delivery: start and stop, and its background loops' findings about shared state.
var processLines = map[string]string{
	"starting hookd":                       "start",
	"tracing: spans go out over OTLP/HTTP": "start",
	"generated a master key; back it up, secrets cannot be read without it":                                                                "start",
	"no adminTokens or apiKeys configured: development mode, listening on loopback only; chat callers name themselves (userId, X-User-Id)": "start",
	"listening":             "start",
	"shutting down":         "stop",
	"stopped":               "stop",
	"breaker state changed": "a receiver URL's breaker is shared by every call to it",
}

// TestLogsCarryTraceIDs: with tracing on (an in-process OTLP receiver), a scenario that logs in a
// chat turn's interceptive hook call, in delivery attempts and in a task firing writes every one
// of those lines with the trace_id and span_id of the span it was
// written in; only the daemon's own start, stop and shared-state lines have none.
func TestLogsCarryTraceIDs(t *testing.T) {
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(200)
	}))
	defer otlp.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer failing.Close()

	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"*","steps":[
		{"toolCalls":[{"name":"workspace_read_file","arguments":{"path":"missing.md"}}]},
		{"text":"done"}]}]}`), 0o600)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
log: {level: debug, format: json}
otel: {endpoint: %s}
model: {provider: scripted, script: %s}
webhooks:
  allowPrivateNetworks: true
  retry: {fast: [10ms], ladder: [10ms], jitter: 0}
`, filepath.Join(dir, "hookd.db"), otlp.URL, script))
	d := startDaemon(t, cfg)
	for _, h := range []string{
		`{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"` + failing.URL + `/gate","failureMode":"ALLOW"}}`,
		`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + failing.URL + `/audit","maxRetries":0}}`,
	} {
		if st := d.call("POST", "/api/hooks", h, nil); st != 201 {
			t.Fatalf("hook: %d", st)
		}
	}
	// A chat turn: the gate fails open before the tool call, the audit delivery dies.
	if out := d.stream("/harness/chat", `{"sessionId":"s1","userId":"alice","input":"read it"}`, ""); !strings.Contains(out, "done") {
		t.Fatalf("chat: %s", out)
	}
	// A task firing.
	var task struct{ ID int64 }
	if st := d.call("POST", "/api/tasks", `{"taskName":"nightly","cron":"0 0 3 * * *","input":"report"}`, &task); st != 201 {
		t.Fatalf("task: %d", st)
	}
	if st := d.call("POST", fmt.Sprintf("/api/tasks/%d/run", task.ID), "", nil); st != 200 && st != 202 {
		t.Fatalf("run task: %d", st)
	}
	// A coding agent's hook: its decision row carries the request's trace.
	in, err := os.ReadFile("../../testdata/agents/claude-code/PreToolUse.json")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", d.url("/v1/agents/claude-code/hooks"), bytes.NewReader(in))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("coding agent hook: %v %v", resp, err)
	}
	resp.Body.Close()
	var rows struct {
		Items []struct {
			AgentKind string
			TraceID   *string
		}
	}
	if st := d.call("GET", "/api/decisions", "", &rows); st != 200 || len(rows.Items) == 0 {
		t.Fatalf("decisions: %d", st)
	}
	agentRows := 0
	for _, r := range rows.Items {
		if r.AgentKind != "claude-code" {
			continue
		}
		agentRows++
		if r.TraceID == nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(*r.TraceID) {
			t.Fatalf("the coding agent's decision row has no trace: %v", r.TraceID)
		}
	}
	if agentRows == 0 {
		t.Fatal("no decision row of the coding agent's hook")
	}
	want := []string{"interceptive hook failed; failureMode applied", "delivery dead: retries spent", "task firing ended"}
	for _, msg := range want {
		d.waitLog(`"msg":"` + msg + `"`)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done

	hexID := func(n int) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`^[0-9a-f]{%d}$`, n)) }
	traceRe, spanRe := hexID(32), hexID(16)
	traced := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(d.log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		if _, ok := processLines[line.Msg]; ok {
			continue
		}
		if !traceRe.MatchString(line.TraceID) || !spanRe.MatchString(line.SpanID) || line.TraceID == strings.Repeat("0", 32) {
			t.Errorf("logged without its trace: %s", sc.Text())
			continue
		}
		traced[line.Msg] = true
	}
	for _, msg := range want {
		if !traced[msg] {
			t.Errorf("%q was not logged with a trace", msg)
		}
	}
}
