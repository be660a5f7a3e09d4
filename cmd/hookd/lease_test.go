package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestSlowReceiverGetsAnEventOnce: a receiver that answers within its hook's timeoutMs but after
// webhooks.claimLease gets each event once, on one daemon (whose own rescuer saw the claim run
// out) as on two replicas of one database, and the delivery records one attempt.
func TestSlowReceiverGetsAnEventOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real daemon")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		slowReceiverTest(t, "sqlite:"+filepath.Join(dir, "hookd.db"), 1)
	})
	t.Run("postgres", func(t *testing.T) {
		slowReceiverTest(t, storagetest.PostgresURL(t), 2)
	})
}

func slowReceiverTest(t *testing.T, database string, replicas int) {
	const events = 4
	var mu sync.Mutex
	seen := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct{ EventID string }
		json.Unmarshal(body, &env)
		mu.Lock()
		seen[env.EventID]++
		mu.Unlock()
		time.Sleep(3 * time.Second) // three claim leases, within the hook's timeoutMs
	}))
	defer recv.Close()
	var nodes []*daemon
	for range replicas {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
dataDir: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks:
  allowPrivateNetworks: true
  claimLease: 1s
`, database, dir, testMasterKey))
		nodes = append(nodes, startDaemon(t, cfg))
	}
	d := nodes[0]
	if st := d.call("POST", "/api/hooks", `{"hookName":"slow","hookType":"post_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":6000,"signingSecret":"s3cr3t"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}
	for i := range events {
		n := nodes[i%len(nodes)]
		body := fmt.Sprintf(`{"hookType":"post_tool_use","sessionId":1,"context":{"toolName":"t","toolCallId":"c%d","arguments":{},"output":"ok","succeeded":true,"durationMs":1}}`, i)
		if st := n.call("POST", "/api/hooks/dispatch", body, nil); st != 202 {
			t.Fatalf("dispatch: %d\n%s", st, n.log())
		}
	}
	var list struct {
		Items []struct {
			EventID  string
			Status   string
			Attempts int
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d.call("GET", "/api/deliveries?status=delivered", "", &list)
		if len(list.Items) == events {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries delivered\n%s", len(list.Items), events, d.log())
		}
	}
	time.Sleep(2 * time.Second) // a rescue and a claim after the last outcome
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != events {
		t.Errorf("the receiver got %d events, want %d", len(seen), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s arrived %d times", id, n)
		}
	}
	for _, it := range list.Items {
		if it.Attempts != 1 {
			t.Errorf("delivery of %s records %d attempts", it.EventID, it.Attempts)
		}
	}
}
