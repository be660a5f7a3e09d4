package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// fullHooks are hook bodies that use every field of the hook model, each auth type once.
var fullHooks = []string{
	`{"id": 1, "hookName": "gate", "hookType": "pre_tool_use", "agentId": 5001, "toolNameMatch": "transferFunds",
	  "priority": 1, "enabled": true, "dispatchType": "webhook", "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
	  "dispatchConfig": {"url": "https://r.example/h", "timeoutMs": 3000, "maxRetries": 3, "signingSecret": "s",
	    "failureMode": "DENY", "signatureScheme": "hookd", "auth": {"type": "BEARER", "credential": "tok", "prefix": "Bearer"}}}`,
	`{"hookName": "k", "hookType": "user_message", "dispatchConfig": {"url": "https://r.example/h",
	    "auth": {"type": "API_KEY", "header": "X-API-Key", "credential": "k"}}}`,
	`{"hookName": "b", "hookType": "post_tool_use", "dispatchConfig": {"url": "https://r.example/h",
	    "auth": {"type": "BASIC", "username": "u", "password": "p"}}}`,
	`{"hookName": "c", "hookType": "session_start", "dispatchConfig": {"url": "https://r.example/h",
	    "auth": {"type": "CUSTOM", "headers": {"X-Tenant": "7"}}}}`,
	`{"hookName": "p", "hookType": "pre_tool_use", "dispatchType": "policy", "dispatchConfig": {"failureMode": "DENY"},
	  "policyConfig": {"rules": [{"name": "over", "when": "args.amount > 10000", "decision": "deny", "reason": "'too much'"},
	    {"name": "mask", "when": "has(args.cardNo)", "decision": "modify", "modifiedValue": "args"}], "default": "allow", "costLimit": 100000}}`,
	`{"hookName": "t", "hookType": "agent_completion", "dispatchConfig": {"url": "https://r.example/h",
	    "auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/token", "method": "POST",
	      "headers": {"X-Client": "c"}, "body": "{}", "tokenPath": "data.token", "expiresInPath": "data.expiresIn",
	      "header": "Authorization", "prefix": "Bearer"}}}}`,
}

// fullContexts are dispatch bodies with every context field of each hookType (the source
// document's examples).
var fullContexts = map[string]string{
	"pre_tool_use":        `{"toolName": "transferFunds", "toolCallId": "call_1", "arguments": {"amount": 5, "target_account": "A"}}`,
	"post_tool_use":       `{"toolName": "queryOrder", "toolCallId": "call_1", "arguments": {"orderId": "O"}, "output": {"order_status": "ok"}, "succeeded": true, "errorMessage": null, "durationMs": 320}`,
	"user_message":        `{"userInput": "hi", "chatMode": "single_chat", "triggerSource": {"sourceType": "human_message", "channelType": "im", "channelProvider": "dingtalk"}, "bizKey": "k", "userNickname": "n"}`,
	"session_start":       `{"newSession": true}`,
	"agent_completion":    `{"succeeded": true, "errorMessage": null, "errorCode": null, "model": "m", "durationMs": 1, "totalTokens": 2, "stepCount": 3, "triggerSourceType": "human_message", "requestId": "r", "assistantMessageId": 4, "userMessageId": 5, "newSession": true, "agentName": "a", "channelProvider": "dingtalk"}`,
	"post_llm_call":       `{"model": "m", "step": 2, "durationMs": 1, "promptTokens": 1, "completionTokens": 1, "totalTokens": 2, "cachedTokens": 0, "reasoningTokens": 0}`,
	"pre_scheduled_task":  `{"taskId": 9001, "taskName": "daily"}`,
	"post_scheduled_task": `{"taskId": 9001, "taskName": "daily", "succeeded": true, "errorMessage": null, "errorCode": null, "durationMs": 60000, "requestId": "r"}`,
}

// freeForm are the paths whose keys are data, not fields: header names, tool arguments and output.
var freeForm = []string{"dispatchConfig.auth.headers", "dispatchConfig.auth.tokenFetchConfig.headers",
	"context.arguments", "context.output"}

// strictCase is one body with one field misspelt or added, and the 400 it must get.
type strictCase struct {
	name, body, want string
}

// strictCases derives, from a valid body, a body per camelCase field with its snake_case twin
// instead, and a body per object (top level and nested) with an unknown field added.
func strictCases(t *testing.T, valid string) []strictCase {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(valid), &doc); err != nil {
		t.Fatalf("%v: %s", err, valid)
	}
	var out []strictCase
	var walk func(obj map[string]any, path string)
	walk = func(obj map[string]any, path string) {
		if slices.Contains(freeForm, path) {
			return
		}
		at := func(k string) string {
			if path == "" {
				return k
			}
			return path + "." + k
		}
		obj["zzUnknown"] = 1
		out = append(out, strictCase{"unknown " + at("zzUnknown"), marshal(t, doc), at("zzUnknown") + ": unknown field"})
		delete(obj, "zzUnknown")
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := obj[k]
			if snake := snakeCase(k); snake != k {
				delete(obj, k)
				obj[snake] = v
				out = append(out, strictCase{"snake " + at(snake), marshal(t, doc),
					fmt.Sprintf("%s: unknown field (did you mean %q?)", at(snake), k)})
				delete(obj, snake)
				obj[k] = v
			}
			switch inner := v.(type) {
			case map[string]any:
				walk(inner, at(k))
			case []any:
				for i, el := range inner {
					if obj, ok := el.(map[string]any); ok {
						walk(obj, fmt.Sprintf("%s[%d]", at(k), i))
					}
				}
			}
		}
	}
	walk(doc, "")
	return out
}

