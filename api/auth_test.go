package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/config"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// The credentials of the auth tests.
const (
	authAdmin = "adm-secret-1"
	keyAlice  = "key-alice-1"
	keyBob    = "key-bob-1"
	keyRev    = "key-reviewer-1" // reviews alice
	keyRevC   = "key-reviewer-2" // reviews carol only
)

var authKeys = []config.APIKey{
	{Key: keyAlice, UserID: "alice", PrincipalID: 1001},
	{Key: keyBob, UserID: "bob", PrincipalID: 1002},
	{Key: keyRev, UserID: "rita", PrincipalID: 9001, Role: "reviewer", Reviews: []string{"alice"}},
	{Key: keyRevC, UserID: "carl", PrincipalID: 9002, Role: "reviewer", Reviews: []string{"carol"}},
}

// askScript makes every run write a file, which asks for confirmation.
const askScript = `{"scripts":[{"match":"","steps":[
  {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},
  {"text":"done"}]}]}`

// authServer serves the whole API for the configuration c, wired as the daemon wires it.
func authServer(t *testing.T, env *agenttest.Env, c config.Config) *httptest.Server {
	t.Helper()
	keys := make([]wire.APIKey, len(c.Auth.APIKeys))
	for i, k := range c.Auth.APIKeys {
		keys[i] = wire.APIKey{Key: k.Key, UserID: k.UserID, PrincipalID: k.PrincipalID, Role: wire.Role(k.Role), Reviews: k.Reviews}
	}
	srv := httptest.NewServer(api.New(api.Deps{DB: env.DB, Hooks: env.Hooks, Dispatcher: env.Dispatcher,
		AdminTokens: c.Auth.AdminTokens, LoopbackOnly: c.LoopbackOnly(), Log: agenttest.Quiet(), Runtime: env.Runtime,
		Keys: wire.NewKeys(keys), ChatDisabled: c.Auth.ChatDisabled(), Workspaces: env.Workspaces}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// call sends a JSON request with an optional bearer token and extra headers ("Name: value") and
// returns the status and the body.
func call(t *testing.T, srv *httptest.Server, method, path, bearer, body string, headers ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAuthTable is the table of configurations: no credentials, admin tokens only, API keys only,
// both; on loopback and on every interface. Each cell says whether the daemon starts and who may
// call the admin API and the chat APIs.
func TestAuthTable(t *testing.T) {
	db := storagetest.SQLite(t)
	env := agenttest.New(t, db, agenttest.Options{Script: askScript})
	aliceOnly := []config.APIKey{authKeys[0]}
	const (
		starts = ""
		// The chat probe is a permission reply for an ask that does not exist: 404 means the
		// caller was accepted (and told nothing), 401/403 that it was refused.
		chatProbe = `{"askId":"ask_nosuch","approved":true}`
	)
	type probe struct {
		name           string
		bearer         string
		header         string
		admin, chatRun int
	}
	anon := func(admin, chat int) probe { return probe{"no credential", "", "", admin, chat} }
	asAdmin := func(admin, chat int) probe { return probe{"admin token", authAdmin, "", admin, chat} }
	asKey := func(admin, chat int) probe { return probe{"chat key", keyAlice, "", admin, chat} }
	spoof := func(chat int) probe { return probe{"X-User-Id only", "", "X-User-Id: alice", 0, chat} }
	cells := []struct {
		name    string
		listen  string
		admin   []string
		keys    []config.APIKey
		chat    string
		refused string // start error, "" when it starts
		probes  []probe
	}{
		{"none/loopback", "127.0.0.1:0", nil, nil, "", starts,
			[]probe{anon(200, 404), spoof(404)}},
		{"none/public", "0.0.0.0:0", nil, nil, "", "auth has no adminTokens or apiKeys", nil},
		{"admin/loopback", "127.0.0.1:0", []string{authAdmin}, nil, "", starts,
			[]probe{anon(401, 401), spoof(401), asAdmin(200, 401)}},
		{"admin/public", "0.0.0.0:0", []string{authAdmin}, nil, "", "add auth.apiKeys, or set auth.chat: disabled", nil},
		{"admin/public/chat disabled", "0.0.0.0:0", []string{authAdmin}, nil, "disabled", starts,
			[]probe{anon(401, 404), asAdmin(200, 404)}},
		{"keys/loopback", "127.0.0.1:0", nil, aliceOnly, "", starts,
			[]probe{anon(401, 401), spoof(401), asKey(401, 404)}},
		{"keys/public", "0.0.0.0:0", nil, aliceOnly, "", starts,
			[]probe{anon(401, 401), spoof(401), asKey(401, 404)}},
		{"both/loopback", "127.0.0.1:0", []string{authAdmin}, aliceOnly, "", starts,
			[]probe{anon(401, 401), spoof(401), asAdmin(200, 401), asKey(401, 404)}},
		{"both/public", "0.0.0.0:0", []string{authAdmin}, aliceOnly, "", starts,
			[]probe{anon(401, 401), spoof(401), asAdmin(200, 401), asKey(401, 404)}},
	}
	for _, cell := range cells {
		t.Run(cell.name, func(t *testing.T) {
			c := config.Default()
			c.Listen, c.Auth.AdminTokens, c.Auth.APIKeys = cell.listen, cell.admin, cell.keys
			if cell.chat != "" {
				c.Auth.Chat = cell.chat
			}
			err := c.Validate()
			if cell.refused != "" {
				if err == nil || !strings.Contains(err.Error(), cell.refused) {
					t.Fatalf("start: err = %v, want one saying %q", err, cell.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("start refused: %v", err)
			}
			srv := authServer(t, env, c)
			for _, p := range cell.probes {
				if p.admin != 0 {
					if st, body := call(t, srv, "GET", "/api/hooks", p.bearer, ""); st != p.admin {
						t.Errorf("%s: GET /api/hooks = %d, want %d: %s", p.name, st, p.admin, body)
					}
				}
				var hdr []string
				if p.header != "" {
					hdr = append(hdr, p.header)
				}
				if st, body := call(t, srv, "POST", "/api/agent/permission/reply", p.bearer, chatProbe, hdr...); st != p.chatRun {
					t.Errorf("%s: permission reply = %d, want %d: %s", p.name, st, p.chatRun, body)
				}
			}
		})
	}
}

// pendingAsk starts a run of user that waits for a confirmation and returns it and its ask.
func pendingAsk(t *testing.T, env *agenttest.Env, user string, principal int64, session string) (agent.RunInfo, agent.AskCall) {
	t.Helper()
	ctx := context.Background()
	info, err := env.Runtime.StartRun(ctx, agent.StartRequest{UserID: user, PrincipalID: &principal, SessionKey: session, Input: "write"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := env.Runtime.Follow(ctx, user, info.RequestID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		evs, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("run ended before it asked: %v", err)
		}
		for _, ev := range evs {
			if ev.Kind == agent.KindAsk {
				return info, ev.Ask.Calls[0]
			}
		}
	}
}

func askStatus(t *testing.T, db *storage.DB, askID string) (string, []byte) {
	t.Helper()
	a, err := db.GetAsk(context.Background(), askID)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status, a.Answer
}

// TestImpersonationRefused is the attack on a daemon with credentials: someone without alice's
// key, or with bob's, tries to start runs as alice, read her stream and answer her permission
// ask, on each of the three dialects. Every attempt is refused and her ask stays pending; a
// reviewer listed for alice may answer it, one listed for someone else may not.
func TestImpersonationRefused(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		env := agenttest.New(t, db, agenttest.Options{Script: askScript, Config: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		c := config.Default()
		c.Listen, c.Auth.AdminTokens, c.Auth.APIKeys = "0.0.0.0:0", []string{authAdmin}, authKeys
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		srv := authServer(t, env, c)
		info, ask := pendingAsk(t, env, "alice", 1001, "sess-alice")

		volo := "/api/agent/chat/volo-ai"
		attacks := []struct {
			name, method, path, bearer, body string
			header                           []string
		}{
			// Starting runs as alice.
			{"harness: body userId", "POST", "/harness/chat", "", `{"sessionId":"s1","userId":"alice","input":"hi"}`, nil},
			{"harness: X-User-Id", "POST", "/harness/chat", "", `{"sessionId":"s1","input":"hi"}`, []string{"X-User-Id: alice"}},
			{"harness: admin token", "POST", "/harness/chat", authAdmin, `{"sessionId":"s1","userId":"alice","input":"hi"}`, nil},
			{"harness: bob's key, alice's id", "POST", "/harness/chat", keyBob, `{"sessionId":"s1","userId":"alice","input":"hi"}`, nil},
			{"platform: body userId", "POST", "/api/agent/run/stream", "", `{"userInput":"hi","userId":"alice"}`, nil},
			{"platform: X-User-Id", "POST", "/api/agent/run/stream", "", `{"userInput":"hi"}`, []string{"X-User-Id: alice"}},
			{"platform: bob's key, X-User-Id alice", "POST", "/api/agent/run/stream", keyBob, `{"userInput":"hi"}`, []string{"X-User-Id: alice"}},
			{"volo: body userId", "POST", volo + "/s1/intent", "", `{"userMessage":"hi","userId":"alice"}`, nil},
			{"volo: admin token", "POST", volo + "/s1/intent", authAdmin, `{"userMessage":"hi","userId":"alice"}`, nil},
			{"volo: bob's key, alice's id", "POST", volo + "/s1/intent", keyBob, `{"userMessage":"hi","userId":"alice"}`, nil},
			{"ag-ui: X-User-Id", "POST", "/ag-ui/run", "", `{"threadId":"s1","runId":"r1","messages":[]}`, []string{"X-User-Id: alice"}},
			{"ag-ui: admin token", "POST", "/ag-ui/run", authAdmin, `{"threadId":"s1","runId":"r1","messages":[]}`, nil},
			// Replaying alice's stream.
			{"platform: replay as bob", "GET", "/api/agent/run/stream?requestId=" + info.RequestID, keyBob, "", nil},
			{"platform: replay by X-User-Id", "GET", "/api/agent/run/stream?requestId=" + info.RequestID, "", "", []string{"X-User-Id: alice"}},
			{"volo: resume as bob", "POST", volo + "/resume", keyBob, `{"sessionId":"sess-alice","turnId":"` + info.ReplyID + `"}`, nil},
			// Answering alice's ask.
			{"platform reply: body userId", "POST", "/api/agent/permission/reply", "", `{"askId":"` + ask.AskID + `","approved":true,"userId":"alice"}`, nil},
			{"platform reply: bob", "POST", "/api/agent/permission/reply", keyBob, `{"askId":"` + ask.AskID + `","approved":true}`, nil},
			{"platform reply: admin token", "POST", "/api/agent/permission/reply", authAdmin, `{"askId":"` + ask.AskID + `","approved":true}`, nil},
			{"platform reply: reviewer of carol", "POST", "/api/agent/permission/reply", keyRevC, `{"askId":"` + ask.AskID + `","approved":true}`, nil},
			{"volo approval: bob", "POST", volo + "/tool-approval/" + ask.CallID, keyBob, `{"approved":true,"turnId":"` + info.ReplyID + `"}`, nil},
			{"volo approval: X-User-Id", "POST", volo + "/tool-approval/" + ask.CallID, "", `{"approved":true,"turnId":"` + info.ReplyID + `"}`, []string{"X-User-Id: alice"}},
			{"volo approval: reviewer", "POST", volo + "/tool-approval/" + ask.CallID, keyRev, `{"approved":true,"turnId":"` + info.ReplyID + `"}`, nil},
			{"harness confirm: bob", "POST", "/harness/chat", keyBob, `{"sessionId":"sess-alice","confirmResults":[{"toolCallId":"` + ask.CallID + `","confirmed":true}]}`, nil},
			{"harness confirm: body userId", "POST", "/harness/chat", "", `{"sessionId":"sess-alice","userId":"alice","confirmResults":[{"toolCallId":"` + ask.CallID + `","confirmed":true}]}`, nil},
		}
		for _, a := range attacks {
			st, body := call(t, srv, a.method, a.path, a.bearer, a.body, a.header...)
			if st < 400 {
				t.Errorf("%s: %d, want refused: %s", a.name, st, body)
			}
			if st, _ := askStatus(t, db, ask.AskID); st != storage.AskPending {
				t.Fatalf("%s: alice's ask is %s", a.name, st)
			}
		}
		if n := len(mustSessions(t, env, "bob")) + len(mustSessions(t, env, "alice")); n != 1 {
			t.Errorf("sessions of alice and bob: %d, want alice's one", n)
		}

		// Alice's reviewer answers; the record says who did, and in what role (as the approvals
		// API records a reviewer: the decision log's hookName is person:reviewer:rita).
		st, body := call(t, srv, "POST", "/api/agent/permission/reply", keyRev, `{"askId":"`+ask.AskID+`","approved":false,"reason":"not now"}`)
		if st != http.StatusOK {
			t.Fatalf("reviewer reply: %d %s", st, body)
		}
		status, answer := askStatus(t, db, ask.AskID)
		var rec agent.Answer
		_ = json.Unmarshal(answer, &rec)
		if status != storage.AskDenied || rec.AnsweredBy != "reviewer:rita" {
			t.Fatalf("after the reviewer: %s, answered by %q", status, rec.AnsweredBy)
		}
	})
}

// mustSessions lists user's sessions with any key seen in the test.
func mustSessions(t *testing.T, env *agenttest.Env, user string) []agent.SessionView {
	t.Helper()
	var out []agent.SessionView
	for _, key := range []string{"s1", "sess-alice"} {
		if s, err := env.Runtime.Session(context.Background(), user, key); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// A wrong admin token and a missing one are told apart (a script with a stale token learns it
// is the token), without saying anything of the configured tokens.
func TestAdminTokenRefusals(t *testing.T) {
	env := agenttest.New(t, storagetest.SQLite(t), agenttest.Options{Script: askScript})
	c := config.Default()
	c.Auth.AdminTokens = []string{authAdmin}
	srv := authServer(t, env, c)
	for bearer, want := range map[string]string{"": "admin bearer token required", "adm-wrong": "the bearer token is not one of the admin tokens"} {
		st, body := call(t, srv, "GET", "/api/hooks", bearer, "")
		if st != http.StatusUnauthorized || !strings.Contains(body, want) || strings.Contains(body, authAdmin) {
			t.Errorf("bearer %q: %d %s", bearer, st, body)
		}
	}
}
