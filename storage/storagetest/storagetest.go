// Package storagetest opens real databases for tests: a SQLite file in a temp dir, and a fresh
// schema on the PostgreSQL server named by HOOKD_TEST_POSTGRES_DSN.
package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/storage"
)

// PostgresEnv names the variable holding the PostgreSQL DSN for tests.
const PostgresEnv = "HOOKD_TEST_POSTGRES_DSN"

// Key is a fixed master key for tests.
var Key = []byte("0123456789abcdef0123456789abcdef")

// Each runs fn once per database: SQLite always, PostgreSQL when HOOKD_TEST_POSTGRES_DSN is set
// (otherwise that subtest skips and says why).
func Each(t *testing.T, fn func(t *testing.T, db *storage.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

// SQLite opens a migrated database in a new file under t.TempDir().
func SQLite(t testing.TB) *storage.DB {
	t.Helper()
	return open(t, SQLiteURL(t))
}

// SQLiteURL names a new database file under t.TempDir().
func SQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "hookd.db")
}

// Postgres opens a migrated database in a schema of its own, dropped when the test ends; it skips
// the test when no server is configured.
func Postgres(t testing.TB) *storage.DB {
	t.Helper()
	return open(t, PostgresURL(t))
}

// PostgresURL creates a fresh schema and returns a DSN whose search_path is that schema.
func PostgresURL(t testing.TB) string {
	t.Helper()
	dsn, admin, schema := postgresAdmin(t, "t_")
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		if s, err := admin.DB(); err == nil {
			s.Close()
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// postgresAdmin connects to the test server as its DSN's (superuser) role and picks a fresh name
// with prefix; it skips the test when no server is configured.
func postgresAdmin(t testing.TB, prefix string) (dsn string, admin *gorm.DB, name string) {
	t.Helper()
	dsn = os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skipf("PostgreSQL test skipped: %s is not set (CI sets it to the machine's server)", PostgresEnv)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	return dsn, admin, prefix + hex.EncodeToString(b[:])
}

func open(t testing.TB, u string) *storage.DB {
	t.Helper()
	db, err := storage.Open(context.Background(), u, storage.Options{Key: Key})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// PostgresReadOnly is a PostgreSQL database whose writes can be refused from outside, as after a
// failover onto a standby: URL connects as a role of its own that owns a fresh schema, and
// SetReadOnly(true) makes every session of that role read-only (default_transaction_read_only),
// ending its open sessions so that the pool reconnects into the new mode; SetReadOnly(false)
// undoes it the same way. LimitConnections and EndSessions make the server refuse the role's
// connections instead. It skips the test when no server is configured.
type PostgresReadOnly struct {
	URL   string
	role  string
	admin *gorm.DB
	t     testing.TB
}

// PostgresWithRole creates the role and its schema; both are dropped when the test ends.
func PostgresWithRole(t testing.TB) *PostgresReadOnly {
	t.Helper()
	dsn, admin, role := postgresAdmin(t, "r_")
	p := &PostgresReadOnly{role: role, admin: admin, t: t}
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "CREATE SCHEMA " + role + " AUTHORIZATION " + role} {
		if err := admin.Exec(q).Error; err != nil {
			t.Fatalf("postgres: %s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		p.EndSessions()
		admin.Exec("DROP SCHEMA " + role + " CASCADE")
		admin.Exec("DROP ROLE " + role)
		if s, err := admin.DB(); err == nil {
			s.Close()
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("postgres DSN: %v", err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("search_path", role)
	u.RawQuery = q.Encode()
	p.URL = u.String()
	return p
}

// SetReadOnly makes the role's sessions read-only (true) or writable again (false).
func (p *PostgresReadOnly) SetReadOnly(on bool) {
	p.t.Helper()
	q := "ALTER ROLE " + p.role + " RESET default_transaction_read_only"
	if on {
		q = "ALTER ROLE " + p.role + " SET default_transaction_read_only = on"
	}
	if err := p.admin.Exec(q).Error; err != nil {
		p.t.Fatalf("postgres: %s: %v", q, err)
	}
	p.EndSessions()
}

// LimitConnections has the server refuse the role an (n+1)th session at a time, as one at its
// max_connections refuses anyone ("too many connections for role", SQLSTATE 53300 like "too many
// clients"), without taking connections from anyone else. Sessions already open stay.
func (p *PostgresReadOnly) LimitConnections(n int) {
	p.t.Helper()
	q := fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", p.role, n)
	if err := p.admin.Exec(q).Error; err != nil {
		p.t.Fatalf("postgres: %s: %v", q, err)
	}
}

// EndSessions ends the role's open sessions; the server's own wait (pg_terminate_backend with a
// timeout) returns once each is gone, so sessions opened after this run under the new settings.
func (p *PostgresReadOnly) EndSessions() {
	var pids []int64 // listed first, then ended one by one: nobody else's session is touched
	if err := p.admin.Raw("SELECT pid FROM pg_stat_activity WHERE usename = ?", p.role).Scan(&pids).Error; err != nil {
		p.t.Fatalf("postgres: sessions of %s: %v", p.role, err)
	}
	for _, pid := range pids {
		// With a timeout the server answers once the session is gone. False means it outlived the
		// timeout, or it had already ended by itself (no such process), which is just as good.
		var ended bool
		if err := p.admin.Raw("SELECT pg_terminate_backend(?, 5000)", pid).Scan(&ended).Error; err != nil {
			p.t.Fatalf("postgres: end session %d of %s: %v", pid, p.role, err)
		}
		var left int64
		if !ended && (p.admin.Raw("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", pid).Scan(&left).Error != nil || left > 0) {
			p.t.Fatalf("postgres: session %d of %s did not end", pid, p.role)
		}
	}
}
