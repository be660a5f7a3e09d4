package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// The binary refuses to start on a database a newer hookd migrated, and says which versions.
func TestServeRefusesANewerSchema(t *testing.T) {
	for name, newURL := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "hookd.db") },
		"postgres": func(t *testing.T) string { return storagetest.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			u := newURL(t)
			db, err := storage.Open(context.Background(), u, storage.Options{Key: storagetest.Key})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			var dial gorm.Dialector = postgres.Open(u)
			if path, ok := strings.CutPrefix(u, "sqlite:"); ok {
				dial = sqlite.Open("file:" + path)
			}
			raw, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
			if err != nil {
				t.Fatal(err)
			}
			newer := storage.KnownSchemaVersion() + 1
			err = raw.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from a newer hookd', 0)`, newer).Error
			if s, _ := raw.DB(); s != nil {
				s.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg := writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: %q\nmasterKey: %q\n", u, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="))
			out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("started on a newer schema: %v\n%s", err, out)
			}
			want := fmt.Sprintf("the database schema is at version %d, newer than this binary's version %d", newer, newer-1)
			if !strings.Contains(string(out), want) {
				t.Fatalf("the error does not name both versions (%q):\n%s", want, out)
			}
		})
	}
}
