package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hookd/hookd/policy"
)

// A call whose result or work is far larger than its arguments is priced from their values
// before it runs, and refused as a cost overrun when the price is more than the limit leaves.
// Without the bound the first two take the process down (out of memory: a 24 GB and a 32 GB
// string), and the next two take seconds to minutes: a regression shows as a crashed or timed
// out test, not as a slow one.
func TestAmplifyingCallsArePricedFirst(t *testing.T) {
	list := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	far := func(n int) []int { // none of list(n)
		out := list(n)
		for i := range out {
			out[i] += n
		}
		return out
	}
	cases := []struct {
		function, when string
		args           map[string]any
	}{
		{"replace", "args.template.replace('{{name}}', args.name).contains('password')",
			map[string]any{"template": strings.Repeat("{{name}}", 60000), "name": strings.Repeat("x", 400000)}},
		{"join", "args.a.map(x, args.s).join('').size() > 0", map[string]any{"a": list(40000), "s": strings.Repeat("x", 800000)}},
		{"format", "'%s'.format([args.a.map(x, args.s)]).size() > 0", map[string]any{"a": list(40000), "s": strings.Repeat("x", 800000)}},
		{"@in", "args.a.exists(x, x in args.b)", map[string]any{"a": list(20000), "b": far(20000)}},
		{"sets.intersects", "sets.intersects(args.a, args.b)", map[string]any{"a": list(20000), "b": far(20000)}},
		{"lists.range", "lists.range(args.n).size() > 0", map[string]any{"n": 2_000_000_000}},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.args)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []uint64{0, policy.MaxCostLimit} {
			p, err := policy.Compile(policy.Config{CostLimit: limit, Rules: []policy.Rule{{Name: "r", When: c.when, Decision: "deny"}}}, "pre_tool_use")
			if err != nil {
				t.Fatalf("%s: %v", c.when, err)
			}
			for _, eval := range []func(*policy.Input) (policy.Result, error){p.Eval, p.EvalCounted} {
				_, err := eval(input(t, toolEvent("x", string(b))))
				var ee *policy.EvalError
				var ce *policy.CallCostError
				// Refused before it ran, or, once the priced calls' charges used the limit up, by
				// the tracker between them (each `in` of the comprehension).
				if !errors.As(err, &ee) || !ee.CostExceeded || ee.Rule != "r" || (errors.As(err, &ce) && ce.Function != c.function) ||
					(ce == nil && c.function != "@in") {
					t.Fatalf("%s, costLimit %d: %v", c.when, limit, err)
				}
			}
		}
	}
}

