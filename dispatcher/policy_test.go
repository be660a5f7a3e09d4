package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A policyCase is one policy hook, alone in its chain, and what Intercept must conclude.
type policyCase struct {
	name     string
	hookType HookType
	mode     string // failureMode; "" is ALLOW
	rules    []policy.Rule
	def      string
	cost     uint64
	context  any // nil: the hook type's sample context
	want     string
	reason   string
	modified *string
	rule     string // the rule the decision log names
	failure  bool   // decided by failureMode
	invalid  bool   // Intercept fails with InvalidModifyError
}

func r(name, when, decision string) policy.Rule {
	return policy.Rule{Name: name, When: when, Decision: decision}
}

func toolCtx(args string) *PreToolUseContext {
	return &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_1", Arguments: Value(args)}
}

func TestPolicyDecisions(t *testing.T) {
	deny := "hook p could not decide: its policy failed (failureMode DENY)"
	cases := []policyCase{
		// pre_tool_use: each rule kind and the default.
		{name: "deny", rules: []policy.Rule{{Name: "limit", When: "args.amount > 10000", Decision: "deny", Reason: "'单笔金额 ' + string(args.amount) + ' 超过限额 10000'"}},
			context: toolCtx(`{"amount":12000}`), want: Deny, reason: "单笔金额 12000 超过限额 10000", rule: "limit"},
		{name: "allow rule", rules: []policy.Rule{r("small", "args.amount < 100", "allow"), r("all", "true", "deny")},
			context: toolCtx(`{"amount":5}`), want: Allow, rule: "small"},
		{name: "ask", rules: []policy.Rule{{Name: "large", When: "args.amount > 1000", Decision: "ask", Reason: "'大额转账需人工审批'"}},
			context: toolCtx(`{"amount":5000}`), want: Ask, reason: "大额转账需人工审批", rule: "large"},
		{name: "modify with()", rules: []policy.Rule{{Name: "mask-card", When: "has(args.cardNo)", Decision: "modify",
			ModifiedValue: "args.with({'cardNo': '****' + args.cardNo.substring(args.cardNo.size() - 4)})"}},
			context: toolCtx(`{"amount":50,"cardNo":"6222020012345678"}`), want: Modify, modified: ptr(`{"amount":50,"cardNo":"****5678"}`), rule: "mask-card"},
		{name: "modify mask()", rules: []policy.Rule{{Name: "m", When: "has(args.cardNo)", Decision: "modify", ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"}},
			context: toolCtx(`{"cardNo":"6222020012345678"}`), want: Modify, modified: ptr(`{"cardNo":"************5678"}`), rule: "m"},
		{name: "modify to a JSON string", rules: []policy.Rule{{Name: "m", When: "true", Decision: "modify", ModifiedValue: `'{"amount": 1}'`}},
			context: toolCtx(`{"amount":5}`), want: Modify, modified: ptr(`{"amount": 1}`), rule: "m"},
		{name: "modify to invalid JSON", rules: []policy.Rule{{Name: "m", When: "true", Decision: "modify", ModifiedValue: "'not json'"}},
			context: toolCtx(`{"amount":5}`), invalid: true, rule: "m"},
		{name: "first match wins", rules: []policy.Rule{r("a", "args.amount > 10", "ask"), r("b", "args.amount > 1", "deny")},
			context: toolCtx(`{"amount":50}`), want: Ask, rule: "a"},
		{name: "default allow", rules: []policy.Rule{r("limit", "args.amount > 10000", "deny")},
			context: toolCtx(`{"amount":5}`), want: Allow},
		{name: "default deny", rules: []policy.Rule{r("ok", "tool == 'queryOrder'", "allow")}, def: "deny",
			context: toolCtx(`{}`), want: Deny},
		{name: "default ask", def: "ask", context: toolCtx(`{}`), want: Ask},
		{name: "has() on an absent field", rules: []policy.Rule{r("card", "has(args.cardNo)", "deny")},
			context: toolCtx(`{"amount":5}`), want: Allow},
		{name: "has() on a nested absent field", rules: []policy.Rule{r("n", "has(args.payee) && has(args.payee.bank)", "deny")},
			context: toolCtx(`{"payee":{"name":"x"}}`), want: Allow},
		{name: "absent field without has(), ALLOW", rules: []policy.Rule{r("card", "args.cardNo == '1'", "deny")},
			context: toolCtx(`{}`), want: Allow, failure: true, rule: "card"},
		{name: "absent field without has(), DENY", mode: FailClosed, rules: []policy.Rule{r("card", "args.cardNo == '1'", "deny")},
			context: toolCtx(`{}`), want: Deny, reason: deny, failure: true, rule: "card"},
		{name: "evaluation error in reason", mode: FailClosed, rules: []policy.Rule{{Name: "x", When: "true", Decision: "allow", Reason: "'n=' + string(10 / args.n)"}},
			context: toolCtx(`{"n":0}`), want: Deny, reason: deny, failure: true, rule: "x"},
		{name: "cost overrun, ALLOW", cost: 200, rules: []policy.Rule{r("slow", "lists.range(5000).exists(i, i == args.amount)", "deny")},
			context: toolCtx(`{"amount":4999}`), want: Allow, failure: true, rule: "slow"},
		{name: "cost overrun, DENY", mode: FailClosed, cost: 200, rules: []policy.Rule{r("slow", "lists.range(5000).exists(i, i == args.amount)", "deny")},
			context: toolCtx(`{"amount":4999}`), want: Deny, reason: deny, failure: true, rule: "slow"},
		{name: "within the cost limit", cost: 100000, rules: []policy.Rule{r("slow", "lists.range(5000).exists(i, i == args.amount)", "deny")},
			context: toolCtx(`{"amount":4999}`), want: Deny, rule: "slow"},
		{name: "event envelope", rules: []policy.Rule{r("e", "event.hookType == 'pre_tool_use' && event.hookName == 'p' && event.context.toolCallId == 'call_1' && event.schemaVersion == '1.0'", "deny")},
			context: toolCtx(`{}`), want: Deny, rule: "e"},
		{name: "principal", rules: []policy.Rule{r("who", "principalId == 1001 && agentId != null && sessionId == 10001", "deny")},
			context: toolCtx(`{}`), want: Deny, rule: "who"},
		{name: "text arguments", rules: []policy.Rule{r("t", "args.size() == 0 && event.context.arguments == 'plain text'", "deny")},
			context: toolCtx(`plain text`), want: Deny, rule: "t"},
		{name: "path within", rules: []policy.Rule{r("etc", "pathWithin(args.path, '/etc')", "ask")},
			context: toolCtx(`{"path":"/srv/../etc/shadow"}`), want: Ask, rule: "etc"},
		{name: "cidr", rules: []policy.Rule{r("net", "isIP(args.host) && cidr('10.0.0.0/8').containsIP(ip(args.host))", "deny")},
			context: toolCtx(`{"host":"10.1.2.3"}`), want: Deny, rule: "net"},

		// user_message.
		{name: "message deny", hookType: UserMessage, rules: []policy.Rule{{Name: "secret", When: "input.contains('密码')", Decision: "deny", Reason: "'不要发送密码'"}},
			context: &UserMessageContext{UserInput: "我的密码是 123"}, want: Deny, reason: "不要发送密码", rule: "secret"},
		{name: "message modify", hookType: UserMessage, rules: []policy.Rule{{Name: "phone", When: "input.matches('1[0-9]{10}')", Decision: "modify",
			ModifiedValue: "regex.replace(input, '1[0-9]{10}', '[phone]')"}},
			context: &UserMessageContext{UserInput: "call 13812345678 now"}, want: Modify, modified: ptr("call [phone] now"), rule: "phone"},
		{name: "message ask", hookType: UserMessage, rules: []policy.Rule{r("ext", "event.context.triggerSource.sourceType == 'api_call'", "ask")},
			context: &UserMessageContext{UserInput: "hi", TriggerSource: TriggerSource{SourceType: SourceAPI}}, want: Ask, rule: "ext"},
		{name: "message default", hookType: UserMessage, rules: []policy.Rule{r("secret", "input.contains('密码')", "deny")},
			context: &UserMessageContext{UserInput: "hello"}, want: Allow},
		{name: "message has() on absent channel", hookType: UserMessage, rules: []policy.Rule{r("ch", "event.context.triggerSource.channelType == null", "deny")},
			context: &UserMessageContext{UserInput: "hello"}, want: Deny, rule: "ch"},
		{name: "message error, DENY", hookType: UserMessage, mode: FailClosed, rules: []policy.Rule{r("x", "int(input) > 3", "deny")},
			context: &UserMessageContext{UserInput: "not a number"}, want: Deny, reason: deny, failure: true, rule: "x"},

		// pre_scheduled_task.
		{name: "task deny", hookType: PreScheduledTask, rules: []policy.Rule{{Name: "weekend", When: "task.taskName.startsWith('批量')", Decision: "deny", Reason: "'批量任务暂停'"}},
			context: &PreScheduledTaskContext{TaskID: 3, TaskName: "批量对账"}, want: Deny, reason: "批量任务暂停", rule: "weekend"},
		{name: "task modify", hookType: PreScheduledTask, rules: []policy.Rule{{Name: "scope", When: "task.taskId == 3", Decision: "modify", ModifiedValue: "'只读模式：' + task.taskName"}},
			context: &PreScheduledTaskContext{TaskID: 3, TaskName: "对账"}, want: Modify, modified: ptr("只读模式：对账"), rule: "scope"},
		{name: "task allow rule", hookType: PreScheduledTask, rules: []policy.Rule{r("ok", "task.taskId < 10", "allow")}, def: "deny",
			context: &PreScheduledTaskContext{TaskID: 3, TaskName: "x"}, want: Allow, rule: "ok"},
		{name: "task default deny", hookType: PreScheduledTask, def: "deny", context: &PreScheduledTaskContext{TaskID: 30, TaskName: "x"}, want: Deny},
		{name: "task ask", hookType: PreScheduledTask, rules: []policy.Rule{r("q", "task.taskId == 30", "ask")},
			context: &PreScheduledTaskContext{TaskID: 30, TaskName: "x"}, want: Ask, rule: "q"},
		{name: "task cost overrun, DENY", hookType: PreScheduledTask, mode: FailClosed, cost: 100, rules: []policy.Rule{r("slow", "lists.range(1000).all(i, i < task.taskId)", "deny")},
			context: &PreScheduledTaskContext{TaskID: 3000, TaskName: "x"}, want: Deny, reason: deny, failure: true, rule: "slow"},
	}
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		sessionID, principalID := int64(10001), int64(1001)
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ht := c.hookType
				if ht == "" {
					ht = PreToolUse
				}
				agentID := int64(5000 + i)
				hk := h.add(Hook{HookName: "p", HookType: ht, AgentID: &agentID, DispatchType: DispatchPolicy,
					DispatchConfig: DispatchConfig{FailureMode: c.mode},
					PolicyConfig:   &policy.Config{Rules: c.rules, Default: c.def, CostLimit: c.cost}})
				ev := Event{HookType: ht, AgentID: &agentID, SessionID: &sessionID, PrincipalID: &principalID,
					TraceID: "tr-policy", Context: c.context}
				dec, err := h.d.Intercept(context.Background(), ev)
				var bad *InvalidModifyError
				if c.invalid {
					if !errors.As(err, &bad) || bad.HookID != hk.ID {
						t.Fatalf("want InvalidModifyError naming the hook, got %v %+v", err, dec)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if dec.Decision != c.want || dec.Reason != c.reason || !samePtr(dec.ModifiedValue, c.modified) {
					t.Fatalf("got %+v (modified %s), want %s %q %s", dec, deref(dec.ModifiedValue), c.want, c.reason, deref(c.modified))
				}
				if c.modified != nil && ht == PreToolUse && !json.Valid([]byte(*dec.ModifiedValue)) {
					t.Fatalf("modifiedValue %s is not JSON", *dec.ModifiedValue)
				}
				logged := h.decisions(dec.DecisionID, 1)[0]
				if logged.Outcome != c.want || logged.RuleName != c.rule || logged.FromFailureMode != c.failure ||
					logged.HookID != hk.ID || logged.Reason != c.reason || logged.StatusCode != 0 {
					t.Fatalf("decision log %+v; want outcome %s rule %q fromFailureMode %v", logged, c.want, c.rule, c.failure)
				}
				if c.failure != (logged.Error != "") {
					t.Fatalf("decision log error %q, failure %v", logged.Error, c.failure)
				}
				if strings.Contains(c.name, "cost overrun") && !strings.Contains(logged.Error, "cost limit") {
					t.Fatalf("cost overrun logged as %q", logged.Error)
				}
			})
		}
	})
}

