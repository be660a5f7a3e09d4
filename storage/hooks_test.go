package storage_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

func TestHookCRUD(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		agent := int64(5001)
		h := storage.Hook{HookType: "pre_tool_use", AgentID: &agent, Enabled: true, Priority: 2,
			Doc: []byte(`{"hookName":"a"}`), Secrets: []byte(`{"signingSecret":"s3cr3t-value"}`)}
		if err := db.CreateHook(ctx, &h); err != nil {
			t.Fatal(err)
		}
		if h.ID == 0 || h.CreatedAt.IsZero() {
			t.Fatalf("id/time not set: %+v", h)
		}
		other := storage.Hook{HookType: "post_tool_use", Enabled: false, Doc: []byte(`{}`)}
		if err := db.CreateHook(ctx, &other); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetHook(ctx, h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Secrets) != string(h.Secrets) || *got.AgentID != agent || got.Priority != 2 || !got.Enabled {
			t.Fatalf("round trip: %+v", got)
		}
		list, err := db.ListHooks(ctx, storage.HookFilter{HookType: "pre_tool_use"})
		if err != nil || len(list) != 1 || list[0].ID != h.ID {
			t.Fatalf("filter by type: %v %+v", err, list)
		}
		// other applies to every agent, so to this one too; a third agent's hook does not.
		thirdAgent := int64(77)
		third := storage.Hook{HookType: "post_tool_use", AgentID: &thirdAgent, Enabled: true, Doc: []byte(`{}`)}
		if err := db.CreateHook(ctx, &third); err != nil {
			t.Fatal(err)
		}
		list, _ = db.ListHooks(ctx, storage.HookFilter{AppliesTo: &agent})
		if len(list) != 2 || list[0].ID != h.ID || list[1].ID != other.ID {
			t.Fatalf("hooks that apply to agent %d: %+v", agent, list)
		}
		off := false
		list, _ = db.ListHooks(ctx, storage.HookFilter{AppliesTo: &agent, Enabled: &off})
		if len(list) != 1 || list[0].ID != other.ID {
			t.Fatalf("disabled hooks that apply to agent %d: %+v", agent, list)
		}
		list, _ = db.ListHooks(ctx, storage.HookFilter{AfterID: h.ID, Limit: 1})
		if len(list) != 1 || list[0].ID != other.ID {
			t.Fatalf("a page after %d: %+v", h.ID, list)
		}
		if err := db.DeleteHook(ctx, third.ID); err != nil {
			t.Fatal(err)
		}
		list, _ = db.ListHooks(ctx, storage.HookFilter{})
		if len(list) != 2 || list[0].ID > list[1].ID {
			t.Fatalf("list all: %+v", list)
		}
		v1, _ := db.HooksVersion(ctx)
		h.Secrets = nil
		h.Priority = 7
		if err := db.UpdateHook(ctx, &h); err != nil {
			t.Fatal(err)
		}
		got, _ = db.GetHook(ctx, h.ID)
		if got.Secrets != nil || got.Priority != 7 {
			t.Fatalf("update: %+v", got)
		}
		if err := db.DeleteHook(ctx, other.ID); err != nil {
			t.Fatal(err)
		}
		v2, _ := db.HooksVersion(ctx)
		if v1 == v2 {
			t.Fatal("hooks version did not change")
		}
		if _, err := db.GetHook(ctx, other.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		if err := db.DeleteHook(ctx, other.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if err := db.UpdateHook(ctx, &other); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("update deleted: %v", err)
		}
	})
}

