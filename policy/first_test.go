package policy

import (
	"fmt"
	"reflect"
	"testing"
)

// TestFirstProgramMatchesRuleByRule: Eval through the one-program form of the whens gives what
// trying the rules one by one gives — decision, rule, reason, modifiedValue, cost, and the error
// naming rule and field — for true, false, erring, non-bool and costly whens.
func TestFirstProgramMatchesRuleByRule(t *testing.T) {
	policies := []Config{
		{Rules: []Rule{
			{Name: "over", When: "args.amount > 10000", Decision: Deny, Reason: "'over ' + string(args.amount)"},
			{Name: "div", When: "args.amount / args.d > 1 // a comment", Decision: Ask},
			{Name: "dyn", When: "args.flag", Decision: Deny},
			{Name: "card", When: "has(args.cardNo)", Decision: Modify, ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"},
			{Name: "cur", When: "!(args.currency in ['CNY', 'USD'])", Decision: Deny, Reason: "args.currency"},
			{Name: "tool", When: "event.context.toolName.matches('^pay') && tool.size() > 3", Decision: Ask}},
			Default: Allow},
		{Rules: []Rule{
			{Name: "a", When: "args.amount > 5", Decision: Deny},
			{Name: "costly", When: "[1,2,3,4,5,6,7,8].all(x, [1,2,3,4,5,6,7,8].all(y, x + y + args.amount > 0))", Decision: Ask}},
			Default: Deny, CostLimit: 150},
		{Rules: []Rule{{Name: "only", When: "args.amount == 1", Decision: Ask}, {Name: "two", When: "false", Decision: Deny}}, Default: Ask},
	}
	args := []string{`{"amount":20000}`, `{"amount":5,"d":0}`, `{"amount":5,"d":1,"flag":"yes"}`, `{"amount":5,"d":1,"flag":true}`,
		`{"amount":5,"d":1,"flag":false,"cardNo":"6222020000001234"}`, `{"amount":5,"d":1,"flag":false,"currency":"EUR"}`,
		`{"amount":5,"d":1,"flag":false,"currency":"CNY"}`, `{"amount":1,"d":1,"flag":false,"currency":"USD"}`, `{}`, `{"amount":-3}`}
	for pi, c := range policies {
		p, err := Compile(c, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		if p.first.counted == nil {
			t.Fatalf("policy %d: no one-program form", pi)
		}
		each := *p
		each.first = program{} // none: rule by rule, counted
		for _, a := range args {
			for _, tool := range []string{"payOrder", "transfer"} {
				in := input(t, fmt.Sprintf(`{"hookType":"pre_tool_use","principalId":1,"context":{"toolName":%q,"arguments":%s}}`, tool, a))
				got, gerr := p.EvalCounted(in)
				want, werr := each.Eval(in)
				if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Fatalf("policy %d, %s %s:\n got %+v %v\nwant %+v %v", pi, tool, a, got, gerr, want, werr)
				}
				// Uncounted where the bound allows: the same decision, or error, without its cost.
				fast, ferr := p.Eval(in)
				if fast.Cost == 0 {
					fast.Cost = got.Cost
				}
				if !reflect.DeepEqual(fast, got) || fmt.Sprint(ferr) != fmt.Sprint(gerr) {
					t.Fatalf("policy %d, %s %s, uncounted:\n got %+v %v\nwant %+v %v", pi, tool, a, fast, ferr, got, gerr)
				}
			}
		}
	}
}

func input(t *testing.T, envelope string) *Input {
	t.Helper()
	v, err := DecodeJSON([]byte(envelope))
	if err != nil {
		t.Fatal(err)
	}
	return NewInput(v.(map[string]any))
}
