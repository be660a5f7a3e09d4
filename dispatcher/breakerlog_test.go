package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestBreakerLogHidesURLKey: a receiver that takes its key in the URL's query does not have it
// written to the log when its breaker changes state (the metric's label drops the query too).
func TestBreakerLogHidesURLKey(t *testing.T) {
	ctx := context.Background()
	db := storagetest.SQLite(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	reg, err := NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	d := New(db, reg, log, Settings{Version: "test"})
	const key = "tok-9f8e7d6c5b"
	url := "https://receiver.example/hook?token=" + key
	for range 5 {
		done, err := d.breakers.Acquire(url)
		if err != nil {
			t.Fatal(err)
		}
		done(context.DeadlineExceeded)
	}
	logs := buf.String()
	if !strings.Contains(logs, "breaker state changed") || !strings.Contains(logs, "token=***") {
		t.Fatalf("the breaker's change was not logged as expected:\n%s", logs)
	}
	if strings.Contains(logs, key) {
		t.Fatalf("the key is in the log:\n%s", logs)
	}
}
