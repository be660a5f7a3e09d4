package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/api/agents"
)

// newHookCmd is the command-hook forwarder: a coding agent runs `hookd hook --agent KIND EVENT`
// as its hook command, with the hook input on stdin, and gets hookd's answer on stdout and in the
// exit code, as that harness expects.
func newHookCmd() *cobra.Command {
	var f hookFlags
	cmd := &cobra.Command{
		Use:   "hook --agent KIND EVENT",
		Short: "forward a coding agent's command hook to hookd (stdin: the hook input)",
		Long: `Forward a coding agent's command hook to the daemon's /v1/agents/KIND/hooks and answer as
the harness expects: the daemon's answer on stdout and exit code 0. When the daemon cannot be asked
(unreachable, timed out, answering an error or a redirect, or answering something other than a
JSON object), --on-error decides: deny (the default for the
events hookd decides: tool calls and prompts) prints the harness's block, writes the reason on
stderr and exits 2, which every supported harness takes as a block of a tool call or prompt (on
other events, as what its exit 2 means there: docs/agents.md); allow (the default for the
others) says nothing and exits 0, naming the failure on stderr.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return forward(cmd, f, args[0]) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "agent", "", "the harness: "+strings.Join(agents.Kinds, ", "))
	fl.StringVar(&f.addr, "addr", envOr("HOOKD_CLI_ADDR", "http://127.0.0.1:8080"), "daemon address (HOOKD_CLI_ADDR)")
	fl.StringVar(&f.token, "token", "", "API key (default: HOOKD_CLI_TOKEN)")
	fl.StringVar(&f.onError, "on-error", "", "when the daemon cannot be asked: deny or allow (default: deny for tool and prompt events, allow for the others)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the daemon")
	fl.Int64Var(&f.agentID, "agent-id", 0, "select the hooks of this agentId")
	fl.BoolVar(&f.cursorToolEvents, "cursor-tool-events", false, "Cursor: the tool-specific hooks are installed too and decide shell, MCP and file-read calls, which preToolUse and postToolUse then leave to them")
	_ = cmd.MarkFlagRequired("agent")
	return cmd
}

type hookFlags struct {
	kind, addr, token, onError string
	timeout                    time.Duration
	agentID                    int64
	cursorToolEvents           bool
}

// hookExitBlock is the exit code with which the harnesses take a command hook's stderr as the
// reason of a block.
const hookExitBlock = 2

func forward(cmd *cobra.Command, f hookFlags, event string) error {
	ad := agents.For(f.kind)
	if ad == nil {
		return usageErrorf("--agent: %q is not one of %s", f.kind, strings.Join(agents.Kinds, ", "))
	}
	if f.cursorToolEvents && f.kind != agents.Cursor {
		return usageErrorf("--cursor-tool-events: only with --agent %s", agents.Cursor)
	}
	if cmd.Flags().Changed("agent-id") && f.agentID <= 0 {
		// Dropped, it would leave the agent's own hooks unasked.
		return usageErrorf("--agent-id: %d is not an agent id (a positive integer)", f.agentID)
	}
	if !agents.Known(f.kind, event) {
		// The daemon would answer it with nothing to say: an entry wired to another harness's
		// event name (codex BeforeTool) would let every call through undecided.
		return usageErrorf("EVENT: %q is not a %s hook event (docs/agents.md lists them)", event, f.kind)
	}
	deny := agents.Interceptive(f.kind, event)
	switch f.onError {
	case "":
	case "deny", "allow":
		deny = f.onError == "deny"
	default:
		return usageErrorf("--on-error: %q is not deny or allow", f.onError)
	}
	body, err := forwardOnce(cmd, f, event)
	if err == nil {
		_, err = cmd.OutOrStdout().Write(body)
		return err
	}
	var other *otherEventError
	if errors.As(err, &other) && agents.Known(f.kind, other.event) {
		// An entry wired to the wrong event: what runs is the input's event, which is answered
		// as such. A tool call or prompt is blocked whatever the command line's event and
		// --on-error say, since neither was written for it. Any other event goes on unless
		// --on-error deny says otherwise: the command line's event's default was not written for
		// it either, and exit 2 there blocks no call (Gemini CLI retries an AfterAgent turn with
		// the reason as its prompt; Claude Code's Stop keeps the agent working).
		event = other.event
		deny = agents.Interceptive(f.kind, event) || f.onError == "deny"
	}
	m := agents.Mapped{Event: event, Point: ad.Point(event)}
	if !deny {
		fmt.Fprintf(cmd.ErrOrStderr(), "hookd: %v; the event goes on without hookd (--on-error allow)\n", err)
		_, werr := cmd.OutOrStdout().Write(ad.Answer(m, agents.Verdict{}))
		return werr
	}
	// The harness's block on stdout for those that read it, and the reason on stderr (the
	// command line prints the error there as "hookd: …") with exit code 2 for those that block so.
	blocked := fmt.Errorf("%v; blocked (--on-error deny)", err)
	if _, werr := cmd.OutOrStdout().Write(ad.Answer(m, agents.Verdict{Decision: "deny", Reason: "hookd: " + blocked.Error()})); werr != nil {
		return werr
	}
	return codeError{hookExitBlock, blocked}
}

// forwardOnce asks the daemon, returning its answer body (empty for a 204).
func forwardOnce(cmd *cobra.Command, f hookFlags, event string) ([]byte, error) {
	in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the hook input: %w", err)
	}
	if len(in) > 1<<20 {
		// Read to its end all the same: a harness whose write of the input fails (a pipe closed
		// before it was all read) has no exit code to act on, and would take the failed hook for
		// a non-blocking error, which runs the call.
		_, _ = io.Copy(io.Discard, cmd.InOrStdin())
		return nil, errors.New("the hook input is over 1 MiB")
	}
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if err := json.Unmarshal(in, &head); err != nil {
		return nil, errors.New("the hook input on stdin is not JSON")
	}
	if head.Event != event {
		return nil, &otherEventError{event: head.Event, want: event}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	url := strings.TrimRight(f.addr, "/") + "/v1/agents/" + f.kind + "/hooks"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token := cmp.Or(f.token, os.Getenv("HOOKD_CLI_TOKEN")); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if f.agentID > 0 {
		req.Header.Set(agents.AgentIDHeader, fmt.Sprint(f.agentID))
	}
	if f.cursorToolEvents {
		req.Header.Set(agents.ToolEventsHeader, "installed")
	}
	resp, err := forwardClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no answer from %s within %s", shownAddr(f.addr), f.timeout)
		}
		return nil, fmt.Errorf("cannot reach the daemon at %s", shownAddr(f.addr))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("the daemon's answer broke off: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		var w struct{ Message string }
		_ = json.Unmarshal(body, &w)
		return nil, fmt.Errorf("the daemon answered HTTP %d: %s", resp.StatusCode, cmp.Or(w.Message, "no message"))
	}
	// The daemon answers 200 with a JSON object, or 204 with no body to Claude Code alone (its
	// "nothing to say"); anything else (a proxy's page, an answer cut short, a 204 to a harness that
	// reads an empty stdout as no objection) is not its answer, and passed on with exit 0 it would
	// let the call through.
	if resp.StatusCode == http.StatusNoContent {
		if f.kind != agents.ClaudeCode {
			return nil, fmt.Errorf("the daemon answered HTTP 204, which is no answer to %s", f.kind)
		}
		return nil, nil
	}
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, fmt.Errorf("the daemon's answer is not a JSON object (%d bytes of %s)", len(body), cmp.Or(resp.Header.Get("Content-Type"), "no content type"))
	}
	return body, nil
}

// otherEventError is a hook input of another event than the command line names.
type otherEventError struct{ event, want string }

func (e *otherEventError) Error() string {
	return fmt.Sprintf("the hook input is a %q event, not %s", e.event, e.want)
}

// forwardClient asks the daemon without following redirects: a redirect is not the daemon's
// answer, and following it would post the hook input elsewhere.
var forwardClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
