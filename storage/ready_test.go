package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestCheckWritable: a database that answers but refuses writes is not ready, and is ready again
// once writes succeed. SQLite's query_only is its read-only mode on the writer's connection.
func TestCheckWritable(t *testing.T) {
	ctx := context.Background()
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		if err := db.CheckWritable(ctx); err != nil {
			t.Fatalf("fresh database: %v", err)
		}
		if db.Dialect() != storage.SQLite {
			return
		}
		if err := storage.Exec(ctx, db, "PRAGMA query_only = ON"); err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(ctx); err != nil {
			t.Fatalf("a read-only database still answers: %v", err)
		}
		if err := db.CheckWritable(ctx); err == nil {
			t.Fatal("a read-only database reports writable")
		}
		if err := storage.Exec(ctx, db, "PRAGMA query_only = OFF"); err != nil {
			t.Fatal(err)
		}
		if err := db.CheckWritable(ctx); err != nil {
			t.Fatalf("writable again: %v", err)
		}
	})
}

// TestCheckWritablePostgres: a PostgreSQL server that turns read-only under the daemon (its
// sessions end and come back with default_transaction_read_only, as after a failover onto a
// standby) answers but is not writable, and is writable again when the server is. The first call
// after the switch may meet a session the server ended; that is not ready either, and the pool
// replaces it.
func TestCheckWritablePostgres(t *testing.T) {
	ctx := context.Background()
	pg := storagetest.PostgresWithRole(t)
	db, err := storage.Open(ctx, pg.URL, storage.Options{Key: storagetest.Key})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CheckWritable(ctx); err != nil {
		t.Fatalf("fresh database: %v", err)
	}

	pg.SetReadOnly(true)
	var readOnly *pgconn.PgError
	for i := range 3 {
		err := db.CheckWritable(ctx)
		if err == nil {
			t.Fatalf("call %d: a read-only server reports writable", i+1)
		}
		if errors.As(err, &readOnly) && readOnly.Code == "25006" { // read_only_sql_transaction
			break
		}
		readOnly = nil
	}
	if readOnly == nil {
		t.Fatal("three calls, and none was refused for being read-only")
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("a read-only server still answers: %v", err)
	}

	pg.SetReadOnly(false)
	var last error
	for range 3 {
		if last = db.CheckWritable(ctx); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("writable again: %v", last)
	}
}
