package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
)

// cursorInput is a Cursor hook input of one conversation: the common fields and the event's own.
func cursorInput(conversation, event string, fields map[string]any) []byte {
	in := map[string]any{"hook_event_name": event, "conversation_id": conversation, "generation_id": "g-1",
		"model": "claude-sonnet-4-6", "cursor_version": "2.4.0", "workspace_roots": []string{"/home/dev/pay"},
		"user_email": "dev@example.com"}
	for k, v := range fields {
		in[k] = v
	}
	b, _ := json.Marshal(in)
	return b
}

// runInstalled runs hookd's entry for event in an installed .cursor/hooks.json as Cursor runs a
// command hook, the input on stdin, and returns what it printed.
func runInstalled(t *testing.T, hooks map[string]any, d *daemon, event string, input []byte) string {
	t.Helper()
	entries, _ := hooks[event].([]any)
	if len(entries) != 1 {
		t.Fatalf("%s: installed %v", event, entries)
	}
	command, _ := entries[0].(map[string]any)["command"].(string)
	args := strings.Fields(command)
	if len(args) < 2 || args[0] != binary || args[1] != "hook" {
		t.Fatalf("%s: installed command %q", event, command)
	}
	out, errs, code := runHook(t, d.url(""), agentKey, input, args[2:]...)
	if code != 0 {
		t.Fatalf("%s: exit %d %s", command, code, errs)
	}
	return out
}

// registerTeamHook registers the team's webhook at each of the points (failing closed where it decides)
// and installs hookd's entries for Cursor into a new project, returning its hooks.
func registerTeamHook(t *testing.T, d *daemon, recv *agentReceiver, types ...dispatcher.HookType) map[string]any {
	t.Helper()
	for _, typ := range types {
		config := fmt.Sprintf(`{"url":%q,"signingSecret":%q}`, recv.srv.URL, hookSecret)
		if typ.Interceptive() {
			config = fmt.Sprintf(`{"url":%q,"signingSecret":%q,"timeoutMs":3000,"failureMode":"DENY"}`, recv.srv.URL, hookSecret)
		}
		spec := fmt.Sprintf(`{"hookName":"team %s","hookType":%q,"dispatchConfig":%s}`, typ, typ, config)
		if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
			t.Fatalf("register %s: %d", typ, s)
		}
	}
	dir := t.TempDir()
	if _, errs, code := runCLI(t, "agents", "install", agents.Cursor, "--project", dir, "--write"); code != 0 {
		t.Fatalf("install: %d %s", code, errs)
	}
	return readJSON(t, filepath.Join(dir, ".cursor", "hooks.json"))["hooks"].(map[string]any)
}

// Cursor fires two hooks for one shell command, MCP call or file read: preToolUse and the
// tool-specific before hook (and postToolUse beside afterShellExecution and afterMCPExecution).
// Through the entries `hookd agents install cursor` writes, each action is decided once: one
// decision row, one call to the team's hook, one observed event; the duplicate says nothing.
func TestCursorOneDecisionPerAction(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	recv.answer(scenarios[1].answer) // deny
	hooks := registerTeamHook(t, d, recv, dispatcher.PreToolUse, dispatcher.PostToolUse)

	shell := map[string]any{"command": "curl -X POST https://bank.example/transfer -d amount=25000", "cwd": "/home/dev/pay"}
	mcpArgs := `{"amount":25000,"to":"6222000011112222"}`
	for _, c := range []struct {
		tool            string
		decider, before map[string]any // the tool-specific event's fields; preToolUse's
		event, post     string         // the tool-specific before and after events
		after           map[string]any
	}{
		{tool: "Shell", decider: shell, event: "beforeShellExecution", post: "afterShellExecution",
			before: map[string]any{"tool_name": "Shell", "tool_input": shell, "tool_use_id": "t-1"},
			after:  map[string]any{"command": shell["command"], "cwd": shell["cwd"], "output": "ok", "duration": 40}},
		{tool: "MCP:transferFunds", decider: map[string]any{"tool_name": "transferFunds", "tool_input": mcpArgs, "url": "http://localhost:3000/mcp"},
			event: "beforeMCPExecution", post: "afterMCPExecution",
			before: map[string]any{"tool_name": "MCP:transferFunds", "tool_input": json.RawMessage(mcpArgs), "tool_use_id": "t-2"},
			after:  map[string]any{"tool_name": "transferFunds", "tool_input": mcpArgs, "result_json": `{"ok":true}`, "duration": 9}},
		{tool: "Read", decider: map[string]any{"file_path": "/home/dev/pay/.env", "content": "TOKEN=abc"}, event: "beforeReadFile",
			before: map[string]any{"tool_name": "Read", "tool_input": map[string]any{"file_path": "/home/dev/pay/.env"}, "tool_use_id": "t-3"}},
	} {
		conversation := "conv-" + c.event
		before := scrape(t, d)
		if got := runInstalled(t, hooks, d, "preToolUse", cursorInput(conversation, "preToolUse", c.before)); got != "{}" {
			t.Errorf("%s preToolUse: %s, want nothing to say", c.tool, got)
		}
		if got := runInstalled(t, hooks, d, c.event, cursorInput(conversation, c.event, c.decider)); !bytes.Contains([]byte(got), []byte(`"permission":"deny"`)) {
			t.Errorf("%s %s: %s, want the team's deny", c.tool, c.event, got)
		}
		if env := recv.next(t); env.HookType != dispatcher.PreToolUse {
			t.Errorf("%s: the team's hook got %s", c.tool, env.HookType)
		}
		if len(recv.got) != 0 {
			t.Errorf("%s: the team's hook was asked %d more times", c.tool, len(recv.got))
		}
		var rows []struct{ HookType, Outcome string }
		decisionLog(t, d, agents.SessionID(agents.Cursor, ptr(int64(agentUser)), conversation), &rows)
		if len(rows) != 1 || rows[0].Outcome != "deny" {
			t.Errorf("%s: decision rows %+v, want one deny", c.tool, rows)
		}
		if c.post != "" {
			runInstalled(t, hooks, d, "postToolUse", cursorInput(conversation, "postToolUse", c.before))
			runInstalled(t, hooks, d, c.post, cursorInput(conversation, c.post, c.after))
			if env := recv.next(t); env.HookType != dispatcher.PostToolUse {
				t.Errorf("%s: observed %s", c.tool, env.HookType)
			}
		}
		after := scrape(t, d)
		count := func(point string) float64 {
			l := []string{`kind="cursor"`, `point="` + point + `"`}
			return sum(after, "hookd_agent_hook_events_total", l...) - sum(before, "hookd_agent_hook_events_total", l...)
		}
		wantPost, wantNone := 0.0, 1.0
		if c.post != "" {
			wantPost, wantNone = 1, 2
		}
		if count("pre_tool_use") != 1 || count("post_tool_use") != wantPost || count("none") != wantNone {
			t.Errorf("%s: %v decided, %v observed, %v said nothing; want 1, %v, %v", c.tool,
				count("pre_tool_use"), count("post_tool_use"), count("none"), wantPost, wantNone)
		}
	}
}

