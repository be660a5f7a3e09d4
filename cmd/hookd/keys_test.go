package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestMasterKeyRotationAndLoss: a hook's secret sealed with key A; masterKeys [B, A] and
// `hookd keys rotate` re-seal it with B; with A removed (B now read from masterKeyFiles) the
// restarted daemon still signs so that a real receiver verifies. Then a start with a wrong key: the daemon serves, the hook reports
// secretUnreadable (and the metric counts it), its interceptive call follows failureMode DENY
// without reaching the receiver, and a PUT with a new secret heals it.
func TestMasterKeyRotationAndLoss(t *testing.T) {
	dir := t.TempDir()
	key := func(c byte) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(c), 32))) }
	keyA, keyB, keyC := key('a'), key('b'), key('c')
	secret := "whsec-rotation-1"
	var verified, calls atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if _, err := signing.VerifyRequest(r, secret, time.Minute, 1<<20); err != nil {
			w.WriteHeader(401)
			return
		}
		verified.Add(1)
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer recv.Close()
	cfgFor := func(keys string) string {
		return writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: sqlite:%s\n%s\nauth: {adminTokens: [adm-test]}\nwebhooks: {allowPrivateNetworks: true}\n",
			filepath.Join(dir, "hookd.db"), keys))
	}
	dispatch := func(d *daemon) string {
		var out struct{ Decision string }
		if st := d.call("POST", "/api/hooks/dispatch", `{"hookType":"pre_tool_use","context":{"toolName":"t","toolCallId":"c1","arguments":{}}}`, &out); st != 200 {
			t.Fatalf("dispatch: %d\n%s", st, d.log())
		}
		return out.Decision
	}
	stop := func(d *daemon) { d.cmd.Process.Signal(syscall.SIGTERM); <-d.done }

	d := startDaemon(t, cfgFor("masterKey: "+keyA))
	hook := `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"` + recv.URL + `","failureMode":"DENY","signingSecret":"%s"}}`
	if st := d.call("POST", "/api/hooks", fmt.Sprintf(hook, secret), nil); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if got := dispatch(d); got != "allow" || verified.Load() != 1 {
		t.Fatalf("with key A: %s, verified %d", got, verified.Load())
	}
	stop(d)

	// Rotate: [B, A], then B alone.
	out, err := exec.Command(binary, "keys", "rotate", "--config", cfgFor(fmt.Sprintf("masterKeys: [%s, %s]", keyB, keyA))).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "re-sealed 1 hook secrets") {
		t.Fatalf("rotate: %v %s", err, out)
	}
	// B alone, read from a file as a mounted Secret gives it.
	fileB := filepath.Join(dir, "b.key")
	if err := os.WriteFile(fileB, []byte(keyB+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, cfgFor("masterKeyFiles: ["+fileB+"]"))
	if got := dispatch(d); got != "allow" || verified.Load() != 2 {
		t.Fatalf("after rotation with key B alone (masterKeyFiles): %s, verified %d\n%s", got, verified.Load(), d.log())
	}
	stop(d)

	// Key loss: a wrong key. The daemon serves; the hook says so and fails closed.
	d = startDaemon(t, cfgFor("masterKey: "+keyC))
	var h struct {
		SecretUnreadable bool
	}
	if st := d.call("GET", "/api/hooks/1", "", &h); st != 200 || !h.SecretUnreadable {
		t.Fatalf("GET hook with a wrong key: %d %+v", st, h)
	}
	if m := scrape(t, d); sum(m, "hookd_hooks_secret_unreadable") != 1 {
		t.Fatalf("metric: %v", sum(m, "hookd_hooks_secret_unreadable"))
	}
	before := calls.Load()
	if got := dispatch(d); got != "deny" || calls.Load() != before {
		t.Fatalf("unreadable hook: %s, receiver called %d times", got, calls.Load()-before)
	}
	// A PUT that keeps the secret it cannot read is refused; one with the secret heals the hook.
	if st := d.call("PUT", "/api/hooks/1", `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`","failureMode":"DENY"}}`, nil); st != 400 {
		t.Fatalf("PUT keeping an unreadable secret: %d", st)
	}
	secret = "whsec-rotation-2"
	var healed json.RawMessage
	if st := d.call("PUT", "/api/hooks/1", fmt.Sprintf(hook, secret), &healed); st != 200 || strings.Contains(string(healed), "secretUnreadable") {
		t.Fatalf("PUT with a new secret: %d %s", st, healed)
	}
	if got := dispatch(d); got != "allow" || verified.Load() != 3 {
		t.Fatalf("healed: %s, verified %d", got, verified.Load())
	}
	stop(d)
}

