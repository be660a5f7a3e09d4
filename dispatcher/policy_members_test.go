package dispatcher

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hookd/hookd/policy"
)

// memberPolicies select members of event.context, test them, miss them, and read the context
// whole; each rule's when is false or fails on most contexts, so that all of them run.
var memberPolicies = [][]policy.Rule{
	{r("mode", "has(event.context.permissionMode) && event.context.permissionMode == 'bypassPermissions'", Ask),
		r("cwd", "has(event.context.cwd) && event.context.cwd.startsWith('/etc')", Deny),
		r("tool", "event.context.toolName == 'never' || event.context.toolCallId == 'never'", Deny),
		r("kind", "has(event.context.agentKind) && event.context.agentKind + event.context.externalSessionId == 'x'", Deny),
		r("args", "event.context.arguments == 'never' || event.hookName == 'never'", Deny)},
	{r("missing", "event.context.permissionMode == 'default'", Ask)},
	{r("whole", "size(event.context) > 7 || event.context.all(k, k == 'x')", Deny),
		r("mode", "event.context.permissionMode == 'default'", Ask)},
}

// FuzzToolCallMembers: each member of a tool call's context that toolCallSource reads alone is
// what the whole context holds (absent where it is absent), and policies that select members of
// it decide what they decide given the whole envelope.
func FuzzToolCallMembers(f *testing.F) {
	for _, args := range []string{`{"amount":5000,"currency":"CNY"}`, ` { "a" : [1, 2.5, {"b": null}], "a": "last" } `,
		`[1,2]`, `"text"`, `12`, `{"open":`, `not json`, ``, `{}`, "{\"bad\":\"\xff\"}"} {
		f.Add("Bash", args, "default")
		f.Add("Bash", args, "")
	}
	f.Fuzz(func(t *testing.T, tool, args, mode string) {
		agent := &CodingAgent{AgentKind: "claude-code", ExternalSessionID: tool, Cwd: mode, PermissionMode: mode}
		for _, ctx := range []any{&PreToolUseContext{ToolName: tool, ToolCallID: "call_1", Arguments: Value(args)},
			&PreToolUseContext{ToolName: tool, ToolCallID: mode, Arguments: Value(args), CodingAgent: agent},
			&UserMessageContext{UserInput: mode}} {
			c, _ := newChainEvent(&Event{HookType: PreToolUse, Context: ctx}, false)
			whole, err := c.Context()
			if err != nil {
				t.Skip("context not rendered:", err)
			}
			if _, ok := c.toolCall(); ok {
				fresh, _ := newChainEvent(&Event{HookType: PreToolUse, Context: ctx}, false)
				for _, k := range append(toolCallMembers[:], "nope") {
					got, gok := toolCallSource{fresh}.Member(k)
					want, wok := whole.(map[string]any)[k]
					if gok != wok || !reflect.DeepEqual(got, want) {
						t.Fatalf("member %s: %#v %v, the context has %#v %v", k, got, gok, want, wok)
					}
				}
			}
			for _, rules := range memberPolicies {
				p, err := policy.Compile(policy.Config{Rules: rules}, string(PreToolUse))
				if err != nil {
					t.Fatal(err)
				}
				h := &boundHook{Hook: Hook{HookType: PreToolUse, HookName: "h"}}
				now := time.UnixMilli(1)
				ev := &Event{HookType: PreToolUse, TraceID: "t", OccurredAt: now, Context: ctx}
				whole, _ := newChainEvent(ev, false)
				event, _ := whole.policyInput(h, "e1", now).ResolveName("event")
				selected, _ := newChainEvent(ev, false)
				got, gerr := p.EvalCounted(selected.policyInput(h, "e1", now))
				want, werr := p.EvalCounted(policy.NewInput(event.(map[string]any)))
				if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Fatalf("%v on %#v:\n got %+v %v\nwant %+v %v", rules, ctx, got, gerr, want, werr)
				}
			}
		}
	})
}
