package main

import (
	"context"
	"strings"
	"testing"
)

// The lines are the sample receiver's, as the demo shows them.
var receiverLines = []string{
	`hookd-receiver listening on 127.0.0.1:45491 (signatures verified, denying [http_request])`,
	`✓ user_message        allow    "帮我整理今天的任务清单 tasks"`,
	`✓ pre_tool_use        allow    workspace_write_file {"content":"# 任务"}`,
	`✓ post_tool_use       noted    workspace_write_file {"content":"# 任务"}`,
	`✓ agent_completion    noted    succeeded=true, 2 steps, 2530 tokens`,
	`✓ user_message        allow    "transfer 100 to ACC-002"`,
	`✓ pre_tool_use        deny     http_request {"body":"{}"}`,
	`✓ post_tool_use       noted    http_request {"body":"{}"}`,
	`✓ agent_completion    noted    succeeded=true, 2 steps, 1525 tokens`,
}

func TestTallyAllThere(t *testing.T) {
	seen := newTally()
	for _, l := range receiverLines {
		seen.line(l)
	}
	if err := seen.await(context.Background(), expectedEvents); err != nil {
		t.Fatal(err)
	}
	if v, r := seen.total(); v != 8 || r != 0 {
		t.Fatalf("verified %d, rejected %d", v, r)
	}
}

func TestTallyNamesWhatIsMissing(t *testing.T) {
	seen := newTally()
	for _, l := range receiverLines[:7] { // the last post_tool_use and agent_completion never came
		seen.line(l)
	}
	seen.line(`✓ agent_completion    noted    succeeded=true (retry of an event already seen)`)
	seen.line(`✗ rejected a request: signature mismatch`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := seen.await(ctx, expectedEvents)
	if err == nil || !strings.Contains(err.Error(), `"post_tool_use noted" (1 of 2)`) || !strings.Contains(err.Error(), `"agent_completion noted" (1 of 2)`) {
		t.Fatalf("missing events not named: %v", err)
	}
	if _, r := seen.total(); r != 1 {
		t.Fatalf("rejected %d, want 1", r)
	}
}

func TestCheckDenied(t *testing.T) {
	const reason = "compliance policy: http_request is not allowed"
	ran := newTurn()
	ran.completed["http_request"] = true
	refused := newTurn()
	refused.failed["http_request"] = "hook 合规审批 denied: " + reason
	brokeOtherwise := newTurn()
	brokeOtherwise.failed["http_request"] = "dial tcp: no such host"
	for name, c := range map[string]struct {
		turn *turn
		ok   bool
	}{"ran": {ran, false}, "refused": {refused, true}, "failed otherwise": {brokeOtherwise, false}, "never called": {newTurn(), false}} {
		if err := checkDenied(c.turn, "http_request", reason); (err == nil) != c.ok {
			t.Errorf("%s: %v", name, err)
		}
	}
}