func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func marshal(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkStrict sends every strict case of valid to method path and wants 400 naming the field;
// valid itself must be accepted with wantOK.
func checkStrict(t *testing.T, c client, method, path, valid string, wantOK int) {
	t.Helper()
	cases := strictCases(t, valid)
	if len(cases) < 2 {
		t.Fatalf("no cases from %s", valid)
	}
	for _, tc := range cases {
		status, w := c.do(method, path, tc.body)
		if status != http.StatusBadRequest || w.Message != tc.want {
			t.Errorf("%s %s, %s:\n  got %d %q\n  want 400 %q", method, path, tc.name, status, w.Message, tc.want)
		}
	}
	if status, w := c.do(method, path, valid); status != wantOK {
		t.Errorf("%s %s with the valid body: %d %s", method, path, status, w.Message)
	}
}

func TestStrictHookBodies(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	for _, body := range fullHooks {
		checkStrict(t, c, "POST", "/api/hooks", body, http.StatusCreated)
		checkStrict(t, c, "PUT", "/api/hooks/1", storedCreatedAt(t, c, "/api/hooks/1", body), http.StatusOK)
	}
}

func TestStrictRuleBody(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	checkStrict(t, c, "POST", "/api/rules", `{"toolName": "shell_execute", "ruleContent": "/^rm /", "behavior": "deny",
		"source": "admin", "scope": "user", "scopeKey": "alice", "expiresAt": "2999-01-01T00:00:00Z"}`, http.StatusCreated)
}

func TestStrictTaskBodies(t *testing.T) {
	c := newTaskServer(t, storagetest.SQLite(t))
	body := `{"id": 1, "taskName": "daily", "cron": "0 9 * * 1-5", "input": "report", "agentId": 5001, "principalId": 1001,
		"reuseSession": false, "enabled": true, "catchUp": true, "sessionId": null, "nextRunAt": null, "lastRunAt": null,
		"createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"}`
	checkStrict(t, c, "POST", "/api/tasks", body, http.StatusCreated)
	checkStrict(t, c, "PUT", "/api/tasks/1", storedCreatedAt(t, c, "/api/tasks/1", body), http.StatusOK)
}

// storedCreatedAt is body with its createdAt, if any, made the one GET path shows: a replace may
// send it back as read, never another.
func storedCreatedAt(t *testing.T, c client, path, body string) string {
	t.Helper()
	status, w := c.do("GET", path, "")
	var got struct {
		CreatedAt string `json:"createdAt"`
	}
	if status != 200 || json.Unmarshal(w.Data, &got) != nil || got.CreatedAt == "" {
		t.Fatalf("GET %s: %d %s", path, status, w.Data)
	}
	return strings.Replace(body, `"createdAt": "2026-01-01T00:00:00Z"`, `"createdAt": "`+got.CreatedAt+`"`, 1)
}

func TestStrictDispatchBodies(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	for typ, ctx := range fullContexts {
		body := `{"hookType": "` + typ + `", "sessionId": 1, "principalId": 2, "agentId": 3, "traceId": "t", "context": ` + ctx + `}`
		want := http.StatusOK
		if !dispatcher.HookType(typ).Interceptive() {
			want = http.StatusAccepted
		}
		checkStrict(t, c, "POST", "/api/hooks/dispatch", body, want)
	}
}

// newServerWithHookAndTask serves the admin API with hook 1 (fullHooks[0]) and task 1 stored.
func newServerWithHookAndTask(t *testing.T) client {
	t.Helper()
	c := newTaskServer(t, storagetest.SQLite(t))
	if status, w := c.do("POST", "/api/hooks", fullHooks[0]); status != 201 {
		t.Fatal(w.Message)
	}
	if status, w := c.do("POST", "/api/tasks", `{"taskName": "daily", "cron": "@daily", "input": "x"}`); status != 201 {
		t.Fatal(w.Message)
	}
	return c
}

// Unknown query parameters are refused on every admin route of hooks, rules and tasks.
func TestStrictQuery(t *testing.T) {
	c := newServerWithHookAndTask(t)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/api/hooks?hook_type=pre_tool_use", `hook_type: unknown query parameter (did you mean "hookType"?)`},
		{"GET", "/api/hooks/1?verbose=1", "verbose: unknown query parameter"},
		{"PUT", "/api/hooks/1?dry_run=1", `dry_run: unknown query parameter (did you mean "dryRun"?)`},
		{"DELETE", "/api/hooks/1?force=1", "force: unknown query parameter"},
		{"POST", "/api/hooks?x=1", "x: unknown query parameter"},
		{"POST", "/api/hooks/dispatch?async=1", "async: unknown query parameter"},
		{"GET", "/api/breakers?state=open", "state: unknown query parameter"},
		{"GET", "/api/rules?scope_key=a", `scope_key: unknown query parameter (did you mean "scopeKey"?)`},
		{"POST", "/api/rules?x=1", "x: unknown query parameter"},
		{"DELETE", "/api/rules/1?x=1", "x: unknown query parameter"},
		{"GET", "/api/tasks?x=1", "x: unknown query parameter"},
		{"POST", "/api/tasks?x=1", "x: unknown query parameter"},
		{"GET", "/api/tasks/1?x=1", "x: unknown query parameter"},
		{"PUT", "/api/tasks/1?x=1", "x: unknown query parameter"},
		{"DELETE", "/api/tasks/1?x=1", "x: unknown query parameter"},
		{"POST", "/api/tasks/1/run?x=1", "x: unknown query parameter"},
		{"GET", "/api/tasks/1/runs?stauts=failed", `stauts: unknown query parameter (did you mean "status"?)`},
		{"POST", "/api/hooks/1/test?sample=1", "sample: unknown query parameter"},
		{"POST", "/api/deliveries/1/redeliver?now=1", "now: unknown query parameter"},
		{"POST", "/api/approvals/ask_1?x=1", "x: unknown query parameter"},
	} {
		body := fullHooks[0]
		if tc.method == "DELETE" || tc.method == "GET" || strings.Contains(tc.path, "/test?") || strings.Contains(tc.path, "/redeliver?") ||
			strings.Contains(tc.path, "/run?") {
			body = "{}" // the routes that take no body
		}
		if status, w := c.do(tc.method, tc.path, body); status != 400 || w.Message != tc.want {
			t.Errorf("%s %s: %d %q, want 400 %q", tc.method, tc.path, status, w.Message, tc.want)
		}
	}
}

// A query that cannot be read as the client meant it is refused, not read in part: a filter
// given twice, or a parameter the URL encoding spoils, must not silently widen a list.
func TestQueryReadWholeOrRefused(t *testing.T) {
	c := newTaskServer(t, storagetest.SQLite(t))
	for _, tc := range []struct{ path, want string }{
		{"/api/hooks?hookType=user_message&hookType=pre_tool_use", "hookType: appears twice; send each query parameter once"},
		{"/api/deliveries?status=dead&status=failed", "status: appears twice; send each query parameter once"},
		{"/api/decisions?limit=1&limit=500", "limit: appears twice; send each query parameter once"},
		{"/api/deliveries?status=%zz", `query: invalid URL escape "%zz"`},
		{"/api/deliveries?stauts%zz=dead", `query: invalid URL escape "%zz"`},
		{"/api/deliveries?status=dead;hookId=1", "query: invalid semicolon separator in query"},
		// A filter sent empty (?toolName=$T, T unset) would read as absent: every row.
		{"/api/decisions?toolName=", "toolName: is empty; leave the parameter out, or give it a value"},
		{"/api/decisions?hookId=&limit=5", "hookId: is empty; leave the parameter out, or give it a value"},
		{"/api/deliveries?status=", "status: is empty; leave the parameter out, or give it a value"},
		{"/api/hooks?hookType", "hookType: is empty; leave the parameter out, or give it a value"},
		{"/api/tasks?cursor=", "cursor: is empty; leave the parameter out, or give it a value"},
		// Hook ids start at 1: a 0 would read as no filter (a purge of every hook's rows).
		{"/api/decisions?hookId=0", "hookId: must be a hook id, from 1"},
		{"/api/decisions?sessionId=0", "sessionId: must be a positive id"},
		{"/api/decisions?principalId=0", "principalId: must be a positive id"},
		{"/api/deliveries?hookId=00", "hookId: must be a hook id, from 1"},
	} {
		if status, w := c.do("GET", tc.path, ""); status != 400 || w.Message != tc.want {
			t.Errorf("GET %s: %d %q, want 400 %q", tc.path, status, w.Message, tc.want)
		}
	}
	if status, w := c.do("DELETE", "/api/deliveries?status=failed,dead&hookId=0", ""); status != 400 || w.Message != "hookId: must be a hook id, from 1" {
		t.Errorf("a purge of hook 0: %d %q, want 400", status, w.Message)
	}
	if status, w := c.do("GET", "/api/deliveries?status=dead&hookId=1", ""); status != 200 {
		t.Errorf("a well-formed query: %d %s", status, w.Message)
	}
}

// receiver is a real webhook receiver that answers every call with answer and counts them.
type receiver struct {
	*httptest.Server
	calls   atomic.Int64
	headers chan http.Header
}

func newReceiver(t *testing.T, answer string) *receiver {
	r := &receiver{headers: make(chan http.Header, 64)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		io.Copy(io.Discard, req.Body)
		select {
		case r.headers <- req.Header.Clone():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(r.Close)
	return r
}

// newDispatchServer serves the admin API with a running dispatcher, and returns the registry of
// its metrics.
func newDispatchServer(t *testing.T, db *storage.DB) (client, *prometheus.Registry) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := dispatcher.NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	disp := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "test", Metrics: metrics})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: disp,
		AdminTokens: []string{adminToken}, Log: log})))
	t.Cleanup(func() {
		srv.Close()
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		disp.Stop(c)
	})
	return client{t: t, base: srv.URL, tok: adminToken}, metrics
}

