package dispatcher

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestRegistrySeesOtherReplicasAtOnce: on PostgreSQL a registry learns of a hook written through
// another (another replica) when that write commits, not at its next poll: here the poll is an
// hour away.
func TestRegistrySeesOtherReplicasAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := storagetest.Postgres(t)
	log := slog.New(slog.DiscardHandler)
	a, err := NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	b.refresh = time.Hour
	ran := make(chan struct{})
	go func() { defer close(ran); b.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	// seen waits until b matches want hooks for the tool (the deadline only keeps a broken build
	// from hanging; the poll is an hour away).
	seen := func(what string, want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); len(b.Match(PreToolUse, nil, "shell")) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other registry still matches %d hooks", what, len(b.Match(PreToolUse, nil, "shell")))
			}
		}
	}
	h, err := a.Create(ctx, Hook{HookName: "gate", HookType: PreToolUse, DispatchConfig: DispatchConfig{URL: "http://10.0.0.9/h", FailureMode: "DENY"}})
	if err != nil {
		t.Fatal(err)
	}
	seen("create", 1)
	off := false
	h.Enabled = &off
	if _, err := a.Replace(ctx, h.ID, h); err != nil {
		t.Fatal(err)
	}
	seen("disable", 0)
	on := true
	h.Enabled = &on
	if _, err := a.Replace(ctx, h.ID, h); err != nil {
		t.Fatal(err)
	}
	seen("enable", 1)
	if err := a.Delete(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	seen("delete", 0)
}
