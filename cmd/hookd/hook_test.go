package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
)

// runHook runs the real binary as a harness runs its command hook: the fixture on stdin.
func runHook(t *testing.T, addr, token string, input []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"hook"}, args...)...)
	cmd.Env = append(os.Environ(), "HOOKD_CLI_ADDR="+addr, "HOOKD_CLI_TOKEN="+token)
	cmd.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func readFixture(t *testing.T, kind, event string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agentsDir, kind, event+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readGolden(t *testing.T, kind, event, scenario string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agentsDir, kind, "golden", event+"."+scenario+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The forwarder under each harness's exit-code and stdout contract: the daemon's answer verbatim
// with exit 0; when the daemon cannot be asked, a block (the harness's deny on stdout, the reason
// on stderr, exit 2) for tool and prompt events, and nothing to say for the others.
func TestHookForwarder(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	recv.answer(scenarios[1].answer) // deny
	for _, typ := range []dispatcher.HookType{dispatcher.PreToolUse, dispatcher.UserMessage} {
		spec := fmt.Sprintf(`{"hookName":"team %s","hookType":%q,"dispatchConfig":{"url":%q,"signingSecret":%q,"failureMode":"DENY"}}`,
			typ, typ, recv.srv.URL, hookSecret)
		if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
			t.Fatalf("register %s: %d", typ, s)
		}
	}
	go func() {
		for range recv.got {
		}
	}()
	down := closedAddr(t)
	// A daemon that never answers (it reads the body, so that a caller's leaving ends the request).
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)

	events := map[string][3]string{ // pre-tool, prompt, observational
		agents.ClaudeCode: {"PreToolUse", "UserPromptSubmit", "PostToolUse"},
		agents.Codex:      {"PreToolUse", "UserPromptSubmit", "Stop"},
		agents.GeminiCLI:  {"BeforeTool", "BeforeAgent", "AfterTool"},
		agents.Cursor:     {"beforeShellExecution", "beforeSubmitPrompt", "afterShellExecution"},
	}
	for kind, evs := range events {
		for i, ev := range evs {
			in := readFixture(t, kind, ev)
			want := "deny"
			if i == 2 {
				want = "observed"
			}
			out, errs, code := runHook(t, d.url(""), agentKey, in, "--agent", kind, ev)
			if code != 0 || out != readGolden(t, kind, ev, want) || errs != "" {
				t.Errorf("%s %s: exit %d stdout %q stderr %q", kind, ev, code, out, errs)
			}

			// The daemon down, answering an error (a wrong key), or not answering in time.
			for _, c := range []struct{ name, addr, token, errText string }{
				{"down", down, agentKey, "cannot reach the daemon"},
				{"wrong key", d.url(""), "key-wrong", "HTTP 401"},
				{"timeout", hang.URL, agentKey, "no answer from"},
			} {
				out, errs, code := runHook(t, c.addr, c.token, in, "--agent", kind, ev, "--timeout", "300ms")
				if i == 2 {
					if code != 0 || !strings.Contains(errs, c.errText) || !strings.Contains(errs, "--on-error allow") ||
						out != string(agents.For(kind).Answer(agents.Mapped{Event: ev, Point: agents.For(kind).Point(ev)}, agents.Verdict{})) {
						t.Errorf("%s %s %s: exit %d stdout %q stderr %q", kind, ev, c.name, code, out, errs)
					}
					continue
				}
				if code != 2 || !strings.Contains(errs, c.errText) || !strings.Contains(errs, "blocked (--on-error deny)") ||
					!strings.Contains(out, c.errText) {
					t.Errorf("%s %s %s: exit %d stdout %q stderr %q", kind, ev, c.name, code, out, errs)
				}
			}
			// A password in the address is not shown to the harness or its user.
			if i == 0 {
				withPassword := strings.Replace(down, "://", "://user:hunter2-secret@", 1)
				out, errs, _ := runHook(t, withPassword, agentKey, in, "--agent", kind, ev, "--timeout", "300ms")
				if strings.Contains(out+errs, "hunter2-secret") || !strings.Contains(errs, "user:xxxxx@") {
					t.Errorf("%s %s: the address's password shown: stdout %q stderr %q", kind, ev, out, errs)
				}
			}
			// --on-error allow lets a tool call through when the daemon is down, saying so.
			if i == 0 {
				_, errs, code := runHook(t, down, agentKey, in, "--agent", kind, ev, "--on-error", "allow")
				if code != 0 || !strings.Contains(errs, "--on-error allow") {
					t.Errorf("%s %s allow: exit %d stderr %q", kind, ev, code, errs)
				}
			}
		}
	}

	// Misuse is exit 2 before anything is sent.
	// An --agent-id that names no agent would leave the agent's hooks unasked; an EVENT of another
	// harness (codex BeforeTool) would be answered with nothing to say, the call let through.
	for _, args := range [][]string{{"--agent", "claude", "PreToolUse"}, {"PreToolUse"}, {"--agent", "codex"},
		{"--agent", "codex", "--on-error", "maybe", "PreToolUse"}, {"--agent", "codex", "--agent-id", "0", "PreToolUse"},
		{"--agent", "codex", "--agent-id=-8003", "PreToolUse"}, {"--agent", "codex", "BeforeTool"},
		{"--agent", "claude-code", "beforeShellExecution"}, {"--agent", "gemini-cli", "PreToolUse"}} {
		if _, errs, code := runHook(t, d.url(""), agentKey, nil, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
	// A tool call sent to an entry of an event that is let through on error (SessionStart, even
	// with --on-error allow) is blocked all the same, answered as the PreToolUse it is.
	pre := readFixture(t, agents.ClaudeCode, "PreToolUse")
	for _, args := range [][]string{{"SessionStart"}, {"PostToolUse", "--on-error", "allow"}} {
		out, errs, code := runHook(t, d.url(""), agentKey, pre, append([]string{"--agent", agents.ClaudeCode}, args...)...)
		if code != 2 || !strings.Contains(errs, `"PreToolUse" event, not `+args[0]) || !strings.Contains(errs, "blocked") ||
			!strings.Contains(out, `"permissionDecision":"deny"`) {
			t.Errorf("PreToolUse input to %v: exit %d stdout %q stderr %q", args, code, out, errs)
		}
	}
}

// An input of another event than the command line says is not forwarded, and is answered as the
// event it is: a tool call or prompt is blocked, whatever EVENT and --on-error say; any other event
// goes on unless --on-error deny is given. Blocked by the default of the command line's event, a
// Gemini CLI AfterAgent would retry the turn, a Claude Code Stop would keep the agent working.
func TestHookForwarderOtherEvent(t *testing.T) {
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("forwarded: %s %s", r.Method, r.URL)
	}))
	t.Cleanup(daemon.Close)
	nothing := func(kind, event string) string {
		ad := agents.For(kind)
		return string(ad.Answer(agents.Mapped{Event: event, Point: ad.Point(event)}, agents.Verdict{}))
	}
	for _, c := range []struct {
		kind, input string
		args        []string
		code        int
	}{
		{agents.GeminiCLI, "AfterAgent", []string{"BeforeTool"}, 0},
		{agents.ClaudeCode, "Stop", []string{"UserPromptSubmit"}, 0},
		{agents.Codex, "Stop", []string{"PreToolUse"}, 0},
		{agents.ClaudeCode, "Notification", []string{"PreToolUse"}, 0}, // an event with no hookd point
		// Asked for, the block is given all the same: exit 2, with nothing that blocks on stdout.
		{agents.GeminiCLI, "AfterAgent", []string{"BeforeTool", "--on-error", "deny"}, 2},
		// A tool call or prompt is blocked as such.
		{agents.GeminiCLI, "BeforeTool", []string{"AfterAgent", "--on-error", "allow"}, 2},
		{agents.ClaudeCode, "UserPromptSubmit", []string{"Stop"}, 2},
	} {
		out, errs, code := runHook(t, daemon.URL, agentKey, readFixture(t, c.kind, c.input), append([]string{"--agent", c.kind}, c.args...)...)
		name := fmt.Sprintf("%s %s input to %v", c.kind, c.input, c.args)
		if code != c.code || !strings.Contains(errs, fmt.Sprintf("%q event, not %s", c.input, c.args[0])) {
			t.Errorf("%s: exit %d stdout %q stderr %q", name, code, out, errs)
			continue
		}
		switch {
		case agents.Interceptive(c.kind, c.input):
			if !strings.Contains(out, "blocked (--on-error deny)") {
				t.Errorf("%s: not blocked: stdout %q", name, out)
			}
		case out != nothing(c.kind, c.input):
			t.Errorf("%s: stdout %q, want the harness's nothing to say %q", name, out, nothing(c.kind, c.input))
		case c.code == 0 && !strings.Contains(errs, "goes on without hookd (--on-error allow)"):
			t.Errorf("%s: stderr %q", name, errs)
		}
	}
}