// A dispatch names its subject: without toolName the fail-closed approval hook is never asked
// and nothing is decided; with it, the receiver decides.
func TestDispatchNeedsItsSubject(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		recv := newReceiver(t, `{"decision": "deny", "reason": "needs approval"}`)
		if status, w := c.do("POST", "/api/hooks", `{"hookName": "approval", "hookType": "pre_tool_use",
			"toolNameMatch": "transferFunds", "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY"}}`); status != 201 {
			t.Fatal(w.Message)
		}
		for _, tc := range []struct{ typ, ctx, want string }{
			{"pre_tool_use", `{}`, "context.toolName: is required for pre_tool_use: it names the tool the event is about"},
			{"pre_tool_use", `{"toolName": ""}`, "context.toolName: is required for pre_tool_use: it names the tool the event is about"},
			{"pre_tool_use", `{"tool_name": "transferFunds"}`, `context.tool_name: unknown field (did you mean "toolName"?)`},
			{"pre_tool_use", `{"toolName": 7}`, "context.toolName: must be a string, not number"},
			{"pre_tool_use", `"transferFunds"`, "context: must be an object, not string"},
			{"pre_tool_use", `null`, "context: is required for pre_tool_use"},
			{"post_tool_use", `{"toolCallId": "c"}`, "context.toolName: is required for post_tool_use: it names the tool the event is about"},
			{"user_message", `{"chatMode": "single_chat"}`, "context.userInput: is required for user_message: it is the input the decision is about"},
			{"user_message", `{"userInput": ["a"]}`, "context.userInput: must be a string, not array"},
			{"user_message", `{"userInput": "  "}`, "context.userInput: is required for user_message: it is the input the decision is about"},
			// The source document's lists, in lower case: another spelling would match no rule.
			{"user_message", `{"userInput": "hi", "chatMode": "GROUP_CHAT"}`, `context.chatMode: "GROUP_CHAT" is not one of single_chat, group_chat (did you mean "group_chat"?)`},
			{"user_message", `{"userInput": "hi", "chatMode": "claude-code"}`, `context.chatMode: "claude-code" is not one of single_chat, group_chat`},
			{"user_message", `{"userInput": "hi", "triggerSource": {"sourceType": "HUMAN"}}`, `context.triggerSource.sourceType: "HUMAN" is not one of human_message, scheduled_task, api_call, internal`},
			{"user_message", `{"userInput": "hi", "triggerSource": {"sourceType": "human_message", "channelProvider": "slack"}}`, `context.triggerSource.channelProvider: "slack" is not one of dingtalk, wecom, wechat, feishu, qq`},
			{"agent_completion", `{"succeeded": true, "triggerSourceType": "Scheduled_Task"}`, `context.triggerSourceType: "Scheduled_Task" is not one of human_message, scheduled_task, api_call, internal (did you mean "scheduled_task"?)`},
			{"pre_scheduled_task", `{}`, "context.taskId: taskId or taskName is required for pre_scheduled_task: it names the task the event is about"},
			{"pre_scheduled_task", `{"taskId": "9001"}`, "context.taskId: must be an integer, not string"},
			{"post_scheduled_task", `{"succeeded": true}`, "context.taskId: taskId or taskName is required for post_scheduled_task: it names the task the event is about"},
			// Arguments sent as text: a key twice is as ambiguous as in the object form.
			{"pre_tool_use", `{"toolName": "transferFunds", "arguments": "{\"amount\": 50000, \"amount\": 1}"}`, "context.arguments.amount: appears twice; send each field once"},
			{"post_tool_use", `{"toolName": "t", "arguments": "[{\"a\": 1, \"a\": 2}]"}`, "context.arguments[0].a: appears twice; send each field once"},
			// Text that begins as JSON and is not: a policy reads no object, a lenient reader one.
			{"pre_tool_use", `{"toolName": "transferFunds", "arguments": "{\"amount\": 20000} x"}`, "context.arguments: begins as JSON " +
				"but is not valid JSON; send the arguments as a JSON object or array, or as text that does not begin with { or ["},
		} {
			status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "`+tc.typ+`", "context": `+tc.ctx+`}`)
			if status != 400 || w.Message != tc.want {
				t.Errorf("%s %s: %d %q, want 400 %q", tc.typ, tc.ctx, status, w.Message, tc.want)
			}
		}
		if n := recv.calls.Load(); n != 0 {
			t.Fatalf("the receiver was called %d times for dispatches without a subject", n)
		}
		// As the lists have them, or a coding agent's prompt as its adapter sends it.
		for _, ctx := range []string{
			`{"userInput": "hi", "chatMode": "group_chat", "triggerSource": {"sourceType": "human_message", "channelType": "im", "channelProvider": "feishu"}}`,
			`{"userInput": "hi", "chatMode": "claude-code", "triggerSource": {"sourceType": "human_message"}, "agentKind": "claude-code", "externalSessionId": "s1"}`,
		} {
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "user_message", "context": `+ctx+`}`); status != 200 {
				t.Errorf("%s: %d %s", ctx, status, w.Message)
			}
		}
		status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "transferFunds", "toolCallId": "c1", "arguments": {"amount": 5}}}`)
		var dec struct {
			Decision   string  `json:"decision"`
			Reason     *string `json:"reason"`
			DecisionID *string `json:"decisionId"`
		}
		json.Unmarshal(w.Data, &dec)
		if status != 200 || dec.Decision != "deny" || dec.Reason == nil || *dec.Reason != "needs approval" || dec.DecisionID == nil {
			t.Fatalf("with its subject: %d %s", status, w.Data)
		}
		if n := recv.calls.Load(); n != 1 {
			t.Fatalf("receiver calls = %d, want 1", n)
		}
		for _, id := range []string{"sessionId", "principalId", "agentId"} {
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "`+id+`": 0, "context": {"toolName": "transferFunds"}}`); status != 400 ||
				w.Message != id+": must be a positive id, or absent" {
				t.Errorf("%s 0: %d %q", id, status, w.Message)
			}
		}
		if n := recv.calls.Load(); n != 1 {
			t.Fatalf("receiver calls = %d, want 1", n)
		}
		for _, ctx := range []string{`{"taskId": 9001}`, `{"taskName": "daily"}`} {
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_scheduled_task", "context": `+ctx+`}`); status != 200 {
				t.Errorf("pre_scheduled_task %s: %d %s", ctx, status, w.Message)
			}
		}
	})
}

// newGuardedServer serves the admin API with registration checked by the SSRF guard of p, as
// the daemon does.
func newGuardedServer(t *testing.T, p netguard.Policy) client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := storagetest.SQLite(t)
	reg, err := dispatcher.NewRegistry(context.Background(), db, log, dispatcher.WithGuard(netguard.New(p)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: reg, AdminTokens: []string{adminToken}, Log: log}))
	t.Cleanup(srv.Close)
	return client{t: t, base: srv.URL, tok: adminToken}
}

