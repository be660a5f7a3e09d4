package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
)

func input(t testing.TB, envelope string) *policy.Input {
	t.Helper()
	v, err := policy.DecodeJSON([]byte(envelope))
	if err != nil {
		t.Fatal(err)
	}
	return policy.NewInput(v.(map[string]any))
}

func toolEvent(tool, args string) string {
	return `{"schemaVersion":"1.0","eventId":"e1","hookType":"pre_tool_use","hookName":"h","occurredAt":1,
		"dispatchedAt":1,"deliveryAttempt":1,"traceId":"t","sessionId":5,"principalId":7,"agentId":null,
		"context":{"toolName":"` + tool + `","toolCallId":"c1","arguments":` + args + `}}`
}

// The example policy, and what it decides.
var transfer = policy.Config{Rules: []policy.Rule{
	{Name: "over-limit", When: "args.amount > 10000", Decision: "deny",
		Reason: "'单笔金额 ' + string(args.amount) + ' 超过限额 10000'"},
	{Name: "large", When: "args.amount > 1000", Decision: "ask", Reason: "'大额转账需人工审批'"},
	{Name: "mask-card", When: "has(args.cardNo)", Decision: "modify",
		ModifiedValue: "args.with({'cardNo': '****' + args.cardNo.substring(args.cardNo.size() - 4)})"}},
	Default: "allow"}

