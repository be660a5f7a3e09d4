package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestReadyzFollowsDatabaseWrites: the running daemon on a PostgreSQL server that turns
// read-only under it (its sessions end and come back read-only, as after a failover onto a
// standby) reports not ready and says why, keeps serving, and is ready again once the server
// takes writes. The first answer after a switch may come from a session the server ended; it is
// not ready either.
func TestReadyzFollowsDatabaseWrites(t *testing.T) {
	pg := storagetest.PostgresWithRole(t)
	dir := t.TempDir()
	d := startDaemon(t, writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: '%s'\ndataDir: %s\nmasterKey: %s\n", pg.URL, dir, testMasterKey)))
	get := func(path string) (int, string) {
		resp, err := http.Get(d.url(path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	readyz := func() (int, string) { return get("/readyz") }
	if st, body := readyz(); st != 200 || !strings.Contains(body, `"ready"`) {
		t.Fatalf("fresh: %d %s", st, body)
	}

	pg.SetReadOnly(true)
	refused := false
	for i := range 3 {
		st, body := readyz()
		if st != 503 {
			t.Fatalf("answer %d on a read-only server: %d %s", i+1, st, body)
		}
		if refused = strings.Contains(body, "database refuses writes"); refused {
			break
		}
	}
	if !refused {
		t.Fatalf("never said the database refuses writes\n%s", d.log())
	}
	if st, _ := readyz(); st != 503 {
		t.Fatalf("still read-only: %d", st)
	}
	if st, body := get("/healthz"); st != 200 {
		t.Fatalf("healthz while read-only: %d %s", st, body)
	}

	pg.SetReadOnly(false)
	st, body := readyz()
	for i := 0; st != 200 && i < 2; i++ {
		st, body = readyz()
	}
	if st != 200 || !strings.Contains(body, `"database":"postgres"`) {
		t.Fatalf("writable again: %d %s\n%s", st, body, d.log())
	}
	if !strings.Contains(d.log(), "readiness: database refuses writes") {
		t.Fatalf("the log does not say why it was not ready:\n%s", d.log())
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}