// Receivers that can never be reached are refused at registration with the default config,
// saying why and which setting allows them.
func TestUnreachableReceiversRefused(t *testing.T) {
	c := newGuardedServer(t, netguard.Policy{})
	const private = "set webhooks.allowPrivateNetworks: true, or list the address in webhooks.allowCIDRs, to allow it"
	cases := []struct{ url, want string }{
		{"http://127.0.0.1:9000/h", "127.0.0.1 is loopback (127.0.0.0/8), which the SSRF guard refuses at every call; " + private},
		{"http://127.8.9.10/h", "127.8.9.10 is loopback (127.0.0.0/8)"},
		{"http://localhost:9000/h", "localhost resolves to 127.0.0.1 is loopback (127.0.0.0/8)"},
		{"http://10.1.2.3/h", "10.1.2.3 is private (RFC1918)"},
		{"https://172.16.0.9/h", "172.16.0.9 is private (RFC1918)"},
		{"https://192.168.1.20:8443/h", "192.168.1.20 is private (RFC1918)"},
		{"http://100.64.0.1/h", "100.64.0.1 is shared address space / CGNAT (100.64.0.0/10)"},
		{"http://169.254.10.1/h", "169.254.10.1 is link-local (169.254.0.0/16)"},
		{"http://169.254.169.254/latest/meta-data", "169.254.169.254 is a cloud metadata endpoint, which the SSRF guard refuses at every call; only an entry in webhooks.allowCIDRs allows it (webhooks.allowPrivateNetworks does not)"},
		{"http://[::1]:9000/h", "::1 is loopback (::1)"},
		{"http://[fd12:3456::1]/h", "fd12:3456::1 is unique local (fc00::/7)"},
		{"http://[fe80::1]/h", "fe80::1 is link-local (fe80::/10)"},
		{"http://[::ffff:10.0.0.1]/h", "::ffff:10.0.0.1 (the IPv4-mapped form of 10.0.0.1) is private (RFC1918)"},
		{"http://[64:ff9b::a00:1]/h", "64:ff9b::a00:1 (the NAT64 form of 10.0.0.1) is private (RFC1918)"},
		{"http://[2002:c0a8:101::1]/h", "2002:c0a8:101::1 (the 6to4 form of 192.168.1.1) is private (RFC1918)"},
		{"http://0.0.0.0:8080/h", "0.0.0.0 is unspecified (0.0.0.0/8), which the SSRF guard refuses at every call; no setting allows it"},
	}
	for _, tc := range cases {
		body := `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "` + tc.url + `"}}`
		status, w := c.do("POST", "/api/hooks", body)
		if status != 400 || !strings.HasPrefix(w.Message, "dispatchConfig.url: "+tc.want) {
			t.Errorf("%s: %d %q\n  want 400 starting %q", tc.url, status, w.Message, "dispatchConfig.url: "+tc.want)
		}
	}
	// The token endpoint of CUSTOM_HTTP_TOKEN is dialed through the same guard.
	status, w := c.do("POST", "/api/hooks", `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://93.184.216.34/h",
		"auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "http://10.0.0.7/token", "tokenPath": "t"}}}}`)
	if status != 400 || !strings.HasPrefix(w.Message, "dispatchConfig.auth.tokenFetchConfig.url: 10.0.0.7 is private") {
		t.Errorf("private token endpoint: %d %q", status, w.Message)
	}
	// A public literal, and a name that does not resolve now, are accepted: the guard checks each dial.
	// The name is noted in the answer, with what follows until it resolves, on a dry run too.
	for _, u := range []string{"https://93.184.216.34/h", "https://receiver.invalid/h"} {
		for _, path := range []string{"/api/hooks", "/api/hooks?dryRun=true"} {
			status, w := c.do("POST", path, `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+u+`"}}`)
			if status != 201 && !(status == 200 && strings.HasSuffix(path, "dryRun=true")) {
				t.Errorf("%s %s: %d %s", path, u, status, w.Message)
			}
			notes := wire.Notes(w.Message)
			if u == "https://93.184.216.34/h" && len(notes) > 0 {
				t.Errorf("%s %s: notes %q", path, u, notes)
			}
			if u == "https://receiver.invalid/h" && (len(notes) != 1 || !strings.HasPrefix(notes[0], "dispatchConfig.url: receiver.invalid does not resolve now (") ||
				!strings.HasSuffix(notes[0], "); until it does, every call fails before it is sent and the hook falls to failureMode ALLOW (the SSRF guard looks the name up again at every call)")) {
				t.Errorf("%s %s: notes %q", path, u, notes)
			}
		}
	}
	status, w = c.do("POST", "/api/hooks", `{"hookName": "r", "hookType": "post_tool_use", "dispatchConfig": {"url": "https://receiver.invalid/h"}}`)
	if notes := wire.Notes(w.Message); status != 201 || len(notes) != 1 || !strings.Contains(notes[0], "; until it does, its deliveries fail before they are sent and are retried until they end dead (") {
		t.Errorf("an observational hook: %d %q", status, notes)
	}
	// allowPrivateNetworks allows loopback, not the metadata endpoint; allowCIDRs allows exactly its ranges.
	open := newGuardedServer(t, netguard.Policy{AllowPrivateNetworks: true})
	for u, want := range map[string]int{"http://127.0.0.1:9/h": 201, "http://localhost:9/h": 201, "http://169.254.169.254/": 400, "http://0.0.0.0/": 400} {
		if status, w := open.do("POST", "/api/hooks", `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+u+`"}}`); status != want {
			t.Errorf("allowPrivateNetworks, %s: %d %s", u, status, w.Message)
		}
	}
	cidr := newGuardedServer(t, netguard.Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	for u, want := range map[string]int{"http://10.20.1.1/h": 201, "http://10.21.1.1/h": 400} {
		if status, w := cidr.do("POST", "/api/hooks", `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+u+`"}}`); status != want {
			t.Errorf("allowCIDRs, %s: %d %s", u, status, w.Message)
		}
	}
}

// ?dryRun=true checks a create or a replace exactly as the write would, receivers and the stored
// secrets included, and stores nothing.
func TestHookDryRun(t *testing.T) {
	c := newGuardedServer(t, netguard.Policy{})
	body := func(u string) string {
		return `{"hookName": "r", "hookType": "pre_tool_use", "dispatchConfig": {"url": "` + u + `", "signingSecret": "s"}}`
	}
	if status, w := c.do("POST", "/api/hooks?dryRun=true", body("http://10.1.2.3/h")); status != 400 ||
		!strings.HasPrefix(w.Message, "dispatchConfig.url: 10.1.2.3 is private (RFC1918)") {
		t.Fatalf("dry run of a private receiver: %d %q", status, w.Message)
	}
	status, w := c.do("POST", "/api/hooks?dryRun=true", body("https://93.184.216.34/h"))
	if status != 200 || !strings.Contains(string(w.Data), `"signingSecret":"***"`) || strings.Contains(string(w.Data), `"id"`) {
		t.Fatalf("dry run of a create: %d %s %s", status, w.Message, w.Data)
	}
	if got := getPage[dispatcher.Hook](t, c, "/api/hooks"); len(got.Items) != 0 {
		t.Fatalf("a dry run stored %d hooks", len(got.Items))
	}
	if status, w := c.do("POST", "/api/hooks", body("https://93.184.216.34/h")); status != 201 {
		t.Fatal(w.Message)
	}
	if status, w := c.do("PUT", "/api/hooks/1?dryRun=true", body("http://[::1]/h")); status != 400 ||
		!strings.HasPrefix(w.Message, "dispatchConfig.url: ::1 is loopback") {
		t.Fatalf("dry run of a replace: %d %q", status, w.Message)
	}
	if status, w := c.do("PUT", "/api/hooks/1?dryRun=true", strings.Replace(body("https://93.184.216.34/other"), `"s"`, `"***"`, 1)); status != 200 ||
		!strings.Contains(string(w.Data), `"id":1`) || !strings.Contains(string(w.Data), "/other") {
		t.Fatalf("dry run of a replace: %d %s %s", status, w.Message, w.Data)
	}
	if got := getPage[dispatcher.Hook](t, c, "/api/hooks"); len(got.Items) != 1 || got.Items[0].DispatchConfig.URL != "https://93.184.216.34/h" {
		t.Fatalf("a dry run replaced the hook: %+v", got.Items)
	}
	if status, _ := c.do("PUT", "/api/hooks/9?dryRun=true", body("https://93.184.216.34/h")); status != 404 {
		t.Fatalf("dry run of a replace of no hook: %d", status)
	}
	if status, w := c.do("POST", "/api/hooks?dryRun=yes", body("https://93.184.216.34/h")); status != 400 || w.Message != "dryRun: must be true or false" {
		t.Fatalf("dryRun=yes: %d %q", status, w.Message)
	}
}

// Header names and values, standard secrets and URL lengths are refused at registration when no
// request could ever carry them.
func TestHookFieldsAHTTPRequestCannotCarry(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	hook := func(dc string) string {
		return `{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example/h"` + dc + `}}`
	}
	long := "https://r.example/" + strings.Repeat("a", 2048)
	cases := []struct{ body, want string }{
		{hook(`, "auth": {"type": "BEARER", "credential": "tok\r\nX-Admin: 1"}`), "dispatchConfig.auth.credential: must not contain control characters"},
		{hook(`, "auth": {"type": "BEARER", "credential": "tok", "prefix": "Bearer\n"}`), "dispatchConfig.auth.prefix: must not contain control characters"},
		{hook(`, "auth": {"type": "API_KEY", "header": "X API Key", "credential": "k"}`), `dispatchConfig.auth.header: "X API Key" is not a header name`},
		{hook(`, "auth": {"type": "API_KEY", "header": "X-Key:", "credential": "k"}`), `dispatchConfig.auth.header: "X-Key:" is not a header name`},
		{hook(`, "auth": {"type": "API_KEY", "credential": "k\u0000"}`), "dispatchConfig.auth.credential: must not contain control characters"},
		{hook(`, "auth": {"type": "CUSTOM", "headers": {"X-Tenant\r\n": "1"}}`), "dispatchConfig.auth.headers.X-Tenant\r\n: "},
		{hook(`, "auth": {"type": "CUSTOM", "headers": {"X-Tenant": "1\r\n2"}}`), "dispatchConfig.auth.headers.X-Tenant: must not contain control characters"},
		{hook(`, "auth": {"type": "CUSTOM", "headers": {"X-Tenant": ""}}`), "dispatchConfig.auth.headers.X-Tenant: needs a value"},
		// A default sent empty would be stored as the default: "" is not "no prefix".
		{hook(`, "auth": {"type": "BEARER", "credential": "tok", "prefix": ""}`), "dispatchConfig.auth.prefix: is empty; leave it out for the default, or give a value"},
		{hook(`, "auth": {"type": "API_KEY", "header": "", "credential": "k"}`), "dispatchConfig.auth.header: is empty; leave it out for the default, or give a value"},
		// One header in two spellings: one value or the other would go, changing from call to call.
		{hook(`, "auth": {"type": "CUSTOM", "headers": {"X-A": "one", "x-a": "two"}}`), "dispatchConfig.auth.headers.x-a: is the header X-A again (header names ignore case); send it once"},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example:99999/h"}}`, "dispatchConfig.url: port 99999 is not a TCP port (1 to 65535)"},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example:0/h"}}`, "dispatchConfig.url: port 0 is not a TCP port (1 to 65535)"},
		{hook(`, "auth": {"type": "BASIC", "username": "a:b", "password": "p"}`), "dispatchConfig.auth.username: must not contain \":\""},
		{hook(`, "auth": {"type": "BASIC", "credential": "dTpw", "username": "u"}`), "dispatchConfig.auth.credential: BASIC takes either credential"},
		{hook(`, "auth": {"type": "BEARER", "credential": "t", "header": "X-Token"}`), "dispatchConfig.auth.header: has no effect for BEARER, which uses credential, prefix"},
		{hook(`, "auth": {"type": "NONE", "credential": "t"}`), "dispatchConfig.auth.credential: has no effect for NONE, which sends no credential"},
		{hook(`, "auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/t", "tokenPath": "t", "header": "Auth orization"}}`), `dispatchConfig.auth.tokenFetchConfig.header: "Auth orization" is not a header name`},
		{hook(`, "auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/t", "tokenPath": "t", "headers": {"X-A": "1\n"}}}`), "dispatchConfig.auth.tokenFetchConfig.headers.X-A: must not contain control characters"},
		{hook(`, "signatureScheme": "standard", "signingSecret": "whsec_!!!"`), "dispatchConfig.signingSecret: the standard scheme needs whsec_ followed by the key in base64; the part after whsec_ is not base64"},
		{hook(`, "signatureScheme": "standard", "signingSecret": "whsec_"`), "dispatchConfig.signingSecret: the standard scheme needs whsec_ followed by the key in base64; the key is empty"},
		{hook(`, "signatureScheme": "standard", "signingSecret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`), "dispatchConfig.signingSecret: the standard scheme needs whsec_ followed by the key in base64; this secret does not start with whsec_"},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "` + long + `"}}`, "dispatchConfig.url: is 2066 bytes long; at most 2048 are accepted"},
		// IPv4 in the legacy forms (one number, hex, octal, fewer than four parts): no resolver of
		// the daemon's finds them, and a browser or curl reads them as an address (127.0.0.1 here).
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "http://2130706433/h"}}`, legacyIPv4("2130706433")},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "http://0x7f.1/h"}}`, legacyIPv4("0x7f.1")},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "http://127.1:8080/h"}}`, legacyIPv4("127.1")},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "http://0177.0.0.1/h"}}`, legacyIPv4("0177.0.0.1")},
		{`{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "http://10.0.0.0x1./h"}}`, legacyIPv4("10.0.0.0x1.")},
		{hook(`, "auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://3232235777/t", "tokenPath": "t"}}`),
			"dispatchConfig.auth.tokenFetchConfig.url: " + strings.TrimPrefix(legacyIPv4("3232235777"), "dispatchConfig.url: ")},
		{hook(`, "auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "` + long + `", "tokenPath": "t"}}`), "dispatchConfig.auth.tokenFetchConfig.url: is 2066 bytes long"},
	}
	for _, tc := range cases {
		status, w := c.do("POST", "/api/hooks", tc.body)
		if status != 400 || !strings.HasPrefix(w.Message, tc.want) {
			t.Errorf("%s\n  got %d %q\n  want 400 starting %q", tc.body, status, w.Message, tc.want)
		}
	}
	if status, w := c.do("POST", "/api/hooks", `{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+long[:2048]+`"}}`); status != 201 {
		t.Errorf("a 2048-byte URL: %d %s", status, w.Message)
	}
	for _, u := range []string{"https://93.184.216.34/h", "https://1e100.net/h", "https://api.0x7f.example/h", "https://[2001:db8::1]/h"} {
		if status, w := c.do("POST", "/api/hooks", `{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+u+`"}}`); status != 201 {
			t.Errorf("%s: %d %s", u, status, w.Message)
		}
	}
}

