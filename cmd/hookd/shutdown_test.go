package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SIGTERM while a run streams and deliveries are in flight: the stream ends with the run's
// pause, the daemon exits 0 within its bound, and after the restart the run resumes to its end
// and every queued event is delivered.
func TestGracefulShutdownKeepsRunsAndDeliveries(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"*","steps":[
		{"text":"thinking slowly","delayMs":4000},
		{"text":"never reached"}]}]}`), 0o600)
	var mu sync.Mutex
	got := map[string]int{}
	slow := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct{ EventID string }
		json.NewDecoder(r.Body).Decode(&env)
		select {
		case <-slow:
		case <-time.After(300 * time.Millisecond): // slow enough to be in flight at SIGTERM
		}
		mu.Lock()
		got[env.EventID]++
		mu.Unlock()
	}))
	defer recv.Close()
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
shutdownTimeout: 5s
model: {provider: scripted, script: %s}
webhooks: {allowPrivateNetworks: true, retry: {fast: [100ms], ladder: [200ms], jitter: 0}}
`, filepath.Join(dir, "hookd.db"), script))
	d := startDaemon(t, cfg)
	d.call("POST", "/api/hooks", `{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":2000}}`, nil)
	var queued []string
	for i := 0; i < 200; i++ {
		var out struct{ EventIDs []string }
		d.call("POST", "/api/hooks/dispatch", `{"hookType":"post_tool_use","context":{"toolName":"t","toolCallId":"c","arguments":{},"output":"x","succeeded":true,"durationMs":1}}`, &out)
		queued = append(queued, out.EventIDs...)
	}

	req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"sessionId":"s","userInput":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %v %v", err, resp)
	}
	requestID := resp.Header.Get("X-Request-Id")
	frames := make(chan []frame, 1)
	go func() {
		frames <- readFrames(t, resp, func(frame) bool { return false }) // until the server ends it
	}()
	time.Sleep(300 * time.Millisecond) // the run is inside its slow model call
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	if code := d.cmd.ProcessState.ExitCode(); code != 0 || time.Since(start) > 8*time.Second {
		t.Fatalf("exit %d after %s:\n%s", code, time.Since(start), d.log())
	}
	var stream []frame
	select {
	case stream = <-frames:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream was not ended by the shutdown")
	}
	last := stream[len(stream)-1]
	if last.EventType != "MESSAGE_SUSPENDED" || !strings.Contains(string(last.Data), "SHUTDOWN_INTERRUPT") {
		t.Fatalf("the stream's last frame: %s %s", last.EventType, last.Data)
	}

	close(slow)
	d2 := startDaemon(t, cfg)
	if st := d2.call("POST", "/api/agent/run/"+requestID+"/resume", "", nil); st != 200 {
		t.Fatalf("resume: %d\n%s", st, d2.log())
	}
	r2, _ := http.Get(d2.url("/api/agent/run/stream?requestId=" + requestID + "&lastEventId=" + last.ID))
	rest := readFrames(t, r2, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
	if len(rest) == 0 || rest[len(rest)-1].EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("after the restart: %+v", rest)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		missing := 0
		for _, id := range queued {
			if got[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d queued events never delivered", missing, len(queued))
		}
	}
	io.Copy(io.Discard, r2.Body)
}
