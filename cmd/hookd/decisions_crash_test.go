package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestCrashLosesNoDecision: callers decide through the real daemon (decisions.durability sync,
// the default) until N decisions were answered, the daemon is SIGKILLed with more in flight, and
// after a restart every answered decision is in the log, whose chain verifies. Editing one row
// in the database then makes `hookd decisions verify` fail naming that row.
func TestCrashLosesNoDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real daemon")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "hookd.db")
		decisionCrashTest(t, dir, "sqlite:"+path, sqlite.Open("file:"+path+"?_busy_timeout=5000"))
	})
	t.Run("postgres", func(t *testing.T) {
		url := storagetest.PostgresURL(t)
		decisionCrashTest(t, t.TempDir(), url, postgres.Open(url))
	})
}

func decisionCrashTest(t *testing.T, dir, database string, direct gorm.Dialector) {
	const acked = 400
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"decision":"deny","reason":"needs approval"}`))
	}))
	defer recv.Close()
	cfg := crashConfig(t, dir, database)
	d := startDaemon(t, cfg)
	if st := d.call("POST", "/api/hooks", `{"hookName":"approval","hookType":"pre_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","failureMode":"DENY"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}

	// Callers decide until acked decisions were answered; the kill lands with more in flight.
	var mu sync.Mutex
	var answered []string
	var count atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var out struct{ Decision, DecisionID string }
				body := fmt.Sprintf(`{"hookType":"pre_tool_use","sessionId":%d,"principalId":7,"context":{"toolName":"transferFunds","toolCallId":"c%d-%d","arguments":{"amount":%d}}}`, w, w, i, i)
				if st := d.callQuiet("POST", "/api/hooks/dispatch", body, &out); st != 200 {
					return // the daemon is gone
				}
				if out.Decision != "deny" || out.DecisionID == "" {
					t.Errorf("decision %+v", out)
					return
				}
				mu.Lock()
				answered = append(answered, out.DecisionID)
				mu.Unlock()
				if count.Add(1) >= acked {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	<-enough
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	wg.Wait()
	mu.Lock()
	got := append([]string(nil), answered...)
	mu.Unlock()
	t.Logf("SIGKILL after %d answered decisions", len(got))

	d2 := startDaemon(t, cfg)
	logged := map[string]bool{}
	var rows []struct {
		ID         int64  `json:"id"`
		DecisionID string `json:"decisionId"`
		ToolName   string `json:"toolName"`
	}
	for cursor := ""; ; {
		var page struct {
			Items []struct {
				ID         int64  `json:"id"`
				DecisionID string `json:"decisionId"`
				ToolName   string `json:"toolName"`
			} `json:"items"`
			Next string `json:"next"`
		}
		path := "/api/decisions?limit=500"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if st := d2.call("GET", path, "", &page); st != 200 {
			t.Fatalf("list decisions: %d", st)
		}
		for _, r := range page.Items {
			logged[r.DecisionID] = true
			rows = append(rows, r)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	missing := 0
	for _, id := range got {
		if !logged[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d answered decisions are not in the log after the crash", missing, len(got))
	}

	cli := func(args ...string) (string, int) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d2.addr, "HOOKD_CLI_TOKEN=adm-test")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := cli("decisions", "verify"); code != 0 || !strings.Contains(out, "decision log intact") {
		t.Fatalf("verify after the crash: %d %s", code, out)
	}

	// An auditor's nightmare: someone with database access turns a deny into an allow.
	victim := rows[len(rows)/2].ID
	db, err := gorm.Open(direct, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`UPDATE decisions SET outcome = 'allow', reason = '' WHERE id = ?`, victim).Error; err != nil {
		t.Fatal(err)
	}
	if s, err := db.DB(); err == nil {
		s.Close()
	}
	out, code := cli("decisions", "verify")
	if code != 1 || !strings.Contains(out, fmt.Sprintf("broken at row %d ", victim)) {
		t.Fatalf("verify after editing row %d: exit %d\n%s", victim, code, out)
	}
	t.Logf("verify: %s", strings.TrimSpace(out))
}

// callQuiet is call for a daemon that may be killed meanwhile: a failed exchange is status 0.
func (d *daemon) callQuiet(method, path, body string, out any) int {
	req, _ := http.NewRequest(method, d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	bearer(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var w struct{ Data json.RawMessage }
	if json.NewDecoder(resp.Body).Decode(&w) != nil {
		return 0 // cut off mid-answer: not an answer
	}
	json.Unmarshal(w.Data, out)
	return resp.StatusCode
}

// crashConfig is the config of the crash tests' daemons: database, the test tokens, receivers on
// loopback allowed.
func crashConfig(t *testing.T, dir, database string) string {
	return writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks: {allowPrivateNetworks: true}
`, database, testMasterKey))
}
