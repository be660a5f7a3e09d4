package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hookd runs the built binary with args and returns its stdout, stderr and exit code.
func hookd(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

func TestVersionAndUsage(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out, _, code := hookd(t, nil, args...); code != 0 || strings.TrimSpace(out) != "hookd test" {
			t.Fatalf("%v: %d %q", args, code, out)
		}
	}
	// Misuse exits 2 and says where the usage is.
	for _, args := range [][]string{{}, {"bogus"}, {"hooks"}, {"hooks", "bogus"}, {"hooks", "test"},
		{"hooks", "test", "1", "2"}, {"hooks", "list", "--status", "dead"}, {"deliveries", "list", "--limit", "many"}, {"serve", "extra"}} {
		_, stderr, code := hookd(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// Each command's help lists its own flags (and its group's), not every flag of the CLI.
func TestPerCommandHelp(t *testing.T) {
	cases := []struct {
		args      []string
		want, not []string
	}{
		{[]string{"hooks", "test", "--help"}, []string{"hookd hooks test ID", "--addr", "--token", "--json"}, []string{"--status", "--secret", "--type", "--config"}},
		{[]string{"deliveries", "list", "-h"}, []string{"--status", "--hook", "--event", "--limit", "--json"}, []string{"--secret", "--type", "--file"}},
		{[]string{"verify", "--help"}, []string{"--secret", "--timestamp", "--signature", "--id", "--tolerance"}, []string{"--addr", "--json", "--status"}},
		{[]string{"serve", "--help"}, []string{"--config"}, []string{"--addr", "--json"}},
		{[]string{"help", "hooks"}, []string{"add", "list", "rm", "test"}, []string{"--status"}},
	}
	for _, c := range cases {
		out, _, code := hookd(t, []string{"HOOKD_CLI_TOKEN=tok-in-env"}, c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %s:\n%s", c.args, w, out)
			}
		}
		for _, n := range append(c.not, "tok-in-env") {
			if strings.Contains(out, n) {
				t.Errorf("%v: help shows %s:\n%s", c.args, n, out)
			}
		}
	}
}

func TestShellCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out, _, code := hookd(t, nil, "completion", shell); code != 0 || !strings.Contains(out, "hookd") {
			t.Errorf("completion %s: exit %d", shell, code)
		}
	}
	// The shell asks the binary itself; flag values complete from what hookd knows.
	out, _, code := hookd(t, nil, "__complete", "deliveries", "list", "--status", "")
	if code != 0 || !strings.Contains(out, "dead\n") || !strings.Contains(out, "delivered\n") {
		t.Fatalf("complete --status: %d %s", code, out)
	}
	out, _, _ = hookd(t, nil, "__complete", "hooks", "list", "--type", "pre_")
	if !strings.Contains(out, "pre_tool_use\n") {
		t.Fatalf("complete --type: %s", out)
	}
}

// A paused delivery (its hook is disabled) says so in the table, and shows no next attempt: none
// is made until the hook is enabled.
func TestDeliveriesTableShowsPaused(t *testing.T) {
	var out strings.Builder
	next := time.Now().Add(time.Minute)
	printDeliveries(&out, []deliveryRow{{ID: 7, EventID: "e7", HookID: 3, HookType: "post_tool_use", Status: "pending", Paused: true, Attempts: 1, NextAttemptAt: next},
		{ID: 8, EventID: "e8", HookID: 4, HookType: "post_tool_use", Status: "pending", Attempts: 1, NextAttemptAt: next}})
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "pending (paused)") || strings.Contains(lines[1], next.Local().Format(time.DateTime)) ||
		strings.Contains(lines[2], "paused") || !strings.Contains(lines[2], next.Local().Format(time.DateTime)) {
		t.Fatalf("the table:\n%s", out.String())
	}
}
