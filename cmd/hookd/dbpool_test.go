package main

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestDatabaseMaxConns: databaseMaxConns, here from the environment, sizes the daemon's
// PostgreSQL pool, and a pool over half of the server's max_connections is logged at start with
// the size the pool has. Once the server refuses the daemon's connections for too many sessions
// (a role's limit: the same SQLSTATE 53300 as "too many clients"), a request that needs one fails
// with that cause in the daemon's error log.
func TestDatabaseMaxConns(t *testing.T) {
	pg := storagetest.PostgresWithRole(t)
	var server int
	probe, err := sql.Open("pgx", pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = probe.QueryRow("SHOW max_connections").Scan(&server)
	probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	pool := server/2 + 1
	dir := t.TempDir()
	d := startDaemon(t, writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: '%s'\ndataDir: %s\nmasterKey: %s\nauth: {adminTokens: [adm-test]}\n", pg.URL, dir, testMasterKey)),
		fmt.Sprintf("HOOKD_DATABASE_MAX_CONNS=%d", pool))
	if want := fmt.Sprintf(`"databaseMaxConns":%d,"max_connections":%d`, pool, server); !strings.Contains(errorLines(d.log()), want) {
		t.Fatalf("no warning with %s at start:\n%s", want, d.log())
	}

	pg.LimitConnections(0)
	pg.EndSessions()
	// Each pooled connection the server ended fails one query (SQLSTATE 57P01) and is dropped;
	// then the pool must connect again, and is refused.
	const failed = `"msg":"request failed"`
	for i := 1; ; i++ {
		if st := d.call("GET", "/api/deliveries", "", nil); st != 500 {
			t.Fatalf("GET /api/deliveries with every connection refused: %d\n%s", st, d.log())
		}
		for strings.Count(d.log(), failed) < i { // logged once the answer is written
			select {
			case <-d.line:
			case <-time.After(10 * time.Second):
				t.Fatalf("request %d: no %s in the log:\n%s", i, failed, d.log())
			}
		}
		for _, line := range strings.Split(d.log(), "\n") {
			if strings.Contains(line, failed) && strings.Contains(line, "SQLSTATE 53300") {
				t.Logf("request %d: %s", i, line)
				return
			}
		}
		if i == 40 {
			t.Fatalf("the error log never said the server refused a connection:\n%s", errorLines(d.log()))
		}
	}
}
