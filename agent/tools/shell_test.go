package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func shellEnv(t *testing.T) Env {
	t.Helper()
	return Env{SessionID: 1, Workspace: t.TempDir()}
}

func TestShellEcho(t *testing.T) {
	t.Setenv("HOOKD_TEST_SECRET", "s3cret")
	env := shellEnv(t)
	sh := NewShell(ShellConfig{Timeout: 10 * time.Second})
	res := run(t, sh, env, `{"command":"echo hello; echo oops >&2; pwd; echo \"home=$HOME lang=$LANG secret=[$HOOKD_TEST_SECRET]\""}`)
	want := "hello\noops\n" + env.Workspace + "\nhome=" + env.Workspace + " lang=C.UTF-8 secret=[]\nexit_code=0"
	if res.IsError || res.Text != want {
		t.Fatalf("got %+v\nwant %q", res, want)
	}
	res = run(t, sh, env, `{"command":"true"}`)
	if res.IsError || res.Text != "(no output)\nexit_code=0" {
		t.Fatalf("no output: %+v", res)
	}
	// It runs in the workspace: a file it writes is there.
	run(t, sh, env, `{"command":"printf x > made.txt"}`)
	if b, err := os.ReadFile(filepath.Join(env.Workspace, "made.txt")); err != nil || string(b) != "x" {
		t.Fatalf("made.txt: %q %v", b, err)
	}
}

func TestShellExitCode(t *testing.T) {
	res := run(t, NewShell(ShellConfig{}), shellEnv(t), `{"command":"echo failing; exit 3"}`)
	if !res.IsError || res.Text != "failing\nexit_code=3" {
		t.Fatalf("exit 3: %+v", res)
	}
	for _, c := range []struct{ args, msg string }{
		{`{}`, "command is required"},
		{`{"command":"  "}`, "command is required"},
		{`{"command":"ls","timeoutSeconds":-1}`, "timeoutSeconds must be positive"},
		{`{"cmd":"ls"}`, `arguments.cmd: unknown field`},
	} {
		res := run(t, NewShell(ShellConfig{}), shellEnv(t), c.args)
		if !res.IsError || !strings.Contains(res.Text, c.msg) {
			t.Errorf("%s: %+v, want an error saying %q", c.args, res, c.msg)
		}
	}
}

func TestShellTimeout(t *testing.T) {
	sh := NewShell(ShellConfig{Timeout: 200 * time.Millisecond})
	start := time.Now()
	res := run(t, sh, shellEnv(t), `{"command":"echo started; sleep 10"}`)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	if !res.IsError || !strings.HasPrefix(res.Text, "started\n") ||
		!strings.Contains(res.Text, "[timed out after 200ms; the command and its process group were killed]") ||
		!strings.HasSuffix(res.Text, "exit_code=137") {
		t.Fatalf("timeout: %+v", res)
	}

	// timeoutSeconds shortens the configured timeout, and cannot lengthen it.
	start = time.Now()
	res = run(t, NewShell(ShellConfig{Timeout: time.Minute}), shellEnv(t), `{"command":"sleep 10","timeoutSeconds":0.2}`)
	if d := time.Since(start); d > 5*time.Second || !strings.Contains(res.Text, "timed out after 200ms") {
		t.Fatalf("timeoutSeconds: %s %+v", d, res)
	}
	res = run(t, sh, shellEnv(t), `{"command":"true","timeoutSeconds":60}`)
	if res.IsError || !strings.Contains(res.Text, "the timeout is 200ms") {
		t.Fatalf("timeoutSeconds above the limit: %+v", res)
	}
}

// gone reports whether pid has exited (it may linger as a zombie if nothing reaps orphans).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func childPID(t *testing.T, text string) int {
	t.Helper()
	first, _, _ := strings.Cut(text, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("no pid in %q", text)
	}
	return pid
}