func TestFunctionsAndShortcuts(t *testing.T) {
	cases := []struct {
		name, when, event string
		want              bool
	}{
		{"mask keeps the tail", "'6222020012345678'.mask(4) == '************5678'", toolEvent("x", `{}`), true},
		{"mask of a short string", "'12'.mask(4) == '12'", toolEvent("x", `{}`), true},
		{"pathWithin resolves dot-dot", "pathWithin('/srv/app/../../etc/passwd', '/etc')", toolEvent("x", `{}`), true},
		{"pathWithin is not a prefix match", "pathWithin('/etcetera', '/etc')", toolEvent("x", `{}`), false},
		{"relative path is not within", "pathWithin('etc/passwd', '/etc')", toolEvent("x", `{}`), false},
		{"glob one segment", "'/etc/passwd'.glob('/etc/*')", toolEvent("x", `{}`), true},
		{"glob does not cross segments", "'/etc/ssh/key'.glob('/etc/*')", toolEvent("x", `{}`), false},
		{"glob double star", "'/etc/ssh/key'.glob('/etc/**')", toolEvent("x", `{}`), true},
		// . and .. are resolved first, as pathWithin does: a deny on /etc/** is not walked round.
		{"glob resolves ..", "'/tmp/../etc/passwd'.glob('/etc/**')", toolEvent("x", `{}`), true},
		{"glob resolves .. out of a dir", "'/srv/app/../../etc/passwd'.glob('/srv/**')", toolEvent("x", `{}`), false},
		{"glob resolves .", "'/etc/./passwd'.glob('/etc/*')", toolEvent("x", `{}`), true},
		// **/ is any number of directories, none included.
		{"glob **/ with no directory", "'key.pem'.glob('**/*.pem')", toolEvent("x", `{}`), true},
		{"glob **/ of ./", "'./key.pem'.glob('**/*.pem')", toolEvent("x", `{}`), true},
		{"glob **/ in the middle", "'/a/b/c/key.pem'.glob('/a/**/key.pem')", toolEvent("x", `{}`), true},
		{"glob **/ in the middle, none", "'/a/key.pem'.glob('/a/**/key.pem')", toolEvent("x", `{}`), true},
		{"glob **/ keeps segments", "'/ab/key.pem'.glob('/a/**/key.pem')", toolEvent("x", `{}`), false},
		{"glob /** takes the directory itself", "'/etc/'.glob('/etc/**') && '/etc'.glob('/etc/**')", toolEvent("x", `{}`), true},
		{"glob /** keeps segments", "'/etcetera'.glob('/etc/**')", toolEvent("x", `{}`), false},
		{"cidr", "cidr('10.0.0.0/8').containsIP(ip(args.host))", toolEvent("http", `{"host":"10.2.3.4"}`), true},
		{"regex matches", "args.command.matches('(^|\\\\s)/etc(/|\\\\s|$)')", toolEvent("shell", `{"command":"cat /etc/hosts"}`), true},
		{"strings ext", "args.command.lowerAscii().startsWith('rm ')", toolEvent("shell", `{"command":"RM -rf /"}`), true},
		{"with replaces and adds", "{'a': 1, 'b': 2}.with({'b': 3, 'c': 4}) == {'a': 1, 'b': 3, 'c': 4}", toolEvent("x", `{}`), true},
		{"event and ids", "event.context.toolCallId == 'c1' && principalId == 7 && sessionId == 5 && agentId == null", toolEvent("x", `{}`), true},
		{"tool", "tool == 'transferFunds'", toolEvent("transferFunds", `{}`), true},
		{"has on an absent field", "has(args.cardNo)", toolEvent("x", `{"amount":1}`), false},
		{"args of text arguments are empty", "args.size() == 0", toolEvent("x", `"not an object"`), true},
		{"optional values", "args.?limit.orValue(5) == 5", toolEvent("x", `{}`), true},
		{"math ext", "math.greatest(args.a, args.b) == 9", toolEvent("x", `{"a":3,"b":9}`), true},
		{"double against int", "args.amount > 10", toolEvent("x", `{"amount":10.5}`), true},
		{"user input", "input.contains('密码')", `{"hookType":"user_message","context":{"userInput":"我的密码是"}}`, true},
		{"task", "task.taskName == 'nightly' && task.taskId == 3", `{"hookType":"pre_scheduled_task","context":{"taskId":3,"taskName":"nightly"}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "r", When: c.when, Decision: "deny"}}}, "pre_tool_use")
			if err != nil {
				t.Fatal(err)
			}
			for _, eval := range []func(*policy.Input) (policy.Result, error){p.Eval, p.EvalCounted} {
				res, err := eval(input(t, c.event))
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Decision == "deny"; got != c.want {
					t.Fatalf("%s = %v, want %v", c.when, got, c.want)
				}
			}
		})
	}
}

func TestExamplePolicy(t *testing.T) {
	p, err := policy.Compile(transfer, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, decision, rule, reason, modified string }{
		{`{"amount":12000}`, "deny", "over-limit", "单笔金额 12000 超过限额 10000", ""},
		{`{"amount":5000}`, "ask", "large", "大额转账需人工审批", ""},
		{`{"amount":50,"cardNo":"6222020012345678"}`, "modify", "mask-card", "", `{"amount":50,"cardNo":"****5678"}`},
		{`{"amount":50}`, "allow", "", "", ""},
	} {
		// Eval as a dispatch does, and counted as a trial does: the same decision, the cost
		// counted only by the latter (the mask-card modify's static bound is over the default
		// costLimit, so Eval counts that one too).
		for _, counted := range []bool{false, true} {
			eval := map[bool]func(*policy.Input) (policy.Result, error){false: p.Eval, true: p.EvalCounted}[counted]
			res, err := eval(input(t, toolEvent("transferFunds", c.args)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Decision != c.decision || res.Rule != c.rule || res.Reason != c.reason || (res.Cost > 0) != (counted || c.modified != "") {
				t.Errorf("%s (counted %v): got %+v", c.args, counted, res)
			}
			if got := ""; res.ModifiedValue != nil {
				if got = *res.ModifiedValue; got != c.modified {
					t.Errorf("%s: modifiedValue %s, want %s", c.args, got, c.modified)
				}
			}
		}
	}
}

// A policy whose static cost bound fits its costLimit decides without counting (Result.Cost 0)
// on an input within SizeBound; over it, it counts, and so does a policy whose bound does not fit,
// whose cost overrun is still stopped. Either way the decision, and any error, is the counted one.
func TestUncountedWithinTheBound(t *testing.T) {
	p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "long", When: "args.s.size() > 3", Decision: "deny",
		Reason: "'too long: ' + args.s.substring(0, 3)"}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s       string
		counted bool
	}{{"abcdef", false}, {strings.Repeat("x", policy.SizeBound+1), true}} {
		in := input(t, toolEvent("x", `{"s":"`+c.s+`"}`))
		res, err := p.Eval(in)
		want, werr := p.EvalCounted(input(t, toolEvent("x", `{"s":"`+c.s+`"}`)))
		if err != nil || werr != nil || res.Decision != "deny" || res.Reason != want.Reason || (res.Cost > 0) != c.counted {
			t.Errorf("%d bytes: %+v %v, counted %+v %v", len(c.s), res, err, want, werr)
		}
	}
	// Over the bound by its arguments' list: a comprehension over it.
	p, err = policy.Compile(policy.Config{CostLimit: 1000, Rules: []policy.Rule{{Name: "any", When: "args.items.exists(i, i > 5)", Decision: "deny"}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Eval(input(t, toolEvent("x", `{"items":[1,9]}`))); err != nil || res.Decision != "deny" || res.Cost == 0 {
		t.Errorf("a bound over the limit is counted: %+v %v", res, err)
	}
	long := "[" + strings.Repeat("1,", 2000) + "1]"
	var ee *policy.EvalError
	if _, err := p.Eval(input(t, toolEvent("x", `{"items":`+long+`}`))); !errors.As(err, &ee) || !ee.CostExceeded {
		t.Errorf("an overrun of a counted policy: %v", err)
	}
	// Errors are the counted evaluation's, naming rule and field.
	p, err = policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "divide", When: "10 / args.n > 1", Decision: "deny"}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(input(t, toolEvent("x", `{"n":0}`))); !errors.As(err, &ee) || ee.Rule != "divide" || ee.Field != "when" {
		t.Errorf("division by zero: %v", err)
	}
}

func TestRegistrationErrors(t *testing.T) {
	rule := func(r policy.Rule) policy.Config {
		return policy.Config{Rules: []policy.Rule{{Name: "ok", When: "true", Decision: "allow"}, r}}
	}
	cases := []struct {
		name     string
		cfg      policy.Config
		hookType string
		field    string
		msg      string
	}{
		{"unknown variable", rule(policy.Rule{Name: "x", When: "amount > 1", Decision: "deny"}), "pre_tool_use",
			"policyConfig.rules[1].when", "undeclared reference to 'amount' (1:1)"},
		{"parse error", rule(policy.Rule{Name: "x", When: "args.amount >", Decision: "deny"}), "pre_tool_use",
			"policyConfig.rules[1].when", "Syntax error"},
		{"type error", rule(policy.Rule{Name: "x", When: "tool + 1 > 2", Decision: "deny"}), "pre_tool_use",
			"policyConfig.rules[1].when", "no matching overload"},
		{"when not bool", rule(policy.Rule{Name: "x", When: "tool", Decision: "deny"}), "pre_tool_use",
			"policyConfig.rules[1].when", "must evaluate to bool, not string"},
		{"reason not string", rule(policy.Rule{Name: "x", When: "true", Decision: "deny", Reason: "1"}), "pre_tool_use",
			"policyConfig.rules[1].reason", "must evaluate to string"},
		{"reason unknown variable", rule(policy.Rule{Name: "x", When: "true", Decision: "deny", Reason: "why"}), "pre_tool_use",
			"policyConfig.rules[1].reason", "undeclared reference to 'why'"},
		{"modifiedValue parse error", rule(policy.Rule{Name: "x", When: "true", Decision: "modify", ModifiedValue: "args.with("}), "pre_tool_use",
			"policyConfig.rules[1].modifiedValue", "Syntax error"},
		{"input modify must be a string", rule(policy.Rule{Name: "x", When: "true", Decision: "modify", ModifiedValue: "{'a': 1}"}), "user_message",
			"policyConfig.rules[1].modifiedValue", "must evaluate to string"},
		{"modify without value", rule(policy.Rule{Name: "x", When: "true", Decision: "modify"}), "pre_tool_use",
			"policyConfig.rules[1].modifiedValue", "is required"},
		{"value without modify", rule(policy.Rule{Name: "x", When: "true", Decision: "deny", ModifiedValue: "'a'"}), "pre_tool_use",
			"policyConfig.rules[1].modifiedValue", "only applies"},
		{"unknown decision", rule(policy.Rule{Name: "x", When: "true", Decision: "dney"}), "pre_tool_use",
			"policyConfig.rules[1].decision", `did you mean "deny"`},
		{"missing name", rule(policy.Rule{When: "true", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].name", "is required"},
		{"padded name", rule(policy.Rule{Name: " r ", When: "true", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].name", "spaces around it"},
		{"long name", rule(policy.Rule{Name: strings.Repeat("n", 201), When: "true", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].name", "at most 200"},
		{"name with a newline", rule(policy.Rule{Name: "a\nb", When: "true", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].name", "control characters"},
		{"duplicate name", rule(policy.Rule{Name: "ok", When: "true", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].name", "rules[0]"},
		{"missing when", rule(policy.Rule{Name: "x", Decision: "deny"}), "pre_tool_use", "policyConfig.rules[1].when", "is required"},
		{"bad default", policy.Config{Default: "modify"}, "pre_tool_use", "policyConfig.default", "not one of"},
		{"default in capitals", policy.Config{Default: "Deny"}, "pre_tool_use", "policyConfig.default", `did you mean "deny"`},
		{"cost limit too high", policy.Config{CostLimit: policy.MaxCostLimit + 1}, "pre_tool_use", "policyConfig.costLimit", "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Compile(c.cfg, c.hookType)
			var ve *hookdtype.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a ValidationError", err)
			}
			if ve.Field != c.field || !strings.Contains(ve.Msg, c.msg) {
				t.Fatalf("got %q, want field %s containing %q", err, c.field, c.msg)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	cfg := policy.Config{Rules: []policy.Rule{{Name: "divide", When: "10 / args.n > 1", Decision: "deny"}}}
	p, err := policy.Compile(cfg, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Eval(input(t, toolEvent("x", `{"n":0}`)))
	var ee *policy.EvalError
	if !errors.As(err, &ee) || ee.Rule != "divide" || ee.Field != "when" || ee.CostExceeded {
		t.Fatalf("division by zero: %v", err)
	}
	_, err = p.Eval(input(t, toolEvent("x", `{}`)))
	if !errors.As(err, &ee) || ee.Field != "when" {
		t.Fatalf("absent field without has(): %v", err)
	}
	cfg = policy.Config{CostLimit: 100, Rules: []policy.Rule{{Name: "slow", When: "lists.range(1000).all(i, i >= 0)", Decision: "deny"}}}
	if p, err = policy.Compile(cfg, "pre_tool_use"); err != nil {
		t.Fatal(err)
	}
	_, err = p.Eval(input(t, toolEvent("x", `{}`)))
	if !errors.As(err, &ee) || !ee.CostExceeded || ee.Rule != "slow" {
		t.Fatalf("cost overrun: %v", err)
	}
	// A dyn modifiedValue passes the type check whatever it holds; a number or a boolean is no
	// tool's arguments, a map or a list is.
	for expr, ok := range map[string]bool{"event.sessionId": false, "args.n": false, "args.n > 0 ? args.n : true": false,
		"event.context": true, "[args.n]": true, "'{}'": true} {
		cfg = policy.Config{Rules: []policy.Rule{{Name: "rewrite", When: "true", Decision: "modify", ModifiedValue: expr}}}
		if p, err = policy.Compile(cfg, "pre_tool_use"); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		in := input(t, toolEvent("x", `{"n":1}`))
		res, err := p.Eval(in)
		if ok != (err == nil) || !ok && (!errors.As(err, &ee) || ee.Field != "modifiedValue") {
			t.Errorf("modifiedValue %s: %+v %v", expr, res, err)
		}
	}
}
