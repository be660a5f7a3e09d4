package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
)

// fakeClaudeCode runs its PreToolUse HTTP hooks as the Claude Code hooks reference says: it
// POSTs the hook input to each matching hook's url with the hook's headers (a $VAR is filled only
// from allowedEnvVars), waits at most the hook's timeout; a 2xx with an empty body is no decision,
// a 2xx with JSON is parsed (hookSpecificOutput.permissionDecision), a non-2xx or no answer is a
// non-blocking error — unless the hook says onFailure: block. hookSpecificOutput.additionalContext
// goes to the model and systemMessage to the user, whatever the decision.
type fakeClaudeCode struct {
	settings map[string]any
	env      map[string]string
	session  string
}

// outcome is what Claude Code does with a tool call after its hooks.
type outcome struct {
	verdict string // "run" (its own permission flow goes on), "deny", "ask", "error" (non-blocking)
	reason  string
	context string // what the model is shown besides the reason (additionalContext)
	shown   string // what the user is shown (systemMessage)
}

var envRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func (c *fakeClaudeCode) preToolUse(t *testing.T, tool string, input map[string]any) outcome {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"session_id": c.session, "transcript_path": "/tmp/t.jsonl",
		"cwd": "/home/dev/pay", "permission_mode": "default", "hook_event_name": "PreToolUse",
		"tool_name": tool, "tool_input": input, "tool_use_id": "toolu_" + tool})
	groups, _ := c.settings["hooks"].(map[string]any)["PreToolUse"].([]any)
	result := outcome{verdict: "run"}
	for _, g := range groups {
		gm := g.(map[string]any)
		if m, _ := gm["matcher"].(string); m != "" && m != "*" && !regexp.MustCompile("^(?:"+m+")$").MatchString(tool) {
			continue
		}
		for _, h := range gm["hooks"].([]any) {
			hm := h.(map[string]any)
			if hm["type"] != "http" {
				continue
			}
			allowed := map[string]bool{}
			for _, v := range hm["allowedEnvVars"].([]any) {
				allowed[v.(string)] = true
			}
			req, _ := http.NewRequest(http.MethodPost, hm["url"].(string), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range hm["headers"].(map[string]any) {
				req.Header.Set(k, envRef.ReplaceAllStringFunc(v.(string), func(ref string) string {
					name := envRef.FindStringSubmatch(ref)[1]
					if !allowed[name] {
						return ""
					}
					return c.env[name]
				}))
			}
			client := &http.Client{Timeout: time.Duration(hm["timeout"].(float64)) * time.Second}
			o := c.answer(client.Do(req))
			if o.verdict == "error" && hm["onFailure"] == "block" {
				o = outcome{verdict: "deny", reason: "hook failed: " + o.reason}
			}
			// deny wins over ask, ask over an allow or no decision; every hook's context and
			// message are shown.
			context, shown := with(result.context, o.context), with(result.shown, o.shown)
			if o.verdict == "deny" || (o.verdict == "ask" && result.verdict != "deny") || result.verdict == "run" {
				result = o
			}
			result.context, result.shown = context, shown
		}
	}
	if result.verdict == "error" {
		result.verdict = "run" // a non-blocking error: the call goes on
	}
	return result
}

