package policy

import (
	"slices"

	"cel.dev/cel-go/common/ast"
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
	switch e.Kind() {
	case ast.LiteralKind:
	case ast.IdentKind:
		r.whole = r.whole || e.AsIdent() == "event"
	case ast.SelectKind:
		path, root := selectPath(e)
		if root.Kind() == ast.IdentKind && root.AsIdent() == "event" {
			r.selected(path)
			return
		}
		r.read(root)
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			r.read(c.Target())
		}
		for _, a := range c.Args() {
			r.read(a)
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			r.read(el)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			r.read(en.AsMapEntry().Key())
			r.read(en.AsMapEntry().Value())
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			r.read(f.AsStructField().Value())
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		if c.IterVar() == "event" || c.IterVar2() == "event" || c.AccuVar() == "event" {
			// A variable of the comprehension hides event within it: not worth telling apart.
			r.whole = true
		}
		for _, x := range [...]ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
			r.read(x)
		}
	default:
		r.whole = true
	}
}

// selectPath is the chain of selections e ends: the fields selected, outward from root, the
// expression they are selected from.
func selectPath(e ast.Expr) (path []string, root ast.Expr) {
	for e.Kind() == ast.SelectKind {
		path = append(path, e.AsSelect().FieldName())
		e = e.AsSelect().Operand()
	}
	slices.Reverse(path)
	return path, e
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
