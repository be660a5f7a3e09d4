// Package storagetest opens real databases for tests: a SQLite file in a temp dir, and a fresh
// schema on the PostgreSQL server named by HOOKD_TEST_POSTGRES_DSN.
package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		t.Skipf("PostgreSQL test skipped: %s is not set (CI sets it to the machine's server)", PostgresEnv)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
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

func open(t testing.TB, u string) *storage.DB {
	t.Helper()
	db, err := storage.Open(context.Background(), u, storage.Options{Key: Key})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
