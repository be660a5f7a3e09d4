package storage_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// tooManyConnections is SQLSTATE 53300: the server refused a session, for its max_connections
// ("sorry, too many clients already") or a role's connection limit.
const tooManyConnections = "53300"

// hold takes n connections of pool until the test ends.
func hold(t *testing.T, pool *sql.DB, n int) []*sql.Conn {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := pool.Conn(context.Background())
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
	}
	return conns
}

// TestPostgresPoolSize: the pool opens MaxConns connections at most. The server lets the role
// hold just that many sessions, so a pool that opened one more would be refused: with every
// connection held, another query waits for one to come back, and then succeeds.
func TestPostgresPoolSize(t *testing.T) {
	ctx := context.Background()
	pg := storagetest.PostgresWithRole(t)
	const size = 3
	pg.LimitConnections(size)
	db, err := storage.Open(ctx, pg.URL, storage.Options{Key: storagetest.Key, MaxConns: size})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := storage.Pool(db)
	if got := pool.Stats().MaxOpenConnections; got != size {
		t.Fatalf("MaxOpenConnections = %d, want %d", got, size)
	}
	held := hold(t, pool, size)
	done := make(chan error, 1)
	go func() { done <- db.CheckWritable(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); pool.Stats().WaitCount == 0; time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("with all %d connections held, a query did not wait for one: %v", size, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the query neither waited for a connection nor returned")
		}
	}
	held[0].Close()
	if err := <-done; err != nil {
		t.Fatalf("once a connection came back: %v", err)
	}
}

// TestPostgresRefusedConnection: a session the server refuses for too many connections keeps its
// cause through storage's errors, and their text names the SQLSTATE, which is what the daemon's
// error log prints ("request failed", "outbox commit failed").
func TestPostgresRefusedConnection(t *testing.T) {
	ctx := context.Background()
	pg := storagetest.PostgresWithRole(t)
	pg.LimitConnections(2)
	db, err := storage.Open(ctx, pg.URL, storage.Options{Key: storagetest.Key, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hold(t, storage.Pool(db), 2)
	err = db.CheckWritable(ctx) // needs a third session
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != tooManyConnections {
		t.Fatalf("the pool's third session, over the role's limit of 2: %v, want SQLSTATE %s", err, tooManyConnections)
	}
	if !strings.Contains(err.Error(), "SQLSTATE "+tooManyConnections) {
		t.Fatalf("the message does not name the SQLSTATE: %v", err)
	}
}

// TestPostgresPoolWarning: a pool that may take more than half of the server's max_connections
// is logged at start (a second replica like it could be refused); half is not.
func TestPostgresPoolWarning(t *testing.T) {
	ctx := context.Background()
	u := storagetest.PostgresURL(t)
	open := func(maxConns int) string {
		t.Helper()
		var log bytes.Buffer
		db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key, MaxConns: maxConns,
			Logger: slog.New(slog.NewJSONHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		return log.String()
	}
	var server int
	if err := storage.Pool(storagetest.Postgres(t)).QueryRow("SHOW max_connections").Scan(&server); err != nil {
		t.Fatal(err)
	}
	if log := open(server / 2); log != "" {
		t.Fatalf("a pool of %d under max_connections %d logged:\n%s", server/2, server, log)
	}
	log := open(server/2 + 1)
	want := fmt.Sprintf(`"databaseMaxConns":%d,"max_connections":%d`, server/2+1, server)
	if !strings.Contains(log, `"level":"WARN"`) || !strings.Contains(log, want) {
		t.Fatalf("a pool of %d under max_connections %d logged:\n%s\nwant a warning with %s", server/2+1, server, log, want)
	}
}

// TestPoolSizeOnSQLite: MaxConns is PostgreSQL's; SQLite keeps its one writer connection.
func TestPoolSizeOnSQLite(t *testing.T) {
	db, err := storage.Open(context.Background(), storagetest.SQLiteURL(t), storage.Options{Key: storagetest.Key, MaxConns: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := storage.Pool(db).Stats().MaxOpenConnections; got != 1 {
		t.Fatalf("SQLite writer: MaxOpenConnections = %d, want 1", got)
	}
}

// TestNegativeMaxConns: a negative pool size is refused, before any connection, rather than
// taken for no limit.
func TestNegativeMaxConns(t *testing.T) {
	_, err := storage.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none", storage.Options{Key: storagetest.Key, MaxConns: -1})
	if err == nil || !strings.Contains(err.Error(), "MaxConns -1") {
		t.Fatalf("MaxConns -1: %v", err)
	}
}