func TestPolicyRegistration(t *testing.T) {
	cfg := func(rules ...policy.Rule) *policy.Config { return &policy.Config{Rules: rules} }
	cases := []struct {
		name  string
		hook  Hook
		field string
		msg   string
	}{
		{"unknown variable", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "true", "allow"), r("b", "amount > 1", "deny"))},
			"policyConfig.rules[1].when", "undeclared reference to 'amount' (1:1)"},
		{"parse error", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "args.amount >", "deny"))},
			"policyConfig.rules[0].when", "Syntax error"},
		{"type error", Hook{HookType: UserMessage, PolicyConfig: cfg(r("a", "input > 3", "deny"))},
			"policyConfig.rules[0].when", "no matching overload"},
		{"reason type", Hook{HookType: PreToolUse, PolicyConfig: cfg(policy.Rule{Name: "a", When: "true", Decision: "deny", Reason: "args.size()"})},
			"policyConfig.rules[0].reason", "must evaluate to string, not int"},
		{"no policyConfig", Hook{HookType: PreToolUse}, "policyConfig", "is required"},
		{"observational type", Hook{HookType: PostToolUse, PolicyConfig: cfg()}, "dispatchType", "interceptive"},
		{"url on a policy", Hook{HookType: PreToolUse, PolicyConfig: cfg(), DispatchConfig: DispatchConfig{URL: "https://x.example"}},
			"dispatchConfig.url", "does not apply to a policy hook"},
		{"secret on a policy", Hook{HookType: PreToolUse, PolicyConfig: cfg(), DispatchConfig: DispatchConfig{SigningSecret: ptr("s")}},
			"dispatchConfig.signingSecret", "does not apply"},
		{"bad failureMode", Hook{HookType: PreToolUse, PolicyConfig: cfg(), DispatchConfig: DispatchConfig{FailureMode: "maybe"}},
			"dispatchConfig.failureMode", "ALLOW or DENY"},
		{"policyConfig on a webhook", Hook{HookType: PreToolUse, DispatchType: DispatchWebhook, PolicyConfig: cfg(),
			DispatchConfig: DispatchConfig{URL: "https://x.example"}}, "policyConfig", "only applies"},
		{"unknown dispatchType", Hook{HookType: PreToolUse, DispatchType: "lambda"}, "dispatchType", "not one of webhook, policy"},
		// A member the event can never have would make has() never true and the rule never fire.
		{"envelope typo", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "true", "allow"), r("b", "has(event.contxt.cwd)", "deny"))},
			"policyConfig.rules[1].when", `event has no member "contxt" (did you mean "context"?)`},
		{"context typo", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "has(event.context.permisionMode) && event.context.permisionMode == 'plan'", "deny"))},
			"policyConfig.rules[0].when", `event.context of pre_tool_use has no member "permisionMode" (did you mean "permissionMode"?); it has toolName, toolCallId, arguments, agentKind,`},
		{"optional select typo", Hook{HookType: UserMessage, PolicyConfig: cfg(r("a", "event.?context.?userinput.orValue('').contains('x')", "deny"))},
			"policyConfig.rules[0].when", `event.context of user_message has no member "userinput" (did you mean "userInput"?)`},
		{"another type's member", Hook{HookType: UserMessage, PolicyConfig: cfg(policy.Rule{Name: "a", When: "true", Decision: "deny", Reason: "event.context.toolName"})},
			"policyConfig.rules[0].reason", `event.context of user_message has no member "toolName"`},
		{"task off its point", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "has(task.taskName)", "deny"))},
			"policyConfig.rules[0].when", "task is {} for pre_tool_use"},
		{"task typo", Hook{HookType: PreScheduledTask, PolicyConfig: cfg(policy.Rule{Name: "a", When: "true", Decision: "modify", ModifiedValue: "task.tskName"})},
			"policyConfig.rules[0].modifiedValue", `task has no member "tskName" (did you mean "taskName"?); it has taskId, taskName`},
		// A variable that holds something for another hook type alone: the rule never fires.
		{"input at a tool call", Hook{HookType: PreToolUse, PolicyConfig: cfg(r("a", "input.contains('password')", "deny"))},
			"policyConfig.rules[0].when", `input is "" for pre_tool_use: it holds the user's input, at user_message`},
		{"args at a prompt", Hook{HookType: UserMessage, PolicyConfig: cfg(r("a", "has(args.cmd) && args.cmd == 'x'", "deny"))},
			"policyConfig.rules[0].when", "args is {} for user_message: it holds the arguments of a tool call, at pre_tool_use"},
		{"tool at a firing", Hook{HookType: PreScheduledTask, PolicyConfig: cfg(policy.Rule{Name: "a", When: "true", Decision: "deny", Reason: "'tool ' + tool"})},
			"policyConfig.rules[0].reason", `tool is "" for pre_scheduled_task`},
		// The ids are an int or null: added to a string, the reason always fails (a deny that
		// fails open under ALLOW); compared with a string, the rule is never true.
		{"id in a string", Hook{HookType: PreToolUse, PolicyConfig: cfg(policy.Rule{Name: "a", When: "true", Decision: "deny", Reason: "'principal ' + principalId + ' may not pay'"})},
			"policyConfig.rules[0].reason", "found no matching overload for '_+_' applied to '(string, wrapper(int))' (1:14) (principalId, agentId and sessionId are an int, or null)"},
		{"id compared with a string", Hook{HookType: UserMessage, PolicyConfig: cfg(r("a", "agentId == '5001'", "deny"))},
			"policyConfig.rules[0].when", "found no matching overload for '_==_' applied to '(wrapper(int), string)'"},
	}
	// What the event has, whichever way it is read, and a comprehension variable that hides a
	// variable's name, are taken.
	for _, ok := range []Hook{
		{HookType: PreToolUse, PolicyConfig: cfg(r("a", "has(event.context.permissionMode) && event.?traceId.hasValue() && event.context.arguments.x == 1 && event.agentId == 5001", "deny"))},
		{HookType: PreToolUse, PolicyConfig: cfg(r("a", "has(event.context.cwd) && args.items.exists(task, task.nope == 1) && cel.bind(event, args, event.whatever == 1)", "deny"))},
		{HookType: PreScheduledTask, PolicyConfig: cfg(r("a", "task.taskId > 3 && event.context.taskName == task.taskName", "deny"))},
		{HookType: UserMessage, PolicyConfig: cfg(r("a", "input.contains('x') && principalId != null && principalId in [7, 8] && sessionId > 0 && string(agentId) == '5'", "deny"))},
		{HookType: PreToolUse, PolicyConfig: cfg(r("a", "tool == 'pay' && args.amount > 10 && principalId == 7 && agentId == null", "deny"))},
	} {
		ok.HookName, ok.DispatchType = "x", DispatchPolicy
		if err := ok.Normalize(); err != nil {
			t.Errorf("%s: %v", ok.PolicyConfig.Rules[0].When, err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.hook
			h.HookName = "x"
			if h.DispatchType == "" {
				h.DispatchType = DispatchPolicy
			}
			err := h.Normalize()
			var ve *hookdtype.ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Msg, c.msg) {
				t.Fatalf("got %v, want %s: …%s…", err, c.field, c.msg)
			}
		})
	}
}