func legacyIPv4(host string) string {
	return "dispatchConfig.url: " + strconv.Quote(host) + " is neither a host name (the last label of one is never a number)" +
		" nor an IP address as the daemon dials one; write the address in full (a.b.c.d in decimal)"
}

// An auth header may not be one hookd sets on every call itself (the signature, its timestamp,
// the body's type, the trace id) nor one HTTP frames the request with: it would overwrite the
// signature so that every call fails verification, or be dropped unsent.
func TestAuthHeadersHookdSetsRefused(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	hook := func(auth string) string {
		return `{"hookName": "x", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example/h",
			"signingSecret": "s", "auth": ` + auth + `}}`
	}
	for _, tc := range []struct{ auth, field, name string }{
		{`{"type": "CUSTOM", "headers": {"X-Webhook-Signature": "sha256=00"}}`, "dispatchConfig.auth.headers.X-Webhook-Signature", "X-Webhook-Signature"},
		{`{"type": "CUSTOM", "headers": {"x-webhook-timestamp": "1"}}`, "dispatchConfig.auth.headers.x-webhook-timestamp", "x-webhook-timestamp"},
		{`{"type": "CUSTOM", "headers": {"webhook-signature": "v1,AA=="}}`, "dispatchConfig.auth.headers.webhook-signature", "webhook-signature"},
		{`{"type": "CUSTOM", "headers": {"Content-Type": "text/plain"}}`, "dispatchConfig.auth.headers.Content-Type", "Content-Type"},
		{`{"type": "CUSTOM", "headers": {"X-Request-Id": "forged"}}`, "dispatchConfig.auth.headers.X-Request-Id", "X-Request-Id"},
		{`{"type": "CUSTOM", "headers": {"User-Agent": "custom-ua"}}`, "dispatchConfig.auth.headers.User-Agent", "User-Agent"},
		{`{"type": "CUSTOM", "headers": {"Host": "other.example"}}`, "dispatchConfig.auth.headers.Host", "Host"},
		{`{"type": "CUSTOM", "headers": {"Content-Length": "5"}}`, "dispatchConfig.auth.headers.Content-Length", "Content-Length"},
		{`{"type": "CUSTOM", "headers": {"Accept-Encoding": "gzip", "X-Key": "k"}}`, "dispatchConfig.auth.headers.Accept-Encoding", "Accept-Encoding"},
		{`{"type": "CUSTOM", "headers": {"content-encoding": "gzip"}}`, "dispatchConfig.auth.headers.content-encoding", "content-encoding"},
		{`{"type": "API_KEY", "header": "X-Webhook-Timestamp", "credential": "k"}`, "dispatchConfig.auth.header", "X-Webhook-Timestamp"},
		{`{"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/t", "tokenPath": "t", "header": "Webhook-Id"}}`,
			"dispatchConfig.auth.tokenFetchConfig.header", "Webhook-Id"},
	} {
		want := tc.field + ": " + strconv.Quote(tc.name) + " is a header hookd sets itself on every call; name another"
		if status, w := c.do("POST", "/api/hooks", hook(tc.auth)); status != 400 || w.Message != want {
			t.Errorf("%s\n  got %d %q\n  want 400 %q", tc.auth, status, w.Message, want)
		}
	}
	// The token endpoint's own request is the hook's to shape; Content-Type there is fine.
	if status, w := c.do("POST", "/api/hooks", hook(`{"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/t",
		"tokenPath": "t", "headers": {"Content-Type": "application/x-www-form-urlencoded"}, "body": "a=1"}}`)); status != 201 {
		t.Errorf("token endpoint Content-Type: %d %s", status, w.Message)
	}
}