// The secret must not be found anywhere in the database file: not in the row, not in the WAL.
func TestSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	u := storagetest.SQLiteURL(t)
	db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec-plaintext-must-not-appear"
	h := storage.Hook{HookType: "user_message", Enabled: true, Doc: []byte(`{}`), Secrets: []byte(`{"signingSecret":"` + secret + `"}`)}
	if err := db.CreateHook(ctx, &h); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(u, "sqlite:")
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var doc string
	var enc []byte
	if err := raw.QueryRow(`SELECT doc, secrets_enc FROM hooks WHERE id = ?`, h.ID).Scan(&doc, &enc); err != nil {
		t.Fatal(err)
	}
	if len(enc) == 0 || bytes.Contains(enc, []byte(secret)) || strings.Contains(doc, secret) {
		t.Fatalf("secret readable in the row")
	}
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("secret in plaintext in %s", f)
		}
	}
	db.Close()

	// Another key cannot open it, and says so instead of returning garbage: the hook is marked.
	other, err := storage.Open(ctx, u, storage.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := other.GetHook(ctx, h.ID); err != nil || !got.SecretsUnreadable || got.Secrets != nil {
		t.Fatalf("wrong key: %+v %v", got, err)
	}
	// Rotation: [new, old] opens it; ResealSecrets seals it with the new key, which then opens it alone.
	newKey := bytes.Repeat([]byte{9}, 32)
	both, err := storage.Open(ctx, u, storage.Options{Key: newKey, OldKeys: [][]byte{storagetest.Key}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := both.ResealSecrets(ctx); err != nil || n != 1 {
		t.Fatalf("reseal: %d %v", n, err)
	}
	both.Close()
	rotated, err := storage.Open(ctx, u, storage.Options{Key: newKey})
	if err != nil {
		t.Fatal(err)
	}
	defer rotated.Close()
	if got, err := rotated.GetHook(ctx, h.ID); err != nil || got.SecretsUnreadable || string(got.Secrets) != string(h.Secrets) {
		t.Fatalf("after rotation: %+v %v", got, err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	u := storagetest.SQLiteURL(t)
	for i := 0; i < 2; i++ {
		db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := db.SchemaVersion(ctx)
		if err != nil || v < 2 {
			t.Fatalf("schema version %d %v", v, err)
		}
		db.Close()
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := storage.LoadOrCreateKey("", dir)
	if err != nil || !created || len(k1) != 32 {
		t.Fatalf("create: %v %v %d", err, created, len(k1))
	}
	st, err := os.Stat(dir + "/master.key")
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", err, st.Mode())
	}
	k2, created, err := storage.LoadOrCreateKey("", dir)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Fatalf("reload: %v %v", err, created)
	}
	if _, _, err := storage.LoadOrCreateKey("c2hvcnQ=", dir); err == nil || !strings.Contains(err.Error(), "masterKey") {
		t.Fatalf("short key accepted: %v", err)
	}
}

// TestSealedSecretKeys: each hook's sealed secrets are reported with the key that opens them —
// the sealing key, an older one, or none — and a hook without secrets is not listed.
func TestSealedSecretKeys(t *testing.T) {
	urls := map[string]func(testing.TB) string{"sqlite": storagetest.SQLiteURL, "postgres": storagetest.PostgresURL}
	for name, urlFor := range urls {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := urlFor(t)
			keyA, keyB, keyC := bytes.Repeat([]byte{'a'}, 32), bytes.Repeat([]byte{'b'}, 32), bytes.Repeat([]byte{'c'}, 32)
			create := func(key []byte, secrets string) int64 {
				db, err := storage.Open(ctx, u, storage.Options{Key: key})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				h := storage.Hook{HookType: "user_message", Enabled: true, Doc: []byte(`{}`), Secrets: []byte(secrets)}
				if err := db.CreateHook(ctx, &h); err != nil {
					t.Fatal(err)
				}
				return h.ID
			}
			underA, underB := create(keyA, `{"signingSecret":"a"}`), create(keyB, `{"signingSecret":"b"}`)
			underC, none := create(keyC, `{"signingSecret":"c"}`), create(keyA, "")

			db, err := storage.Open(ctx, u, storage.Options{Key: keyB, OldKeys: [][]byte{keyA}})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got, err := db.SealedSecretKeys(ctx)
			want := map[int64]int{underB: 0, underA: 1, underC: -1}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("SealedSecretKeys() = %v %v, want %v (hook %d has none)", got, err, want, none)
			}
		})
	}
}