// The same calls on values of ordinary size decide as before.
func TestPricedCallsThatFit(t *testing.T) {
	for _, when := range []string{
		"args.s.replace('a', 'bb') == 'bbbbbb'",
		"args.s.replace('', '-') == '-a-a-a-'",
		"args.s.replace('a', 'b', 1) == 'baa'",
		"['x', 'y'].join(',') == 'x,y' && [args.s, args.s].join() == 'aaaaaa'",
		"'%s-%d'.format([args.s, 3]) == 'aaa-3'",
		"2 in args.l && !(9 in args.l) && 'k' in {'k': 1}",
		"sets.contains(args.l, [1, 2]) && sets.intersects(args.l, [3]) && !sets.equivalent(args.l, [1])",
		"lists.range(3) == [0, 1, 2] && [[1], [2, [3]]].flatten() == [1, 2, [3]] && [1, 1, 2].distinct() == [1, 2]",
	} {
		p, err := policy.Compile(policy.Config{Rules: []policy.Rule{{Name: "r", When: when, Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		res, err := p.EvalCounted(input(t, toolEvent("x", `{"s": "aaa", "l": [1, 2, 3]}`)))
		if err != nil || res.Decision != "deny" {
			t.Errorf("%s: %+v %v", when, res, err)
		}
	}
}

// A flatten of a list the rule computes is priced from the list's sizes before it runs, the
// tracker's own charge for the list it would make included: args.l.map(i, args.l) is 3,000
// references to one list (about 40,000 to build), and its flatten 9 million elements. Without
// the price counting that charge, the flatten ran (seconds, 1.6 GB) and only then went over the
// limit, reporting 18 million.
func TestFlattenOfAComputedListIsPricedFirst(t *testing.T) {
	b, err := json.Marshal(map[string]any{"l": make([]int, 3000)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(policy.Config{CostLimit: policy.MaxCostLimit, Rules: []policy.Rule{
		{Name: "r", When: "args.l.map(i, args.l).flatten().size() == 0", Decision: "deny"}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	for _, eval := range []func(*policy.Input) (policy.Result, error){p.Eval, p.EvalCounted} {
		res, err := eval(input(t, toolEvent("x", string(b))))
		var ee *policy.EvalError
		var ce *policy.CallCostError
		if !errors.As(err, &ee) || !ee.CostExceeded || ee.Rule != "r" || !errors.As(err, &ce) || ce.Function != "flatten" {
			t.Fatalf("%+v %v", res, err)
		}
		if res.Cost > policy.MaxCostLimit {
			t.Errorf("cost %d, over the limit %d", res.Cost, policy.MaxCostLimit)
		}
	}
}

// Whatever the size of the list a call makes, the evaluation decides within the limit or is
// stopped before it passes it: a refused call charges nothing, and a call that runs was priced
// with everything the tracker charges for it and for its arguments' second evaluation. The one
// margin is the step after the call (a size, then a comparison: 1 each), which the price does not
// see and the tracker stops at.
func TestListMakingCallsStayWithinTheLimit(t *testing.T) {
	const limit, margin = 100_000, 1
	for _, when := range []string{
		"args.l.map(i, args.l).flatten().size() > 0",
		"args.l.map(i, args.l).flatten(1).size() > 0",
		"lists.range(args.l.size() * 500).size() > 0",
	} {
		p, err := policy.Compile(policy.Config{CostLimit: limit, Rules: []policy.Rule{{Name: "r", When: when, Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		decided, refused := 0, 0
		for n := 50; n <= 250; n += 2 { // lists of 2,500 to 62,500 elements, priced from 12,500 to 312,500
			b, err := json.Marshal(map[string]any{"l": make([]int, n)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.EvalCounted(input(t, toolEvent("x", string(b))))
			var ee *policy.EvalError
			switch {
			case err == nil:
				decided++
			case errors.As(err, &ee) && ee.CostExceeded:
				refused++
			default:
				t.Fatalf("%s, %d: %v", when, n, err)
			}
			if res.Cost > limit+margin {
				t.Fatalf("%s, %d: cost %d, over the limit %d", when, n, res.Cost, limit)
			}
		}
		if decided == 0 || refused == 0 {
			t.Errorf("%s: %d decided, %d refused; the sizes should straddle the limit", when, decided, refused)
		}
	}
}

// What the daemon decides (Eval, uncounted where CEL's static estimate fits the limit) is what a
// trial decides (EvalCounted: policy test, the evaluate endpoint), near the limit too: a priced
// call's price is not in CEL's estimate, so an expression with one is counted. Before, a format
// priced at 978 with 976 of costLimit 1000 left was refused counted and ran uncounted: the daemon
// denied what the trial said its failureMode allowed. hookd's own mask and with make values as
// large as their receivers, and are priced like the others: 400 masks of a 900 KB string were
// 6,814 units and 670 MB.
func TestUncountedDecidesAsCounted(t *testing.T) {
	zeros := make([]int, 2000)
	for _, c := range []struct {
		when  string
		limit uint64
		args  map[string]any
		over  bool // past the limit: both refuse it
	}{
		{"'%s'.format([args.items]).size() > 1000", 1000, map[string]any{"items": zeros}, true},
		{"'%s'.format([args.items]).size() > 1000", 0, map[string]any{"items": zeros}, false},
		{"args.items.flatten().size() > 10", 1000, map[string]any{"items": [][]int{zeros}}, true},
		{"lists.range(400).map(x, args.s.mask(0)).size() > 0", 0, map[string]any{"s": strings.Repeat("x", 900_000)}, true},
		{"lists.range(300).map(x, args.m.with(args.m)).size() > 0", 0, map[string]any{"m": map[string]int{"a": 1}}, false},
		{"lists.range(2000).map(x, args.m.with(args.m)).size() > 0", 10000, map[string]any{"m": bigMap(100)}, true},
		{"tool in ['x', 'y'] && args.items.size() > 10", 0, map[string]any{"items": zeros}, false},
	} {
		b, err := json.Marshal(c.args)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Compile(policy.Config{CostLimit: c.limit, Rules: []policy.Rule{{Name: "r", When: c.when, Decision: "deny"}}}, "pre_tool_use")
		if err != nil {
			t.Fatalf("%s: %v", c.when, err)
		}
		got, gotErr := p.Eval(input(t, toolEvent("x", string(b))))
		want, wantErr := p.EvalCounted(input(t, toolEvent("x", string(b))))
		var ee *policy.EvalError
		if got.Decision != want.Decision || (gotErr == nil) != (wantErr == nil) || c.over != (errors.As(gotErr, &ee) && ee.CostExceeded) {
			t.Errorf("%s (limit %d): the daemon's %+v %v, a trial's %+v %v", c.when, c.limit, got, gotErr, want, wantErr)
		}
	}
}

func bigMap(n int) map[string]int {
	m := make(map[string]int, n)
	for i := range n {
		m[strings.Repeat("k", i+1)] = i
	}
	return m
}
