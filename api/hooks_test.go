package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const adminToken = "adm-test-token"

type client struct {
	t    *testing.T
	base string
	tok  string
}

type wrapped struct {
	Success        bool            `json:"success"`
	HTTPStatusCode int             `json:"httpStatusCode"`
	Data           json.RawMessage `json:"data"`
	Message        string          `json:"message"`
}

func (c client) do(method, path, body string) (int, wrapped) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if c.tok != "" {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var w wrapped
	if err := json.Unmarshal(raw, &w); err != nil {
		c.t.Fatalf("%s %s: response is not the wrapper: %s", method, path, raw)
	}
	if w.HTTPStatusCode != resp.StatusCode || w.Success != (resp.StatusCode < 300) {
		c.t.Fatalf("%s %s: wrapper %+v disagrees with status %d", method, path, w, resp.StatusCode)
	}
	return resp.StatusCode, w
}

func newServer(t *testing.T, db *storage.DB, tokens []string, loopback bool) client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := dispatcher.NewRegistry(context.Background(), db, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: db, Hooks: reg, AdminTokens: tokens, LoopbackOnly: loopback, Log: log})))
	t.Cleanup(srv.Close)
	return client{t: t, base: srv.URL, tok: adminToken}
}

const sampleHook = `{
  "hookName": "财务审批 Hook", "hookType": "pre_tool_use", "agentId": 5001,
  "toolNameMatch": "transferFunds|payOrder", "priority": 0, "enabled": true, "dispatchType": "webhook",
  "dispatchConfig": {"url": "https://hooks.example.com/approve", "timeoutMs": 3000, "maxRetries": 3,
    "signingSecret": "whsec-original", "failureMode": "DENY",
    "auth": {"type": "BEARER", "credential": "tok-secret", "prefix": "Bearer"}}}`

func TestHookLifecycle(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		status, w := c.do("POST", "/api/hooks", sampleHook)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, w.Message)
		}
		var h dispatcher.Hook
		json.Unmarshal(w.Data, &h)
		if h.ID == 0 || h.Secret() != "***" || h.DispatchConfig.Auth.Credential != "***" {
			t.Fatalf("created hook not masked or no id: %s", w.Data)
		}
		if strings.Contains(string(w.Data), "whsec-original") || strings.Contains(string(w.Data), "tok-secret") {
			t.Fatal("secret in response")
		}
		id := "/api/hooks/" + itoa(h.ID)

		_, w = c.do("GET", "/api/hooks?hookType=pre_tool_use&agentId=5001", "")
		if !strings.Contains(string(w.Data), `"signingSecret":"***"`) {
			t.Fatalf("list does not show the masked secret: %s", w.Data)
		}
		_, w = c.do("GET", "/api/hooks?hookType=post_tool_use", "")
		if string(w.Data) != `{"items":[]}` {
			t.Fatalf("filter by type: %s", w.Data)
		}
		_, w = c.do("GET", "/api/hooks?agentId=1", "")
		if string(w.Data) != `{"items":[]}` {
			t.Fatalf("filter by agent: %s", w.Data)
		}

		secretOf := func() string {
			stored, err := db.GetHook(context.Background(), h.ID)
			if err != nil {
				t.Fatal(err)
			}
			var s struct {
				SigningSecret *string `json:"signingSecret"`
				Auth          *dispatcher.Auth
			}
			json.Unmarshal(stored.Secrets, &s)
			if s.Auth == nil || s.Auth.Credential != "tok-secret" {
				t.Fatalf("auth credential lost: %s", stored.Secrets)
			}
			if s.SigningSecret == nil {
				return "<none>"
			}
			return *s.SigningSecret
		}
		// 1. absent keeps; the GET output sent back as-is ("***" everywhere) keeps too.
		noSecret := strings.Replace(sampleHook, `"signingSecret": "whsec-original",`, "", 1)
		if status, w := c.do("PUT", id, strings.Replace(noSecret, `"tok-secret"`, `"***"`, 1)); status != 200 {
			t.Fatalf("put absent: %d %s", status, w.Message)
		}
		if got := secretOf(); got != "whsec-original" {
			t.Fatalf("absent did not keep: %s", got)
		}
		_, w = c.do("GET", id, "")
		if status, w := c.do("PUT", id, string(w.Data)); status != 200 {
			t.Fatalf("put of GET output: %d %s", status, w.Message)
		}
		if got := secretOf(); got != "whsec-original" {
			t.Fatalf("*** did not keep: %s", got)
		}
		// 2. a new value replaces.
		c.do("PUT", id, strings.Replace(sampleHook, "whsec-original", "whsec-rotated", 1))
		if got := secretOf(); got != "whsec-rotated" {
			t.Fatalf("new value did not replace: %s", got)
		}
		// 3. "" clears.
		c.do("PUT", id, strings.Replace(sampleHook, `"whsec-original"`, `""`, 1))
		if got := secretOf(); got != "<none>" {
			t.Fatalf("empty did not clear: %s", got)
		}
		_, w = c.do("GET", id, "")
		if strings.Contains(string(w.Data), "signingSecret") {
			t.Fatalf("cleared secret still shown: %s", w.Data)
		}

		if status, _ := c.do("DELETE", id, ""); status != 200 {
			t.Fatalf("delete: %d", status)
		}
		if status, _ := c.do("GET", id, ""); status != 404 {
			t.Fatalf("get deleted: %d", status)
		}
		if status, _ := c.do("DELETE", id, ""); status != 404 {
			t.Fatalf("delete twice: %d", status)
		}
		if status, _ := c.do("PUT", id, sampleHook); status != 404 {
			t.Fatalf("put deleted: %d", status)
		}
	})
}

