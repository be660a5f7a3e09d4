package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
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

// A hook's toolNameMatch is compiled when it changes, not again at each reload that every write of
// any hook makes (a megabyte of regex took a second per write), and is bounded in size.
func TestToolNameMatchCompiledOnce(t *testing.T) {
	ctx := context.Background()
	reg, err := NewRegistry(ctx, storagetest.SQLite(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h, err := reg.Create(ctx, Hook{HookName: "re", HookType: PreToolUse, ToolNameMatch: "/^transfer/", DispatchConfig: DispatchConfig{URL: "https://r.example/h"}})
	if err != nil {
		t.Fatal(err)
	}
	before := reg.snap.Load().all[h.ID].match
	if _, err := reg.Create(ctx, Hook{HookName: "other", HookType: PostToolUse, DispatchConfig: DispatchConfig{URL: "https://r.example/h"}}); err != nil {
		t.Fatal(err)
	}
	re := func(m hookdtype.NameMatch) uintptr { return reflect.ValueOf(m).FieldByName("re").Pointer() }
	if after := reg.snap.Load().all[h.ID].match; re(after) == 0 || re(after) != re(before) {
		t.Fatal("the regex was compiled again by another hook's write")
	}
	h.ToolNameMatch = "/^pay/"
	if _, err := reg.Replace(ctx, h.ID, h); err != nil {
		t.Fatal(err)
	}
	if m := reg.snap.Load().all[h.ID].match; !m.Match("payOrder") || m.Match("transferFunds") {
		t.Fatal("a changed toolNameMatch kept the old regex")
	}
	h.ToolNameMatch = "/(" + strings.Repeat("a|", 40<<10) + "b)/"
	if _, err := reg.Replace(ctx, h.ID, h); err == nil || !strings.HasPrefix(err.Error(), "toolNameMatch: is 81925 bytes long; at most 65536 are accepted") {
		t.Fatalf("a toolNameMatch of 80 KiB: %v", err)
	}
}