// The one rule of secrets and credentials, seen where it matters: the headers a real receiver gets.
// auth absent or sent back as GET shows it keeps the credential, a new value replaces it, NONE
// clears it; signingSecret follows the same rule.
func TestAuthUpdateRuleAtTheReceiver(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		recv := newReceiver(t, `{"decision": "allow"}`)
		head := `"hookName": "gate", "hookType": "pre_tool_use", "toolNameMatch": "transferFunds"`
		status, w := c.do("POST", "/api/hooks", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY",
			"signingSecret": "sec-1", "auth": {"type": "BEARER", "credential": "tok-1"}}}`)
		if status != 201 {
			t.Fatal(w.Message)
		}
		var created dispatcher.Hook
		json.Unmarshal(w.Data, &created)
		path := "/api/hooks/" + itoa(created.ID)
		// seen dispatches once and returns the headers the receiver got.
		seen := func(step string) http.Header {
			t.Helper()
			for len(recv.headers) > 0 {
				<-recv.headers
			}
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "transferFunds", "toolCallId": "c", "arguments": {}}}`); status != 200 {
				t.Fatalf("%s: dispatch %d %s", step, status, w.Message)
			}
			select {
			case h := <-recv.headers:
				return h
			default:
				t.Fatalf("%s: the receiver got nothing", step)
				return nil
			}
		}
		put := func(step, body string) {
			t.Helper()
			if status, w := c.do("PUT", path, body); status != 200 {
				t.Fatalf("%s: PUT %d %s", step, status, w.Message)
			}
		}
		want := func(step string, h http.Header, auth string, signed bool) {
			t.Helper()
			if got := h.Get("Authorization"); got != auth {
				t.Errorf("%s: Authorization %q, want %q", step, got, auth)
			}
			if got := h.Get("X-Webhook-Signature") != ""; got != signed {
				t.Errorf("%s: signed %v, want %v", step, got, signed)
			}
		}
		want("created", seen("created"), "Bearer tok-1", true)

		put("auth absent", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY"}}`)
		want("auth absent", seen("auth absent"), "Bearer tok-1", true)

		_, w = c.do("GET", path, "")
		if !strings.Contains(string(w.Data), `"credential":"***"`) || strings.Contains(string(w.Data), "tok-1") {
			t.Fatalf("GET does not mask the credential: %s", w.Data)
		}
		put("GET sent back", string(w.Data))
		want("GET sent back", seen("GET sent back"), "Bearer tok-1", true)

		put("new value", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY", "auth": {"type": "BEARER", "credential": "tok-2"}}}`)
		want("new value", seen("new value"), "Bearer tok-2", true)

		put("other type", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY", "auth": {"type": "CUSTOM", "headers": {"Authorization": "Token t-3", "X-Tenant": "7"}}}}`)
		h := seen("other type")
		want("other type", h, "Token t-3", true)
		_, w = c.do("GET", path, "")
		put("CUSTOM sent back", string(w.Data))
		h = seen("CUSTOM sent back")
		want("CUSTOM sent back", h, "Token t-3", true)
		if h.Get("X-Tenant") != "7" {
			t.Errorf("CUSTOM sent back: X-Tenant %q", h.Get("X-Tenant"))
		}

		put("NONE", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY", "auth": {"type": "NONE"}}}`)
		h = seen("NONE")
		want("NONE", h, "", true)
		if h.Get("X-Tenant") != "" {
			t.Errorf("NONE kept a CUSTOM header: %q", h.Get("X-Tenant"))
		}
		put("absent after NONE", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY"}}`)
		want("absent after NONE", seen("absent after NONE"), "", true)

		put("secret cleared", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "DENY", "signingSecret": ""}}`)
		want("secret cleared", seen("secret cleared"), "", false)

		put("CUSTOM again", `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "auth": {"type": "CUSTOM", "headers": {"X-Tenant": "7"}}}}`)
		if status, w := c.do("PUT", path, `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "auth": {"type": "CUSTOM", "headers": {"X-Tenant": "***", "X-New": "***"}}}}`); status != 400 ||
			w.Message != `dispatchConfig.auth.headers.X-New: "***" is the mask, not a credential` {
			t.Errorf("a mask for a header never stored: %d %q", status, w.Message)
		}
		if status, w := c.do("PUT", path, `{`+head+`, "dispatchConfig": {"url": "`+recv.URL+`", "auth": {"type": "API_KEY", "credential": "***"}}}`); status != 400 ||
			w.Message != `dispatchConfig.auth.credential: "***" is the mask, not a credential` {
			t.Errorf("a mask for a credential never stored: %d %q", status, w.Message)
		}
	})
}

// Fields the document says have no effect for a hook's type (failureMode on an observational
// hook, maxRetries on an interceptive one) are shown by GET, so PUT takes them back unchanged.
func TestGetPutRoundTripsUnchanged(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	for _, body := range []string{
		`{"hookName": "audit", "hookType": "post_tool_use", "dispatchConfig": {"url": "https://r.example/a", "failureMode": "DENY", "signingSecret": "s"}}`,
		`{"hookName": "gate", "hookType": "pre_tool_use", "toolNameMatch": "a|b", "dispatchConfig": {"url": "https://r.example/g", "maxRetries": 1,
			"auth": {"type": "CUSTOM_HTTP_TOKEN", "tokenFetchConfig": {"url": "https://t.example/t", "body": "{\"k\":1}", "headers": {"X-K": "v"}, "tokenPath": "t"}}}}`,
	} {
		status, w := c.do("POST", "/api/hooks", body)
		if status != 201 {
			t.Fatal(w.Message)
		}
		var h dispatcher.Hook
		json.Unmarshal(w.Data, &h)
		path := "/api/hooks/" + itoa(h.ID)
		_, got := c.do("GET", path, "")
		status, put := c.do("PUT", path, string(got.Data))
		if status != 200 {
			t.Fatalf("PUT of what GET showed: %d %s", status, put.Message)
		}
		_, again := c.do("GET", path, "")
		strip := func(raw json.RawMessage) string {
			var m map[string]any
			json.Unmarshal(raw, &m)
			delete(m, "updatedAt")
			return marshal(t, m)
		}
		if strip(got.Data) != strip(again.Data) {
			t.Errorf("GET → PUT changed the hook:\n  before %s\n  after  %s", got.Data, again.Data)
		}
	}
}

// gateServer is newDispatchServer on SQLite with one pre_tool_use hook, 1, whose receiver allows.
func gateServer(t *testing.T) (client, *receiver) {
	t.Helper()
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	recv := newReceiver(t, `{"decision": "allow"}`)
	if status, w := c.do("POST", "/api/hooks", `{"hookName": "gate", "hookType": "pre_tool_use", "dispatchConfig": {"url": "`+recv.URL+`"}}`); status != 201 {
		t.Fatal(w.Message)
	}
	return c, recv
}

// A body is read whole or refused: JSON text that is not UTF-8 would otherwise be decoded with
// each bad byte silently replaced, so a hook, or the subject of a decision, would not be what
// was sent.
func TestBodiesNotUTF8Refused(t *testing.T) {
	c, recv := gateServer(t)
	for _, tc := range []struct{ path, body, want string }{
		{"/api/hooks", "{\"hookName\": \"g\xffate\", \"hookType\": \"pre_tool_use\", \"dispatchConfig\": {\"url\": \"https://r.example/h\"}}",
			"body: is not UTF-8 text: byte 15 (0xff) is not part of a UTF-8 character"},
		{"/api/hooks/dispatch", "{\"hookType\": \"pre_tool_use\", \"context\": {\"toolName\": \"t\", \"arguments\": {\"memo\": \"\xc3(\"}}}",
			"body: is not UTF-8 text: byte 81 (0xc3) is not part of a UTF-8 character"},
		{"/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "t", "toolName": "u"}}`, "context.toolName: appears twice; send each field once"},
		{"/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "t"}} {}`, "body: trailing data after the JSON value"},
	} {
		if status, w := c.do("POST", tc.path, tc.body); status != 400 || w.Message != tc.want {
			t.Errorf("POST %s %q: %d %q, want 400 %q", tc.path, tc.body, status, w.Message, tc.want)
		}
	}
	if n := recv.calls.Load(); n != 0 {
		t.Fatalf("the receiver was called %d times", n)
	}
	if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "t", "arguments": {"memo": "转账 ✓"}}}`); status != 200 {
		t.Fatalf("UTF-8 arguments: %d %s", status, w.Message)
	}
}

// The traceId of a dispatch is sent as the X-Request-Id header: one no request can carry would
// make every call fail before any receiver is asked, and a fail-open chain answer allow.
func TestDispatchTraceIDAHeaderCanCarry(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	recv := newReceiver(t, `{"decision": "deny", "reason": "no"}`)
	if status, w := c.do("POST", "/api/hooks", `{"hookName": "gate", "hookType": "pre_tool_use", "toolNameMatch": "transferFunds",
		"dispatchConfig": {"url": "`+recv.URL+`", "failureMode": "ALLOW"}}`); status != 201 {
		t.Fatal(w.Message)
	}
	dispatch := func(traceID string) (int, string) {
		b, _ := json.Marshal(traceID)
		status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "traceId": `+string(b)+`,
			"context": {"toolName": "transferFunds", "toolCallId": "c1", "arguments": {"amount": 5}}}`)
		if status == 200 {
			return status, string(w.Data)
		}
		return status, w.Message
	}
	for traceID, want := range map[string]string{
		"t1\r\nX-Admin: 1":         `traceId: must not contain control characters (CR, LF, …); found '\r' at byte 2`,
		"t1\x00":                   `traceId: must not contain control characters (CR, LF, …); found '\x00' at byte 2`,
		strings.Repeat("a", 70000): "traceId: is 70000 bytes long; at most 256 are accepted",
	} {
		if status, got := dispatch(traceID); status != 400 || got != want {
			t.Errorf("traceId %.20q: %d %q, want 400 %q", traceID, status, got, want)
		}
	}
	if n := recv.calls.Load(); n != 0 {
		t.Fatalf("the receiver was called %d times", n)
	}
	for _, traceID := range []string{"4bf92f3577b34da6a3ce929d0e0e4736", "追踪-1", strings.Repeat("a", 256)} {
		if status, got := dispatch(traceID); status != 200 || !strings.Contains(got, `"decision":"deny"`) {
			t.Errorf("traceId %.20q: %d %s, want the receiver's deny", traceID, status, got)
		}
	}
}