func TestHookDefaults(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, true)
	_, w := c.do("POST", "/api/hooks", `{"hookName":"a","hookType":"user_message","dispatchConfig":{"url":"http://r.example/x"}}`)
	var h dispatcher.Hook
	json.Unmarshal(w.Data, &h)
	dc := h.DispatchConfig
	if dc.TimeoutMs != 3000 || dc.FailureMode != "ALLOW" || *dc.MaxRetries != 3 || !*h.Enabled || h.DispatchType != "webhook" || dc.SignatureScheme != "hookd" {
		t.Fatalf("interceptive defaults: %s", w.Data)
	}
	_, w = c.do("POST", "/api/hooks", `{"hookName":"b","hookType":"post_llm_call","dispatchConfig":{"url":"https://r.example/x"}}`)
	json.Unmarshal(w.Data, &h)
	if h.DispatchConfig.TimeoutMs != 5000 {
		t.Fatalf("observational timeout default: %s", w.Data)
	}
}

// A toolNameMatch name that looks like a glob is matched exactly, as the document says: the hook
// is stored, and every answer that shows it (create, a dry run, a replace) says so in its message,
// naming the /regex/ that would do what the glob seems to say. A plain one is a plain success.
func TestGlobLikeToolNameNoted(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, true)
	hook := func(match string) string {
		return `{"hookName":"g","hookType":"pre_tool_use","toolNameMatch":"` + match + `","dispatchConfig":{"url":"https://r.example/h"}}`
	}
	note := `success; note: toolNameMatch: "transfer*" is matched as that exact tool name, not as a glob (toolNameMatch has none); a pattern is a /regex/, such as "/^transfer/"`
	code, w := c.do("POST", "/api/hooks", hook("transfer*"))
	if code != 201 || w.Message != note {
		t.Fatalf("create: %d %q", code, w.Message)
	}
	var h dispatcher.Hook
	json.Unmarshal(w.Data, &h)
	if h.ToolNameMatch != "transfer*" {
		t.Fatalf("stored %q", h.ToolNameMatch)
	}
	if code, w := c.do("POST", "/api/hooks?dryRun=true", hook("payOrder|transfer*")); code != 200 || w.Message != note {
		t.Errorf("dry run: %d %q", code, w.Message)
	}
	if code, w := c.do("PUT", fmt.Sprintf("/api/hooks/%d", h.ID), hook("transfer*")); code != 200 || w.Message != note {
		t.Errorf("replace: %d %q", code, w.Message)
	}
	// A regex with a flag after it, as JavaScript writes one, is a name too.
	if code, w := c.do("POST", "/api/hooks", hook("/transfer/i")); code != 201 || w.Message != `success; note: toolNameMatch: "/transfer/i" is matched as that exact tool name: `+
		`a /regex/ takes no flags after it; write them inside, such as "/(?i)transfer/"` {
		t.Errorf("/transfer/i: %d %q", code, w.Message)
	}
	for _, plain := range []string{"transferFunds|payOrder", "*", "/^transfer/", "/a/b/"} {
		if code, w := c.do("POST", "/api/hooks", hook(plain)); code != 201 || w.Message != "success" {
			t.Errorf("%s: %d %q", plain, code, w.Message)
		}
	}
}

