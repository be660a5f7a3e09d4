package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
)

// argsEvent is a pre_tool_use event with the arguments args.
func argsEvent(t *testing.T, args map[string]string) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return toolEvent("x", string(b))
}

// A pattern taken from the input whose matching may cost more than the limit is refused before
// it runs, at any costLimit, with an error naming the function and the sizes, and reported as a
// cost overrun. Without the bound each of the first four runs for many seconds (a quadratic NFA
// run over 80 KB), and the last, a 241-byte pattern that compiles to 40,000 instructions, for
// seconds: a regression shows as a test that times out, not as one that is slow.
func TestComputedPatternOverTheLimitIsRefused(t *testing.T) {
	const n = 20000
	long := strings.Repeat("a", 4*n)
	cases := []struct{ function, when, s, pattern string }{
		{"glob", "args.s.glob(args.p)", long, strings.Repeat("*a", n) + "*b"},
		{"matches", "args.s.matches(args.p)", long, strings.Repeat("a*", n) + "b"},
		{"matches", "matches(args.s, args.p)", long, strings.Repeat("a*", n) + "b"},
		{"regex.extract", "regex.extract(args.s, args.p).hasValue()", long, strings.Repeat("a*", n) + "b"},
		{"matches", "args.s.matches(args.p)", long[:10000], strings.Repeat("(?:a*){1000}", 20) + "b"},
	}
	for _, c := range cases {
		for _, limit := range []uint64{0, policy.MaxCostLimit} {
			p, err := policy.Compile(policy.Config{CostLimit: limit, Rules: []policy.Rule{{Name: "r", When: c.when, Decision: "deny"}}}, "pre_tool_use")
			if err != nil {
				t.Fatal(err)
			}
			for _, eval := range []func(*policy.Input) (policy.Result, error){p.Eval, p.EvalCounted} {
				_, err := eval(input(t, argsEvent(t, map[string]string{"s": c.s, "p": c.pattern})))
				var ee *policy.EvalError
				var pe *policy.PatternCostError
				if !errors.As(err, &ee) || !ee.CostExceeded || ee.Rule != "r" || ee.Field != "when" || !errors.As(err, &pe) {
					t.Fatalf("%s, costLimit %d: %v", c.when, limit, err)
				}
				if pe.Function != c.function || pe.StringBytes != len(c.s) || pe.PatternBytes != len(c.pattern) || pe.Cost <= pe.Left {
					t.Errorf("%s, costLimit %d: %+v", c.when, limit, pe)
				}
				if want := fmt.Sprintf("%s of a %d-byte string with a %d-byte pattern", c.function, len(c.s), len(c.pattern)); !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the message does not name the function and sizes: %v", c.when, err)
				}
			}
		}
	}
}

