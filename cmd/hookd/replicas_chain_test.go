package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestReplicasShareOneDecisionChain: two daemons on one PostgreSQL database decide at once, both
// appending to the one hash-chained decision log. Each replica's guess at the chain's tail goes
// stale whenever the other appends, so both ways of appending are taken; the log then holds every
// answered decision and verifies unbroken: the replicas never forked the chain.
func TestReplicasShareOneDecisionChain(t *testing.T) {
	if os.Getenv(storagetest.PostgresEnv) == "" {
		t.Skipf("replica test skipped: %s is not set; replicas need PostgreSQL", storagetest.PostgresEnv)
	}
	if testing.Short() {
		t.Skip("replica test runs two real daemons")
	}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"decision":"allow"}`))
	}))
	defer recv.Close()
	c := newCluster(t, 64)
	a := c.start()
	if st := a.call("POST", "/api/hooks", `{"hookName":"approval","hookType":"pre_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","failureMode":"DENY"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, a.log())
	}
	c.start() // it loads the hook at start

	const callers, each = 16, 40
	var answered atomic.Int64
	var wg sync.WaitGroup
	for w := range callers {
		d := c.nodes[w%len(c.nodes)]
		wg.Go(func() {
			for i := range each {
				var out struct{ Decision string }
				body := fmt.Sprintf(`{"hookType":"pre_tool_use","sessionId":%d,"context":{"toolName":"transferFunds","toolCallId":"c%d-%d","arguments":{}}}`, w+1, w, i)
				if st := d.callQuiet("POST", "/api/hooks/dispatch", body, &out); st != 200 || out.Decision != "allow" {
					t.Errorf("dispatch through %s: %d %+v", d.addr, st, out)
					return
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	for _, d := range c.nodes {
		var rep storage.ChainReport
		if st := d.call("GET", "/api/decisions/verify", "", &rep); st != 200 || !rep.OK || rep.Checked != answered.Load() {
			t.Fatalf("verify through %s: %d %+v, want %d rows checked\n%s", d.addr, st, rep, answered.Load(), c.logs())
		}
	}
}
