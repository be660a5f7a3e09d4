package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A binary refuses a database that a newer binary migrated, naming both versions, and leaves it
// as it found it.
func TestSchemaNewerThanBinaryRefused(t *testing.T) {
	ctx := context.Background()
	dbs := map[string]func(testing.TB) string{"sqlite": storagetest.SQLiteURL, "postgres": storagetest.PostgresURL}
	for name, newURL := range dbs {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			known := storage.KnownSchemaVersion()
			for _, tc := range []struct {
				version int
				want    string
			}{
				{known + 1, fmt.Sprintf("schema is at version %d, newer than this binary's version %d", known+1, known)},
				// A migration this binary lacks below its newest (versions are reserved ahead).
				{-7, fmt.Sprintf("has migration -7, which this binary (version %d) does not know", known)},
			} {
				raw := rawDB(t, u)
				if err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'newer', 0)`, tc.version).Error; err != nil {
					t.Fatal(err)
				}
				_, err = storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
				var tooNew *storage.SchemaTooNewError
				if !errors.As(err, &tooNew) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("version %d: open = %v, want a SchemaTooNewError saying %q", tc.version, err, tc.want)
				}
				if err := raw.Exec(`DELETE FROM schema_migrations WHERE version = ?`, tc.version).Error; err != nil {
					t.Fatal(err)
				}
				if db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key}); err != nil {
					t.Fatalf("without the unknown migration: %v", err)
				} else {
					db.Close()
				}
			}
		})
	}
}

func rawDB(t *testing.T, u string) *gorm.DB {
	t.Helper()
	var dial gorm.Dialector
	if path, ok := strings.CutPrefix(u, "sqlite:"); ok {
		dial = sqlite.Open("file:" + path + "?_busy_timeout=5000")
	} else {
		dial = postgres.Open(u)
	}
	g, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := g.DB(); err == nil {
			s.Close()
		}
	})
	return g
}
