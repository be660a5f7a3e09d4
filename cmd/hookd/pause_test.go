package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// frame is one platform SSE frame, with its envelope timestamp and when it arrived.
type frame struct {
	ID        string
	EventType string          `json:"eventType"`
	Data      json.RawMessage `json:"data"`
	Timestamp string          `json:"timestamp"`
	// Step and TotalTokens are the model call a frame belongs to and the run's tokens then.
	Step        *int   `json:"step"`
	TotalTokens *int64 `json:"totalTokens"`
	arrived     time.Time
}

// readFrames reads SSE frames (heartbeats left out) from resp until stop says so or the stream
// ends.
func readFrames(t *testing.T, resp *http.Response, stop func(frame) bool) []frame {
	t.Helper()
	defer resp.Body.Close()
	var out []frame
	scanSSE(t, resp.Body, func(_, id, data string) bool {
		var f frame
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatalf("frame data: %v: %s", err, data)
		}
		f.ID, f.arrived = id, time.Now()
		if f.EventType == "HEARTBEAT" {
			return false
		}
		out = append(out, f)
		return stop(f)
	})
	return out
}

func seqOf(t *testing.T, id string) int64 {
	n, err := strconv.ParseInt(strings.SplitN(id, ".", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("frame id %q: %v", id, err)
	}
	return n
}

// A run waiting for a person's confirmation survives a SIGKILL: after the restart the answer
// resumes it under the same run id, and its stream has every event once, in order.
func TestPendingConfirmationSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"*","steps":[
		{"thinking":"save it","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"report.md","content":"# Q3"}}]},
		{"text":"saved report.md"}]}]}`), 0o600)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
agent: {toolDefault: ask}
`, filepath.Join(dir, "hookd.db"), script))
	d := startDaemon(t, cfg)

	req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"sessionId":"s-1","userInput":"write the Q3 report"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(bearer(req))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %v %v", err, resp)
	}
	requestID := resp.Header.Get("X-Request-Id")
	before := readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
	var ask struct{ AskID string }
	for _, f := range before {
		if f.EventType == "PERMISSION_ASK" {
			json.Unmarshal(f.Data, &ask)
		}
	}
	if ask.AskID == "" || requestID == "" {
		t.Fatalf("no ask before the pause: %+v", before)
	}
	lastID := before[len(before)-1].ID

	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d2 := startDaemon(t, cfg)

	if st := d2.call("POST", "/api/agent/permission/reply", `{"askId":"`+ask.AskID+`","approved":true}`, nil); st != 200 {
		t.Fatalf("reply after restart: %d\n%s", st, d2.log())
	}
	if st := d2.call("POST", "/api/agent/permission/reply", `{"askId":"`+ask.AskID+`","approved":true}`, nil); st != 409 {
		t.Fatalf("second use of the approval: %d", st)
	}
	get := func(after string) []frame {
		r, _ := http.NewRequest("GET", d2.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+after), nil)
		c := &http.Client{Timeout: 20 * time.Second}
		resp, err := c.Do(bearer(r))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("resume stream: %v %v", err, resp)
		}
		return readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
	}
	after := get(lastID)
	if len(after) == 0 || after[len(after)-1].EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("after the restart: %+v", after)
	}
	if seqOf(t, after[0].ID) <= seqOf(t, lastID) {
		t.Fatalf("replayed from %s after %s", after[0].ID, lastID)
	}
	resolved := false
	for _, f := range after {
		resolved = resolved || f.EventType == "PERMISSION_ASK_RESOLVED"
	}
	if !resolved {
		t.Fatalf("no PERMISSION_ASK_RESOLVED: %+v", after)
	}
	// The whole run, replayed: every frame once, ids increasing, and what the first daemon sent
	// is exactly its beginning.
	all := get("0")
	seen := map[string]bool{}
	for i, f := range all {
		if seen[f.ID] {
			t.Fatalf("frame %s twice", f.ID)
		}
		seen[f.ID] = true
		if i > 0 && seqOf(t, f.ID) < seqOf(t, all[i-1].ID) {
			t.Fatalf("ids go back: %s after %s", f.ID, all[i-1].ID)
		}
	}
	for i, f := range before {
		if all[i].ID != f.ID || all[i].EventType != f.EventType {
			t.Fatalf("replay differs at %d: %s %s vs %s %s", i, all[i].ID, all[i].EventType, f.ID, f.EventType)
		}
	}
}

// A run whose daemon is SIGKILLed while its user_message hook decides has not taken its input:
// resumed after the restart, it asks the hook again (the resume is no way past it), and the
// model gets the input once the hook admits it (the script answers the run's input).
func TestRunKilledWhileItsInputIsDecided(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"/quarterly/","steps":[{"text":"the quarterly answer"}]},
		{"match":"*","steps":[{"text":"an answer to something else"}]}]}`), 0o600)
	var mu sync.Mutex
	var asked []string // the userInput of every user_message call
	answer := make(chan string, 4)
	hold := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct{ Context struct{ UserInput string } }
		json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		asked = append(asked, env.Context.UserInput)
		first := len(asked) == 1
		mu.Unlock()
		if first {
			select { // the first daemon dies while it waits here
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte(<-answer))
	}))
	defer recv.Close()
	defer close(hold)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
webhooks: {allowPrivateNetworks: true}
`, filepath.Join(dir, "hookd.db"), script))
	d := startDaemon(t, cfg)
	if st := d.call("POST", "/api/hooks", `{"hookName":"dlp","hookType":"user_message",
		"dispatchConfig":{"url":"`+recv.URL+`","signingSecret":"s3cr3t","timeoutMs":60000,"failureMode":"DENY"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}
	start := func(d *daemon, input string) (string, *http.Response) {
		req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"sessionId":"s-1","userInput":"`+input+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(bearer(req))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("run: %v %v", err, resp)
		}
		return resp.Header.Get("X-Request-Id"), resp
	}
	requestID, resp := start(d, "the quarterly numbers, card 4111")
	go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close() }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(asked)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hook was not asked:\n%s", d.log())
		}
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done

	d2 := startDaemon(t, cfg)
	stream := func(after string) []frame {
		r, _ := http.NewRequest("GET", d2.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+after), nil)
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(bearer(r))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", err, resp)
		}
		return readFrames(t, resp, func(f frame) bool {
			return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" || f.EventType == "MESSAGE_SUSPENDED"
		})
	}
	suspended := stream("0")
	if suspended[len(suspended)-1].EventType != "MESSAGE_SUSPENDED" {
		t.Fatalf("after the restart: %+v", suspended)
	}
	answer <- `{"decision":"allow"}`
	if st := d2.call("POST", "/api/agent/run/"+requestID+"/resume", "", nil); st != 200 {
		t.Fatalf("resume: %d\n%s", st, d2.log())
	}
	fs := stream(suspended[len(suspended)-1].ID)
	var text strings.Builder // the answer's text, its deltas joined
	for _, f := range fs {
		var d struct{ Text string }
		json.Unmarshal(f.Data, &d)
		text.WriteString(d.Text)
	}
	if last := fs[len(fs)-1]; last.EventType != "MESSAGE_COMPLETED" || !strings.Contains(text.String(), "the quarterly answer") {
		t.Fatalf("the resumed run, its hook allowing: %s", text.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[1] != asked[0] {
		t.Fatalf("the hook was asked %q; want the input asked again on resume", asked)
	}
}
