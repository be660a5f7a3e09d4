package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/api/agents"
)

func newAgentsCmd() *cobra.Command {
	return newGroup("agents", "connect coding agents (Claude Code, Codex, Gemini CLI, Cursor) to hookd", newAgentsInstallCmd())
}

type installFlags struct {
	project                string
	user, write, uninstall bool
	addr, hookd            string
}

// newAgentsInstallCmd writes a harness's hook entries pointing at this daemon into its settings
// file, next to the user's own hooks, which it never removes.
func newAgentsInstallCmd() *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install KIND",
		Short: "print (or --write) the hook entries that send a coding agent's hooks to hookd",
		Long: `Merge into the harness's settings file one hook entry per event hookd has a point for:
Claude Code gets HTTP hooks to the daemon's /v1/agents/claude-code/hooks (the API key from
HOOKD_CLI_TOKEN, through allowedEnvVars, never written into the file), but on SessionStart, where
it runs only commands, the command hook "hookd hook --agent claude-code SessionStart"; Codex, Gemini CLI and Cursor
get the command hook "hookd hook --agent KIND EVENT", which reads HOOKD_CLI_ADDR and HOOKD_CLI_TOKEN.
The user's own hooks stay as they are; running it again replaces hookd's entries; --uninstall removes
only hookd's entries. Without --write it prints the merged file and writes nothing.

  claude-code  .claude/settings.json   (--user: ~/.claude/settings.json, or $CLAUDE_CONFIG_DIR/settings.json)
  codex        .codex/hooks.json       (--user: ~/.codex/hooks.json, or $CODEX_HOME/hooks.json)
  gemini-cli   .gemini/settings.json   (--user: ~/.gemini/settings.json, or $GEMINI_CLI_HOME/.gemini/settings.json)
  cursor       .cursor/hooks.json      (--user: ~/.cursor/hooks.json)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return install(cmd, f, args[0]) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.project, "project", "", "the project directory whose settings to change (default: the current directory)")
	fl.BoolVar(&f.user, "user", false, "change the user's settings in the home directory instead")
	fl.BoolVar(&f.write, "write", false, "write the file (default: print it)")
	fl.BoolVar(&f.uninstall, "uninstall", false, "remove hookd's entries only")
	fl.StringVar(&f.addr, "addr", envOr("HOOKD_CLI_ADDR", "http://127.0.0.1:8080"), "the daemon's address the hooks call (HOOKD_CLI_ADDR)")
	fl.StringVar(&f.hookd, "hookd", "", "the hookd binary the command hooks run (default: this one)")
	return cmd
}

// harnessSettings says where a harness keeps its hooks and how one of hookd's entries looks.
type harnessSettings struct {
	dir, file string
	// homeEnv is the variable that moves the harness's user directory (~/dir) elsewhere, and
	// homeDirEnv the one that stands for the home directory itself (HOME/dir): --user writes
	// where they say, when set, as the harness then reads no other.
	homeEnv, homeDirEnv string
	// entry is hookd's hook for one event, in the harness's shape; grouped says whether the
	// event's list holds matcher groups ({"hooks": [entry]}) rather than entries (Cursor).
	entry   func(f installFlags, kind, event string) map[string]any
	grouped bool
}

var settingsOf = map[string]harnessSettings{
	agents.ClaudeCode: {dir: ".claude", file: "settings.json", homeEnv: "CLAUDE_CONFIG_DIR", grouped: true, entry: func(f installFlags, kind, event string) map[string]any {
		if event == "SessionStart" { // Claude Code runs no HTTP hook there, only commands
			return map[string]any{"type": "command", "command": hookCommand(f, kind, event), "timeout": 15}
		}
		e := map[string]any{"type": "http", "url": hookURL(f.addr, kind), "timeout": 15,
			"headers": map[string]any{"Authorization": "Bearer $HOOKD_CLI_TOKEN"}, "allowedEnvVars": []any{"HOOKD_CLI_TOKEN"}}
		if agents.Interceptive(kind, event) {
			e["onFailure"] = "block" // a daemon that cannot be reached blocks, as the forwarder does
		}
		return e
	}},
	agents.Codex: {dir: ".codex", file: "hooks.json", homeEnv: "CODEX_HOME", grouped: true, entry: func(f installFlags, kind, event string) map[string]any {
		return map[string]any{"type": "command", "command": shellFailClosed(kind, event, hookCommand(f, kind, event)), "timeout": 15}
	}},
	agents.GeminiCLI: {dir: ".gemini", file: "settings.json", homeDirEnv: "GEMINI_CLI_HOME", grouped: true, entry: func(f installFlags, kind, event string) map[string]any {
		return map[string]any{"type": "command", "name": "hookd", "command": shellFailClosed(kind, event, hookCommand(f, kind, event)), "timeout": 15000}
	}},
	agents.Cursor: {dir: ".cursor", file: "hooks.json", entry: func(f installFlags, kind, event string) map[string]any {
		var flags []string
		if event == "preToolUse" || event == "postToolUse" {
			// The tool-specific events are installed beside them (every event hookd has a point
			// for is), and decide their calls once.
			flags = append(flags, "--cursor-tool-events")
		}
		e := map[string]any{"command": hookCommand(f, kind, event, flags...)}
		if agents.Interceptive(kind, event) {
			e["failClosed"] = true // a forwarder that crashes or is killed blocks, as Claude Code's onFailure
		}
		return e
	}},
}

func hookURL(addr, kind string) string {
	return strings.TrimRight(addr, "/") + "/v1/agents/" + kind + "/hooks"
}

// hookCommand is the forwarder's command line with flags; the address is on it only when it is
// not the default, so that HOOKD_CLI_ADDR keeps working.
func hookCommand(f installFlags, kind, event string, flags ...string) string {
	c := shellQuote(f.hookd) + " hook --agent " + kind
	if f.addr != "http://127.0.0.1:8080" {
		c += " --addr " + shellQuote(f.addr)
	}
	for _, fl := range flags {
		c += " " + fl
	}
	return c + " " + event
}

// shellFailClosed is the command line c of a harness that runs its command hooks through the
// shell (sh -c, bash -c) and has no setting that makes a failed hook block: at an event hookd
// decides, an exit of c other than 0 or 2 is made a 2. The harness takes exit 2 for a block, and
// any other code for a non-blocking error that lets the call through — what a forwarder that
// cannot start gives (127: its binary gone with an upgrade, the install having written the path a
// link led to), or one killed (128+n). (Claude Code's entries say "onFailure": "block", Cursor's
// "failClosed": true.) On Windows the harnesses may run the line with Windows PowerShell 5.1 (Gemini
// CLI does when PowerShell 7 is not installed), which refuses || as a syntax error, and that
// error would be the non-blocking one on every call: there the line is left as it is.
func shellFailClosed(kind, event, c string) string {
	if runtime.GOOS != "windows" && agents.Interceptive(kind, event) {
		return c + " || exit 2"
	}
	return c
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isHookd says whether a hook entry is one hookd installed for kind, bin being the binary this
// install writes into commands. An HTTP hook is hookd's when it calls the agents route of kind with
// the CLI's token, hookd's own variable: another service's hook on a URL of the same path has no
// reason to pass it. A command is hookd's when it runs a hookd binary's forwarder for one of
// kind's events as its first command — this binary, or one whose name starts with hookd (an
// install by another build, hookd-linux-amd64, must be replaced, not doubled): "~/bin/audit hook
// --agent …" and "echo …; hookd hook --agent …" are the user's.
func isHookd(e map[string]any, kind, bin string) bool {
	if u, ok := e["url"].(string); ok {
		vars, _ := e["allowedEnvVars"].([]any)
		return strings.HasSuffix(u, "/v1/agents/"+kind+"/hooks") && slices.Contains(vars, any("HOOKD_CLI_TOKEN"))
	}
	c, _ := e["command"].(string)
	w := shellWords(c, 16) // the binary, hook --agent KIND, its flags, the event
	return len(w) >= 5 && (w[0] == bin || strings.HasPrefix(filepath.Base(w[0]), "hookd")) && w[1] == "hook" &&
		w[2] == "--agent" && w[3] == kind && slices.Contains(agents.Events(kind), w[len(w)-1])
}

// shellWords is the first n words of the command line c as sh reads them, for the plain commands
// hookCommand writes: blanks part words, '…' and "…" quote, a backslash escapes the next
// character. It stops at the first character that ends or redirects a simple command or expands
// (; & | < > ( ) ` $ #), so that what follows is never taken for the first command's words.
func shellWords(c string, n int) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(c) && len(words) < n; i++ {
		switch ch := c[i]; {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
			continue
		case strings.IndexByte(";&|<>()`$#", ch) >= 0:
			if inWord && ch != '$' && ch != '#' { // a$b and a#b are one word whose end is unknown here
				words = append(words, w.String())
			}
			return words
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(c[i+1:], ch)
			if end < 0 {
				return words // an unfinished quote: sh refuses the line
			}
			w.WriteString(c[i+1 : i+1+end])
			i += end + 1
		case ch == '\\' && i+1 < len(c):
			i++
			w.WriteByte(c[i])
		default:
			w.WriteByte(ch)
		}
		inWord = true
	}
	if inWord && len(words) < n {
		words = append(words, w.String())
	}
	return words
}