// TestHooksVersionMovesOnEveryWrite: every hook write moves the version other replicas poll,
// even when the writer's clock is behind another's (a hook's updated_at ahead of every later
// write), and when a deleted hook's id is given to the next one.
func TestHooksVersionMovesOnEveryWrite(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		ahead := storage.Hook{HookType: "pre_tool_use", Enabled: true, Doc: []byte(`{"hookName":"ahead"}`)}
		h := storage.Hook{HookType: "pre_tool_use", Enabled: true, Doc: []byte(`{"hookName":"gate"}`)}
		for _, x := range []*storage.Hook{&ahead, &h} {
			if err := db.CreateHook(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		// Written by a replica whose clock runs an hour ahead.
		if err := storage.Exec(ctx, db, `UPDATE hooks SET updated_at = updated_at + 3600000 WHERE id = ?`, ahead.ID); err != nil {
			t.Fatal(err)
		}
		last, _ := db.HooksVersion(ctx)
		step := func(what string, write func() error) {
			t.Helper()
			if err := write(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			v, err := db.HooksVersion(ctx)
			if err != nil || v == last {
				t.Fatalf("%s: the hooks version stayed %q (%v)", what, v, err)
			}
			last = v
		}
		step("disable", func() error { h.Enabled = false; return db.UpdateHook(ctx, &h) })
		step("enable", func() error { h.Enabled = true; return db.UpdateHook(ctx, &h) })
		step("delete the newest", func() error { return db.DeleteHook(ctx, h.ID) })
		step("create again", func() error { h.ID = 0; return db.CreateHook(ctx, &h) })
		step("reseal", func() error {
			x := storage.Hook{HookType: "pre_tool_use", Enabled: true, Doc: []byte(`{}`), Secrets: []byte(`{"signingSecret":"s"}`)}
			if err := db.CreateHook(ctx, &x); err != nil {
				return err
			}
			last, _ = db.HooksVersion(ctx)
			_, err := db.ResealSecrets(ctx)
			return err
		})
	})
}

// TestHookWritesNotify: on PostgreSQL every hook write is announced on ChannelHooks once it
// commits, so the other replicas' registries reload at once instead of at their next poll; and
// every Listen of a process shares one connection.
func TestHookWritesNotify(t *testing.T) {
	db := storagetest.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := func(names ...string) (<-chan struct{}, <-chan string) {
		connected, notified := make(chan struct{}, 10), make(chan string, 10)
		go db.Listen(ctx, names, storage.Listener{
			OnConnect: func() { connected <- struct{}{} },
			OnNotify:  func(channel, _ string) { notified <- channel },
		})
		return connected, notified
	}
	connected, notified := listen(storage.ChannelHooks)
	runsConnected, runs := listen(storage.ChannelRunEvents)
	<-connected
	<-runsConnected
	// One LISTEN connection for both: the one whose last statement listened on this schema's
	// channels.
	var conns int
	if err := storage.QueryRow(ctx, db, `SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND query LIKE '%_' || current_schema() || '"'`, &conns); err != nil || conns != 1 {
		t.Fatalf("LISTEN connections: %d %v, want 1", conns, err)
	}
	await := func(what string) {
		t.Helper()
		select {
		case ch := <-notified:
			if ch != storage.ChannelHooks {
				t.Fatalf("%s: notified on %q", what, ch)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: no notification", what)
		}
	}
	h := storage.Hook{HookType: "pre_tool_use", Enabled: true, Doc: []byte(`{"hookName":"n"}`)}
	if err := db.CreateHook(ctx, &h); err != nil {
		t.Fatal(err)
	}
	await("create")
	h.Enabled = false
	if err := db.UpdateHook(ctx, &h); err != nil {
		t.Fatal(err)
	}
	await("update")
	if err := db.DeleteHook(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	await("delete")
	select {
	case ch := <-runs:
		t.Fatalf("a listener of %s was told of %s", storage.ChannelRunEvents, ch)
	default:
	}
	if err := db.Listen(ctx, []string{"hookz"}, storage.Listener{}); err == nil {
		t.Fatal("listening on a channel hookd has not: no error")
	}
}
