package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// The calls whose work, or whose result, can be far larger than their arguments: a replace of
// every "{{x}}" of a 480 KB text by a 400 KB one makes 24 GB, a join of a list holding one 800
// KB string 40,000 times (args.a.map(x, args.s)) 32 GB, an `in` of each of 20,000 items in a
// list of 20,000 takes 400 million comparisons. The cost tracker charges a call after it
// returns, too late: the daemon is out of memory, or a decision takes minutes. So each such call
// is priced from its arguments' values before it runs (pricedCall), like a computed pattern.
//
// A price is in CEL cost units: about one per comparison or element, a tenth per byte of a
// string made or scanned (CEL's own string traversal factor).
var callPrices = map[string]func(args []ref.Val, left uint64) uint64{
	"replace":         replacePrice,
	"join":            joinPrice,
	"format":          formatPrice,
	"flatten":         flattenPrice,
	"lists.range":     rangePrice,
	"@in":             inPrice,
	"distinct":        func(a []ref.Val, _ uint64) uint64 { n := lenOf(a[0]); return cost.SafeMultiply(n, n) },
	"sets.contains":   productPrice,
	"sets.intersects": productPrice,
	"sets.equivalent": productPrice,
	"hasAll":          productPrice,
	"hasAny":          productPrice,
	"hasOnly":         productPrice,
	"hasExactly":      productPrice,
	// hookd's own: each makes a value as large as its receiver (and, for with, its argument).
	"mask": func(a []ref.Val, _ uint64) uint64 { return textSize(a[0], MaxCostLimit*10)/10 + 1 },
	"with": func(a []ref.Val, _ uint64) uint64 {
		if len(a) < 2 {
			return lenOf(a[0]) + 1
		}
		return cost.SafeAdd(lenOf(a[0]), lenOf(a[1])) + 1
	},
}

// perElement is, for each call of callPrices that makes a list, its price for each element of
// the list (at least). The tracker charges such a call for its list after it returns, one per
// element (cost.AllocList), so the check before the call counts that charge too: else a flatten
// priced at 9 million of the 10 million left ran to its end, holding its 9 million elements, and
// only then was over the limit, at 18 million.
var perElement = map[string]uint64{"flatten": flattenCopies, "lists.range": 1}

// boundCalls (a cel.CustomDecoratorV2) prices the calls of callPrices and the pattern calls of
// boundPatterns before they run.
func boundCalls(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	if call, ok := i.(interpreter.InterpretableCall); ok {
		if price, ok := callPrices[call.Function()]; ok && len(call.Args()) > 0 {
			return &pricedCall{InterpretableCall: call, price: price, perElement: perElement[call.Function()]}, nil
		}
	}
	return boundPatterns(i)
}

// CallCostError is a call refused before it ran: what it would cost, worked out from its
// arguments (its price, and the tracker's charge for a list it makes), is more than the Left of
// the cost limit once its arguments are evaluated again (see evalArgs). It is an EvalError's Err,
// with CostExceeded.
type CallCostError struct {
	Function   string
	Cost, Left uint64
}

func (e *CallCostError) Error() string {
	return fmt.Sprintf("cost limit exceeded: this %s of these values may cost %d, more than the %d left", e.Function, e.Cost, e.Left)
}

// pricedCall is a call of callPrices: its arguments are evaluated to price it, and the call
// then runs (evaluating them again, as computedPattern does) or is refused with a CallCostError.
type pricedCall struct {
	interpreter.InterpretableCall
	price      func(args []ref.Val, left uint64) uint64
	perElement uint64 // perElement's, 0 for a call that makes no list
}