func install(cmd *cobra.Command, f installFlags, kind string) error {
	hs, ok := settingsOf[kind]
	if !ok {
		return usageErrorf("KIND: %q is not one of %s", kind, strings.Join(agents.Kinds, ", "))
	}
	if f.user && f.project != "" {
		return usageErrorf("--user and --project: choose one")
	}
	base := f.project
	if f.user {
		home, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		base = home
		if moved := os.Getenv(hs.homeDirEnv); hs.homeDirEnv != "" && moved != "" {
			base = moved
		}
	} else if base == "" {
		base = "."
	}
	if f.hookd == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		f.hookd = exe
	}
	path := filepath.Join(base, hs.dir, hs.file)
	if f.user && hs.homeEnv != "" {
		if moved := os.Getenv(hs.homeEnv); moved != "" {
			path = filepath.Join(moved, hs.file)
		}
	}
	doc := map[string]any{}
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && f.uninstall:
		// Nothing to remove, and no file to make: one with no hooks (no version, for Cursor)
		// is not a file the harness wrote or reads as meant.
		fmt.Fprintf(cmd.OutOrStdout(), "%s does not exist: nothing of hookd's to remove\n", path)
		return nil
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		// Numbers are kept as written (a float64 would round a long one).
		dec := json.NewDecoder(bytes.NewReader(old))
		dec.UseNumber()
		err := dec.Decode(&doc)
		if err == nil && len(bytes.TrimSpace(old[dec.InputOffset():])) > 0 {
			err = errors.New("text after the JSON object")
		}
		if syn := (*json.SyntaxError)(nil); errors.As(err, &syn) && hasComment(old, syn.Offset) {
			// Gemini CLI reads its settings.json with comments; a rewrite could not keep them.
			return fmt.Errorf("%s has comments (// or /* */), which hookd cannot keep when it rewrites the file, "+
				"so it is left alone: remove them, or copy hookd's entries into it by hand from what "+
				"`hookd agents install %s --project EMPTY_DIR` prints", path, kind)
		}
		if err != nil || doc == nil {
			return fmt.Errorf("%s is not a JSON object, so it is left alone: %v", path, err)
		}
	}
	if err := mergeHooks(doc, hs, f, kind); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Written without HTML escapes, so that a hook command's "&&" or "<" stays as the user wrote it.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	out := buf.Bytes()
	if !f.write {
		_, err := cmd.OutOrStdout().Write(out)
		fmt.Fprintf(cmd.ErrOrStderr(), "hookd: this is %s as --write would leave it\n", path)
		return err
	}
	if bytes.Equal(out, old) {
		fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date\n", path)
		return nil
	}
	if err := writeFileAtomic(path, out); err != nil {
		return err
	}
	what := "hookd's hooks written to"
	if f.uninstall {
		what = "hookd's hooks removed from"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", what, path)
	return nil
}