// A hook read with GET and posted back, id and all, is created as a copy, and the answer says so:
// the id is not silently dropped, and a caller who meant to change the hook learns the PUT that
// does. A dry run says the same; a POST without an id, or a PUT, has nothing to note. A task
// posted with an id is noted the same way.
func TestPostedIDNoted(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, true)
	code, w := c.do("POST", "/api/hooks", `{"hookName":"a","hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example/h"}}`)
	if code != 201 || w.Message != "success" {
		t.Fatalf("create: %d %q", code, w.Message)
	}
	_, got := c.do("GET", "/api/hooks/1", "")
	note := "success; note: id: 1 is not taken from a POST, which always creates a new hook; PUT /api/hooks/1 changes hook 1"
	for _, path := range []string{"/api/hooks?dryRun=true", "/api/hooks"} {
		if code, w := c.do("POST", path, string(got.Data)); code/100 != 2 || w.Message != note {
			t.Errorf("POST %s of a GET's body: %d %q", path, code, w.Message)
		}
	}
	var copied dispatcher.Hook
	_, w = c.do("GET", "/api/hooks/2", "")
	if err := json.Unmarshal(w.Data, &copied); err != nil || copied.ID != 2 || copied.HookName != "a" {
		t.Fatalf("the copy: %s %v", w.Data, err)
	}
	if code, w := c.do("PUT", "/api/hooks/1", string(got.Data)); code != 200 || w.Message != "success" {
		t.Errorf("PUT of a GET's body: %d %q", code, w.Message)
	}

	tc := newTaskServer(t, storagetest.SQLite(t))
	if code, w := tc.do("POST", "/api/tasks", `{"taskName":"daily","cron":"@daily","input":"report"}`); code != 201 || w.Message != "success" {
		t.Fatalf("task: %d %q", code, w.Message)
	}
	// (A task's GET body holds nextRunAt, which a POST refuses: only the id is sent back here.)
	if code, w := tc.do("POST", "/api/tasks", `{"id":1,"taskName":"daily","cron":"@daily","input":"report"}`); code != 201 ||
		w.Message != "success; note: id: 1 is not taken from a POST, which always creates a new task; PUT /api/tasks/1 changes task 1" {
		t.Errorf("POST of a task with an id: %d %q", code, w.Message)
	}
}

// A policy that denies or asks and fails open is noted: a rule that cannot be evaluated lets the
// call through, as the rule has it, which a team writing deny rules rarely means.
func TestFailOpenPolicyNoted(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, true)
	policy := func(mode, decision string) string {
		dc := ""
		if mode != "" {
			dc = `"dispatchConfig":{"failureMode":"` + mode + `"},`
		}
		return `{"hookName":"p","hookType":"pre_tool_use","dispatchType":"policy",` + dc +
			`"policyConfig":{"rules":[{"name":"r","when":"args.amount > 10","decision":"` + decision + `"}]}}`
	}
	note := "success; note: dispatchConfig.failureMode: ALLOW (the default) lets a call through when a rule cannot be evaluated " +
		"(a field read without has(), say), even where a deny rule would have matched; DENY blocks it instead"
	for _, tc := range []struct{ mode, decision, want string }{
		{"", "deny", note}, {"ALLOW", "ask", note}, {"DENY", "deny", "success"}, {"", "allow", "success"},
	} {
		if code, w := c.do("POST", "/api/hooks", policy(tc.mode, tc.decision)); code != 201 || w.Message != tc.want {
			t.Errorf("failureMode %q, a %s rule: %d %q", tc.mode, tc.decision, code, w.Message)
		}
	}
}