// What is left of the limit counts: a pattern the limit allows alone is refused after a
// comprehension that costs less than the pattern's price.
func TestComputedPatternAfterOtherWork(t *testing.T) {
	compile := func(limit uint64) *policy.Policy {
		p, err := policy.Compile(policy.Config{CostLimit: limit, Rules: []policy.Rule{
			{Name: "r", When: "lists.range(args.n.size() * 100).all(i, i >= 0) && args.s.glob(args.p)", Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := map[string]string{"s": strings.Repeat("a", 1000), "p": "*a*", "n": ""}
	alone, err := compile(policy.MaxCostLimit).EvalCounted(input(t, argsEvent(t, args)))
	if err != nil || alone.Decision != "deny" {
		t.Fatalf("alone: %+v %v", alone, err)
	}
	args["n"] = "x"
	both, err := compile(policy.MaxCostLimit).EvalCounted(input(t, argsEvent(t, args)))
	if err != nil || both.Cost-alone.Cost >= alone.Cost {
		t.Fatalf("the comprehension should cost less than the glob: %+v %v, alone %d", both, err, alone.Cost)
	}
	limit := alone.Cost + (both.Cost-alone.Cost)/2
	if res, err := compile(limit).Eval(input(t, argsEvent(t, map[string]string{"s": args["s"], "p": args["p"], "n": ""}))); err != nil || res.Decision != "deny" {
		t.Fatalf("alone, limit %d: %+v %v", limit, res, err)
	}
	_, err = compile(limit).Eval(input(t, argsEvent(t, args)))
	var pe *policy.PatternCostError
	if !errors.As(err, &pe) || pe.Left >= pe.Cost {
		t.Fatalf("after the comprehension, limit %d: %v", limit, err)
	}
}

// Literal patterns on large inputs decide as before, and within the default costLimit; computed
// patterns of ordinary size too.
func TestPatternsThatFit(t *testing.T) {
	big := strings.Repeat("a", 600_000)
	cases := []struct {
		when string
		args map[string]string
		want bool
	}{
		{"args.path.glob('/etc/**')", map[string]string{"path": "/etc/" + big}, true},
		{"args.path.glob('**/*.pem')", map[string]string{"path": "/srv/" + big}, false},
		{"args.path.glob('**/*.pem')", map[string]string{"path": "/srv/" + big + ".pem"}, true},
		{"args.s.matches('^a+$')", map[string]string{"s": big}, true},
		{"args.s.matches('(^|\\\\s)/etc(/|\\\\s|$)')", map[string]string{"s": big + " /etc/hosts"}, true},
		{"regex.replace(args.s, 'a+', 'b') == 'b'", map[string]string{"s": big}, true},
		{"args.path.glob(args.p)", map[string]string{"path": "/etc/passwd", "p": "/etc/*"}, true},
		{"args.path.glob(args.p)", map[string]string{"path": "/etc/ssh/key", "p": "/etc/*"}, false},
		// The pattern is resolved as the path is: written with ./, .. or a trailing slash, it
		// matches what it names.
		{"args.path.glob('./secrets/*')", map[string]string{"path": "./secrets/key.pem"}, true},
		{"args.path.glob('./secrets/*')", map[string]string{"path": "secrets/key.pem"}, true},
		{"args.path.glob('/etc/ssh/')", map[string]string{"path": "/etc/ssh/"}, true},
		{"args.path.glob('/srv/app/../keys/**')", map[string]string{"path": "/srv/keys/a/b.pem"}, true},
		{"args.path.glob(args.p)", map[string]string{"path": "/etc/ssh/key", "p": "/etc/ssh/"}, false},
		{"args.s.matches(args.p)", map[string]string{"s": "cat /etc/hosts", "p": "(^|\\s)/etc(/|\\s|$)"}, true},
		{"matches(args.s, args.p)", map[string]string{"s": "cat /tmp/x", "p": "(^|\\s)/etc(/|\\s|$)"}, false},
	}
	for _, c := range cases {
		p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "r", When: c.when, Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		for _, eval := range []func(*policy.Input) (policy.Result, error){p.Eval, p.EvalCounted} {
			res, err := eval(input(t, argsEvent(t, c.args)))
			if err != nil {
				t.Fatalf("%s: %v", c.when, err)
			}
			if got := res.Decision == "deny"; got != c.want {
				t.Errorf("%s = %v, want %v", c.when, got, c.want)
			}
			// A computed pattern has no static bound: it is always counted.
			if strings.Contains(c.when, "args.p)") && res.Cost == 0 {
				t.Errorf("%s: not counted", c.when)
			}
		}
	}
	// An invalid computed pattern is an evaluation error, not a cost overrun.
	p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "r", When: "args.s.matches(args.p)", Decision: "deny"}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Eval(input(t, argsEvent(t, map[string]string{"s": "a", "p": "("})))
	var ee *policy.EvalError
	if !errors.As(err, &ee) || ee.CostExceeded {
		t.Errorf("invalid pattern: %v", err)
	}
}

// The cost of a glob grows with the string, and, for a computed pattern, with the pattern.
func TestGlobCostGrowsWithItsInputs(t *testing.T) {
	cost := func(when string, args map[string]string) uint64 {
		t.Helper()
		p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "r", When: when, Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.EvalCounted(input(t, argsEvent(t, args)))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return res.Cost
	}
	short, long := "/srv/"+strings.Repeat("a", 100), "/srv/"+strings.Repeat("a", 100_000)
	if a, b := cost("args.path.glob('**/*.pem')", map[string]string{"path": short}),
		cost("args.path.glob('**/*.pem')", map[string]string{"path": long}); b <= 100*a {
		t.Errorf("literal pattern: cost %d for %d bytes, %d for %d", a, len(short), b, len(long))
	}
	if a, b := cost("args.path.glob(args.p)", map[string]string{"path": short, "p": "**/*.pem"}),
		cost("args.path.glob(args.p)", map[string]string{"path": long, "p": "**/*.pem"}); b <= 100*a {
		t.Errorf("computed pattern: cost %d for %d bytes, %d for %d", a, len(short), b, len(long))
	}
	if a, b := cost("args.path.glob(args.p)", map[string]string{"path": short, "p": "*a"}),
		cost("args.path.glob(args.p)", map[string]string{"path": short, "p": strings.Repeat("*a", 50)}); b <= 10*a {
		t.Errorf("computed pattern: cost %d for 2 bytes of pattern, %d for 100", a, b)
	}
}

// A pattern written in the rule is compiled at registration, as the function compiles it when it
// runs (RE2), for every function that takes one: one that does not compile, or that the function
// refuses (regex.extract and regex.extractAll take at most one capturing group), would fail the
// rule on every input, and a deny rule under failureMode ALLOW would let everything through. A
// pattern that compiles, and one the rule computes, are accepted.
func TestLiteralPatternsAreCheckedAtRegistration(t *testing.T) {
	cases := []struct {
		function, field, expr, msg string // msg "": compiles
	}{
		{"matches", "when", "args.s.matches('(')", "error parsing regexp: missing closing )"},
		{"matches", "when", "matches(args.s, '[')", "error parsing regexp: missing closing ]"},
		{"regex.extract", "when", "regex.extract(args.cmd, '(sk-[a-z]+').hasValue()", "error parsing regexp: missing closing )"},
		{"regex.extract", "when", "regex.extract(args.s, '(a)(b)').hasValue()", "2 capturing groups"},
		{"regex.extractAll", "when", "regex.extractAll(args.s, '[').size() > 0", "error parsing regexp: missing closing ]"},
		{"regex.extractAll", "when", "regex.extractAll(args.s, '(a)(b)').size() > 0", "2 capturing groups"},
		{"regex.replace", "modifiedValue", "regex.replace(input, '([0-9]{6}', '******')", "error parsing regexp: missing closing )"},
		{"regex.replace", "modifiedValue", "regex.replace(input, 'a{2,1}', 'b', 1)", "error parsing regexp: invalid repeat count"},
		{"regex.replace", "reason", "regex.replace(input, '*', '')", "error parsing regexp: missing argument to repetition operator"},

		{"matches", "when", "args.s.matches('^(sk-[a-z]+)$')", ""},
		{"regex.extract", "when", "regex.extract(args.cmd, '(sk-[a-z]+)').hasValue()", ""},
		{"regex.extractAll", "when", "regex.extractAll(args.s, '[0-9]+').size() > 0", ""},
		{"regex.replace", "modifiedValue", "regex.replace(input, '([0-9]{14})([0-9]{3}[0-9Xx])', r'**************\\2')", ""},
		{"glob", "when", "args.path.glob('/etc/[ssh]/**')", ""},

		{"matches", "when", "args.s.matches(args.p)", ""},
		{"regex.extract", "when", "regex.extract(args.cmd, args.p).hasValue()", ""},
		{"regex.extractAll", "when", "regex.extractAll(args.s, args.p + '(').size() > 0", ""},
		{"regex.replace", "modifiedValue", "regex.replace(input, input, '******')", ""},
		{"glob", "when", "args.path.glob(args.p)", ""},
	}
	for _, c := range cases {
		r := policy.Rule{Name: "secret", When: "true", Decision: "deny"}
		switch c.field {
		case "when":
			r.When = c.expr
		case "reason":
			r.Reason = c.expr
		case "modifiedValue":
			r.Decision, r.ModifiedValue = "modify", c.expr
		}
		_, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "ok", When: "false", Decision: "allow"}, r}}, "user_message")
		if c.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", c.expr, err)
			}
			continue
		}
		var ve *hookdtype.ValidationError
		if !errors.As(err, &ve) || ve.Field != "policyConfig.rules[1]."+c.field ||
			!strings.HasPrefix(ve.Msg, c.function+": ") || !strings.Contains(ve.Msg, c.msg) {
			t.Errorf("%s: got %v, want a ValidationError of policyConfig.rules[1].%s saying %s: …%s…", c.expr, err, c.field, c.function, c.msg)
		}
	}
}
