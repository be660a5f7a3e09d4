//go:build !linux

package tools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// SandboxCommand is the first argument with which the daemon's binary runs as a command's
// sandbox (Linux only).
const SandboxCommand = "__shell-sandbox"

var errNoSandbox = errors.New("the shell sandbox needs Linux namespaces; set agent.shell.sandbox: none to run commands without it")

func (s *Sandbox) prepare(*exec.Cmd, string, string) error { return errNoSandbox }

// Check says there is no sandbox here.
func (s *Sandbox) Check() error { return errNoSandbox }

// SandboxMain exits: there is no sandbox here.
func SandboxMain([]string) {
	fmt.Fprintln(os.Stderr, errNoSandbox)
	os.Exit(125)
}
