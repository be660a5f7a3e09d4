package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/storage/storagetest"
)

// A hook stored under a laxer setting is named at start when the guard now refuses its receiver.
func TestRegistryWarnsOfUnreachableStoredHooks(t *testing.T) {
	ctx := context.Background()
	db := storagetest.SQLite(t)
	lax, err := NewRegistry(ctx, db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://10.0.0.9/h", "https://93.184.216.34/h"} {
		if _, err := lax.Create(ctx, Hook{HookName: "h " + u, HookType: PreToolUse, DispatchConfig: DispatchConfig{URL: u}}); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	if _, err := NewRegistry(ctx, db, slog.New(slog.NewTextHandler(&logs, nil)), WithGuard(netguard.New(netguard.Policy{}))); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, `reason="10.0.0.9 is private (RFC1918)`) || !strings.Contains(out, "hookId=1") ||
		strings.Contains(out, "93.184.216.34") {
		t.Fatalf("start logs:\n%s", out)
	}
}