func (c *pricedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args, left := evalArgs(frame, c)
	for _, a := range args {
		if types.IsUnknownOrError(a) {
			return c.InterpretableCall.Exec(frame) // as CEL reports it
		}
	}
	price := c.price(args, left)
	total := price
	if c.perElement > 0 {
		total = cost.SafeAdd(total, price/c.perElement+cost.CallCost+cost.ListCreateBaseCost)
	}
	if total > left {
		return types.WrapErr(&CallCostError{Function: c.Function(), Cost: total, Left: left})
	}
	charge(frame, c, price)
	return c.InterpretableCall.Exec(frame)
}

// evalArgs evaluates c's arguments, to price c, and works out what is left of the cost limit
// for c itself: the call evaluates its arguments again when it runs, spending what they cost a
// second time (args.l.map(i, args.l) before a flatten, 40,000).
func evalArgs(frame *interpreter.ExecutionFrame, c interpreter.InterpretableCall) (args []ref.Val, left uint64) {
	before := costLeft(frame)
	args = make([]ref.Val, len(c.Args()))
	for i, a := range c.Args() {
		args[i] = a.Exec(frame)
	}
	after := costLeft(frame)
	return args, cost.SafeSubtract(after, before-after)
}

// costLeft is what is left of the evaluation's cost limit; without a tracker (an uncounted
// program) the largest limit.
func costLeft(frame *interpreter.ExecutionFrame) uint64 {
	if t := frame.CostTracker(); t != nil && t.Limit != nil {
		return cost.SafeSubtract(*t.Limit, t.ActualCost())
	}
	return MaxCostLimit
}

// charge adds price, a priced call's work, to the evaluation's cost: the tracker prices a call
// only by its overload and argument values, and the cost model prices callWork's overload at its
// argument.
func charge(frame *interpreter.ExecutionFrame, c interpreter.InterpretableCall, price uint64) {
	if t := frame.CostTracker(); t != nil {
		t.EvalUnary(frame, c.ID(), callWork{c.Function()}, types.Int(min(price, uint64(MaxCostLimit))), types.NullValue)
	}
}

// Eval implements interpreter.Interpretable: the embedded call's Eval would skip Exec above.
func (c *pricedCall) Eval(vars interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(vars, c.Exec)
}

// replacePrice: s.replace(old, new[, n]) scans s and makes a string of s's length plus, for each
// occurrence replaced, the difference of new's and old's.
func replacePrice(a []ref.Val, _ uint64) uint64 {
	if len(a) < 3 {
		return 0
	}
	s, ok1 := a[0].(types.String)
	old, ok2 := a[1].(types.String)
	repl, ok3 := a[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return 0 // CEL refuses the call
	}
	k := uint64(strings.Count(string(s), string(old)))
	if old == "" {
		k = uint64(utf8.RuneCountInString(string(s))) + 1
	}
	if len(a) > 3 {
		if n, ok := a[3].(types.Int); ok && n >= 0 && uint64(n) < k {
			k = uint64(n)
		}
	}
	grow := uint64(0)
	if len(repl) > len(old) {
		grow = uint64(len(repl) - len(old))
	}
	made := cost.SafeAdd(uint64(len(s)), cost.SafeMultiply(k, grow))
	return cost.SafeAdd(uint64(len(s)), made)/10 + 1
}

// joinPrice: list.join([sep]) makes a string of its elements' lengths and the separators'.
func joinPrice(a []ref.Val, left uint64) uint64 {
	l, ok := a[0].(traits.Lister)
	if !ok {
		return 0
	}
	var sep uint64
	if len(a) > 1 {
		if s, ok := a[1].(types.String); ok {
			sep = uint64(len(s))
		}
	}
	n := lenOf(l)
	made := cost.SafeMultiply(n, sep)
	for it := l.Iterator(); it.HasNext() == types.True && made/10 <= left; {
		if s, ok := it.Next().(types.String); ok {
			made = cost.SafeAdd(made, uint64(len(s)))
		}
	}
	return made/10 + n
}