func TestHookValidation(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	base := func(dc string) string {
		return `{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example/h"` + dc + `}}`
	}
	cases := []struct{ body, field string }{
		{`{"hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example"}}`, "hookName"},
		// Shown in the decision log and the CLI's tables, where an escape would pass for other text.
		{`{"hookName":"g\u001b[2K\rallow","hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example"}}`, "hookName"},
		{`{"hookName":"x","dispatchConfig":{"url":"https://r.example"}}`, "hookType"},
		{`{"hookName":"x","hookType":"pre_everything","dispatchConfig":{"url":"https://r.example"}}`, "hookType"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchType":"mq","dispatchConfig":{"url":"https://r.example"}}`, "dispatchType"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{}}`, "dispatchConfig.url"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"ftp://r.example"}}`, "dispatchConfig.url"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"https://"}}`, "dispatchConfig.url"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"r.example/h"}}`, "dispatchConfig.url"},
		{base(`,"timeoutMs":99`), "dispatchConfig.timeoutMs"},
		{base(`,"timeoutMs":60001`), "dispatchConfig.timeoutMs"},
		{base(`,"maxRetries":4`), "dispatchConfig.maxRetries"},
		{base(`,"maxRetries":-1`), "dispatchConfig.maxRetries"},
		{base(`,"failureMode":"MAYBE"`), "dispatchConfig.failureMode"},
		{base(`,"signatureScheme":"md5"`), "dispatchConfig.signatureScheme"},
		{base(`,"signatureScheme":"standard","signingSecret":"plain"`), "dispatchConfig.signingSecret"},
		{base(`,"auth":{}`), "dispatchConfig.auth.type"},
		{base(`,"auth":{"type":"KERBEROS"}`), "dispatchConfig.auth.type"},
		{base(`,"auth":{"type":"API_KEY"}`), "dispatchConfig.auth.credential"},
		{base(`,"auth":{"type":"BEARER"}`), "dispatchConfig.auth.credential"},
		{base(`,"auth":{"type":"BASIC","username":"u"}`), "dispatchConfig.auth.password"},
		{base(`,"auth":{"type":"BASIC","password":"p"}`), "dispatchConfig.auth.username"},
		{base(`,"auth":{"type":"CUSTOM"}`), "dispatchConfig.auth.headers"},
		{base(`,"auth":{"type":"CUSTOM_HTTP_TOKEN"}`), "dispatchConfig.auth.tokenFetchConfig"},
		{base(`,"auth":{"type":"CUSTOM_HTTP_TOKEN","tokenFetchConfig":{"url":"https://t.example","tokenPath":""}}`), "dispatchConfig.auth.tokenFetchConfig.tokenPath"},
		{base(`,"auth":{"type":"CUSTOM_HTTP_TOKEN","tokenFetchConfig":{"url":"x","tokenPath":"a"}}`), "dispatchConfig.auth.tokenFetchConfig.url"},
		{`{"hookName":"x","hookType":"user_message","toolNameMatch":"a","dispatchConfig":{"url":"https://r.example"}}`, "toolNameMatch"},
		{`{"hookName":"x","hookType":"pre_tool_use","toolNameMatch":"/(bad/","dispatchConfig":{"url":"https://r.example"}}`, "toolNameMatch"},
		// No tool is named "": a list with an empty name governs nothing it meant to.
		{`{"hookName":"x","hookType":"pre_tool_use","toolNameMatch":"|","dispatchConfig":{"url":"https://r.example"}}`, "toolNameMatch"},
		{`{"hookName":"x","hookType":"post_tool_use","toolNameMatch":"a|| b","dispatchConfig":{"url":"https://r.example"}}`, "toolNameMatch"},
		{`{"hookName":"x","hookType":"pre_tool_use","toolNameMatch":"transferFunds|","dispatchConfig":{"url":"https://r.example"}}`, "toolNameMatch"},
		{`{"hookName":"x","hookType":"pre_tool_use","agentId":"five","dispatchConfig":{"url":"https://r.example"}}`, "agentId"},
		{`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example","timeoutMs":"fast"}}`, "dispatchConfig.timeoutMs"},
		{`{"hookName":`, "body"},
		{``, "body"},
	}
	for _, tc := range cases {
		status, w := c.do("POST", "/api/hooks", tc.body)
		if status != 400 || !strings.HasPrefix(w.Message, tc.field) {
			t.Errorf("%s\n  got %d %q, want 400 naming %s", tc.body, status, w.Message, tc.field)
		}
	}
	valid := []string{
		base(`,"auth":{"type":"NONE"}`),
		base(`,"auth":{"type":"API_KEY","header":"X-API-Key","credential":"k"}`),
		base(`,"auth":{"type":"BASIC","username":"u","password":"p"}`),
		base(`,"auth":{"type":"BASIC","credential":"dTpw"}`),
		base(`,"auth":{"type":"CUSTOM","headers":{"X-A":"1"}}`),
		base(`,"auth":{"type":"CUSTOM_HTTP_TOKEN","tokenFetchConfig":{"url":"https://t.example/token","method":"POST","headers":{},"body":"{}","tokenPath":"data.token","expiresInPath":"data.expiresIn","header":"Authorization","prefix":"Bearer"}}`),
		base(`,"signatureScheme":"standard","signingSecret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`),
		`{"hookName":"x","hookType":"pre_tool_use","toolNameMatch":"/^transfer.*/","dispatchConfig":{"url":"https://r.example"}}`,
		`{"hookName":"x","hookType":"pre_tool_use","toolNameMatch":"a | b","dispatchConfig":{"url":"https://r.example"}}`,
	}
	for _, body := range valid {
		if status, w := c.do("POST", "/api/hooks", body); status != 201 {
			t.Errorf("%s: %d %s", body, status, w.Message)
		}
	}
}

func TestAdminAuthAndErrors(t *testing.T) {
	db := storagetest.SQLite(t)
	c := newServer(t, db, []string{"other-token", adminToken}, false)
	for _, tok := range []string{"", "wrong", adminToken + "x"} {
		anon := c
		anon.tok = tok
		if status, _ := anon.do("GET", "/api/hooks", ""); status != 401 {
			t.Errorf("token %q: %d, want 401", tok, status)
		}
	}
	if status, _ := c.do("GET", "/api/hooks", ""); status != 200 {
		t.Fatalf("second token refused: %d", status)
	}
	if status, _ := c.do("GET", "/api/nothing", ""); status != 404 {
		t.Errorf("unknown route: %d", status)
	}
	if status, _ := c.do("PATCH", "/api/hooks", ""); status != 405 {
		t.Errorf("wrong method: %d", status)
	}
	if status, _ := c.do("GET", "/api/hooks/abc", ""); status != 400 {
		t.Errorf("bad id: %d", status)
	}
	big := `{"hookName":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`
	if status, _ := c.do("POST", "/api/hooks", big); status != 413 {
		t.Errorf("big body: %d", status)
	}
	// Without Content-Length (chunked) the limit still holds.
	req, _ := http.NewRequest("POST", c.base+"/api/hooks", io.MultiReader(bytes.NewReader([]byte(big))))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked big body: %d", resp.StatusCode)
	}
	// The rest of the body is left unread: the connection is closed, not read on to be reused.
	if !resp.Close {
		t.Errorf("chunked big body: the connection is kept (%v)", resp.Header)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		anon := c
		anon.tok = ""
		if status, _ := anon.do("GET", path, ""); status != 200 {
			t.Errorf("%s: %d", path, status)
		}
	}

	// No admin tokens: open on loopback, closed elsewhere.
	open := newServer(t, db, nil, true)
	open.tok = ""
	if status, _ := open.do("GET", "/api/hooks", ""); status != 200 {
		t.Errorf("loopback dev mode: %d", status)
	}
	closed := newServer(t, db, nil, false)
	closed.tok = ""
	if status, _ := closed.do("GET", "/api/hooks", ""); status != 401 {
		t.Errorf("no tokens off loopback: %d", status)
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// pageItems decodes the items of one page of a list answer.
func pageItems[T any](t *testing.T, data json.RawMessage) []T {
	t.Helper()
	var p struct {
		Items []T `json:"items"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Items == nil {
		t.Fatalf("not a page: %v %s", err, data)
	}
	return p.Items
}

func TestRulesAPI(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		for body, field := range map[string]string{
			`{"behavior":"allow"}`:                                    "toolName",
			`{"toolName":"x","behavior":"maybe"}`:                     "behavior",
			`{"toolName":"x","behavior":"deny","scope":"team"}`:       "scope",
			`{"toolName":"x","behavior":"deny","scope":"user"}`:       "scopeKey",
			`{"toolName":"/(x/","behavior":"deny"}`:                   "toolName",
			`{"toolName":"x","ruleContent":"/(x/","behavior":"deny"}`: "ruleContent",
		} {
			if status, w := c.do("POST", "/api/rules", body); status != 400 || !strings.HasPrefix(w.Message, field) {
				t.Errorf("%s: %d %s", body, status, w.Message)
			}
		}
		status, w := c.do("POST", "/api/rules", `{"toolName":"shell_execute","ruleContent":"/^rm /","behavior":"deny","scope":"user","scopeKey":"alice"}`)
		if status != 201 {
			t.Fatalf("add: %d %s", status, w.Message)
		}
		var rule storage.PermissionRule
		json.Unmarshal(w.Data, &rule)
		_, w = c.do("GET", "/api/rules?scope=user", "")
		if !strings.Contains(string(w.Data), `"ruleContent":"/^rm /"`) {
			t.Fatalf("list: %s", w.Data)
		}
		if status, _ := c.do("DELETE", "/api/rules/"+itoa(rule.ID), ""); status != 200 {
			t.Fatalf("revoke: %d", status)
		}
		if status, _ := c.do("DELETE", "/api/rules/"+itoa(rule.ID), ""); status != 404 {
			t.Fatalf("revoke twice: %d", status)
		}
	})
}

// A priority the database's priority column cannot hold is a 400 naming it, on either database
// (PostgreSQL's INTEGER is 32 bits: 3000000000 was a 500 there, and taken on SQLite), and the
// bounds themselves are stored and read back.
func TestHookPriorityRange(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		body := func(p string) string {
			return `{"hookName":"p","hookType":"pre_tool_use","priority":` + p + `,"dispatchConfig":{"url":"https://r.example/h"}}`
		}
		for _, p := range []string{"3000000000", "-3000000000", "2147483648", "-2147483649"} {
			if status, w := c.do("POST", "/api/hooks", body(p)); status != 400 || !strings.HasPrefix(w.Message, "priority") {
				t.Errorf("priority %s: %d %s", p, status, w.Message)
			}
		}
		for _, p := range []string{"2147483647", "-2147483648"} {
			status, w := c.do("POST", "/api/hooks", body(p))
			if status != 201 || !strings.Contains(string(w.Data), `"priority":`+p+`,`) {
				t.Errorf("priority %s: %d %s %s", p, status, w.Message, w.Data)
			}
		}
	})
}

// The stored auth is the credential of the receiver it was given for: a PUT that moves the url to
// another origin without sending auth again (left out, or sent back as GET shows it, "***") is a
// 400 naming auth, where the old receiver's token went on to the new host. A url of the same
// origin keeps it, as before; a new auth, or NONE, for the new origin is taken.
func TestHookAuthNotCarriedToAnotherOrigin(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		old, moved := newReceiver(t, `{"decision": "allow"}`), newReceiver(t, `{"decision": "allow"}`)
		hook := func(url, auth string) string {
			return `{"hookName": "pay", "hookType": "pre_tool_use", "dispatchConfig": {"url": "` + url + `"` + auth + `}}`
		}
		status, w := c.do("POST", "/api/hooks", hook(old.URL, `, "auth": {"type": "BEARER", "credential": "tok-old"}`))
		var made struct{ ID int64 }
		if json.Unmarshal(w.Data, &made); status != 201 {
			t.Fatal(w.Message)
		}
		path := "/api/hooks/" + itoa(made.ID)
		called := func(r *receiver, want string) {
			t.Helper()
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "t"}}`); status != 200 {
				t.Fatal(w.Message)
			}
			select {
			case h := <-r.headers:
				if got := h.Get("Authorization"); got != want {
					t.Fatalf("Authorization %q, want %q", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the receiver was not called")
			}
		}
		for _, auth := range []string{"", `, "auth": {"type": "BEARER", "credential": "***"}`} {
			for _, q := range []string{"", "?dryRun=true"} {
				status, w := c.do("PUT", path+q, hook(moved.URL, auth))
				want := "dispatchConfig.auth: the stored credential is for " + old.URL + ", and dispatchConfig.url now goes to " + moved.URL
				if status != 400 || !strings.HasPrefix(w.Message, want) {
					t.Errorf("PUT%s %q: %d %q, want 400 %s…", q, auth, status, w.Message, want)
				}
			}
		}
		called(old, "Bearer tok-old")
		// Another path at the same origin keeps the credential.
		if status, w := c.do("PUT", path, hook(old.URL+"/v2", "")); status != 200 {
			t.Fatal(w.Message)
		}
		called(old, "Bearer tok-old")
		if status, w := c.do("PUT", path, hook(moved.URL, `, "auth": {"type": "BEARER", "credential": "tok-new"}`)); status != 200 {
			t.Fatal(w.Message)
		}
		called(moved, "Bearer tok-new")
		if status, w := c.do("PUT", path, hook(old.URL, `, "auth": {"type": "NONE"}`)); status != 200 {
			t.Fatal(w.Message)
		}
		called(old, "")
	})
}