func (c *fakeClaudeCode) answer(resp *http.Response, err error) outcome {
	if err != nil {
		return outcome{verdict: "error", reason: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return outcome{verdict: "error", reason: resp.Status}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return outcome{verdict: "run"}
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
			AdditionalContext        string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
		SystemMessage string `json:"systemMessage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return outcome{verdict: "error", reason: "invalid JSON output"}
	}
	o := outcome{verdict: "run", context: out.HookSpecificOutput.AdditionalContext, shown: out.SystemMessage}
	switch d := out.HookSpecificOutput.PermissionDecision; d {
	case "deny", "ask":
		o.verdict, o.reason = d, out.HookSpecificOutput.PermissionDecisionReason
	}
	return o
}

// with is text and more, a blank line between them when both are there.
func with(text, more string) string {
	if text == "" || more == "" {
		return text + more
	}
	return text + "\n\n" + more
}

// A fake Claude Code, configured by `hookd agents install claude-code`, against the running
// daemon with a denying CEL policy and a fail-closed webhook that is down: the tool calls they
// stop are blocked with hookd's reason, the others go on, and a daemon that is down blocks too.
// A receiver's extras reach it: a hint as the model's context, a tool event's userMessage (the
// approval URL of a deny) as the message the user sees.
func TestFakeClaudeCode(t *testing.T) {
	d := startAgentDaemon(t)
	down := closedAddr(t)
	recv := newAgentReceiver(t)
	recv.answer(func(env dispatcher.Envelope) (int, string) {
		var c struct{ ToolName string }
		json.Unmarshal(env.Context, &c)
		if c.ToolName == "Deploy" {
			return 200, `{"decision":"deny","reason":"deploys need a sign-off","hint":"Wait for the sign-off, then retry.",` +
				`"toolEvent":{"category":"auth_required","payload":{"url":"https://approve.example/req/42"},` +
				`"userMessage":"Approve the deploy at https://approve.example/req/42"}}`
		}
		return 200, `{"decision":"allow","hint":"Search results under vendor/ are third-party code."}`
	})
	for _, spec := range []string{
		`{"hookName":"no destructive shell","hookType":"pre_tool_use","toolNameMatch":"Bash","dispatchType":"policy",
		  "dispatchConfig":{"failureMode":"DENY"},
		  "policyConfig":{"rules":[
		    {"name":"rm-rf","when":"event.context.agentKind == 'claude-code' && args.command.contains('rm -rf')","decision":"deny",
		     "reason":"'destructive command refused in ' + event.context.cwd + ': ' + args.command"},
		    {"name":"push","when":"args.command.startsWith('git push')","decision":"ask","reason":"'pushing needs a reviewer'"}],
		   "default":"allow"}}`,
		fmt.Sprintf(`{"hookName":"write approval","hookType":"pre_tool_use","toolNameMatch":"Write",
		  "dispatchConfig":{"url":%q,"timeoutMs":2000,"failureMode":"DENY","signingSecret":%q}}`, down+"/approve", hookSecret),
		fmt.Sprintf(`{"hookName":"deploy sign-off","hookType":"pre_tool_use","toolNameMatch":"Deploy|Grep",
		  "dispatchConfig":{"url":%q,"timeoutMs":3000,"failureMode":"DENY","signingSecret":%q}}`, recv.srv.URL, hookSecret),
	} {
		if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
			t.Fatalf("register: %d %s", s, spec)
		}
	}

	dir := t.TempDir()
	out, errs, code := runCLI(t, "agents", "install", agents.ClaudeCode, "--project", dir, "--addr", d.url(""))
	if code != 0 {
		t.Fatalf("install: %d %s", code, errs)
	}
	claude := &fakeClaudeCode{env: map[string]string{"HOOKD_CLI_TOKEN": agentKey}, session: "5b7d-fake"}
	if err := json.Unmarshal([]byte(out), &claude.settings); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		tool           string
		input          map[string]any
		verdict        string
		reason         string
		context, shown string
	}{
		{"Bash", map[string]any{"command": "rm -rf /home/dev/pay/build"}, "deny",
			"destructive command refused in /home/dev/pay: rm -rf /home/dev/pay/build", "", ""},
		{"Bash", map[string]any{"command": "git push origin main"}, "ask", "pushing needs a reviewer", "", ""},
		{"Bash", map[string]any{"command": "make test"}, "run", "", "", ""},
		{"Write", map[string]any{"file_path": "/home/dev/pay/x.go", "content": "package x"}, "deny",
			"hook write approval unavailable (failureMode DENY)", "", ""},
		{"Read", map[string]any{"file_path": "/home/dev/pay/x.go"}, "run", "", "", ""},
		{"Deploy", map[string]any{"env": "prod"}, "deny", "deploys need a sign-off", "Wait for the sign-off, then retry.",
			"Approve the deploy at https://approve.example/req/42"},
		{"Grep", map[string]any{"pattern": "TODO"}, "run", "", "Search results under vendor/ are third-party code.", ""},
	} {
		got := claude.preToolUse(t, c.tool, c.input)
		if got.verdict != c.verdict || got.reason != c.reason || got.context != c.context || got.shown != c.shown {
			t.Errorf("%s %v: %+v, want %s %q context %q shown %q", c.tool, c.input, got, c.verdict, c.reason, c.context, c.shown)
		}
	}

	// Without the key Claude Code's call is a non-blocking error — which onFailure: block turns
	// into a block; with the daemon gone, the same.
	claude.env = map[string]string{}
	if got := claude.preToolUse(t, "Read", map[string]any{"file_path": "/x"}); got.verdict != "deny" || !strings.Contains(got.reason, "401") {
		t.Errorf("no key: %+v", got)
	}
	claude.env = map[string]string{"HOOKD_CLI_TOKEN": agentKey}
	d.kill()
	if got := claude.preToolUse(t, "Read", map[string]any{"file_path": "/x"}); got.verdict != "deny" || !strings.Contains(got.reason, "hook failed") {
		t.Errorf("daemon down: %+v", got)
	}
}

// A Claude Code tool call that hookd's shutdown cuts short while its hook decides is answered a
// block, the reason saying so: an empty 2xx would be "no decision" to Claude Code, and the call
// would run under its own permission rules. The hook's failureMode is ALLOW, so the block is not
// the hook's. The record has the chain's row (an error: hookd stopped) and hookd's block.
func TestClaudeCodeBlockedAtShutdown(t *testing.T) {
	d := startAgentDaemon(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(func() { close(release); recv.Close() })
	hook := fmt.Sprintf(`{"hookName":"slow approval","hookType":"pre_tool_use","toolNameMatch":"Bash",
	  "dispatchConfig":{"url":%q,"timeoutMs":60000,"failureMode":"ALLOW","signingSecret":%q}}`, recv.URL, hookSecret)
	if s := d.call("POST", "/api/hooks", hook, nil); s != http.StatusCreated {
		t.Fatalf("register: %d", s)
	}

	type reply struct {
		status int
		body   []byte
		id     string
		err    error
	}
	replied := make(chan reply, 1)
	go func() {
		body := `{"session_id":"s-stop","transcript_path":"/tmp/t.jsonl","cwd":"/home/dev/pay","permission_mode":"default",
		  "hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make deploy"},"tool_use_id":"toolu_stop"}`
		req, _ := http.NewRequest(http.MethodPost, d.url("/v1/agents/claude-code/hooks"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+agentKey)
		resp, err := d.http.Do(req)
		if err != nil {
			replied <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		replied <- reply{status: resp.StatusCode, body: raw, id: resp.Header.Get(agents.DecisionIDHeader)}
	}()
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the hook was never asked")
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	var r reply
	select {
	case r = <-replied:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after SIGTERM")
	}
	var answer struct {
		HookSpecificOutput struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
	}
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &answer) != nil ||
		answer.HookSpecificOutput.PermissionDecision != "deny" || !strings.Contains(answer.HookSpecificOutput.PermissionDecisionReason, "blocked") {
		t.Fatalf("answer while stopping: %d %s %v; want a deny", r.status, r.body, r.err)
	}
	<-d.done

	again := startDaemon(t, filepath.Join(d.cmd.Dir, "hookd.yaml"))
	var page struct {
		Items []struct{ DecisionID, HookName, Outcome, Reason, Error string }
	}
	if s := again.call("GET", "/api/decisions?toolName=Bash", "", &page); s != http.StatusOK {
		t.Fatalf("decisions: %d", s)
	}
	var chain, block bool
	for _, row := range page.Items {
		switch {
		case row.HookName == "slow approval" && row.Outcome == "error" && strings.Contains(row.Error, "hookd stopped while hook"):
			chain = true
		case row.HookName == dispatcher.RefusedBy && row.Outcome == "deny" && row.DecisionID == r.id &&
			row.Reason == answer.HookSpecificOutput.PermissionDecisionReason:
			block = true
		}
	}
	if !chain || !block {
		t.Fatalf("rows %+v; want the chain's error and hookd's block %s", page.Items, r.id)
	}
}

// A block whose hook gave no reason (or only spaces) is told with hookd's words, since Codex throws
// out a blank one and runs the call; the record holds the words the harness was told.
func TestBlankReasonRecordedAsTold(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	recv.answer(func(env dispatcher.Envelope) (int, string) {
		var c struct{ ToolName string }
		json.Unmarshal(env.Context, &c)
		return 200, `{"decision":"` + strings.ToLower(c.ToolName) + `","reason":"  "}`
	})
	hook := fmt.Sprintf(`{"hookName":"terse","hookType":"pre_tool_use","toolNameMatch":"Deny|Ask",
	  "dispatchConfig":{"url":%q,"failureMode":"DENY","signingSecret":%q}}`, recv.srv.URL, hookSecret)
	if s := d.call("POST", "/api/hooks", hook, nil); s != http.StatusCreated {
		t.Fatalf("register: %d", s)
	}
	for _, tool := range []string{"Deny", "Ask"} {
		body := []byte(`{"session_id":"s-terse","transcript_path":"/tmp/t.jsonl","cwd":"/w","permission_mode":"default",
		  "hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":{},"tool_use_id":"toolu_` + tool + `"}`)
		status, raw, id := agentPost(t, d, agents.ClaudeCode, body, agentKey)
		var answer struct {
			HookSpecificOutput struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
		}
		json.Unmarshal(raw, &answer)
		told := answer.HookSpecificOutput.PermissionDecisionReason
		if status != http.StatusOK || answer.HookSpecificOutput.PermissionDecision != strings.ToLower(tool) ||
			!strings.HasPrefix(told, "hookd: ") {
			t.Fatalf("%s: %d %s", tool, status, raw)
		}
		var page struct {
			Items []struct{ HookName, Outcome, Reason string }
		}
		if s := d.call("GET", "/api/decisions?decisionId="+id, "", &page); s != http.StatusOK || len(page.Items) != 1 {
			t.Fatalf("%s: decisions %d %+v", tool, s, page.Items)
		}
		if r := page.Items[0]; r.HookName != "terse" || r.Outcome != strings.ToLower(tool) || r.Reason != told {
			t.Errorf("%s: row %+v, the harness was told %q", tool, r, told)
		}
	}
}
