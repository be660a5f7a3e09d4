package policy

import (
	"slices"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
)

// eventReads is what a policy's expressions read of the event variable. Most select a member or
// two (event.context.permissionMode, has(event.traceId)); CEL then looks up those keys and
// nothing else of the map, so a map of them alone gives every such expression what the whole
// envelope gives it: the same values, the same "no such key" for a key the envelope lacks, the
// same has(). An expression that uses event otherwise (compares it, iterates it, passes it to a
// function) needs the whole of it. So too of event.context, whose decoding is the costly part.
type eventReads struct {
	whole   bool     // some expression uses event otherwise than by selecting a member
	members []string // the members selected
	// What is read of event.context, when members holds it.
	contextWhole   bool
	contextMembers []string
}

// read adds what expression e, a checked one, reads of the event variable.
func (r *eventReads) read(e ast.Expr) {
	uses(e, func(name string, path []string) {
		switch {
		case name != "event" && name != "":
		case len(path) == 0:
			r.whole = true
		default:
			r.selected(path)
		}
	})
}

// uses calls f with every use of a variable in e, a checked expression: the variable's name and
// the members selected from it, outward (event.context.cwd and has(event.context.cwd):
// "event", [context cwd]; event.?traceId: "event", [traceId]), or no members for any other use
// (event alone, compared, iterated, indexed, passed to a function). A comprehension's own
// variable hides the one of its name within it: that one is reported used whole, and what is
// selected from the name within the comprehension is not reported. An expression of a kind uses
// does not know is reported as a use of any variable: name "".
func uses(e ast.Expr, f func(name string, path []string)) {
	walkUses(e, nil, f)
}

func walkUses(e ast.Expr, hidden []string, f func(string, []string)) {
	if name, path, ok := varPath(e); ok {
		if !slices.Contains(hidden, name) {
			f(name, path)
		}
		return
	}
	switch e.Kind() {
	case ast.LiteralKind:
	case ast.SelectKind:
		walkUses(e.AsSelect().Operand(), hidden, f)
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			walkUses(c.Target(), hidden, f)
		}
		for _, a := range c.Args() {
			walkUses(a, hidden, f)
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			walkUses(el, hidden, f)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			walkUses(en.AsMapEntry().Key(), hidden, f)
			walkUses(en.AsMapEntry().Value(), hidden, f)
		}
	case ast.StructKind:
		for _, fl := range e.AsStruct().Fields() {
			walkUses(fl.AsStructField().Value(), hidden, f)
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		// The range and the accumulator's start are outside the comprehension's variables.
		walkUses(c.IterRange(), hidden, f)
		walkUses(c.AccuInit(), hidden, f)
		inner := hidden
		for _, v := range [...]string{c.IterVar(), c.IterVar2(), c.AccuVar()} {
			if v != "" && !slices.Contains(inner, v) {
				f(v, nil) // not worth telling apart
				inner = append(slices.Clip(inner), v)
			}
		}
		for _, x := range [...]ast.Expr{c.LoopCondition(), c.LoopStep(), c.Result()} {
			walkUses(x, inner, f)
		}
	default:
		f("", nil)
	}
}

// varPath is the variable e is or selects from and the members selected, outward, through any
// mix of selections, optional selections and indexes by a string literal (event.?context.cwd and
// event['context'].cwd: "event", [context cwd]); ok is false when e is not such a chain.
func varPath(e ast.Expr) (name string, path []string, ok bool) {
	for {
		switch e.Kind() {
		case ast.IdentKind:
			slices.Reverse(path)
			return e.AsIdent(), path, true
		case ast.SelectKind:
			path = append(path, e.AsSelect().FieldName())
			e = e.AsSelect().Operand()
		case ast.CallKind:
			c := e.AsCall()
			// A map indexed by a string written in the rule selects that member, as a selection
			// does (event['context'], event.context[?'cwd']): the same value, the same error.
			switch c.FunctionName() {
			case operators.OptSelect, operators.Index, operators.OptIndex:
			default:
				return "", nil, false
			}
			if len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
				return "", nil, false
			}
			field, isString := c.Args()[1].AsLiteral().(types.String)
			if !isString {
				return "", nil, false
			}
			path = append(path, string(field))
			e = c.Args()[0]
		default:
			return "", nil, false
		}
	}
}

// selected adds the selection event.path[0].path[1]….
func (r *eventReads) selected(path []string) {
	if !slices.Contains(r.members, path[0]) {
		r.members = append(r.members, path[0])
	}
	switch {
	case path[0] != "context":
	case len(path) == 1:
		r.contextWhole = true
	case !slices.Contains(r.contextMembers, path[1]):
		r.contextMembers = append(r.contextMembers, path[1])
	}
}

// millisInstants are the envelope's members that hold an instant as milliseconds since the epoch.
var millisInstants = []string{"occurredAt", "dispatchedAt"}

// millisTimestamps calls f with each member of millisInstants that e, a checked expression, hands
// to timestamp() as it is (through a conversion such as int(), or an optional's orValue):
// timestamp() takes seconds, and of milliseconds it is out of range, on every call.
func millisTimestamps(e ast.Expr, f func(member string)) {
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		if c.IsMemberFunction() || c.FunctionName() != overloads.TypeConvertTimestamp || len(c.Args()) != 1 {
			return
		}
		arg := c.Args()[0]
		for unwrapped := true; unwrapped && arg.Kind() == ast.CallKind; {
			switch a := arg.AsCall(); {
			case a.IsMemberFunction() && a.FunctionName() == "orValue":
				arg = a.Target()
			case !a.IsMemberFunction() && len(a.Args()) == 1 && slices.Contains(conversions, a.FunctionName()):
				arg = a.Args()[0]
			default:
				unwrapped = false
			}
		}
		if name, path, ok := varPath(arg); ok && name == "event" && len(path) == 1 && slices.Contains(millisInstants, path[0]) {
			f(path[0])
		}
	}))
}

// conversions are the functions that hand a number on as the same number.
var conversions = []string{overloads.TypeConvertInt, overloads.TypeConvertUint, overloads.TypeConvertDouble, overloads.TypeConvertDyn}
