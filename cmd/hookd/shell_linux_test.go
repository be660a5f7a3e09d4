package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/tools"
)

// The shell's sandbox through the daemon's binary: a shell_execute command of one session works
// in its own workspace and sees neither another session's workspace, the master key, the
// database, the config nor the daemon's listening socket (its network is its own). The same command with agent.shell.sandbox: none sees them all, which
// shows the command would have told.
func TestShellSandboxEndToEnd(t *testing.T) {
	if err := (&tools.Sandbox{Exe: binary}).Check(); err != nil {
		t.Skipf("this machine refuses the shell's sandbox (%v): nothing to test", err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ws, db, masterKey := filepath.Join(data, "workspaces"), filepath.Join(data, "hookd.db"), filepath.Join(data, "master.key")
	cfgPath := filepath.Join(dir, "hookd.yaml")
	peek := fmt.Sprintf("{ cat %[1]s/*/a.txt; ls %[1]s; cat %[2]s; cat %[3]s; head -c 15 %[4]s; } > peek.txt 2>&1; pwd > where.txt; cat /proc/net/tcp > tcp.txt",
		ws, masterKey, cfgPath, db)
	script := map[string]any{"scripts": []any{
		shellScript("/write/", "printf A-SECRET > a.txt && cat a.txt"),
		shellScript("/peek/", peek),
	}}
	scriptPath := filepath.Join(dir, "script.json")
	if b, err := json.Marshal(script); err != nil || os.WriteFile(scriptPath, b, 0o600) != nil {
		t.Fatal(err)
	}
	config := func(sandbox string) string {
		return writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
agent: {toolDefault: allow, shell: {enabled: true, sandbox: %s}}
`, db, scriptPath, sandbox))
	}
	chat := func(d *daemon, session, input string) {
		t.Helper()
		out := d.stream("/harness/chat", `{"sessionId":"`+session+`","userId":"tester","input":"`+input+`"}`, "key-test")
		if !strings.Contains(out, "done") {
			t.Fatalf("chat %s %s: %s\n%s", session, input, out, d.log())
		}
	}
	// read returns the file of that name in a session's workspace, and the workspace.
	read := func(name string) (text, workspace string) {
		t.Helper()
		paths, _ := filepath.Glob(filepath.Join(ws, "*", name))
		if len(paths) != 1 {
			t.Fatalf("%s in the workspaces: %v", name, paths)
		}
		b, err := os.ReadFile(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(b), filepath.Dir(paths[0])
	}
	// listening is the daemon's address as /proc/net/tcp writes it.
	listening := func(d *daemon) string {
		t.Helper()
		_, port, err := net.SplitHostPort(d.addr)
		n, err2 := strconv.Atoi(port)
		if err != nil || err2 != nil {
			t.Fatalf("the daemon's address %q", d.addr)
		}
		return fmt.Sprintf("0100007F:%04X", n)
	}

	d := startDaemon(t, config("namespaces"))
	d.waitLog("shell_execute commands run sandboxed")
	chat(d, "s-a", "/write/")
	if text, _ := read("a.txt"); text != "A-SECRET" {
		t.Fatalf("a.txt: %q", text)
	}
	key, err := os.ReadFile(masterKey)
	if err != nil {
		t.Fatal(err)
	}
	chat(d, "s-b", "/peek/")
	where, own := read("where.txt")
	seen, _ := read("peek.txt")
	t.Logf("sandboxed, from %s: %s", own, seen)
	if where != own+"\n" {
		t.Errorf("the command ran in %q, not in its workspace %s", where, own)
	}
	for what, s := range map[string]string{"another session's file": "A-SECRET", "the master key": strings.TrimSpace(string(key)),
		"the config": "adm-test", "the database": "SQLite format"} {
		if strings.Contains(seen, s) {
			t.Errorf("a sandboxed command saw %s: %s", what, seen)
		}
	}
	if ls := filepath.Base(own) + "\n"; !strings.Contains(seen, "No such file") || !strings.Contains(seen, "\n"+ls) {
		t.Errorf("the workspaces a sandboxed command sees are not just its own (%s): %s", ls, seen)
	}
	if sockets, _ := read("tcp.txt"); !strings.Contains(sockets, "local_address") || strings.Contains(sockets, listening(d)) {
		t.Errorf("a sandboxed command sees the daemon's socket %s: %s", listening(d), sockets)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done

	// The control: unsandboxed, the same command sees it all.
	for _, name := range []string{"peek.txt", "where.txt", "tcp.txt"} {
		if err := os.Remove(filepath.Join(own, name)); err != nil {
			t.Fatal(err)
		}
	}
	d = startDaemon(t, config("none"))
	d.waitLog("agent.shell.sandbox is none")
	chat(d, "s-c", "/peek/")
	if seen, _ = read("peek.txt"); !strings.Contains(seen, "A-SECRET") || !strings.Contains(seen, strings.TrimSpace(string(key))) ||
		!strings.Contains(seen, "adm-test") || !strings.Contains(seen, "SQLite format") {
		t.Errorf("unsandboxed, the command did not see what the sandbox hid: %s", seen)
	}
	if sockets, _ := read("tcp.txt"); !strings.Contains(sockets, listening(d)) {
		t.Errorf("unsandboxed, the command did not see the daemon's socket %s: %s", listening(d), sockets)
	}
}

// shellScript is a scripted model's script for the runs whose input matches: one shell_execute
// call of command, then "done".
func shellScript(match, command string) map[string]any {
	return map[string]any{"match": match, "steps": []any{
		map[string]any{"toolCalls": []any{map[string]any{"name": tools.NameShell, "arguments": map[string]any{"command": command}}}},
		map[string]any{"text": "done"},
	}}
}

// A machine that refuses user namespaces refuses the start of a daemon whose shell is to be
// sandboxed, saying which setting runs it without, before the database is opened. The refusal is
// made real in a user namespace of the test's own that may have no other.
func TestShellSandboxRefusedWithoutNamespaces(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hookd.db")
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+db+"\nagent: {shell: {enabled: true}}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const cannotLimit = 99
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c",
		`echo 0 > /proc/sys/user/max_user_namespaces || exit `+fmt.Sprint(cannotLimit)+`; exec "$0" serve --config "$1"`, binary, cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		t.Skipf("this machine refuses user namespaces to the test too (%v): nothing to compare", err)
	case exit != nil && exit.ExitCode() == cannotLimit:
		t.Skipf("user namespaces cannot be limited here: %s", out)
	}
	if err == nil || strings.Contains(string(out), `"msg":"listening"`) ||
		!strings.Contains(string(out), "agent.shell.sandbox: namespaces:") || !strings.Contains(string(out), "set agent.shell.sandbox: none") {
		t.Fatalf("started, or refused without naming agent.shell.sandbox and none (%v):\n%s", err, out)
	}
	t.Logf("%s", out)
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database was opened before the refusal: %v", err)
	}
}
