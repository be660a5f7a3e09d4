// Command hookd is the policy daemon: `hookd serve` runs it; the other commands operate a running
// daemon through its admin API or work offline (verify). root.go says how the commands are laid out.
package main

import (
	"os"
	// The zone database, for a host that has none (a distroless or scratch image): without it a
	// rule's getHours('Asia/Shanghai') failed on every call, deciding by failureMode, and a task's
	// CRON_TZ could not be read. The host's own is still read first.
	_ "time/tzdata"

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
