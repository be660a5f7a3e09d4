package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestCrashLosesNoEvent queues observational events for a receiver that is failing, lets it
// recover, SIGKILLs the daemon in the middle of delivering, starts it again on the same
// database, and checks that every queued eventId arrived at least once (duplicates are counted:
// they are the events the receiver took but the daemon had not yet recorded).
func TestCrashLosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real daemon")
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		crashTest(t, dir, "sqlite:"+filepath.Join(dir, "hookd.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		crashTest(t, t.TempDir(), storagetest.PostgresURL(t))
	})
}

func crashTest(t *testing.T, dir, database string) {
	const events = 2000
	// The attempts the daemon makes of a delivery: the first, the hook's three fast retries and
	// the ladder below. While it is down the receiver takes an event only on its last attempt,
	// so however long queueing takes on a loaded machine, no delivery runs out of retries.
	const lastAttempt = 1 + 3 + 9
	var healthy atomic.Bool
	var mu sync.Mutex
	seen := map[string]int{}
	var requests atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests.Add(1)
		var env struct {
			EventID         string
			DeliveryAttempt int
		}
		json.Unmarshal(body, &env)
		if !healthy.Load() && env.DeliveryAttempt < lastAttempt {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		seen[env.EventID]++
		mu.Unlock()
	}))
	defer recv.Close()

	// A short ladder so the test takes seconds (lastAttempt counts its steps); its longer tail
	// is reached only when queueing is slow, and keeps most events undelivered until the
	// receiver recovers. A short claim lease so PostgreSQL hands out the killed daemon's
	// in-flight rows soon after the restart.
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks:
  allowPrivateNetworks: true
  claimLease: 3s
  retry: {fast: [200ms, 300ms, 400ms], ladder: [1s, 2s, 2s, 2s, 2s, 2s, 5s, 10s, 20s], jitter: 0}
`, database, testMasterKey))
	d := startDaemon(t, cfg)
	var hook struct{ ID int64 }
	if st := d.call("POST", "/api/hooks", `{"hookName":"audit","hookType":"post_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":1000,"signingSecret":"s3cr3t"}}`, &hook); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}

	// Queue the events from several clients at once; a 202 means the event is durable.
	queued := make(chan string, events)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < events; i += 8 {
				var out struct{ EventIDs []string }
				body := fmt.Sprintf(`{"hookType":"post_tool_use","sessionId":%d,"context":{"toolName":"t","toolCallId":"c%d","arguments":{},"output":"ok","succeeded":true,"durationMs":1}}`, i+1, i)
				if st := d.call("POST", "/api/hooks/dispatch", body, &out); st != 202 || len(out.EventIDs) != 1 {
					t.Errorf("dispatch %d: %d %v", i, st, out.EventIDs)
					return
				}
				queued <- out.EventIDs[0]
			}
		}(w)
	}
	wg.Wait()
	close(queued)
	if t.Failed() {
		return
	}

	// Kill it while it is busy retrying against the failing receiver.
	for deadline := time.Now().Add(2 * time.Minute); requests.Load() < events/2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon made only %d attempts", requests.Load())
		}
	}
	// The receiver recovers and the daemon is killed in the middle of delivering: some events
	// are accepted by the receiver but not yet recorded as delivered, and will arrive twice.
	healthy.Store(true)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= events/10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got only %d events after recovering", n)
		}
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	mu.Lock()
	t.Logf("SIGKILL after %d attempts, %d events delivered", requests.Load(), len(seen))
	mu.Unlock()

	d2 := startDaemon(t, cfg)
	want := map[string]bool{}
	for id := range queued {
		want[id] = true
	}
	// A bound for a loaded machine, not a speed requirement: the wait ends when the last event
	// arrives.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		missing := 0
		for id := range want {
			if seen[id] == 0 {
				missing++
			}
		}
		dups := 0
		for _, n := range seen {
			dups += n - 1
		}
		mu.Unlock()
		if missing == 0 {
			t.Logf("all %d events arrived; %d duplicate deliveries", len(want), dups)
			break
		}
		if time.Now().After(deadline) {
			var dead struct{ Items []struct{ EventID string } }
			d2.call("GET", "/api/deliveries?status=dead&limit=500", "", &dead)
			t.Fatalf("%d of %d events never arrived (%d deliveries dead)\n%s", missing, len(want), len(dead.Items), d2.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The daemon agrees: every delivery is recorded delivered.
	var pending struct{ Items []struct{ Status string } }
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		d2.call("GET", "/api/deliveries?status=pending&limit=500", "", &pending)
		var inflight struct{ Items []struct{ Status string } }
		d2.call("GET", "/api/deliveries?status=delivering&limit=500", "", &inflight)
		if len(pending.Items)+len(inflight.Items) == 0 {
			var dead struct{ Items []struct{ Status string } }
			d2.call("GET", "/api/deliveries?status=dead&limit=500", "", &dead)
			if len(dead.Items) > 0 {
				t.Fatalf("%d deliveries dead although every event arrived", len(dead.Items))
			}
			return
		}
	}
	t.Fatalf("%d deliveries still pending after all events arrived", len(pending.Items))
}
