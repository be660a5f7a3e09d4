package policy_test

import (
	"cel.dev/cel-go/common/types"

	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/policy"
)

// tenRules is a realistic payment policy; the event below passes all ten, so every rule's when
// is evaluated (the worst case for a first-match policy).
var tenRules = policy.Config{Rules: []policy.Rule{
	{Name: "over-limit", When: "args.amount > 10000", Decision: "deny", Reason: "'over limit'"},
	{Name: "negative", When: "args.amount <= 0", Decision: "deny"},
	{Name: "currency", When: "!(args.currency in ['CNY', 'USD', 'EUR'])", Decision: "deny"},
	{Name: "account", When: "!args.to.matches('^[0-9]{16,19}$')", Decision: "deny"},
	{Name: "self", When: "args.to == args.from", Decision: "deny"},
	{Name: "memo", When: "has(args.memo) && args.memo.size() > 140", Decision: "deny"},
	{Name: "night", When: "has(args.scheduled) && args.scheduled", Decision: "ask"},
	{Name: "anonymous", When: "principalId == null", Decision: "deny"},
	{Name: "large", When: "args.amount > 5000", Decision: "ask"},
	{Name: "card", When: "has(args.cardNo)", Decision: "modify", ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"},
}}

var accountRe = regexp.MustCompile(`^[0-9]{16,19}$`)

// tenChecks is tenRules written as a plain Go function over the same input.
func tenChecks(in *policy.Input) string {
	a := in.Args
	amount, _ := a["amount"].(types.Int)
	cur, _ := a["currency"].(types.String)
	to, _ := a["to"].(types.String)
	from, _ := a["from"].(types.String)
	memo, hasMemo := a["memo"].(types.String)
	sched, _ := a["scheduled"].(bool)
	switch {
	case amount > 10000, amount <= 0, !slices.Contains([]types.String{"CNY", "USD", "EUR"}, cur),
		!accountRe.MatchString(string(to)), to == from, hasMemo && len(memo) > 140:
		return policy.Deny
	case sched:
		return policy.Ask
	case in.PrincipalID == nil:
		return policy.Deny
	case amount > 5000:
		return policy.Ask
	}
	if _, ok := a["cardNo"]; ok {
		return policy.Modify
	}
	return policy.Allow
}

const benchArgs = `{"amount":1200,"currency":"CNY","to":"6222020012345678","from":"6222020087654321","memo":"rent"}`

// BenchmarkDecision compares one 10-rule policy decision with the same checks in Go, on the same
// input, one of each in turn so that load from elsewhere falls on both alike. It reports the
// medians of single decisions and their ratio (x-go-p50).
func BenchmarkDecision(b *testing.B) {
	in := input(b, toolEvent("transferFunds", benchArgs))
	p, err := policy.Compile(tenRules, "pre_tool_use")
	if err != nil {
		b.Fatal(err)
	}
	if res, err := p.Eval(in); err != nil || res.Decision != policy.Allow || tenChecks(in) != policy.Allow {
		b.Fatalf("policy %+v %v, go %s", res, err, tenChecks(in))
	}
	pol := make([]time.Duration, 0, b.N)
	plain := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := p.Eval(in); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if tenChecks(in) == "" {
			b.Fatal("no decision")
		}
		pol, plain = append(pol, t1.Sub(t0)), append(plain, time.Since(t1))
	}
	b.StopTimer()
	pp, gp := p50(pol), p50(plain)
	b.ReportMetric(float64(pp.Nanoseconds()), "policy-p50-ns")
	b.ReportMetric(float64(gp.Nanoseconds()), "go-p50-ns")
	b.ReportMetric(float64(pp)/float64(gp), "x-go-p50")
}

func p50(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func TestTenRulesAgreeWithGo(t *testing.T) {
	p, err := policy.Compile(tenRules, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{benchArgs,
		strings.Replace(benchArgs, "1200", "20000", 1), strings.Replace(benchArgs, "1200", "6000", 1),
		strings.Replace(benchArgs, "CNY", "JPY", 1), strings.Replace(benchArgs, `"rent"`, `"rent","cardNo":"6222"`, 1),
		strings.Replace(benchArgs, "6222020012345678", "62", 1)} {
		in := input(t, toolEvent("transferFunds", args))
		res, err := p.Eval(in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision != tenChecks(in) {
			t.Errorf("%s: policy %s, go %s", args, res.Decision, tenChecks(in))
		}
	}
}