// A PUT replaces what its path names; a body that names another id (a script sending hook 2's
// definition to hook 1's path) is refused, not applied to the path's.
func TestPutBodyIDMustMatchThePath(t *testing.T) {
	c := newServerWithHookAndTask(t)
	for _, tc := range []struct{ path, body, want string }{
		{"/api/hooks/1", strings.Replace(fullHooks[0], `"id": 1`, `"id": 2`, 1), "id: 2, but the path names 1; a PUT replaces what its path names"},
		{"/api/tasks/1", `{"id": 7, "taskName": "daily", "cron": "@daily", "input": "x"}`, "id: 7, but the path names 1; a PUT replaces what its path names"},
	} {
		if status, w := c.do("PUT", tc.path, tc.body); status != 400 || w.Message != tc.want {
			t.Errorf("PUT %s: %d %q, want 400 %q", tc.path, status, w.Message, tc.want)
		}
	}
	for path, body := range map[string]string{"/api/hooks/1": storedCreatedAt(t, c, "/api/hooks/1", fullHooks[0]),
		"/api/tasks/1": `{"id": 1, "taskName": "daily", "cron": "@daily", "input": "y"}`} {
		if status, w := c.do("PUT", path, body); status != 200 {
			t.Errorf("PUT %s with its own id: %d %s", path, status, w.Message)
		}
	}
}

// createdAt is set once by hookd: a PUT that sends it back as GET showed it is accepted, one that
// names another time (to backdate a hook) is refused rather than answered 200 without it.
func TestPutCreatedAtIsTheStoredOne(t *testing.T) {
	c := newServerWithHookAndTask(t)
	for path, body := range map[string]string{"/api/hooks/1": fullHooks[0],
		"/api/tasks/1": `{"taskName": "daily", "cron": "@daily", "createdAt": "2026-01-01T00:00:00Z", "input": "y"}`} {
		status, w := c.do("PUT", path, body)
		if status != 400 || !strings.HasPrefix(w.Message, "createdAt: 2026-01-01T00:00:00Z, but it was created at ") ||
			!strings.HasSuffix(w.Message, "; createdAt is set by hookd (leave it out or send it as GET shows it)") {
			t.Errorf("PUT %s with another createdAt: %d %q", path, status, w.Message)
		}
		if status, w := c.do("PUT", path, storedCreatedAt(t, c, path, body)); status != 200 {
			t.Errorf("PUT %s with the stored createdAt: %d %s", path, status, w.Message)
		}
		if status, w := c.do("PUT", path, strings.Replace(body, `"createdAt": "2026-01-01T00:00:00Z",`, "", 1)); status != 200 {
			t.Errorf("PUT %s without createdAt: %d %s", path, status, w.Message)
		}
	}
}

// A route that takes no body refuses one, rather than ignore what it said; an empty object, which
// some clients send with every POST, is not refused.
func TestRoutesWithoutBodyRefuseOne(t *testing.T) {
	c, _ := gateServer(t)
	for _, r := range []struct{ method, path, route string }{
		{"POST", "/api/hooks/1/test", "/api/hooks/:id/test"},
		{"POST", "/api/deliveries/1/redeliver", "/api/deliveries/:id/redeliver"},
		{"DELETE", "/api/deliveries/1", "/api/deliveries/:id"},
		{"DELETE", "/api/deliveries?status=dead", "/api/deliveries"},
		{"DELETE", "/api/rules/1", "/api/rules/:id"},
		{"DELETE", "/api/tasks/1", "/api/tasks/:id"},
		{"POST", "/api/tasks/1/run", "/api/tasks/:id/run"},
		{"DELETE", "/api/hooks/1", "/api/hooks/:id"},
		{"GET", "/api/hooks", "/api/hooks"},
		{"GET", "/api/deliveries", "/api/deliveries"},
		{"GET", "/api/decisions", "/api/decisions"},
	} {
		want := "body: " + r.method + " " + r.route + " takes no body"
		if status, w := c.do(r.method, r.path, `{"hookId": 2}`); status != 400 || w.Message != want {
			t.Errorf("%s %s with a body: %d %q, want 400 %q", r.method, r.path, status, w.Message, want)
		}
	}
	if status, w := c.do("POST", "/api/hooks/1/test", ` { } `); status != 200 {
		t.Errorf("POST /api/hooks/1/test {}: %d %s", status, w.Message)
	}
	if status, w := c.do("DELETE", "/api/hooks/1", ""); status != 200 {
		t.Errorf("DELETE /api/hooks/1: %d %s", status, w.Message)
	}
}

// A setting whose absence takes a default is refused when sent empty: an empty failureMode would
// be stored as ALLOW (fail-open), an empty policy default as allow, a timeoutMs or costLimit of 0
// as the default, a maxRetries of null as 3 (its 0 is a value), all silently. Left out, each
// takes its default.
func TestEmptySettingsRefused(t *testing.T) {
	c, _ := gateServer(t)
	const msg = "is empty; leave it out for the default, or give a value"
	webhook := func(cfg string) string {
		return `{"hookName": "h", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example/h"` + cfg + `}}`
	}
	policy := func(cfg string) string {
		return `{"hookName": "p", "hookType": "pre_tool_use", "dispatchType": "policy", "dispatchConfig": {"failureMode": "DENY"},
			"policyConfig": {"rules": [{"name": "r", "when": "true", "decision": "deny"}]` + cfg + `}}`
	}
	for _, tc := range []struct{ body, field string }{
		{webhook(`, "failureMode": ""`), "dispatchConfig.failureMode"},
		{webhook(`, "failureMode": null`), "dispatchConfig.failureMode"},
		{webhook(`, "timeoutMs": 0`), "dispatchConfig.timeoutMs"},
		{webhook(`, "timeoutMs": null`), "dispatchConfig.timeoutMs"},
		{webhook(`, "maxRetries": null`), "dispatchConfig.maxRetries"}, // 0 is a value: no fast retry
		{policy(`, "default": ""`), "policyConfig.default"},
		{policy(`, "costLimit": 0`), "policyConfig.costLimit"},
		// Read as their defaults before: enabled and a webhook.
		{`{"hookName": "h", "hookType": "pre_tool_use", "enabled": null, "dispatchConfig": {"url": "https://r.example/h"}}`, "enabled"},
		{`{"hookName": "h", "hookType": "pre_tool_use", "dispatchType": "", "dispatchConfig": {"url": "https://r.example/h"}}`, "dispatchType"},
		{`{"hookName": "h", "hookType": "pre_tool_use", "dispatchType": null, "dispatchConfig": {"url": "https://r.example/h"}}`, "dispatchType"},
	} {
		for _, method := range []string{"POST /api/hooks", "PUT /api/hooks/1"} {
			m, path, _ := strings.Cut(method, " ")
			if status, w := c.do(m, path, tc.body); status != 400 || w.Message != tc.field+": "+msg {
				t.Errorf("%s %s: %d %q, want 400 %s: %s", method, tc.body, status, w.Message, tc.field, msg)
			}
		}
	}
	status, w := c.do("POST", "/api/hooks", webhook(""))
	var h dispatcher.Hook
	json.Unmarshal(w.Data, &h)
	if status != 201 || h.DispatchConfig.FailureMode != dispatcher.FailOpen || h.DispatchConfig.TimeoutMs == 0 {
		t.Fatalf("defaults: %d %s %+v", status, w.Message, h.DispatchConfig)
	}
	status, w = c.do("POST", "/api/hooks", webhook(`, "maxRetries": 0`))
	json.Unmarshal(w.Data, &h)
	if status != 201 || h.DispatchConfig.MaxRetries == nil || *h.DispatchConfig.MaxRetries != 0 {
		t.Fatalf("maxRetries 0: %d %s %+v", status, w.Message, h.DispatchConfig)
	}
}

