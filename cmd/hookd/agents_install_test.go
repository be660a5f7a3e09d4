package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
)

// A project's settings with the user's own hooks for each harness.
var userSettings = map[string]struct{ path, body string }{
	agents.ClaudeCode: {".claude/settings.json", `{"permissions": {"allow": ["Bash(make test)"]},
 "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/check-bash.sh"}]}],
           "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}]}}`},
	agents.Codex: {".codex/hooks.json", `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./scripts/summarize.py", "timeout": 30}]}]}}`},
	agents.GeminiCLI: {".gemini/settings.json", `{"theme": "GitHub", "hooks": {"BeforeTool": [{"matcher": "write_file",
 "hooks": [{"type": "command", "command": "./lint.sh", "name": "lint"}]}]}}`},
	agents.Cursor: {".cursor/hooks.json", `{"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}],
 "beforeShellExecution": [{"command": "./audit.sh"}]}}`},
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// hookdEntries counts hookd's entries per event in a settings document.
func hookdEntries(doc map[string]any, kind string) map[string]int {
	n := map[string]int{}
	hooks, _ := doc["hooks"].(map[string]any)
	for event, v := range hooks {
		list, _ := v.([]any)
		for _, item := range list {
			m, _ := item.(map[string]any)
			inner, grouped := m["hooks"].([]any)
			if !grouped {
				inner = []any{m}
			}
			for _, h := range inner {
				if hm, _ := h.(map[string]any); hm != nil && isHookd(hm, kind, binary) {
					n[event]++
				}
			}
		}
	}
	return n
}

// agents install merges hookd's entries next to the user's hooks, prints without --write, is
// idempotent, and --uninstall gives back the user's file as it was.
func TestAgentsInstall(t *testing.T) {
	for kind, s := range userSettings {
		dir := t.TempDir()
		path := filepath.Join(dir, s.path)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(s.body), 0o600); err != nil {
			t.Fatal(err)
		}
		before := readJSON(t, path)

		out, errs, code := runCLI(t, "agents", "install", kind, "--project", dir, "--addr", "http://hookd.internal:8080")
		if code != 0 || !strings.Contains(errs, path) {
			t.Fatalf("%s print: %d %s", kind, code, errs)
		}
		var printed map[string]any
		if err := json.Unmarshal([]byte(out), &printed); err != nil {
			t.Fatalf("%s print: %v\n%s", kind, err, out)
		}
		if !reflect.DeepEqual(readJSON(t, path), before) {
			t.Fatalf("%s: printing changed the file", kind)
		}

		for round := 0; round < 2; round++ {
			if _, errs, code := runCLI(t, "agents", "install", kind, "--project", dir, "--write", "--addr", "http://hookd.internal:8080"); code != 0 {
				t.Fatalf("%s write: %d %s", kind, code, errs)
			}
			doc := readJSON(t, path)
			if round == 0 && !reflect.DeepEqual(doc, printed) {
				t.Errorf("%s: the written file differs from the printed one", kind)
			}
			n := hookdEntries(doc, kind)
			for _, ev := range agents.Events(kind) {
				if n[ev] != 1 {
					t.Errorf("%s round %d: %d hookd entries for %s: %v", kind, round, n[ev], ev, n)
				}
			}
			if len(n) != len(agents.Events(kind)) {
				t.Errorf("%s: hookd entries for %v, want %v", kind, n, agents.Events(kind))
			}
			// The user's hooks are all still there.
			var userLeft func(v any) bool
			userLeft = func(v any) bool {
				switch v := v.(type) {
				case map[string]any:
					if c, _ := v["command"].(string); c != "" && strings.HasPrefix(c, "./") || strings.HasPrefix(c, "notify") {
						return true
					}
					for _, x := range v {
						if userLeft(x) {
							return true
						}
					}
				case []any:
					for _, x := range v {
						if userLeft(x) {
							return true
						}
					}
				}
				return false
			}
			if !userLeft(doc["hooks"]) {
				t.Errorf("%s: the user's hooks are gone: %v", kind, doc["hooks"])
			}
		}
		raw, _ := os.ReadFile(path)
		if kind == agents.ClaudeCode {
			if strings.Contains(string(raw), agentKey) || !strings.Contains(string(raw), `"$HOOKD_CLI_TOKEN"`) && !strings.Contains(string(raw), "Bearer $HOOKD_CLI_TOKEN") ||
				!strings.Contains(string(raw), "http://hookd.internal:8080/v1/agents/claude-code/hooks") || !strings.Contains(string(raw), `"onFailure": "block"`) {
				t.Errorf("claude-code settings:\n%s", raw)
			}
		} else if !strings.Contains(string(raw), " hook --agent "+kind+" --addr http://hookd.internal:8080 ") {
			t.Errorf("%s settings:\n%s", kind, raw)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", kind, st.Mode())
		}

		if _, errs, code := runCLI(t, "agents", "install", kind, "--project", dir, "--write", "--uninstall"); code != 0 {
			t.Fatalf("%s uninstall: %d %s", kind, code, errs)
		}
		if after := readJSON(t, path); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: uninstall left\n%v\nwant\n%v", kind, after, before)
		}
	}

	// A file that is not JSON is left alone; an unknown kind and --user with --project are misuse.
	dir := t.TempDir()
	bad := filepath.Join(dir, ".codex", "hooks.json")
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte("# not json"), 0o644)
	if _, errs, code := runCLI(t, "agents", "install", "codex", "--project", dir, "--write"); code != 1 || !strings.Contains(errs, "not a JSON object") {
		t.Errorf("not JSON: %d %s", code, errs)
	}
	// Gemini CLI's settings.json may hold comments, which a rewrite would lose: refused, saying so.
	commented := filepath.Join(dir, ".gemini", "settings.json")
	os.MkdirAll(filepath.Dir(commented), 0o755)
	for _, text := range []string{"{\n  // the theme\n  \"theme\": \"dark\"\n}", "{/* x */}"} {
		os.WriteFile(commented, []byte(text), 0o644)
		if _, errs, code := runCLI(t, "agents", "install", "gemini-cli", "--project", dir, "--write"); code != 1 || !strings.Contains(errs, "has comments") {
			t.Errorf("comments: %d %s", code, errs)
		}
		if b, _ := os.ReadFile(commented); string(b) != text {
			t.Errorf("commented file changed: %s", b)
		}
	}
	// An uninstall where no settings file is removes nothing and makes no file.
	none := t.TempDir()
	for kind := range userSettings {
		if out, errs, code := runCLI(t, "agents", "install", kind, "--project", none, "--write", "--uninstall"); code != 0 ||
			!strings.Contains(out, "nothing of hookd's to remove") {
			t.Errorf("%s uninstall without a file: %d %s %s", kind, code, out, errs)
		}
	}
	if entries, _ := os.ReadDir(none); len(entries) != 0 {
		t.Errorf("an uninstall without a settings file made %v", entries)
	}
	for _, args := range [][]string{{"agents", "install", "claude"}, {"agents", "install", "codex", "--user", "--project", dir}} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
}