// A policy update replaces the compiled policy at once: the next decision is the new policy's.
// A stored policy that no longer compiles decides by its failureMode instead of leaving the chain.
func TestPolicyReplaceAndBroken(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		agent := int64(77)
		hk := h.add(Hook{HookName: "p", HookType: PreToolUse, AgentID: &agent, DispatchType: DispatchPolicy,
			PolicyConfig: &policy.Config{Rules: []policy.Rule{r("v1", "true", "ask")}}})
		ev := Event{HookType: PreToolUse, AgentID: &agent, Context: toolCtx(`{}`)}
		if dec, _ := h.d.Intercept(ctx, ev); dec.Decision != Ask {
			t.Fatalf("v1: %+v", dec)
		}
		first := h.reg.byID(hk.ID).decider
		other := h.add(Hook{HookName: "other", HookType: PreToolUse, AgentID: &agent, Priority: 9, DispatchType: DispatchPolicy,
			PolicyConfig: &policy.Config{}})
		if h.reg.byID(hk.ID).decider != first {
			t.Fatal("another hook's change recompiled an unchanged policy")
		}
		hk.PolicyConfig = &policy.Config{Rules: []policy.Rule{r("v2", "true", "deny")}}
		if _, err := h.reg.Replace(ctx, hk.ID, hk); err != nil {
			t.Fatal(err)
		}
		if dec, _ := h.d.Intercept(ctx, ev); dec.Decision != Deny {
			t.Fatalf("v2: %+v", dec)
		}
		if err := h.reg.Delete(ctx, hk.ID); err != nil {
			t.Fatal(err)
		}
		// A row whose rules stopped compiling (written by another version, say).
		row, err := db.GetHook(ctx, other.ID)
		if err != nil {
			t.Fatal(err)
		}
		row.Doc = []byte(strings.Replace(string(row.Doc), `"policyConfig":{"rules":[]}`,
			`"policyConfig":{"rules":[{"name":"x","when":"nosuchvar","decision":"allow"}]}`, 1))
		if !strings.Contains(string(row.Doc), "nosuchvar") {
			t.Fatalf("stored document %s", row.Doc)
		}
		row.Enabled = true
		if err := db.UpdateHook(ctx, &row); err != nil {
			t.Fatal(err)
		}
		if err := h.reg.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		dec, err := h.d.Intercept(ctx, ev)
		if err != nil || dec.Decision != Allow {
			t.Fatalf("broken policy: %+v %v", dec, err)
		}
		logged := h.decisions(dec.DecisionID, 1)[0]
		if !logged.FromFailureMode || !strings.Contains(logged.Error, "does not compile") {
			t.Fatalf("broken policy logged as %+v", logged)
		}
	})
}

