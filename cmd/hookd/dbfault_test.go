package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// pgLink is a TCP link to the PostgreSQL server that a test can break: its connections are
// reset and new ones refused until it is mended, as while a database restarts or fails over.
type pgLink struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	broken bool
}

func newPGLink(t *testing.T, target string) *pgLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &pgLink{ln: ln}
	t.Cleanup(func() { ln.Close(); l.set(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			up, err := net.Dial("tcp", target)
			if l.broken || err != nil {
				l.mu.Unlock()
				c.Close()
				if up != nil {
					up.Close()
				}
				continue
			}
			l.conns = append(l.conns, c, up)
			l.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return l
}

// set breaks the link (resetting every connection through it) or mends it.
func (l *pgLink) set(broken bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.broken = broken
	if broken {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}

// TestBatchedDecisionsOutliveADatabaseRestart: with decisions.durability batched on PostgreSQL,
// the decisions answered while the database refuses connections for a moment are written once
// it is back, as the retries of a failed write promise: no connection was made, so nothing can
// have been written, and writing them again cannot store them twice.
func TestBatchedDecisionsOutliveADatabaseRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real daemon")
	}
	database := storagetest.PostgresURL(t)
	u, _ := url.Parse(database)
	link := newPGLink(t, u.Host)
	viaLink := *u
	viaLink.Host = link.ln.Addr().String()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"decision":"allow"}`))
	}))
	defer recv.Close()
	dir := t.TempDir()
	d := startDaemon(t, writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks: {allowPrivateNetworks: true}
decisions: {durability: batched}
`, viaLink.String(), testMasterKey)))
	if st := d.call("POST", "/api/hooks", `{"hookName":"gate","hookType":"pre_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","failureMode":"DENY"}}`, nil); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, d.log())
	}
	decide := func(i int) string {
		var out struct{ Decision, DecisionID string }
		body := fmt.Sprintf(`{"hookType":"pre_tool_use","sessionId":1,"context":{"toolName":"t","toolCallId":"c%d","arguments":{}}}`, i)
		if st := d.callQuiet("POST", "/api/hooks/dispatch", body, &out); st != 200 || out.Decision != "allow" {
			return ""
		}
		return out.DecisionID
	}
	logged := func(id string) bool {
		var page struct{ Items []struct{ DecisionID string } }
		d.callQuiet("GET", "/api/decisions?decisionId="+id, "", &page)
		return len(page.Items) > 0
	}
	first := decide(0)
	for deadline := time.Now().Add(10 * time.Second); !logged(first); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first decision was never logged\n%s", d.log())
		}
	}
	link.set(true)
	// The pool's connections, idle for over a second, are checked before use and found gone, so
	// each write needs a new connection, which is refused. (One used sooner would take the
	// statement and fail after it: whether it was written cannot be known, and it is not.)
	time.Sleep(1200 * time.Millisecond)
	var answered []string
	for i := 1; i <= 5; i++ {
		if id := decide(i); id != "" {
			answered = append(answered, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	link.set(false)
	if len(answered) == 0 {
		t.Fatalf("no decision was answered while the database was away\n%s", d.log())
	}
	time.Sleep(3 * time.Second) // the retries of a failed write span about 1.5 s
	for _, id := range answered {
		if !logged(id) {
			t.Errorf("decision %s was answered but is not in the log", id)
		}
	}
	if t.Failed() {
		t.Log(d.log())
	}
}