// TestNoNewKeyOverSealedSecrets: with the key file gone, the daemon refuses to generate a new one
// over a database that holds sealed secrets.
func TestNoNewKeyOverSealedSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\n")
	d := startDaemon(t, cfg)
	if st := d.call("POST", "/api/hooks", `{"hookName":"g","hookType":"post_tool_use","dispatchConfig":{"url":"https://r.example/h","signingSecret":"s3"}}`, nil); st != 201 {
		t.Fatalf("create: %d", st)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	if err := exec.Command("rm", filepath.Join(dir, "master.key")).Run(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds sealed secrets") {
		t.Fatalf("started with a new key over sealed secrets: %v\n%s", err, out)
	}
	if _, err := exec.Command("ls", filepath.Join(dir, "master.key")).Output(); err == nil {
		t.Fatal("a new key file was left behind")
	}
}

// TestUnreadableSecretKeepsEventsQueued: an observational hook whose secret opens with no key
// (the daemon restarted with a wrong one) sends nothing: its events stay pending with no attempt
// spent, while another hook's events go out. A PUT with a new secret heals it, and every queued
// event reaches the real receiver at once, signed with the new secret, as attempt 1. On SQLite
// and PostgreSQL.
func TestUnreadableSecretKeepsEventsQueued(t *testing.T) {
	dbs := map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "hookd.db") },
		"postgres": func(t *testing.T, _ string) string { return storagetest.PostgresURL(t) },
	}
	for name, dbURL := range dbs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			dbURL := dbURL(t, dir)
			key := func(c byte) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(c), 32))) }
			var secret atomic.Value
			secret.Store("whsec-queued-1")
			type got struct {
				eventID  string
				attempt  int
				verified bool
			}
			audit, other := make(chan got, 16), make(chan got, 16)
			receiver := func(into chan got) *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, err := signing.VerifyRequest(r, secret.Load().(string), time.Minute, 1<<20)
					var env struct {
						EventID         string `json:"eventId"`
						DeliveryAttempt int    `json:"deliveryAttempt"`
					}
					json.Unmarshal(body, &env)
					into <- got{env.EventID, env.DeliveryAttempt, err == nil}
				}))
			}
			auditRecv, otherRecv := receiver(audit), receiver(other)
			defer auditRecv.Close()
			defer otherRecv.Close()
			cfgFor := func(k string) string {
				return writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: '%s'\nmasterKey: %s\nauth: {adminTokens: [adm-test]}\n"+
					"webhooks: {allowPrivateNetworks: true}\n", dbURL, k))
			}
			auditHook := `{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + auditRecv.URL + `","signingSecret":"%s"}}`

			d := startDaemon(t, cfgFor(key('a')))
			if st := d.call("POST", "/api/hooks", fmt.Sprintf(auditHook, secret.Load()), nil); st != 201 {
				t.Fatalf("create audit: %d", st)
			}
			if st := d.call("POST", "/api/hooks", `{"hookName":"other","hookType":"post_tool_use","dispatchConfig":{"url":"`+otherRecv.URL+`","signingSecret":"whsec-other"}}`, nil); st != 201 {
				t.Fatalf("create other: %d", st)
			}
			d.cmd.Process.Signal(syscall.SIGTERM)
			<-d.done

			// A wrong key: both hooks' secrets are unreadable; "other" is healed first, so it
			// shows that deliveries go out while "audit"'s wait.
			d = startDaemon(t, cfgFor(key('c')))
			secret.Store("whsec-other")
			if st := d.call("PUT", "/api/hooks/2", `{"hookName":"other","hookType":"post_tool_use","dispatchConfig":{"url":"`+otherRecv.URL+`","signingSecret":"whsec-other"}}`, nil); st != 200 {
				t.Fatalf("heal other: %d", st)
			}
			var h struct{ SecretUnreadable bool }
			if st := d.call("GET", "/api/hooks/1", "", &h); st != 200 || !h.SecretUnreadable {
				t.Fatalf("audit with a wrong key: %d %+v", st, h)
			}
			var events []string
			for i := range 3 {
				var out struct{ EventIDs []string }
				body := fmt.Sprintf(`{"hookType":"post_tool_use","context":{"toolName":"t","toolCallId":"c%d","arguments":{},"output":"ok","succeeded":true,"durationMs":3}}`, i)
				if st := d.call("POST", "/api/hooks/dispatch", body, &out); st != 202 || len(out.EventIDs) != 2 {
					t.Fatalf("dispatch: %d %v\n%s", st, out, d.log())
				}
				events = append(events, out.EventIDs...)
			}
			delivery := func(eventID string) (dl struct {
				HookID    int64
				Status    string
				Attempts  int
				LastError string
			}) {
				var page struct{ Items []json.RawMessage }
				if st := d.call("GET", "/api/deliveries?eventId="+eventID, "", &page); st != 200 || len(page.Items) != 1 {
					t.Fatalf("delivery %s: %d %d", eventID, st, len(page.Items))
				}
				json.Unmarshal(page.Items[0], &dl)
				return dl
			}
			var queued []string
			for _, id := range events {
				if delivery(id).HookID == 1 {
					queued = append(queued, id)
				}
			}
			for range 3 { // "other" is delivered: the dispatcher is working
				if g := <-other; !g.verified {
					t.Fatalf("other: signature did not verify")
				}
			}
			// waitDelivery polls the delivery row (the dispatcher's state) until done says so.
			waitDelivery := func(id, what string, done func(status string, attempts int, lastError string) bool) {
				deadline := time.Now().Add(10 * time.Second)
				for dl := delivery(id); !done(dl.Status, dl.Attempts, dl.LastError); dl = delivery(id) {
					if time.Now().After(deadline) {
						t.Fatalf("delivery %s: %s: %+v", id, what, dl)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			for _, id := range queued {
				waitDelivery(id, "never looked at", func(_ string, _ int, lastError string) bool { return lastError != "" })
				if dl := delivery(id); dl.Status != "pending" || dl.Attempts != 0 || !strings.Contains(dl.LastError, "master key") {
					t.Fatalf("audit delivery while its secret is unreadable: %+v, want pending, 0 attempts, the reason", dl)
				}
			}
			select {
			case g := <-audit:
				t.Fatalf("the unreadable hook's receiver was called: %+v", g)
			default:
			}

			// Healed: all three arrive, signed with the new secret, each as its first attempt.
			secret.Store("whsec-queued-2")
			if st := d.call("PUT", "/api/hooks/1", fmt.Sprintf(auditHook, secret.Load()), nil); st != 200 {
				t.Fatalf("heal audit: %d", st)
			}
			seen := map[string]bool{}
			for range queued {
				select {
				case g := <-audit:
					if !g.verified || g.attempt != 1 {
						t.Fatalf("after the heal: %+v, want verified, attempt 1", g)
					}
					seen[g.eventID] = true
				case <-time.After(10 * time.Second):
					t.Fatalf("after the heal only %d of %d queued events arrived\n%s", len(seen), len(queued), d.log())
				}
			}
			for _, id := range queued {
				if !seen[id] {
					t.Fatalf("event %s not delivered after the heal", id)
				}
				waitDelivery(id, "not recorded as delivered in one attempt after the heal", func(status string, attempts int, _ string) bool {
					return status == "delivered" && attempts == 1
				})
			}
			d.cmd.Process.Signal(syscall.SIGTERM)
			<-d.done
		})
	}
}