// closedAddr is the address of a port nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close()
	return addr
}

// An answer that is not the daemon's — a body that is not a JSON object, cut short, or a redirect
// to some page — is not an answer: the forwarder blocks as when the daemon cannot be reached,
// never passing it on with exit 0, which every harness would take as "no objection".
func TestHookForwarderMalformedAnswer(t *testing.T) {
	redirectTo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>sign in</html>"))
	}))
	t.Cleanup(redirectTo.Close)
	answers := map[string]http.HandlerFunc{
		"html":  func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>sign in</html>")) },
		"array": func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`[{"permission":"deny"}]`)) },
		"cut short": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"`))
		},
		"empty 200": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) },
		// Claude Code's "nothing to say"; to the others the daemon answers a JSON object.
		"204": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, redirectTo.URL+"/login", http.StatusFound)
		},
	}
	events := map[string][2]string{ // pre-tool, observational
		agents.ClaudeCode: {"PreToolUse", "PostToolUse"},
		agents.Codex:      {"PreToolUse", "Stop"},
		agents.GeminiCLI:  {"BeforeTool", "AfterTool"},
		agents.Cursor:     {"beforeShellExecution", "afterShellExecution"},
	}
	for name, h := range answers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			h(w, r)
		}))
		for kind, evs := range events {
			in := readFixture(t, kind, evs[0])
			out, errs, code := runHook(t, srv.URL, agentKey, in, "--agent", kind, evs[0])
			if name == "204" && kind == agents.ClaudeCode {
				if code != 0 || out != "" || errs != "" {
					t.Errorf("204 to claude-code: exit %d stdout %q stderr %q", code, out, errs)
				}
				continue
			}
			if code != 2 || !strings.Contains(errs, "blocked (--on-error deny)") || !strings.Contains(out, "hookd:") {
				t.Errorf("%s: %s %s: exit %d stdout %q stderr %q", name, kind, evs[0], code, out, errs)
			}
			ad := agents.For(kind)
			out, errs, code = runHook(t, srv.URL, agentKey, readFixture(t, kind, evs[1]), "--agent", kind, evs[1])
			if code != 0 || !strings.Contains(errs, "--on-error allow") ||
				out != string(ad.Answer(agents.Mapped{Event: evs[1], Point: ad.Point(evs[1])}, agents.Verdict{})) {
				t.Errorf("%s: %s %s: exit %d stdout %q stderr %q", name, kind, evs[1], code, out, errs)
			}
		}
		srv.Close()
	}
}

