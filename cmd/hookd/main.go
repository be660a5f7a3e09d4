// Command hookd is the policy daemon: `hookd serve` runs it; the other commands operate a running
// daemon through its admin API or work offline (verify). root.go says how the commands are laid out.
package main

import "os"

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() { os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