// mergeHooks removes hookd's entries of kind from doc's "hooks" and, unless uninstalling, adds
// one for each event hookd has a point for. Everything else in doc stays.
// hasComment says the JSON syntax error at offset (one past the byte refused) is the start of a
// // or /* comment.
func hasComment(b []byte, offset int64) bool {
	i := int(offset) - 1
	return i >= 0 && i+1 < len(b) && b[i] == '/' && (b[i+1] == '/' || b[i+1] == '*')
}

func mergeHooks(doc map[string]any, hs harnessSettings, f installFlags, kind string) error {
	hooks, ok := doc["hooks"].(map[string]any)
	if doc["hooks"] != nil && !ok {
		return errors.New(`"hooks" is not an object`)
	}
	if hooks == nil {
		hooks = map[string]any{}
	}
	// emptied: an event's list held only hookd's entries. When that leaves "hooks" empty, an
	// uninstall removes "hooks" too, as install found the file; an event list or a "hooks" that
	// the user left empty stays.
	emptied := false
	for event, v := range hooks {
		list, ok := v.([]any)
		if !ok {
			continue // not hookd's to judge
		}
		kept := list[:0:0]
		for _, item := range list {
			m, _ := item.(map[string]any)
			switch {
			case m == nil:
				kept = append(kept, item)
			case !hs.grouped:
				if !isHookd(m, kind, f.hookd) {
					kept = append(kept, item)
				}
			default:
				inner, ok := m["hooks"].([]any)
				if !ok {
					kept = append(kept, item)
					break
				}
				rest := inner[:0:0]
				for _, h := range inner {
					if hm, _ := h.(map[string]any); hm == nil || !isHookd(hm, kind, f.hookd) {
						rest = append(rest, h)
					}
				}
				if len(rest) > 0 || len(inner) == 0 {
					m["hooks"] = rest
					kept = append(kept, m)
				}
			}
		}
		switch {
		case len(kept) == len(list): // nothing of hookd's: left as it was
		case len(kept) == 0:
			delete(hooks, event)
			emptied = true
		default:
			hooks[event] = kept
		}
	}
	if !f.uninstall {
		for _, event := range agents.Events(kind) {
			var item any = hs.entry(f, kind, event)
			if hs.grouped {
				item = map[string]any{"hooks": []any{item}}
			}
			list, ok := hooks[event].([]any)
			if hooks[event] != nil && !ok {
				return fmt.Errorf(`"hooks.%s" is not a list, so hookd's entry has no place`, event)
			}
			hooks[event] = append(list, item)
		}
	}
	if len(hooks) == 0 && emptied {
		delete(doc, "hooks")
	} else {
		doc["hooks"] = hooks
	}
	if kind == agents.Cursor && doc["version"] == nil && !f.uninstall { // hooks.json's format needs it
		doc["version"] = 1
	}
	return nil
}

// writeFileAtomic replaces path with b, keeping an existing file's mode. A path that is a link (a
// settings file kept with the user's dotfiles) is written where it leads, so the link stays.
func writeFileAtomic(path string, b []byte) error {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%s is a link that leads nowhere, so it is left alone: %w", path, err)
		}
		path = target
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
