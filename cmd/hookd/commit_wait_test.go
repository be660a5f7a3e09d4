package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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
	held := heldBinary(t)
	for _, kind := range []string{"deliveries", "decisions"} {
		t.Run("sqlite/"+kind, func(t *testing.T) {
			dir := t.TempDir()
			heldCommitTest(t, held, dir, "sqlite:"+filepath.Join(dir, "hookd.db"), kind)
		})
		t.Run("postgres/"+kind, func(t *testing.T) {
			heldCommitTest(t, held, t.TempDir(), storagetest.PostgresURL(t), kind)
		})
	}
	t.Run("sqlite/firing-end", func(t *testing.T) {
		dir := t.TempDir()
		heldFiringEndTest(t, held, dir, "sqlite:"+filepath.Join(dir, "hookd.db"))
	})
	t.Run("postgres/firing-end", func(t *testing.T) {
		heldFiringEndTest(t, held, t.TempDir(), storagetest.PostgresURL(t))
	})
}

// heldFiringEndTest: a firing's end is committed with the post_scheduled_task that reports it.
// Killed with that commit held, the daemon has recorded neither: the firing is still running, and
// the restarted daemon ends it (ABANDONED) and reports it, once. Before, the end committed alone
// first, and a crash right after it left a firing ended and never reported.
func heldFiringEndTest(t *testing.T, bin, dir, database string) {
	var mu sync.Mutex
	var reports []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct{ Context map[string]any }
		json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		reports = append(reports, env.Context)
		mu.Unlock()
	}))
	defer recv.Close()
	cfg := crashConfig(t, dir, database)
	d := startBinary(t, bin, cfg, "HOOKD_TEST_HOLD_COMMIT=taskRunEnds")
	if st := d.call("POST", "/api/hooks", `{"hookName":"task results","hookType":"post_scheduled_task","dispatchConfig":{"url":"`+recv.URL+`"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}
	var task struct{ ID int64 }
	if st := d.call("POST", "/api/tasks", `{"taskName":"daily report","cron":"@yearly","input":"hello"}`, &task); st != 201 {
		t.Fatalf("create task: %d\n%s", st, d.log())
	}
	var firing struct {
		ID        int64
		RequestID *string
	}
	if st := d.call("POST", fmt.Sprintf("/api/tasks/%d/run", task.ID), "", &firing); st != 202 || firing.RequestID == nil {
		t.Fatalf("run now: %d %+v\n%s", st, firing, d.log())
	}
	d.waitLog(`"msg":"commit held","kind":"taskRunEnds"`)
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	mu.Lock()
	if len(reports) != 0 {
		t.Fatalf("reported before its end committed: %v", reports)
	}
	mu.Unlock()

	d2 := startDaemon(t, cfg)
	var runs struct {
		Items []struct {
			ID         int64
			Status     string
			ErrorCode  string
			RequestID  *string
			FinishedAt *string
		}
	}
	if st := d2.call("GET", fmt.Sprintf("/api/tasks/%d/runs", task.ID), "", &runs); st != 200 || len(runs.Items) != 1 {
		t.Fatalf("runs: %d %+v", st, runs)
	}
	if strings.HasPrefix(database, "postgres") {
		// Another daemon may hold it: it is rescued once its lease (a minute) has lapsed, which
		// the scheduler's TestAbandonedFiring shows. Here: neither its end nor its report is in.
		if r := runs.Items[0]; r.Status != "running" || r.FinishedAt != nil {
			t.Fatalf("the firing after the restart: %+v", r)
		}
		return
	}
	if r := runs.Items[0]; r.ID != firing.ID || r.Status != "interrupted" || r.ErrorCode != "ABANDONED" || r.FinishedAt == nil ||
		r.RequestID == nil || *r.RequestID != *firing.RequestID {
		t.Fatalf("the firing after the restart: %+v", r)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rescued firing was never reported\n%s", d2.log())
		}
	}
	// Stopped, the daemon has sent all it will: one report, of the firing as it ended.
	d2.cmd.Process.Signal(syscall.SIGTERM)
	<-d2.done
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || reports[0]["errorCode"] != "ABANDONED" || reports[0]["succeeded"] != false ||
		reports[0]["taskId"] != float64(task.ID) || reports[0]["taskName"] != "daily report" || reports[0]["requestId"] != *firing.RequestID {
		t.Fatalf("reports of the firing: %v", reports)
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
	cfg := crashConfig(t, dir, database)
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