// TestPostgresNeedsOneMasterKey: on PostgreSQL no master key is generated: each replica made one
// of its own, so the secrets of a hook one replica created opened on no other, whose calls of it
// then resolved by failureMode (a transfer denied on one replica was allowed on the next). serve
// and doctor refuse, naming masterKey; a key file already in dataDir is still read.
func TestPostgresNeedsOneMasterKey(t *testing.T) {
	database := storagetest.PostgresURL(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: '%s'\ndataDir: %s\n", database, dir))
	for _, args := range [][]string{{"serve", "--config", cfg}, {"doctor", "--config", cfg}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a serve that starts runs on
		out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "masterKey: none is configured and the database is PostgreSQL") {
			t.Errorf("%s without a master key: %v\n%s", args[0], err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "master.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file was generated: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(testMasterKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, cfg)
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}

// TestRotateNeedsTheDatabase: keys rotate against a database setting that names no hookd database
// (a mistyped path) fails, naming it, and creates nothing: it made an empty database there and
// said "re-sealed 0", and the operator then dropped the old key the real database still needed.
func TestRotateNeedsTheDatabase(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "dta", "hookd.db")
	cfg := writeConfig(t, dir, fmt.Sprintf("database: sqlite:%s\nmasterKeys: [%s, %s]\n", missing,
		base64.StdEncoding.EncodeToString([]byte(strings.Repeat("n", 32))), testMasterKey))
	out, stderr, code := hookd(t, nil, "keys", "rotate", "--config", cfg)
	if code != 1 || !strings.Contains(stderr, "keys rotate: sqlite:"+missing+" holds no hookd database") || strings.Contains(out, "re-sealed") {
		t.Fatalf("rotate of no database: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rotate made the database's directory: %v", err)
	}
}