// Claude Code runs only command hooks on SessionStart (an HTTP hook there never fires), so hookd's
// SessionStart entry is the forwarder, and that command, run as Claude Code runs it, reaches the
// daemon: the session's start is in the record like every other point.
func TestAgentsInstallClaudeSessionStart(t *testing.T) {
	d := startAgentDaemon(t)
	recv := newAgentReceiver(t)
	spec := fmt.Sprintf(`{"hookName":"team session_start","hookType":"session_start","dispatchConfig":{"url":%q,"signingSecret":%q}}`,
		recv.srv.URL, hookSecret)
	if s := d.call("POST", "/api/hooks", spec, nil); s != http.StatusCreated {
		t.Fatalf("register: %d", s)
	}
	dir := t.TempDir()
	if _, errs, code := runCLI(t, "agents", "install", agents.ClaudeCode, "--project", dir, "--write", "--addr", d.url("")); code != 0 {
		t.Fatalf("install: %d %s", code, errs)
	}
	doc := readJSON(t, filepath.Join(dir, ".claude", "settings.json"))
	var starts []map[string]any
	for _, g := range doc["hooks"].(map[string]any)["SessionStart"].([]any) {
		for _, h := range g.(map[string]any)["hooks"].([]any) {
			starts = append(starts, h.(map[string]any))
		}
	}
	if len(starts) != 1 || starts[0]["type"] != "command" || !isHookd(starts[0], agents.ClaudeCode, binary) {
		t.Fatalf("SessionStart entries: %v", starts)
	}
	for ev, groups := range doc["hooks"].(map[string]any) {
		for _, g := range groups.([]any) {
			for _, h := range g.(map[string]any)["hooks"].([]any) {
				if typ := h.(map[string]any)["type"]; ev != "SessionStart" && typ != "http" {
					t.Errorf("%s: a %v hook", ev, typ)
				}
			}
		}
	}
	cmd := exec.Command("sh", "-c", starts[0]["command"].(string))
	cmd.Env = append(os.Environ(), "HOOKD_CLI_TOKEN="+agentKey)
	cmd.Stdin = bytes.NewReader(readFixture(t, agents.ClaudeCode, "SessionStart"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || out.Len() != 0 || errb.Len() != 0 {
		t.Fatalf("the SessionStart command: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	if env := recv.next(t); env.HookType != dispatcher.SessionStart || !strings.Contains(string(env.Context), `"agentKind":"claude-code"`) {
		t.Errorf("delivered: %s %s", env.HookType, env.Context)
	}
	// Uninstall removes the command hook too.
	if _, errs, code := runCLI(t, "agents", "install", agents.ClaudeCode, "--project", dir, "--write", "--uninstall"); code != 0 {
		t.Fatalf("uninstall: %d %s", code, errs)
	}
	if n := hookdEntries(readJSON(t, filepath.Join(dir, ".claude", "settings.json")), agents.ClaudeCode); len(n) != 0 {
		t.Errorf("left after uninstall: %v", n)
	}
}

// The rest of the user's file is kept as written: numbers keep every digit, and a hook command's
// "&&" or "<" stays readable rather than becoming \u0026 escapes.
func TestAgentsInstallKeepsValues(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(`{"cleanupPeriodDays": 12345678901234567890, "ratio": 0.1,
 "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "cd build && make < /dev/null"}]}]}}`), 0o644)
	for _, args := range [][]string{{"--write"}, {"--write", "--uninstall"}} {
		if _, errs, code := runCLI(t, append([]string{"agents", "install", agents.ClaudeCode, "--project", dir}, args...)...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errs)
		}
		raw, _ := os.ReadFile(path)
		for _, want := range []string{"12345678901234567890", `"ratio": 0.1`, `"cd build && make < /dev/null"`} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("%v: %s is gone:\n%s", args, want, raw)
			}
		}
	}
}