// The whole process group is killed on timeout: a background child does not survive.
func TestShellKillsProcessGroup(t *testing.T) {
	sh := NewShell(ShellConfig{Timeout: 300 * time.Millisecond})
	start := time.Now()
	res := run(t, sh, shellEnv(t), `{"command":"sleep 30 & echo $!; wait"}`)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	if !strings.Contains(res.Text, "timed out") {
		t.Fatalf("no timeout: %+v", res)
	}
	waitGone(t, childPID(t, res.Text))

	// A job left in the background when the shell exits is killed too, and does not keep the
	// call waiting on its output.
	sh = NewShell(ShellConfig{Timeout: time.Minute})
	start = time.Now()
	res = run(t, sh, shellEnv(t), `{"command":"sleep 30 & echo $!"}`)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("background job: took %s", d)
	}
	if res.IsError || !strings.HasSuffix(res.Text, "exit_code=0") {
		t.Fatalf("background job: %+v", res)
	}
	waitGone(t, childPID(t, res.Text))
}

func TestShellCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	res, err := NewShell(ShellConfig{}).Run(ctx, shellEnv(t), json.RawMessage(`{"command":"sleep 30 & echo $!; wait"}`))
	if err == nil || time.Since(start) > 5*time.Second || !res.IsError || !strings.Contains(res.Text, "[canceled;") {
		t.Fatalf("cancel: %v %+v", err, res)
	}
	waitGone(t, childPID(t, res.Text))
}

func TestShellOutputCap(t *testing.T) {
	sh := NewShell(ShellConfig{MaxOutput: 1000})
	res := run(t, sh, shellEnv(t), `{"command":"echo BEGIN; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"}`)
	if res.IsError || len(res.Text) > 1300 {
		t.Fatalf("capped: %d bytes: %+v", len(res.Text), res)
	}
	if !strings.HasPrefix(res.Text, "BEGIN\naaa") || !strings.HasSuffix(res.Text, "aaa\nEND\nexit_code=0") ||
		!strings.Contains(res.Text, "[output truncated: 100011 bytes in all, 99011 bytes in the middle omitted (limit 1000)]") {
		t.Fatalf("capped: %q", res.Text)
	}
	// Multi-byte output is cut at rune boundaries.
	res = run(t, sh, shellEnv(t), `{"command":"i=0; while [ $i -lt 1000 ]; do printf 'é✓'; i=$((i+1)); done"}`)
	if strings.ContainsRune(res.Text, '\uFFFD') || !strings.Contains(res.Text, "[output truncated") {
		t.Fatalf("runes: %q", res.Text)
	}
}

func TestShellProgress(t *testing.T) {
	env := shellEnv(t)
	var (
		mu    sync.Mutex
		lines []string
	)
	first := make(chan struct{})
	env.Progress = func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
		if s == "one" {
			close(first)
		}
	}
	done := make(chan Result)
	go func() {
		res, _ := NewShell(ShellConfig{}).Run(context.Background(), env, json.RawMessage(`{"command":"echo one; sleep 1; echo two >&2; printf three"}`))
		done <- res
	}()
	select {
	case <-first: // streamed while the command still runs
	case res := <-done:
		t.Fatalf("command ended before the first line was streamed: %+v", res)
	}
	res := <-done
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(lines, "|"); got != "one|two|three" {
		t.Fatalf("progress lines %q", got)
	}
	if res.Text != "one\ntwo\nthree\nexit_code=0" {
		t.Fatalf("result %q", res.Text)
	}

	// Streaming stops at MaxOutput, with one note.
	lines = nil
	env.Progress = func(s string) { lines = append(lines, s) }
	NewShell(ShellConfig{MaxOutput: 100}).Run(context.Background(), env, json.RawMessage(`{"command":"i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done"}`))
	if len(lines) == 0 || len(lines) > 20 || !strings.Contains(lines[len(lines)-1], "the rest is not streamed") || lines[0] != "line0" {
		t.Fatalf("capped progress: %q", lines)
	}
}