// formatPrice: fmt.format(list) makes about fmt's length and its arguments' text.
func formatPrice(a []ref.Val, left uint64) uint64 {
	s, _ := a[0].(types.String)
	if len(a) < 2 {
		return uint64(len(s))/10 + 1
	}
	return cost.SafeAdd(uint64(len(s)), textSize(a[1], cost.SafeMultiply(left, 10)))/10 + 1
}

// flattenCopies is flatten's price for each element of the list it makes: it appends them to a
// list as long as its receiver, which Go's append grows by a quarter at a time, so each element
// is written about five times; the tracker charges the fifth after the call (see perElement).
// Priced at one, the largest flatten within MaxCostLimit (4.8 million elements) took 2 s and 420
// MB, twice a comprehension at the limit; at four, it is 2 million elements and 0.7 s.
const flattenCopies = 4

// flattenPrice: l.flatten([depth]) makes a list of l's elements, each list among them within
// depth replaced by its own elements.
func flattenPrice(a []ref.Val, left uint64) uint64 {
	l, ok := a[0].(traits.Lister)
	if !ok {
		return 0
	}
	depth := types.Int(1)
	if len(a) > 1 {
		if d, ok := a[1].(types.Int); ok {
			depth = d
		}
	}
	return cost.SafeMultiply(flattenedSize(l, int64(depth), left/flattenCopies), flattenCopies)
}

// flattenedSize is the length of l.flatten(depth), and one more for each list it opens. The lists
// at the last depth count by their size, their elements unread: the list of 3,000 lists of 3,000
// is 3,000 sizes to price, not 9 million elements to walk. It stops counting past limit.
func flattenedSize(l traits.Lister, depth int64, limit uint64) uint64 {
	if depth <= 0 {
		return lenOf(l)
	}
	var n uint64
	for it := l.Iterator(); it.HasNext() == types.True && n <= limit; {
		if inner, ok := it.Next().(traits.Lister); ok {
			n = cost.SafeAdd(n, cost.SafeAdd(1, flattenedSize(inner, depth-1, limit-n)))
		} else {
			n++
		}
	}
	return n
}

func rangePrice(a []ref.Val, _ uint64) uint64 {
	if n, ok := a[0].(types.Int); ok && n > 0 {
		return uint64(n)
	}
	return 1
}

// inPrice: x in list compares x with each element; x in map is one lookup.
func inPrice(a []ref.Val, _ uint64) uint64 {
	if len(a) < 2 {
		return 1
	}
	if _, isMap := a[1].(traits.Mapper); isMap {
		return 1
	}
	return lenOf(a[1]) + 1
}

// productPrice: a set function of two lists compares each element of one with each of the other.
func productPrice(a []ref.Val, _ uint64) uint64 {
	if len(a) < 2 {
		return lenOf(a[0]) + 1
	}
	return cost.SafeMultiply(lenOf(a[0])+1, lenOf(a[1])+1)
}

func lenOf(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

// textSize is about the bytes of v's text: a string's length, 8 for any other scalar, its
// elements' (and a map's keys') for a list or map, each time a value appears (one string held
// 40,000 times in a list is 40,000 strings' worth). It stops counting past limit: a list of lists
// of the same list, nested 30 deep, holds 2³⁰ strings.
func textSize(v ref.Val, limit uint64) uint64 {
	var n uint64
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if n > limit {
			return
		}
		switch x := v.(type) {
		case types.String:
			n = cost.SafeAdd(n, uint64(len(x)))
		case types.Bytes:
			n = cost.SafeAdd(n, uint64(len(x)))
		case traits.Mapper:
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				k := it.Next()
				walk(k)
				walk(x.Get(k))
			}
		case traits.Lister:
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				walk(it.Next())
			}
		default:
			n = cost.SafeAdd(n, 8)
		}
	}
	walk(v)
	return n
}

// callWork is the charge of a priced call's work (charge).
type callWork struct{ function string }

const callWorkOverload = "hookd_call_work"

func (w callWork) Function() string { return w.function }
func (callWork) OverloadID() string { return callWorkOverload }
