// Command hookd is the policy daemon: `hookd serve` runs it; the other commands operate a running
// daemon through its admin API or work offline (verify). root.go says how the commands are laid out.
package main

import (
	"os"

	"github.com/hookd/hookd/agent/tools"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == tools.SandboxCommand {
		tools.SandboxMain(os.Args[2:]) // a shell_execute command's sandbox: never returns
	}
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
