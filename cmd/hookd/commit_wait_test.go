package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestCallerReleasedOnlyAfterCommit: a daemon built with the commithold tag stops its writer
// inside the transaction that holds a caller's row, after the row is written and before COMMIT.
// The caller (an observational dispatch waiting for its outbox row, a sync decision waiting for
// its log row) must not have its answer then, and after a SIGKILL there it has none at all; the
// restarted daemon holds no trace of the row, and an observational event whose row never
// committed was never sent (delivery starts only after the commit).
func TestCallerReleasedOnlyAfterCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real daemon")
	}
	held := filepath.Join(t.TempDir(), "hookd-commithold")
	if out, err := exec.Command("go", "build", "-tags", "commithold", "-o", held, ".").CombinedOutput(); err != nil {
		t.Fatalf("build hookd with commithold: %v\n%s", err, out)
	}
	for _, kind := range []string{"deliveries", "decisions"} {
		t.Run("sqlite/"+kind, func(t *testing.T) {
			dir := t.TempDir()
			heldCommitTest(t, held, dir, "sqlite:"+filepath.Join(dir, "hookd.db"), kind)
		})
		t.Run("postgres/"+kind, func(t *testing.T) {
			heldCommitTest(t, held, t.TempDir(), storagetest.PostgresURL(t), kind)
		})
	}
}

func heldCommitTest(t *testing.T, bin, dir, database, kind string) {
	var observed, decided atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/observe" {
			observed.Add(1)
		} else {
			decided.Add(1)
		}
		w.Write([]byte(`{"decision":"allow"}`))
	}))
	defer recv.Close()
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks: {allowPrivateNetworks: true}
`, database))
	d := startBinary(t, bin, cfg, "HOOKD_TEST_HOLD_COMMIT="+kind)
	for _, h := range []string{
		`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + recv.URL + `/observe"}}`,
		`{"hookName":"approval","hookType":"pre_tool_use","dispatchConfig":{"url":"` + recv.URL + `/decide","failureMode":"DENY"}}`,
	} {
		if st := d.call("POST", "/api/hooks", h, nil); st != 201 {
			t.Fatalf("create hook: %d\n%s", st, d.log())
		}
	}
	body := `{"hookType":"pre_tool_use","sessionId":3,"principalId":7,"context":{"toolName":"transferFunds","toolCallId":"c1","arguments":{"amount":1}}}`
	if kind == "deliveries" {
		body = `{"hookType":"post_tool_use","sessionId":3,"context":{"toolName":"t","toolCallId":"c1","arguments":{},"output":"ok","succeeded":true,"durationMs":1}}`
	}
	answer := make(chan int, 1)
	go func() {
		var out map[string]any
		answer <- d.callQuiet("POST", "/api/hooks/dispatch", body, &out)
	}()
	d.waitLog(`"msg":"commit held","kind":"` + kind + `"`)
	select {
	case st := <-answer:
		t.Fatalf("the caller had its answer (%d) while its row's commit was held", st)
	default:
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	if st := <-answer; st != 0 {
		t.Fatalf("the caller had an answer (%d) though its row was never committed", st)
	}
	if kind == "decisions" && decided.Load() != 1 {
		t.Fatalf("the approval hook was asked %d times", decided.Load())
	}

	d2 := startDaemon(t, cfg)
	path := "/api/decisions"
	if kind == "deliveries" {
		path = "/api/deliveries"
	}
	var page struct{ Items []map[string]any }
	if st := d2.call("GET", path, "", &page); st != 200 {
		t.Fatalf("GET %s: %d", path, st)
	}
	if len(page.Items) != 0 {
		t.Fatalf("%s after the crash: %v: a row nobody was answered for was committed", path, page.Items)
	}
	// A delivery must never start before its row is durable: the receiver saw nothing then, and
	// the restarted daemon has nothing to send.
	if n := observed.Load(); n != 0 {
		t.Fatalf("the observational receiver got %d requests for an event whose row never committed", n)
	}
}