// A failed tool call (Cursor's postToolUseFailure, installed by `hookd agents install cursor`)
// is observed as a post_tool_use that did not succeed, carrying Cursor's error message.
func TestCursorToolFailureObserved(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	hooks := registerTeamHook(t, d, recv, dispatcher.PostToolUse)
	if got := runInstalled(t, hooks, d, "postToolUseFailure", readFixture(t, agents.Cursor, "postToolUseFailure")); got != "{}" {
		t.Errorf("postToolUseFailure: %s", got)
	}
	env := recv.next(t)
	var c dispatcher.PostToolUseContext
	if err := json.Unmarshal(env.Context, &c); err != nil {
		t.Fatal(err)
	}
	want := "EACCES: permission denied, open '/home/dev/pay/ledger/lock'"
	if env.HookType != dispatcher.PostToolUse || c.ToolName != "Write" || c.ToolCallID != "tool_4d5e6f" || c.Succeeded ||
		c.ErrorMessage == nil || *c.ErrorMessage != want || c.DurationMs != 12 || c.CodingAgent == nil || c.AgentKind != agents.Cursor {
		t.Errorf("envelope %s %+v", env.HookType, c)
	}
}

// A hooks.json written by hand with preToolUse alone (no tool-specific hooks, no
// --cursor-tool-events) has every call decided there, shell commands included: leaving them to a
// hook that is not installed would let them through undecided. The adapter takes the header only
// from a Cursor hook, and only as "installed".
func TestCursorPreToolUseAloneDecidesShell(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	recv.answer(scenarios[1].answer) // deny
	registerTeamHook(t, d, recv, dispatcher.PreToolUse)
	shell := map[string]any{"tool_name": "Shell", "tool_use_id": "t-1",
		"tool_input": map[string]any{"command": "rm -rf /srv/ledger", "cwd": "/home/dev/pay"}}
	out, errs, code := runHook(t, d.url(""), agentKey, cursorInput("conv-alone", "preToolUse", shell), "--agent", agents.Cursor, "preToolUse")
	if code != 0 || !strings.Contains(out, `"permission":"deny"`) {
		t.Fatalf("preToolUse alone: exit %d %s %s, want the team's deny", code, out, errs)
	}
	env := recv.next(t)
	var got dispatcher.PreToolUseContext
	if err := json.Unmarshal(env.Context, &got); err != nil || env.HookType != dispatcher.PreToolUse || got.ToolName != "Shell" ||
		!strings.Contains(string(got.Arguments), "rm -rf /srv/ledger") {
		t.Errorf("the team's hook got %s %s (%v)", env.HookType, env.Context, err)
	}
	if _, errs, code := runHook(t, d.url(""), agentKey, []byte(`{"hook_event_name":"PreToolUse"}`), "--agent", agents.ClaudeCode,
		"--cursor-tool-events", "PreToolUse"); code == 0 || !strings.Contains(errs, "--cursor-tool-events") {
		t.Errorf("--cursor-tool-events with claude-code: exit %d %s", code, errs)
	}
	// Refused: on another harness's route (where preToolUse is no event of its, so a 400), and
	// with another value (a block of the call, naming the header: an error status lets it run).
	for _, c := range []struct {
		kind, value string
		status      int
	}{{agents.ClaudeCode, "installed", http.StatusBadRequest}, {agents.Cursor, "yes", http.StatusOK}} {
		req, _ := http.NewRequest("POST", d.url("/v1/agents/"+c.kind+"/hooks"), bytes.NewReader(cursorInput("conv-h", "preToolUse", shell)))
		req.Header.Set("Authorization", "Bearer "+agentKey)
		req.Header.Set(agents.ToolEventsHeader, c.value)
		resp, err := d.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(raw), agents.ToolEventsHeader) ||
			c.status == http.StatusOK && !strings.Contains(string(raw), `"permission":"deny"`) {
			t.Errorf("%s with %s %q: %d %s, want %d", c.kind, agents.ToolEventsHeader, c.value, resp.StatusCode, raw, c.status)
		}
	}
}
