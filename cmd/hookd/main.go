// Command hookd is the policy daemon: `hookd serve` runs it, `hookd version` says which it is.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookd/hookd/config"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage:
  hookd serve [--config FILE]   run the daemon
  hookd version                 print the version
` + cliUsage

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, "hookd", version)
		return 0
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		path := fs.String("config", os.Getenv("HOOKD_CONFIG"), "YAML config file (default: none, the embedded defaults)")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		cfg, err := config.Load(*path, os.Environ())
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, cfg, newLogger(cfg.Log, stderr)); err != nil {
			fmt.Fprintln(stderr, "hookd:", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "hooks", "deliveries", "verify":
		return runCLI(args, os.Stdin, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "hookd: unknown command %q\n%s", args[0], usage)
		return 2
	}
}