// A chain of policies and webhooks follows one set of rules, whatever kind each stage is.
func TestMixedChain(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		agent := int64(9000)
		var mu sync.Mutex
		var calls []string
		webhook := func(a *int64, name string, prio int, body string) Hook {
			return h.add(Hook{HookName: name, HookType: PreToolUse, AgentID: a, Priority: prio,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, name, body).srv.URL}})
		}
		pol := func(a *int64, name string, prio int, rules ...policy.Rule) Hook {
			return h.add(Hook{HookName: name, HookType: PreToolUse, AgentID: a, Priority: prio, DispatchType: DispatchPolicy,
				PolicyConfig: &policy.Config{Rules: rules}})
		}
		run := func(a *int64, args string) (Decision, []string) {
			t.Helper()
			mu.Lock()
			calls = nil
			mu.Unlock()
			dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, AgentID: a, Context: toolCtx(args)})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return dec, append([]string(nil), calls...)
		}
		next := func() *int64 { agent++; a := agent; return &a }

		t.Run("ask then deny is deny", func(t *testing.T) {
			a := next()
			p := pol(a, "policy-ask", 1, policy.Rule{Name: "large", When: "args.amount > 1000", Decision: "ask", Reason: "'大额'"})
			w := webhook(a, "webhook-deny", 2, `{"decision":"deny","reason":"黑名单"}`)
			dec, calls := run(a, `{"amount":5000}`)
			if dec.Decision != Deny || dec.Reason != "黑名单" || len(calls) != 1 {
				t.Fatalf("%+v calls %v", dec, calls)
			}
			logged := h.decisions(dec.DecisionID, 2)
			if logged[0].HookID != p.ID || logged[0].Outcome != Ask || logged[0].RuleName != "large" ||
				logged[1].HookID != w.ID || logged[1].Outcome != Deny || logged[1].RuleName != "" || logged[1].StatusCode != 200 {
				t.Fatalf("decision log %+v", logged)
			}
		})
		t.Run("webhook ask then policy deny is deny", func(t *testing.T) {
			a := next()
			webhook(a, "webhook-ask", 1, `{"decision":"ask","reason":"人工"}`)
			pol(a, "policy-deny", 2, r("limit", "args.amount > 1000", "deny"))
			dec, _ := run(a, `{"amount":5000}`)
			if dec.Decision != Deny {
				t.Fatalf("%+v", dec)
			}
			if logged := h.decisions(dec.DecisionID, 2); logged[0].Outcome != Ask || logged[1].RuleName != "limit" {
				t.Fatalf("decision log %+v", logged)
			}
		})
		t.Run("ask then allow is ask", func(t *testing.T) {
			a := next()
			pol(a, "policy-ask", 1, policy.Rule{Name: "large", When: "args.amount > 1000", Decision: "ask", Reason: "'大额转账需人工审批'"})
			webhook(a, "webhook-allow", 2, `{"decision":"allow"}`)
			dec, calls := run(a, `{"amount":5000}`)
			if dec.Decision != Ask || dec.Reason != "大额转账需人工审批" || len(calls) != 1 {
				t.Fatalf("%+v calls %v", dec, calls)
			}
			if logged := h.decisions(dec.DecisionID, 2); logged[0].Outcome != Ask || logged[1].Outcome != Allow {
				t.Fatalf("decision log %+v", logged)
			}
		})
		t.Run("deny ends the chain", func(t *testing.T) {
			a := next()
			pol(a, "policy-deny", 1, r("all", "true", "deny"))
			webhook(a, "never", 2, `{"decision":"allow"}`)
			dec, calls := run(a, `{}`)
			if dec.Decision != Deny || len(calls) != 0 {
				t.Fatalf("%+v calls %v", dec, calls)
			}
			h.decisions(dec.DecisionID, 1)
		})
		t.Run("order is priority then id across kinds", func(t *testing.T) {
			a := next()
			// Created first but with the larger priority: runs second.
			webhook(a, "second", 5, `{"decision":"deny","reason":"webhook saw the masked card"}`)
			pol(a, "first", 1, policy.Rule{Name: "mask", When: "has(args.cardNo)", Decision: "modify",
				ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"})
			dec, calls := run(a, `{"cardNo":"6222020012345678"}`)
			if dec.Decision != Deny || len(calls) != 1 {
				t.Fatalf("%+v calls %v", dec, calls)
			}
			logged := h.decisions(dec.DecisionID, 2)
			if logged[0].HookName != "first" || logged[0].Outcome != Modify || logged[0].RuleName != "mask" || logged[1].HookName != "second" {
				t.Fatalf("decision log %+v", logged)
			}
		})
		t.Run("modify handed on from policy to webhook and back", func(t *testing.T) {
			a := next()
			var seen []string
			rec := newRecorder(t, func(_ int, _ *http.Request, body []byte) (int, string) {
				var env Envelope
				json.Unmarshal(body, &env)
				mu.Lock()
				seen = append(seen, string(env.Context))
				mu.Unlock()
				return 200, `{"decision":"modify","modifiedValue":"{\"cardNo\":\"************5678\",\"checked\":true}"}`
			})
			pol(a, "mask", 1, policy.Rule{Name: "mask", When: "has(args.cardNo) && !args.cardNo.startsWith('*')", Decision: "modify",
				ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"})
			h.add(Hook{HookName: "check", HookType: PreToolUse, AgentID: a, Priority: 2, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
			pol(a, "after", 3, policy.Rule{Name: "checked", When: "has(args.checked) && args.checked", Decision: "ask", Reason: "'checked: ' + args.cardNo"})
			dec, _ := run(a, `{"cardNo":"6222020012345678"}`)
			if dec.Decision != Ask || dec.Reason != "checked: ************5678" || deref(dec.ModifiedValue) != `{"cardNo":"************5678","checked":true}` {
				t.Fatalf("%+v modified %s", dec, deref(dec.ModifiedValue))
			}
			if len(seen) != 1 || !strings.Contains(seen[0], `"arguments":{"cardNo":"************5678"}`) {
				t.Fatalf("webhook saw %v", seen)
			}
			logged := h.decisions(dec.DecisionID, 3)
			if logged[0].Outcome != Modify || logged[1].Outcome != Modify || logged[2].Outcome != Ask || logged[2].RuleName != "checked" {
				t.Fatalf("decision log %+v", logged)
			}
		})
	})
}

// TestPolicySourceSize: chainEvent.MaxSize bounds pre_tool_use's context by its fields, so it
// must know every one of them; a field added to the context needs its place there.
func TestPolicySourceSize(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[PreToolUseContext]().Fields() {
		fields = append(fields, f.Name)
	}
	if want := []string{"ToolName", "ToolCallID", "Arguments", "CodingAgent"}; !reflect.DeepEqual(fields, want) {
		t.Fatalf("PreToolUseContext has %v; chainEvent.MaxSize knows %v", fields, want)
	}
	c, _ := newChainEvent(&Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "t", Arguments: `{"a":"xxxxxxxxxx"}`,
		CodingAgent: &CodingAgent{AgentKind: "codex", Cwd: strings.Repeat("/d", 300)}}}, false)
	if n := c.MaxSize(); n < 600 {
		t.Fatalf("MaxSize %d, less than the cwd's 600 bytes", n)
	}
}

// FuzzPolicySource: what a policy reads of a context through the chain event — its arguments,
// tool and input, each taken from the context's own fields — is what it would read of the whole
// context as a webhook receives it, rendered and decoded.
func FuzzPolicySource(f *testing.F) {
	for _, args := range []string{`{"amount":5000,"currency":"CNY"}`, ` { "a" : [1, 2.5, {"b": null}], "a": "last" } `,
		`{"html":"<b>&</b>","u":"\u2028\ud83d\ude00","n":-0.1e3}`, `[1,2]`, `"text"`, `12`, `{"open":`, `not json`, ``,
		`{}`, `{"deep":{"er":{"still":[{"x":true}]}}}`, "{\"bad\":\"\xff\"}"} {
		f.Add("transferFunds", args, "hello")
	}
	f.Fuzz(func(t *testing.T, tool, args, input string) {
		agent := &CodingAgent{AgentKind: "claude-code", ExternalSessionID: input, Cwd: tool, PermissionMode: input}
		for _, ctx := range []any{&PreToolUseContext{ToolName: tool, ToolCallID: "call_1", Arguments: Value(args)},
			&PreToolUseContext{ToolName: tool, ToolCallID: input, Arguments: Value(args), CodingAgent: agent},
			&UserMessageContext{UserInput: input}} {
			c, err := newChainEvent(&Event{HookType: PreToolUse, Context: ctx}, false)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := c.Context()
			if err != nil {
				t.Skip("context not rendered:", err) // as json.Marshal would refuse it
			}
			// Built from the fields (toolCallContext) or decoded: what the rendered context decodes to.
			body, _, err := c.rendered()
			if err != nil {
				t.Fatal(err)
			}
			if decoded, err := policy.DecodeJSON(body); err != nil || !reflect.DeepEqual(whole, decoded) {
				t.Fatalf("context %#v, the rendered one %s decodes to %#v (%v)", whole, body, decoded, err)
			}
			want := policy.Decoded(whole)
			fresh, _ := newChainEvent(&Event{HookType: PreToolUse, Context: ctx}, false) // parts read first, the whole never
			if got, w := fresh.Arguments(), want.Arguments(); !reflect.DeepEqual(got, w) {
				t.Fatalf("arguments %q: %#v, the context has %#v", args, got, w)
			}
			if fresh.ToolName() != want.ToolName() || fresh.UserInput() != want.UserInput() {
				t.Fatalf("tool %q / input %q, the context has %q / %q", fresh.ToolName(), fresh.UserInput(), want.ToolName(), want.UserInput())
			}
			// The size bound the uncounted evaluation trusts holds of what a rule reads.
			if got, w := fresh.MaxSize(), want.MaxSize(); got < w {
				t.Fatalf("MaxSize %d, but the context holds a value of size %d", got, w)
			}
		}
	})
}