// An event whose value is not a list is not hookd's to replace: the file is left alone, naming it.
func TestAgentsInstallEventNotAList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".codex", "hooks.json")
	os.MkdirAll(filepath.Dir(path), 0o755)
	body := `{"hooks": {"PreToolUse": {"command": "./guard.sh"}}}`
	os.WriteFile(path, []byte(body), 0o644)
	if _, errs, code := runCLI(t, "agents", "install", agents.Codex, "--project", dir, "--write"); code != 1 || !strings.Contains(errs, "PreToolUse") {
		t.Errorf("install: %d %s", code, errs)
	}
	if raw, _ := os.ReadFile(path); string(raw) != body {
		t.Errorf("the file changed:\n%s", raw)
	}
}

// Cursor lets the action through when a hook crashes, times out or prints no valid answer, unless
// the entry says "failClosed": true; hookd's entries on the events it decides say so, as Claude
// Code's say "onFailure": "block", and the others do not (an observer must not stop the agent).
func TestAgentsInstallCursorFailClosed(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := runCLI(t, "agents", "install", agents.Cursor, "--project", dir, "--write"); code != 0 {
		t.Fatalf("install: %d %s", code, errs)
	}
	doc := readJSON(t, filepath.Join(dir, ".cursor", "hooks.json"))
	for _, ev := range agents.Events(agents.Cursor) {
		entries := doc["hooks"].(map[string]any)[ev].([]any)
		if len(entries) != 1 {
			t.Fatalf("%s: %v", ev, entries)
		}
		fc, _ := entries[0].(map[string]any)["failClosed"].(bool)
		if fc != agents.Interceptive(agents.Cursor, ev) {
			t.Errorf("%s: failClosed %v", ev, entries[0])
		}
	}
}