// A forwarder that gives up waiting (its --timeout, shorter than the hook's) blocks the call;
// the decision log says the caller went away while the hook decided, not the allow of the hook's
// failureMode, which nobody was told.
func TestHookForwarderGivesUp(t *testing.T) {
	d := startAgentDaemon(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write([]byte(`{"decision":"allow"}`))
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	spec := fmt.Sprintf(`{"hookName":"slow approval","hookType":"pre_tool_use","dispatchConfig":{"url":%q,"signingSecret":%q,"timeoutMs":20000,"failureMode":"ALLOW"}}`,
		slow.URL, hookSecret)
	if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
		t.Fatalf("register: %d", s)
	}
	in := readFixture(t, agents.Codex, "PreToolUse")
	_, errs, code := runHook(t, d.url(""), agentKey, in, "--agent", agents.Codex, "PreToolUse", "--timeout", "500ms")
	if code != 2 || !strings.Contains(errs, "no answer from") {
		t.Fatalf("the forwarder giving up: exit %d %q", code, errs)
	}
	var head struct {
		Session string `json:"session_id"`
	}
	json.Unmarshal(in, &head)
	session := agents.SessionID(agents.Codex, ptr(int64(agentUser)), head.Session)
	var rows []struct{ Outcome, Error string }
	for deadline := time.Now().Add(30 * time.Second); len(rows) == 0; time.Sleep(20 * time.Millisecond) {
		// The daemon learns that its caller left when the connection closes, after the exit.
		if time.Now().After(deadline) {
			t.Fatal("no decision row")
		}
		decisionLog(t, d, session, &rows)
	}
	if len(rows) != 1 || rows[0].Outcome != "error" || !strings.Contains(rows[0].Error, "the caller went away") {
		t.Fatalf("rows %+v", rows)
	}
}

// A hook input over the forwarder's limit (a Write of a large file) is blocked, and read to its
// end first: a harness whose write of the input fails (the pipe closed by a forwarder gone before
// reading it all) has no exit code to act on, and takes the failed hook for a non-blocking error.
func TestHookForwarderReadsAnInputOverTheLimit(t *testing.T) {
	in := []byte(`{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Write","tool_input":{"file_path":"/w/big","content":"` +
		strings.Repeat("x", 2<<20) + `"}}`)
	cmd := exec.Command(binary, "hook", "--agent", agents.Codex, "PreToolUse", "--addr", "http://127.0.0.1:1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, werr := stdin.Write(in)
	stdin.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if werr != nil || !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errb.String(), "over 1 MiB") {
		t.Fatalf("writing the input: %v; exit %v %q, want the whole input read and exit 2", werr, err, errb.String())
	}
}
