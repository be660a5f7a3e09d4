package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestCrashWhileToolRunsKeepsTheStep: a daemon killed while a step's tool runs restarts with the
// run paused at that step (MESSAGE_SUSPENDED step 1, its tokens counted). Resumed, the run runs
// the call again (its TOOL_ frames, within step 1, now end) and goes on to step 2: the model is
// not asked step 1 again, so the stream does not repeat its answer and the run's token count
// never goes back. Before, the model's answer was
// saved only once its calls were done: the resumed run asked the model again, streamed step 1 a
// second time from a token count of 0, and left the first call's tokens out of its total.
func TestCrashWhileToolRunsKeepsTheStep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real daemon")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		stepCrashTest(t, dir, "sqlite:"+filepath.Join(dir, "hookd.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		stepCrashTest(t, t.TempDir(), storagetest.PostgresURL(t))
	})
}

func stepCrashTest(t *testing.T, dir, database string) {
	// The search backend holds the first search until the test ends (the daemon is killed
	// meanwhile) and answers the next at once.
	searching := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	var searches atomic.Int32
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if searches.Add(1) == 1 {
			close(searching)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"results":[{"title":"hookd","url":"https://example.com/","content":"a policy daemon"}]}`))
	}))
	defer web.Close()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"*","steps":[
		{"text":"looking it up","usage":{"inputTokens":120,"outputTokens":30},"toolCalls":[{"name":"web_search","arguments":{"query":"hookd"}}]},
		{"text":"found it","usage":{"inputTokens":200,"outputTokens":10}}]}]}`), 0o600)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
agent: {toolDefault: allow, runLease: 5s, webSearch: {url: %s/search}}
webhooks: {allowPrivateNetworks: true}
`, database, testMasterKey, script, web.URL))

	d := startDaemon(t, cfg)
	resp := d.postStream(t, "/api/agent/run/stream", `{"sessionId":"s-1","userInput":"what is hookd?"}`)
	requestID := resp.Header.Get("X-Request-Id")
	select {
	case <-searching:
	case <-time.After(time.Minute):
		t.Fatalf("the tool never ran:\n%s", d.log())
	}
	resp.Body.Close()
	d.kill()

	d2 := startDaemon(t, cfg)
	get := func(after string, stop func(frame) bool) []frame {
		r, _ := http.NewRequest("GET", d2.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+after), nil)
		rs, err := (&http.Client{Timeout: 30 * time.Second}).Do(bearer(r))
		if err != nil || rs.StatusCode != 200 {
			t.Fatalf("stream: %v %v", err, rs)
		}
		return readFrames(t, rs, stop)
	}
	before := get("0", func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
	pauseFrame := before[len(before)-1]
	var pause struct{ SuspendReason struct{ Type string } }
	json.Unmarshal(pauseFrame.Data, &pause)
	if pause.SuspendReason.Type != "SHUTDOWN_INTERRUPT" || pauseFrame.Step == nil || *pauseFrame.Step != 1 ||
		pauseFrame.TotalTokens == nil || *pauseFrame.TotalTokens == 0 {
		t.Fatalf("the recovered pause does not stand at step 1 with its tokens: step %v tokens %v %s", pauseFrame.Step, pauseFrame.TotalTokens, pauseFrame.Data)
	}
	if st := d2.call("POST", "/api/agent/run/"+requestID+"/resume", "", nil); st != 200 {
		t.Fatalf("resume: %d\n%s", st, d2.log())
	}
	after := get(pauseFrame.ID, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
	if last := after[len(after)-1]; last.EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("after the resume: %+v", after)
	}
	for _, f := range after {
		// The interrupted call runs again, within step 1; the model's answer is not streamed again.
		if f.Step != nil && *f.Step < 2 && !strings.HasPrefix(f.EventType, "TOOL_") {
			t.Errorf("step 1 streamed again after the resume: %s %s", f.EventType, f.Data)
		}
		if f.TotalTokens != nil && *f.TotalTokens < *pauseFrame.TotalTokens {
			t.Errorf("the token count went back from %d to %d: %s", *pauseFrame.TotalTokens, *f.TotalTokens, f.EventType)
		}
	}
	if searches.Load() != 2 {
		t.Errorf("%d searches, want the interrupted one and its run after the resume", searches.Load())
	}
}
