package main

// The command line is a tree of cobra commands, one file per command group:
//
//	root.go        the root, `version`, exit codes, helpers every command uses
//	serve.go       `serve` (the daemon itself)
//	admin.go       the admin API client and the --addr/--token/--json flags of every group that uses it
//	hooks.go       `hooks list|add|rm|test` (hooks_apply.go: `hooks apply`, hook files in hookfiles.go)
//	policy.go      `policy test` (policy test cases, offline)
//	decisions.go   `decisions list|verify`
//	deliveries.go  `deliveries list|redeliver`
//	verify.go      `verify` (offline signature check)
//	doctor.go      `doctor` (what serve would stand on, checked without changing it)
//
// To add a command group, write <group>.go with a `newXxxCmd() *cobra.Command` (build the group
// with newGroup, give it admin flags with addAdminFlags if it talks to the daemon) and add one
// line to the list in newRootCmd, in alphabetical order. To add a command to an existing group,
// write it in its own file (e.g. hooks_apply.go) and add one line to that group's newGroup call.
// Flags are per command: declare them on the command that reads them, never on the root. Every
// list command takes --json (the API's data verbatim) and prints a table otherwise. RunE returns
// an error to fail with exit code 1; return usageErrorf(...) for a misuse (exit code 2, cobra's own
// flag and argument errors are that too) or codeError{n, err} for another code.

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hookd",
		Short:         "hookd puts a policy checkpoint at every point of an AI agent's life",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          groupHelp,
	}
	root.SetVersionTemplate("hookd {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newAgentsCmd(),
		newDecisionsCmd(),
		newDeliveriesCmd(),
		newDoctorCmd(),
		newHookCmd(),
		newHooksCmd(),
		newKeysCmd(),
		newPolicyCmd(),
		newServeCmd(),
		newVerifyCmd(),
		newVersionCmd(),
	)
	return root
}

// execute runs the command line and returns the process's exit code: 0 done, 1 failed, 2 misuse.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// An error before a command's RunE (an unknown command, a bad argument count, a required
	// flag missing) is a misuse; so is a usageError from within.
	ran := false
	visit(root, func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { ran = true; return run(cmd, args) }
		}
	})
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "hookd:", err)
	if ue := (usageError{}); errors.As(err, &ue) || !ran {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	}
	if ce := (codeError{}); errors.As(err, &ce) {
		return ce.code
	}
	return 1
}

func visit(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		visit(sub, f)
	}
}

// usageError is a misuse of the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// codeError fails with an exit code other than 1 (serve: 2 for a config that does not load).
type codeError struct {
	code int
	err  error
}

func (e codeError) Error() string { return e.err.Error() }
func (e codeError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// newGroup is a command that only holds sub-commands: alone it prints its help and exits 2, and
// an unknown sub-command is an error rather than its help.
func newGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: groupHelp}
	g.AddCommand(subs...)
	return g
}

func groupHelp(cmd *cobra.Command, args []string) error {
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Help()
	return usageErrorf("%s needs a command", cmd.CommandPath())
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "hookd", version)
			return nil
		},
	}
}
