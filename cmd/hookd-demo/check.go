package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// tally counts what the sample receiver reported, line by line: each event it verified (by hook
// type, verdict and tool) and each request it rejected. The demo fails on what it finds wrong
// rather than printing that all went well.
type tally struct {
	mu       sync.Mutex
	events   map[string]int // "pre_tool_use deny http_request", "agent_completion noted", …
	rejected []string       // requests whose signature did not verify
	changed  chan struct{}  // closed and replaced at each line
}

func newTally() *tally { return &tally{events: map[string]int{}, changed: make(chan struct{})} }

// line reads one line of the receiver's output.
func (t *tally) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := strings.Fields(s)
	switch {
	case len(f) >= 3 && f[0] == "✓" && !strings.Contains(s, "(retry of an event already seen)"):
		key := f[1] + " " + f[2]
		if f[1] == "pre_tool_use" && len(f) >= 4 {
			key += " " + f[3]
		}
		t.events[key]++
	case len(f) >= 1 && f[0] == "✗":
		t.rejected = append(t.rejected, s)
	default:
		return
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// await returns once the receiver verified at least the expected count of each event, or says
// which are missing when ctx ends first.
func (t *tally) await(ctx context.Context, expected map[string]int) error {
	for {
		t.mu.Lock()
		missing := t.missing(expected)
		changed := t.changed
		t.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("the receiver never got %s", strings.Join(missing, ", "))
		}
	}
}

func (t *tally) missing(expected map[string]int) []string {
	var out []string
	for k, n := range expected {
		if got := t.events[k]; got < n {
			out = append(out, fmt.Sprintf("%q (%d of %d)", k, got, n))
		}
	}
	sort.Strings(out)
	return out
}

func (t *tally) total() (verified, rejected int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.events {
		verified += n
	}
	return verified, len(t.rejected)
}

// expectedEvents is what the two turns of the demo must deliver: each turn's user message
// (allowed), its tool gate (the first tool allowed, http_request denied), the tool's outcome and
// the turn's completion.
var expectedEvents = map[string]int{
	"user_message allow":                      2,
	"pre_tool_use allow workspace_write_file": 1,
	"pre_tool_use deny http_request":          1,
	"post_tool_use noted":                     2,
	"agent_completion noted":                  2,
}

// turn is what the client saw of the tools in one chat turn.
type turn struct {
	completed map[string]bool   // tool → a TOOL_COMPLETED came
	failed    map[string]string // tool → the TOOL_FAILED message
}

func newTurn() *turn { return &turn{completed: map[string]bool{}, failed: map[string]string{}} }

// checkDenied fails unless the denied tool was refused with the receiver's reason and never
// completed.
func checkDenied(t *turn, tool, reason string) error {
	if t.completed[tool] {
		return fmt.Errorf("the denied tool %s ran: the client saw it complete", tool)
	}
	msg, ok := t.failed[tool]
	if !ok {
		return fmt.Errorf("the client never saw %s refused", tool)
	}
	if !strings.Contains(msg, reason) {
		return fmt.Errorf("%s failed, but not by the hook's denial (%q): %s", tool, reason, msg)
	}
	return nil
}