// Codex and Gemini CLI run a command hook through the shell and take any exit but 0 and 2 for a
// non-blocking error that lets the call through. hookd's entries at the events it decides block
// when the forwarder cannot start (its binary gone with an upgrade: exit 127), and run as the
// harness runs them, through sh -c; the other events still go on. A second install replaces them.
func TestAgentsInstallForwarderGoneBlocks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the entries end in || exit 2 only where the harnesses run them with sh or bash")
	}
	gone := filepath.Join(t.TempDir(), "hookd-1.2", "hookd")
	for _, c := range []struct{ kind, path, decided, observed, decidedIn, observedIn string }{
		{agents.Codex, ".codex/hooks.json", "PreToolUse", "PostToolUse",
			`{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`,
			`{"hook_event_name":"PostToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"command":"ls"}}`},
		{agents.GeminiCLI, ".gemini/settings.json", "BeforeTool", "AfterTool",
			`{"hook_event_name":"BeforeTool","session_id":"s1","tool_name":"run_shell_command","tool_input":{"command":"rm -rf /"}}`,
			`{"hook_event_name":"AfterTool","session_id":"s1","tool_name":"run_shell_command","tool_input":{"command":"ls"}}`},
	} {
		dir := t.TempDir()
		for range 2 {
			if _, errs, code := runCLI(t, "agents", "install", c.kind, "--project", dir, "--write", "--hookd", gone); code != 0 {
				t.Fatalf("%s install: %d %s", c.kind, code, errs)
			}
		}
		hooks := readJSON(t, filepath.Join(dir, c.path))["hooks"].(map[string]any)
		run := func(event, input string) int {
			groups := hooks[event].([]any)
			if len(groups) != 1 {
				t.Fatalf("%s %s: %v", c.kind, event, groups)
			}
			command := groups[0].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"].(string)
			cmd := exec.Command("sh", "-c", command)
			cmd.Stdin = strings.NewReader(input)
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return 0
		}
		if code := run(c.decided, c.decidedIn); code != 2 {
			t.Errorf("%s %s without its forwarder: exit %d, want 2 (a block)", c.kind, c.decided, code)
		}
		if code := run(c.observed, c.observedIn); code == 2 || code == 0 {
			t.Errorf("%s %s without its forwarder: exit %d, want the shell's own error (not a block)", c.kind, c.observed, code)
		}
	}
}

// Claude Code reads its user settings from $CLAUDE_CONFIG_DIR, Codex from $CODEX_HOME and Gemini
// CLI from $GEMINI_CLI_HOME/.gemini when they are set, and never from the home directory then: --user writes there, or the entries
// would be in a file the harness does not read, and nothing governed.
func TestAgentsInstallUserHomeMoved(t *testing.T) {
	for kind, c := range map[string]struct{ env, file string }{
		agents.ClaudeCode: {"CLAUDE_CONFIG_DIR", "settings.json"},
		agents.Codex:      {"CODEX_HOME", "hooks.json"},
		agents.GeminiCLI:  {"GEMINI_CLI_HOME", ".gemini/settings.json"}, // a home directory of its own
	} {
		home, moved := t.TempDir(), t.TempDir()
		cmd := exec.Command(binary, "agents", "install", kind, "--user", "--write")
		cmd.Env = append(os.Environ(), "HOME="+home, c.env+"="+moved)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", kind, err, out)
		}
		if n := hookdEntries(readJSON(t, filepath.Join(moved, c.file)), kind); len(n) != len(agents.Events(kind)) {
			t.Errorf("%s: hookd's entries in $%s/%s: %v", kind, c.env, c.file, n)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("%s: written into the home directory, which the harness does not read with %s set: %v", kind, c.env, entries)
		}
	}
}

