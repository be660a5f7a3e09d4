package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
)

var update = flag.Bool("update", false, "rewrite the golden answers in testdata/agents")

const (
	agentsDir  = "../../testdata/agents"
	agentKey   = "key-agent-test"
	agentUser  = 1001
	hookSecret = "whsec-agents-test"
)

// fixture is one harness hook input from testdata/agents/<kind>/<Event>.json.
type fixture struct {
	kind, event string
	body        []byte
}

func fixtures(t *testing.T) []fixture {
	t.Helper()
	var out []fixture
	for _, kind := range agents.Kinds {
		files, err := filepath.Glob(filepath.Join(agentsDir, kind, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no fixtures for %s: %v", kind, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fixture{kind: kind, event: strings.TrimSuffix(filepath.Base(f), ".json"), body: b})
		}
	}
	return out
}

// agentReceiver is the team's webhook: it checks the signature, answers with the scenario's
// answer, and hands every envelope to the test.
type agentReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	ans func(env dispatcher.Envelope) (int, string)
	got chan dispatcher.Envelope
}

func newAgentReceiver(t *testing.T) *agentReceiver {
	r := &agentReceiver{got: make(chan dispatcher.Envelope, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := signing.VerifyRequest(req, hookSecret, 0, 1<<20)
		if err != nil {
			t.Errorf("receiver: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("receiver: %v", err)
		}
		r.got <- env
		status, answer := http.StatusOK, `{"decision":"allow"}`
		r.mu.Lock()
		if r.ans != nil && env.HookType.Interceptive() {
			status, answer = r.ans(env)
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *agentReceiver) answer(f func(env dispatcher.Envelope) (int, string)) {
	r.mu.Lock()
	r.ans = f
	r.mu.Unlock()
}

func (r *agentReceiver) next(t *testing.T) dispatcher.Envelope {
	t.Helper()
	select {
	case env := <-r.got:
		return env
	case <-time.After(15 * time.Second):
		t.Fatal("the receiver got no event")
	}
	return dispatcher.Envelope{}
}

// scenarios are the team's answers the goldens are taken under, for the interceptive points.
var scenarios = []struct {
	name   string
	answer func(env dispatcher.Envelope) (int, string)
}{
	{"allow", func(dispatcher.Envelope) (int, string) { return 200, `{"decision":"allow"}` }},
	{"deny", func(dispatcher.Envelope) (int, string) {
		return 200, `{"decision":"deny","reason":"transfers over 10000 need the finance team's approval"}`
	}},
	{"ask", func(dispatcher.Envelope) (int, string) {
		return 200, `{"decision":"ask","reason":"a person from finance must approve this"}`
	}},
	{"modify", func(env dispatcher.Envelope) (int, string) {
		if env.HookType == dispatcher.UserMessage {
			return 200, `{"decision":"modify","modifiedValue":"Transfer 25000 to account ****2222"}`
		}
		var c struct{ Arguments map[string]any }
		json.Unmarshal(env.Context, &c)
		c.Arguments["approvedBy"] = "finance"
		args, _ := json.Marshal(c.Arguments)
		v, _ := json.Marshal(string(args))
		return 200, `{"decision":"modify","modifiedValue":` + string(v) + `}`
	}},
	// The hooks' extras: a hint for the model beside an allow, with a custom event no harness has a
	// place for; a deny whose tool event tells the person where to approve (a prompt hook cannot
	// carry a tool event: a deny with a hint).
	{"hint", func(dispatcher.Envelope) (int, string) {
		return 200, `{"decision":"allow","hint":"Staging credentials rotate at noon; read them from vault:staging/db.",` +
			`"events":[{"name":"policy_checked","value":{"rule":"transfers-v3"}}]}`
	}},
	{"notice", func(env dispatcher.Envelope) (int, string) {
		if env.HookType == dispatcher.UserMessage {
			return 200, `{"decision":"deny","reason":"prompts naming customer accounts are not allowed",` +
				`"hint":"Refer to the account by its ticket number."}`
		}
		return 200, `{"decision":"deny","reason":"deploys need a sign-off","hint":"Wait for the sign-off, then retry.",` +
			`"toolEvent":{"category":"auth_required","payload":{"url":"https://approve.example/req/42"},` +
			`"userMessage":"Approve the deploy at https://approve.example/req/42"}}`
	}},
	// The daemon cannot decide: arguments that are not JSON for a tool, the fail-closed receiver
	// failing for a prompt.
	{"error", func(env dispatcher.Envelope) (int, string) {
		if env.HookType == dispatcher.UserMessage {
			return 500, `oops`
		}
		return 200, `{"decision":"modify","modifiedValue":"not json{"}`
	}},
}

func startAgentDaemon(t *testing.T) *daemon {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth:
  adminTokens: [adm-test]
  apiKeys: [{key: %s, userId: dev-1, principalId: %d}, {key: key-agent-5001, userId: dev-2, principalId: 1002, agentId: 5001}]
webhooks: {allowPrivateNetworks: true}
`, filepath.Join(dir, "hookd.db"), agentKey, agentUser))
	return startDaemon(t, cfg)
}

// agentPost sends a hook input as the harness would, returning the status, the body and the
// decision id header.
func agentPost(t *testing.T, d *daemon, kind string, body []byte, key string) (int, []byte, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/"+kind+"/hooks"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header.Get(agents.DecisionIDHeader)
}

// golden compares an answer with testdata/agents/<kind>/golden/<event>.<scenario>.golden.
func golden(t *testing.T, f fixture, scenario string, got []byte) {
	t.Helper()
	path := filepath.Join(agentsDir, f.kind, "golden", f.event+"."+scenario+".golden")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run with -update to write it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s %s %s:\n got %s\nwant %s", f.kind, f.event, scenario, got, want)
	}
}

// TestAgentGoldens sends every fixture of every harness to the running daemon and compares its
// answers with the goldens: with no hook, then with the team's receiver allowing, denying,
// modifying and failing. Observational events reach the receiver through the outbox, carrying
// the harness's session and kind.
func TestAgentGoldens(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	fs := fixtures(t)

	for _, f := range fs {
		status, body, decision := agentPost(t, d, f.kind, f.body, agentKey)
		if status != answered(body) || decision != "" {
			t.Fatalf("%s %s with no hook: %d %q %s", f.kind, f.event, status, decision, body)
		}
		golden(t, f, "nohook", body)
	}

	for _, typ := range []dispatcher.HookType{dispatcher.PreToolUse, dispatcher.UserMessage, dispatcher.PostToolUse,
		dispatcher.SessionStart, dispatcher.AgentCompletion} {
		spec := fmt.Sprintf(`{"hookName":"team %s","hookType":%q,"dispatchConfig":{"url":%q,"signingSecret":%q,"timeoutMs":3000,"failureMode":"DENY"}}`,
			typ, typ, recv.srv.URL, hookSecret)
		if typ.Interceptive() == false {
			spec = fmt.Sprintf(`{"hookName":"team %s","hookType":%q,"dispatchConfig":{"url":%q,"signingSecret":%q}}`,
				typ, typ, recv.srv.URL, hookSecret)
		}
		if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
			t.Fatalf("register %s: %d", typ, s)
		}
	}

	for _, f := range fs {
		point := agents.For(f.kind).Point(f.event)
		if point == "" {
			continue
		}
		var in struct {
			SessionID      string `json:"session_id"`
			ConversationID string `json:"conversation_id"`
		}
		json.Unmarshal(f.body, &in)
		external := in.SessionID + in.ConversationID
		if f.kind == agents.Cursor {
			external = in.ConversationID
		}
		check := func(env dispatcher.Envelope) {
			t.Helper()
			var c dispatcher.CodingAgent
			json.Unmarshal(env.Context, &c)
			want := agents.SessionID(f.kind, ptr(int64(agentUser)), external)
			if env.HookType != point || c.AgentKind != f.kind || c.ExternalSessionID != external ||
				env.PrincipalID == nil || *env.PrincipalID != agentUser || env.SessionID == nil || *env.SessionID != want {
				t.Errorf("%s %s: envelope %s %+v principal %v session %v (want %d)", f.kind, f.event, env.HookType, c,
					env.PrincipalID, env.SessionID, want)
			}
		}
		if !point.Interceptive() {
			status, body, _ := agentPost(t, d, f.kind, f.body, agentKey)
			if status != answered(body) {
				t.Fatalf("%s %s: %d %s", f.kind, f.event, status, body)
			}
			golden(t, f, "observed", body)
			check(recv.next(t))
			continue
		}
		for _, sc := range scenarios {
			recv.answer(sc.answer)
			status, body, decision := agentPost(t, d, f.kind, f.body, agentKey)
			// Every answer names its decision, a block for a modify hookd cannot apply included.
			if status != answered(body) || decision == "" {
				t.Fatalf("%s %s %s: %d decision %q %s", f.kind, f.event, sc.name, status, decision, body)
			}
			check(recv.next(t))
			golden(t, f, sc.name, body)
		}
	}

	// Every decision is in the log, under the harness session's number.
	session := agents.SessionID(agents.ClaudeCode, ptr(int64(agentUser)), "8f3c2a1e-5b7d-4c9e-a1f2-3d4e5f6a7b8c")
	// Decisions are committed before they are answered (decisions.durability sync): every row is
	// there already.
	var rows []struct {
		HookType  string `json:"hookType"`
		Outcome   string `json:"outcome"`
		AgentKind string `json:"agentKind"`
	}
	decisionLog(t, d, session, &rows)
	if len(rows) < 2*len(scenarios) {
		t.Errorf("decision log of the Claude Code session has %d rows, want at least %d", len(rows), 2*len(scenarios))
	}
	m := scrape(t, d)
	for kind, event := range map[string]string{agents.ClaudeCode: "Notification", agents.Codex: "PermissionRequest",
		agents.GeminiCLI: "BeforeModel", agents.Cursor: "afterFileEdit"} {
		if n := sum(m, "hookd_agent_hook_unmapped_total", `kind="`+kind+`"`, `event="`+event+`"`); n != 1 {
			t.Errorf("unmapped %s %s counted %v times", kind, event, n)
		}
	}
	// The custom events of the hint scenario reached no harness: counted, one per interceptive
	// answer. So are the hints a harness has no place for beside the verdict: the hint scenario's
	// allow on Gemini CLI BeforeTool and Cursor's events, every refused prompt's hint.
	for kind, want := range map[string][3]float64{agents.ClaudeCode: {2, 1, 0}, agents.Codex: {2, 1, 0},
		agents.GeminiCLI: {2, 2, 0}, agents.Cursor: {5, 6, 0}} {
		for i, extra := range []string{"events", "hint", "notice"} {
			if n := sum(m, "hookd_agent_hook_extras_dropped_total", `kind="`+kind+`"`, `extra="`+extra+`"`); n != want[i] {
				t.Errorf("dropped %s of %s counted %v times, want %v", extra, kind, n, want[i])
			}
		}
	}
	var outcomes []string
	for _, r := range rows {
		outcomes = append(outcomes, r.HookType+":"+r.Outcome)
		if r.AgentKind != agents.ClaudeCode {
			t.Errorf("decision row of a Claude Code hook has agentKind %q", r.AgentKind)
		}
	}
	for _, want := range []string{"pre_tool_use:deny", "user_message:deny", "pre_tool_use:ask"} {
		if !slices.Contains(outcomes, want) {
			t.Errorf("decision log of the Claude Code session lacks %s: %v", want, outcomes)
		}
	}
	// Claude Code cannot ask about or rewrite a prompt, so those answers were blocks: the log
	// says what the harness was told, not what the hook answered.
	// A tool call's rewrite was an ask about the rewritten call.
	for _, never := range []string{"user_message:ask", "user_message:modify", "pre_tool_use:modify"} {
		if slices.Contains(outcomes, never) {
			t.Errorf("decision log of the Claude Code session records %s, which Claude Code enforced as a block: %v", never, outcomes)
		}
	}
}

// answered is the status of an answer: 204 when there is nothing to say, else 200.
func answered(body []byte) int {
	if len(body) == 0 {
		return http.StatusNoContent
	}
	return http.StatusOK
}

func ptr[T any](v T) *T { return &v }

// The adapter routes need an API key, know their kinds, and refuse what is not a hook input; an
// agent id selects agent-specific hooks.
func TestAgentRouteRefusals(t *testing.T) {
	d := startAgentDaemon(t)
	pre := []byte(`{"hook_event_name":"PreToolUse","session_id":"s1","cwd":"/w","tool_name":"Bash","tool_input":{"command":"ls"}}`)
	for _, c := range []struct {
		kind, key string
		body      []byte
		status    int
	}{
		{agents.ClaudeCode, "", pre, http.StatusUnauthorized},
		{agents.ClaudeCode, "key-wrong", pre, http.StatusUnauthorized},
		{"claude", agentKey, pre, http.StatusNotFound},
		{agents.Codex, agentKey, []byte(`not json`), http.StatusBadRequest},
		{agents.Codex, agentKey, []byte(`{"session_id":"s1"}`), http.StatusBadRequest},
		{agents.Codex, agentKey, pre, http.StatusOK},
	} {
		status, body, _ := agentPost(t, d, c.kind, c.body, c.key)
		if status != c.status {
			t.Errorf("%s key %q %s: %d %s, want %d", c.kind, c.key, c.body, status, body, c.status)
		}
	}
	// A setting put in the URL is refused, not ignored: agentId there would select nothing.
	req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/claude-code/hooks?agentId=5001"), bytes.NewReader(pre))
	req.Header.Set("Authorization", "Bearer "+agentKey)
	if resp, err := d.http.Do(req); err != nil {
		t.Fatal(err)
	} else {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "agentId: unknown query parameter") {
			t.Errorf("?agentId=5001: %d %s, want 400 naming it", resp.StatusCode, raw)
		}
	}

	// A hook of agent 5001 applies to the key of that agent. A key without an agent may name an
	// agent in the header, but not one bound to another user's key (5001 is dev-2's): that would
	// be acting as dev-2's agent. A header cannot change a key's agent.
	if s := d.call("POST", "/api/hooks", `{"hookName":"agent 5001 only","hookType":"pre_tool_use","agentId":5001,
		"dispatchType":"policy","dispatchConfig":{"failureMode":"DENY"},
		"policyConfig":{"rules":[{"name":"all","when":"true","decision":"deny","reason":"'agent 5001 may not'"}]}}`, nil); s != http.StatusCreated {
		t.Fatalf("register: %d", s)
	}
	for _, c := range []struct {
		key, header string
		status      int
		denied      bool
	}{
		{"key-agent-5001", "", http.StatusOK, true},
		{agentKey, "", http.StatusNoContent, false},
		{agentKey, "5001", http.StatusOK, false},
		{agentKey, "5002", http.StatusNoContent, false},
		{"key-agent-5001", "5001", http.StatusOK, true},
		// A header hookd refuses blocks the call (an error status would let the tool run),
		// naming the header.
		{"key-agent-5001", "6000", http.StatusOK, false},
		{agentKey, "x", http.StatusOK, false},
	} {
		req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/claude-code/hooks"), bytes.NewReader(pre))
		req.Header.Set("Authorization", "Bearer "+c.key)
		if c.header != "" {
			req.Header.Set(agents.AgentIDHeader, c.header)
		}
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || strings.Contains(string(raw), "agent 5001 may not") != c.denied {
			t.Errorf("key %s header %q: %d %s", c.key, c.header, resp.StatusCode, raw)
		}
		if !c.denied && c.status == http.StatusOK && (!strings.Contains(string(raw), `"permissionDecision":"deny"`) ||
			!strings.Contains(string(raw), agents.AgentIDHeader)) {
			t.Errorf("key %s header %q: %s, want a deny naming %s", c.key, c.header, raw, agents.AgentIDHeader)
		}
	}
	// A scheduled task of dev-2 is dev-2's agent too: filled in, and another refused.
	var task struct{ AgentID *int64 }
	if s := d.call("POST", "/api/tasks", `{"taskName":"n","cron":"@daily","input":"x","principalId":1002}`, &task); s != http.StatusCreated ||
		task.AgentID == nil || *task.AgentID != 5001 {
		t.Errorf("a task of principal 1002: %d, agentId %v", s, task.AgentID)
	}
	if s := d.call("POST", "/api/tasks", `{"taskName":"n","cron":"@daily","input":"x","principalId":1002,"agentId":7}`, nil); s != http.StatusBadRequest {
		t.Errorf("a task of principal 1002 as agent 7: %d", s)
	}
	// An input cut short that names a tool event is blocked as that event; one that names none
	// has no call to block, and is a 400.
	for body, want := range map[string]int{string(pre[:len(pre)-2]): http.StatusOK, "not json": http.StatusBadRequest} {
		req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/claude-code/hooks"), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agentKey)
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == http.StatusOK && !strings.Contains(string(raw), `"permissionDecision":"deny"`) {
			t.Errorf("%q: %d %s, want %d", body, resp.StatusCode, raw, want)
		}
	}
}

// decisionLog reads the decision rows of a session (a page of them, or a list).
func decisionLog(t *testing.T, d *daemon, session int64, out any) {
	t.Helper()
	var data json.RawMessage
	if s := d.call("GET", fmt.Sprintf("/api/decisions?sessionId=%d&limit=500", session), "", &data); s != http.StatusOK {
		t.Fatalf("decisions: %d", s)
	}
	var page struct{ Items json.RawMessage }
	if json.Unmarshal(data, &page) == nil && page.Items != nil {
		data = page.Items
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("decisions: %s", data)
	}
}

// A hook input over the body limit (a Write of a large file, say) cannot be read, so at a point
// hookd decides the call is blocked in the harness's own answer, never refused with 413, which the
// harness would take for "no objection"; whether the client says the length first or streams it.
// At an observational point there is nothing to block and the 413 stands.
func TestAgentHookInputOverLimit(t *testing.T) {
	d := startAgentDaemon(t)
	pad := func(in []byte) []byte { // a large last member, after the event's name as harnesses write it
		in = bytes.TrimRight(bytes.TrimSpace(in), "}")
		return append(append(in, `,"content":"`+strings.Repeat("x", 1<<20)+`"`...), '}')
	}
	reason := fmt.Sprintf("hookd: the hook input is over %d bytes, more than hookd reads, so the call is blocked", 1<<20)
	events := map[string][2]string{ // decided, observational
		agents.ClaudeCode: {"PreToolUse", "PostToolUse"},
		agents.Codex:      {"UserPromptSubmit", "Stop"},
		agents.GeminiCLI:  {"BeforeTool", "AfterTool"},
		agents.Cursor:     {"beforeShellExecution", "afterShellExecution"},
	}
	for kind, evs := range events {
		ad := agents.For(kind)
		want := ad.Answer(agents.Mapped{Event: evs[0], Point: ad.Point(evs[0])}, agents.Verdict{Decision: dispatcher.Deny, Reason: reason})
		big := pad(readFixture(t, kind, evs[0]))
		for _, streamed := range []bool{false, true} {
			var body io.Reader = bytes.NewReader(big)
			if streamed {
				body = io.MultiReader(body) // no length known: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/"+kind+"/hooks"), body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+agentKey)
			resp, err := d.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
				t.Errorf("%s %s (streamed %v): %d %s\nwant %s", kind, evs[0], streamed, resp.StatusCode, got, want)
			}
		}
		if status, got, _ := agentPost(t, d, kind, pad(readFixture(t, kind, evs[1])), agentKey); status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s: %d %s, want 413", kind, evs[1], status, got)
		}
		if status, _, _ := agentPost(t, d, kind, big, ""); status != http.StatusUnauthorized {
			t.Errorf("%s %s without a key: %d, want 401", kind, evs[0], status)
		}
	}
}

// TestAgentRefusalsOnTheRecord: a block hookd decides itself on the coding agents' route (a
// header it refuses, an input cut short, one over the body limit) is a decision like any other:
// the answer names its decisionId and the decision log has its row, hookd's (hookId 0), deny,
// with the reason the harness was told, the key's principal and, where the input could be read,
// the call it stopped.
func TestAgentRefusalsOnTheRecord(t *testing.T) {
	d := startAgentDaemon(t)
	pre := []byte(`{"hook_event_name":"PreToolUse","session_id":"s-ref","cwd":"/w","tool_name":"Bash","tool_input":{"command":"ls"}}`)
	big := append(bytes.TrimSuffix(pre, []byte("}")), []byte(`,"content":"`+strings.Repeat("x", 1<<20)+`"}`)...)
	for _, c := range []struct {
		name         string
		headers      [][2]string
		body         []byte
		tool, reason string
	}{
		{"agent header refused", [][2]string{{agents.AgentIDHeader, "x"}}, pre, "Bash", agents.AgentIDHeader},
		// Which of the two was meant is not known.
		{"agent header twice", [][2]string{{agents.AgentIDHeader, "7"}, {agents.AgentIDHeader, "8"}}, pre, "Bash", "sent 2 times"},
		// A valid key claiming another user: a block under the key's own principal, not a 403
		// that the harness would take for no objection.
		{"another user claimed", [][2]string{{"X-User-Id", "someone-else"}}, pre, "Bash", "userId does not match"},
		{"input cut short", nil, pre[:len(pre)-2], "", "hookd: "},
		// The agent a valid header names is the row's, as it is a decided call's.
		{"input cut short, agent named", [][2]string{{agents.AgentIDHeader, "77"}}, pre[:len(pre)-2], "", "hookd: "},
		{"agent header not plain digits", [][2]string{{agents.AgentIDHeader, "077"}}, pre, "Bash", "plain digits"},
		{"input over the limit", nil, big, "", "is over 1048576 bytes"},
		// A call without its arguments, or with arguments that are not an object, would be
		// decided on nothing: a rule on args.command never matching.
		{"tool arguments missing", nil, []byte(`{"hook_event_name":"PreToolUse","session_id":"s-ref","tool_name":"Bash"}`),
			"Bash", "tool_input is required"},
		{"tool arguments not an object", nil, []byte(`{"hook_event_name":"PreToolUse","session_id":"s-ref","tool_name":"Bash","tool_input":"rm -rf /"}`),
			"Bash", "tool_input must be a JSON object"},
	} {
		req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/claude-code/hooks"), bytes.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+agentKey)
		for _, h := range c.headers {
			req.Header.Add(h[0], h[1])
		}
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := resp.Header.Get(agents.DecisionIDHeader)
		var answer struct {
			HookSpecificOutput struct{ PermissionDecision, PermissionDecisionReason string }
		}
		json.Unmarshal(raw, &answer)
		told := answer.HookSpecificOutput.PermissionDecisionReason
		if resp.StatusCode != http.StatusOK || answer.HookSpecificOutput.PermissionDecision != "deny" || id == "" {
			t.Errorf("%s: %d %s, decisionId %q; want a deny naming its decision", c.name, resp.StatusCode, raw, id)
			continue
		}
		var rows []struct {
			DecisionID, HookName, Outcome, Reason, ToolName, AgentKind, Error string
			HookID                                                            int64
			PrincipalID, AgentID                                              *int64
		}
		var page struct{ Items json.RawMessage }
		if s := d.call("GET", "/api/decisions?decisionId="+id, "", &page); s != http.StatusOK {
			t.Fatalf("decisions: %d", s)
		}
		json.Unmarshal(page.Items, &rows)
		if len(rows) != 1 {
			t.Errorf("%s: %d rows for decision %s, want 1", c.name, len(rows), id)
			continue
		}
		r := rows[0]
		if r.HookID != 0 || r.HookName != dispatcher.RefusedBy || r.Outcome != "deny" || r.Reason != told ||
			!strings.Contains(told, c.reason) || r.ToolName != c.tool || r.AgentKind != agents.ClaudeCode || r.Error == "" ||
			r.PrincipalID == nil || *r.PrincipalID != agentUser {
			t.Errorf("%s: row %+v, told %q", c.name, r, told)
		}
		if named := strings.HasSuffix(c.name, "agent named"); named != (r.AgentID != nil && *r.AgentID == 77) {
			t.Errorf("%s: agentId %v", c.name, r.AgentID)
		}
	}
	if v := d.call("GET", "/api/decisions/verify", "", nil); v != http.StatusOK {
		t.Fatalf("the chain with hookd's rows: %d", v)
	}
}
