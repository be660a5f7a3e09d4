package storage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
)

// A time that is not set is absent from the JSON, never "0001-01-01T00:00:00Z".
func TestZeroTimesAreAbsent(t *testing.T) {
	now := time.Now()
	raw, err := json.Marshal(storage.Delivery{ID: 1, Status: storage.StatusDelivered, OccurredAt: now, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "nextAttemptAt") || strings.Contains(string(raw), "0001-01-01") {
		t.Fatalf("delivered row: %s", raw)
	}
	raw, _ = json.Marshal(storage.Delivery{Status: storage.StatusPending, NextAttemptAt: now})
	if !strings.Contains(string(raw), `"nextAttemptAt"`) {
		t.Fatalf("pending row without its next attempt: %s", raw)
	}
}