// What only looks like hookd's is the user's: another service's HTTP hook on a URL of the agents
// route's path (without hookd's token variable), a wrapper of another name run with hookd's
// flags, a hookd forwarder after another command; and an event the user left empty. Install and
// uninstall keep them all, and through a settings file that is a link (dotfiles in a repository),
// which stays a link: the file ends as it began.
func TestAgentsInstallKeepsLookalikes(t *testing.T) {
	dir := t.TempDir()
	dotfiles := filepath.Join(dir, "dotfiles", "claude-settings.json")
	os.MkdirAll(filepath.Dir(dotfiles), 0o755)
	body := `{"model": "opus", "hooks": {
 "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "http", "url": "https://policy.other-team.example/v1/agents/claude-code/hooks", "timeout": 5}]}],
 "Stop": [{"hooks": [{"type": "command", "command": "~/bin/audit hook --agent claude-code --log /var/log/x"}]}],
 "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo start; hookd hook --agent claude-code SessionStart"}]}],
 "Notification": []}}`
	os.WriteFile(dotfiles, []byte(body), 0o644)
	project := filepath.Join(dir, "project")
	link := filepath.Join(project, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink("../../dotfiles/claude-settings.json", link); err != nil {
		t.Fatal(err)
	}
	before := readJSON(t, dotfiles)

	if _, errs, code := runCLI(t, "agents", "install", agents.ClaudeCode, "--project", project, "--write"); code != 0 {
		t.Fatalf("install: %d %s", code, errs)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is gone: %v %v", st, err)
	}
	doc := readJSON(t, dotfiles)
	if n := hookdEntries(doc, agents.ClaudeCode); n["PreToolUse"] != 1 || n["Stop"] != 1 || n["SessionStart"] != 1 {
		t.Errorf("hookd's entries: %v", n)
	}
	hooks := doc["hooks"].(map[string]any)
	for event, n := range map[string]int{"PreToolUse": 2, "Stop": 2, "SessionStart": 2} {
		if got := len(hooks[event].([]any)); got != n {
			t.Errorf("%s holds %d groups, want the user's and hookd's: %v", event, got, hooks[event])
		}
	}

	if _, errs, code := runCLI(t, "agents", "install", agents.ClaudeCode, "--project", project, "--write", "--uninstall"); code != 0 {
		t.Fatalf("uninstall: %d %s", code, errs)
	}
	if after := readJSON(t, dotfiles); !reflect.DeepEqual(after, before) {
		t.Errorf("uninstall left\n%v\nwant\n%v", after, before)
	}

	// Another build's install (a binary named hookd-linux-amd64 elsewhere) is replaced by this
	// one's, not doubled, and uninstall removes both builds' entries.
	p := t.TempDir()
	for _, args := range [][]string{{"--hookd", "/opt/hookd-1.4/hookd-linux-amd64"}, nil, {"--uninstall"}} {
		if _, errs, code := runCLI(t, append([]string{"agents", "install", agents.Codex, "--project", p, "--write"}, args...)...); code != 0 {
			t.Fatalf("codex %v: %d %s", args, code, errs)
		}
		doc := readJSON(t, filepath.Join(p, settingsOf[agents.Codex].dir, settingsOf[agents.Codex].file))
		hooks, _ := doc["hooks"].(map[string]any)
		pre, _ := hooks["PreToolUse"].([]any)
		if want := map[bool]int{true: 0, false: 1}[len(args) == 1 && args[0] == "--uninstall"]; len(pre) != want {
			t.Errorf("codex after %v: PreToolUse holds %d entries, want %d: %v", args, len(pre), want, pre)
		}
	}

	// A file that install made, and no more, is {} again after uninstall; Cursor's keeps the
	// version its format needs.
	for kind, want := range map[string]string{agents.Codex: `{}`, agents.Cursor: `{"version": 1}`} {
		p := t.TempDir()
		for _, args := range [][]string{{"--write"}, {"--write", "--uninstall"}} {
			if _, errs, code := runCLI(t, append([]string{"agents", "install", kind, "--project", p}, args...)...); code != 0 {
				t.Fatalf("%s %v: %d %s", kind, args, code, errs)
			}
		}
		var w map[string]any
		json.Unmarshal([]byte(want), &w)
		if got := readJSON(t, filepath.Join(p, settingsOf[kind].dir, settingsOf[kind].file)); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: uninstall left %v, want %s", kind, got, want)
		}
	}
}

func TestShellWords(t *testing.T) {
	for c, want := range map[string][]string{
		"/usr/local/bin/hookd hook --agent codex PreToolUse":      {"/usr/local/bin/hookd", "hook", "--agent", "codex"},
		"'/opt/my tools/hookd' hook --agent cursor --addr x stop": {"/opt/my tools/hookd", "hook", "--agent", "cursor"},
		`"/opt/a b/hookd"  hook	--agent gemini-cli`:               {"/opt/a b/hookd", "hook", "--agent", "gemini-cli"},
		`/opt/it\'s/hookd hook --agent codex`:                     {"/opt/it's/hookd", "hook", "--agent", "codex"},
		"echo start; hookd hook --agent claude-code SessionStart": {"echo", "start"},
		"cd x && hookd hook --agent codex Stop":                   {"cd", "x"},
		"$HOME/bin/hookd hook --agent codex Stop":                 nil,
		"'unfinished hook --agent codex":                          nil,
		"hookd hook":                                              {"hookd", "hook"},
	} {
		if got := shellWords(c, 4); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %q, want %q", c, got, want)
		}
	}
}
