package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
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

// eventCounter counts the requests a receiver got of each eventId.
type eventCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

// count counts r and returns how many requests of its event came so far.
func (c *eventCounter) count(r *http.Request) int {
	body, _ := io.ReadAll(r.Body)
	var env struct{ EventID string }
	json.Unmarshal(body, &env)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[env.EventID]++
	return c.seen[env.EventID]
}

func slowReceiverTest(t *testing.T, database string, replicas int) {
	const events = 4
	var c eventCounter
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.count(r)
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) != events {
		t.Errorf("the receiver got %d events, want %d", len(c.seen), events)
	}
	for id, n := range c.seen {
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

// TestShutdownGivesBackItsClaims: on PostgreSQL, a delivery whose attempt a SIGTERM cut short is
// sent again by another replica at once, not once the claim lease (2 minutes by default) has run
// out; its attempt is not spent.
func TestShutdownGivesBackItsClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real daemon")
	}
	database := storagetest.PostgresURL(t)
	var c eventCounter
	hang := make(chan struct{})
	defer close(hang)
	first := make(chan struct{}, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.count(r) == 1 {
			first <- struct{}{}
			select { // the first attempt outlasts the shutdown's bound
			case <-hang:
			case <-r.Context().Done():
			}
		}
	}))
	defer recv.Close()
	var nodes []*daemon
	for range 2 {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
dataDir: %s
masterKey: %s
shutdownTimeout: 1s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks: {allowPrivateNetworks: true}
`, database, dir, testMasterKey))
		nodes = append(nodes, startDaemon(t, cfg))
	}
	a, b := nodes[0], nodes[1]
	if st := a.call("POST", "/api/hooks", `{"hookName":"audit","hookType":"post_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":30000}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, a.log())
	}
	// B knows the hook before A queues the event (a hook write reaches the others at commit).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var hooks struct{ Items []struct{ ID int64 } }
		b.call("GET", "/api/hooks", "", &hooks)
		if len(hooks.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B does not list the hook")
		}
	}
	var out struct{ EventIDs []string }
	if st := a.call("POST", "/api/hooks/dispatch", `{"hookType":"post_tool_use","context":{"toolName":"t","toolCallId":"c","arguments":{},"output":"x","succeeded":true,"durationMs":1}}`, &out); st != 202 || len(out.EventIDs) != 1 {
		t.Fatalf("dispatch: %d %v", st, out.EventIDs)
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the event was never sent")
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	<-a.done
	stopped := time.Now()
	for deadline := stopped.Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c.mu.Lock()
		n := c.seen[out.EventIDs[0]]
		c.mu.Unlock()
		if n >= 2 {
			t.Logf("sent again %s after the shutdown", time.Since(stopped).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event cut short by the shutdown was not sent again within 20 s\n%s", a.log())
		}
	}
	var list struct {
		Items []struct {
			Status   string
			Attempts int
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b.call("GET", "/api/deliveries?eventId="+out.EventIDs[0], "", &list)
		if len(list.Items) == 1 && list.Items[0].Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery: %+v", list.Items)
		}
	}
	if list.Items[0].Attempts != 1 {
		t.Errorf("the delivery records %d attempts: the one cut short was spent", list.Items[0].Attempts)
	}
}