// Every route of the daemon refuses a query parameter it does not read, each in its own
// dialect's answer: a parameter it ignored (?agentId=5 on a run, ?userId= on a chat) would leave
// the request doing what the client did not ask. Walking the engine's routes keeps a route added
// later from forgetting it.
func TestEveryRouteRefusesUnknownQuery(t *testing.T) {
	db := storagetest.SQLite(t)
	env := agenttest.New(t, db, agenttest.Options{Script: askScript})
	sched := scheduler.New(db, env.Runtime, env.Dispatcher, agenttest.Quiet(), scheduler.Config{})
	h := api.New(api.Deps{DB: db, Hooks: env.Hooks, Dispatcher: env.Dispatcher, Runtime: env.Runtime, Scheduler: sched,
		Workspaces: env.Workspaces, LoopbackOnly: true, Log: agenttest.Quiet(), Metrics: prometheus.NewRegistry()})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := client{t: t, base: srv.URL}
	if status, w := c.do("POST", "/api/hooks", fullHooks[0]); status != 201 {
		t.Fatal(w.Message)
	}
	if status, w := c.do("POST", "/api/tasks", `{"taskName": "daily", "cron": "@daily", "input": "x"}`); status != 201 {
		t.Fatal(w.Message)
	}
	// The routes that read no parameter of a client's: static files (a ?v= cache buster is the
	// browser's) and the Prometheus exposition, which takes none and is read by scrapers.
	skip := map[string]bool{"/console": true, "/console/": true, "/console/assets/:name": true, "/metrics": true}
	param := regexp.MustCompile(`[:*][A-Za-z]+`)
	routes := h.(*gin.Engine).Routes()
	if len(routes) < 50 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, r := range routes {
		if skip[r.Path] {
			continue
		}
		path := strings.Replace(r.Path, ":kind", "claude-code", 1)
		path = param.ReplaceAllString(path, "1") + "?zzUnknown=1"
		req, _ := http.NewRequest(r.Method, srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "zzUnknown: unknown query parameter") {
			t.Errorf("%s %s: %d %.200s", r.Method, path, resp.StatusCode, body)
		}
		checkPrivate(t, r.Method+" "+path, resp)
	}
	// And an answer that is not an error: a hook, with its configuration.
	resp, err := http.Get(srv.URL + "/api/hooks/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/hooks/1: %d", resp.StatusCode)
	}
	checkPrivate(t, "GET /api/hooks/1", resp)
}

// checkPrivate fails unless resp may not be stored by a cache nor sniffed into another type.
func checkPrivate(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	if cc, ns := resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"); cc != "no-store" || ns != "nosniff" {
		t.Errorf("%s: Cache-Control %q, X-Content-Type-Options %q; want no-store, nosniff", what, cc, ns)
	}
}

// The chat dialects' bodies are decoded strictly too, each error in its dialect's answer: a
// misspelt field (executionMod, remeber) would otherwise run the request without it.
func TestChatBodiesStrict(t *testing.T) {
	db := storagetest.SQLite(t)
	env := agenttest.New(t, db, agenttest.Options{Script: askScript})
	srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: env.Hooks, Dispatcher: env.Dispatcher, Runtime: env.Runtime,
		Workspaces: env.Workspaces, LoopbackOnly: true, Log: agenttest.Quiet()}))
	t.Cleanup(srv.Close)
	const volo = "/api/agent/chat/volo-ai"
	send := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/harness/chat", `{"sessionId": "s", "userId": "u", "input": "hi", "sesionId": "s"}`, `sesionId: unknown field (did you mean \"sessionId\"?)`},
		{"/harness/chat", `{"sessionId": "s", "userId": "u", "input": "hi", "chatModel": {"temprature": 1}}`, `chatModel.temprature: unknown field`},
		{"/harness/chat", `{"sessionId": "s", "userId": "u", "input": "", "confirmResults": [{"toolCallId": "c", "confirmed": true, "rule": []}]}`, `confirmResults[0].rule: unknown field`},
		{"/api/agent/run/stream", `{"userInput": "hi", "agentID": 5}`, `agentID`},
		{"/api/agent/permission/reply", `{"askId": "a", "approved": true, "remeber": true}`, `remeber: unknown field`},
		{"/api/agent/run/1/input", `{"content": "x", "contnt": "y"}`, `contnt: unknown field`},
		{"/api/agent/run/1/stop", `{"userId": "bob"}`, `takes no body`},
		{"/ag-ui/run", `{"threadId": "t", "runId": "r", "messages": [], "tols": []}`, `tols`},
		{volo + "/s1/intent", `{"userMessage": "hi", "executionMod": "FAST"}`, `executionMod: unknown field (did you mean \"executionMode\"?)`},
		{volo + "/s1/append-message", `{"appendedTxt": "x"}`, `appendedTxt: unknown field`},
		{volo + "/s1/stop", `{"userID": "bob"}`, `userID`},
		{volo + "/tool-approval/c1", `{"approved": true, "turnId": "t", "reasn": "x"}`, `reasn: unknown field`},
		{volo + "/interaction-response/i1", `{"response": {"approvd": true}}`, `response.approvd: unknown field`},
		{volo + "/interaction-response/i1", `{"response": [{"approved": true, "inputs": {}}]}`, `response[0].inputs: unknown field`},
		{volo + "/resume", `{"turnId": "t", "respons": "ok"}`, `respons: unknown field`},
	} {
		if status, body := send("POST", tc.path, tc.body); status != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %.300s, want 400 with %q", tc.path, tc.body, status, body, tc.want)
		}
	}
	// The GET routes take no body, and a cursor is read as sent (" 5" is not 5).
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/api/agent/run/stream?requestId=r1", `{"lastEventId": "5"}`, `GET /api/agent/run/stream takes no body`},
		{"GET", "/api/agent/run/stream?requestId=r1&lastEventId=%205", "", `lastEventId: must be an event id`},
		{"GET", "/ai-sdk/chat/c1/stream", `{"since": 1}`, `takes no body`},
		{"GET", volo + "/s1/messages", `{"since": 1}`, `GET /api/agent/chat/volo-ai/:sessionId/messages takes no body`},
		{"POST", volo + "/resume?turnId=t&afterSeq=%205", "", `afterSeq: \" 5\" is not a frame's seq`},
	} {
		if status, body := send(tc.method, tc.path, tc.body); status != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %.300s, want 400 with %q", tc.method, tc.path, tc.body, status, body, tc.want)
		}
	}
}

// A dispatch's counts (milliseconds, tokens, steps) are refused negative, and its ids 0 or less, naming
// the field: a receiver summing them would take them as given.
func TestDispatchContextNumbers(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	for _, tc := range []struct{ typ, ctx, field string }{
		{"post_tool_use", `{"toolName": "t", "succeeded": true, "durationMs": -1}`, "context.durationMs"},
		{"post_llm_call", `{"model": "m", "step": -1}`, "context.step"},
		{"post_llm_call", `{"model": "m", "promptTokens": -5}`, "context.promptTokens"},
		{"post_llm_call", `{"model": "m", "reasoningTokens": -1}`, "context.reasoningTokens"},
		{"agent_completion", `{"succeeded": true, "totalTokens": -2048}`, "context.totalTokens"},
		{"agent_completion", `{"succeeded": true, "stepCount": -3}`, "context.stepCount"},
		{"agent_completion", `{"succeeded": true, "userMessageId": 0}`, "context.userMessageId"},
		{"post_scheduled_task", `{"taskId": 9, "succeeded": false, "durationMs": -60000}`, "context.durationMs"},
		// A taskId of 0 would read as none: the task named by its name alone.
		{"pre_scheduled_task", `{"taskId": 0, "taskName": "daily"}`, "context.taskId"},
		{"post_scheduled_task", `{"taskId": 0, "taskName": "daily", "succeeded": true}`, "context.taskId"},
		{"pre_scheduled_task", `{"taskId": -4, "taskName": "daily"}`, "context.taskId"},
	} {
		status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "`+tc.typ+`", "context": `+tc.ctx+`}`)
		if status != 400 || !strings.HasPrefix(w.Message, tc.field+": ") {
			t.Errorf("%s %s: %d %q, want 400 naming %s", tc.typ, tc.ctx, status, w.Message, tc.field)
		}
	}
	ok := `{"model": "m", "step": 0, "durationMs": 0, "promptTokens": 850, "completionTokens": 320, "totalTokens": 1170}`
	if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "post_llm_call", "context": `+ok+`}`); status != 202 {
		t.Fatalf("%s: %d %s", ok, status, w.Message)
	}
}
