package storage_test

import (
	"context"
	"testing"

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
