// Package policy compiles and evaluates the CEL rules of a policy hook: the checks a compliance
// team would otherwise run as a webhook, evaluated inside the daemon in microseconds.
//
// A policy is a list of rules tried in order; the first whose `when` is true decides, and none
// decides by the policy's default. Every expression is parsed and type-checked when the policy is
// compiled, and every evaluation is bounded by a CEL cost limit.
package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"

	"github.com/hookd/hookd/hookdtype"
)

// Decisions a rule or a default may give.
const (
	Allow  = "allow"
	Deny   = "deny"
	Modify = "modify"
	Ask    = "ask"
)

// Cost bounds of one evaluation: the CEL cost units all expressions of one decision may spend.
const (
	DefaultCostLimit = 1_000_000
	MaxCostLimit     = 10_000_000
	MaxRules         = 200
	maxRuleNameBytes = 200 // as a hook's name: the decision log and the console show it
	maxExprBytes     = 4096
)

// Config is a hook's policyConfig.
type Config struct {
	Rules   []Rule `json:"rules"`
	Default string `json:"default,omitempty" strict:"nonempty"`
	// CostLimit bounds one decision (every expression evaluated for it, together); 0 means
	// DefaultCostLimit.
	CostLimit uint64 `json:"costLimit,omitempty" strict:"nonempty"`
}

// Rule is one rule of a policy. When, Reason and ModifiedValue are CEL expressions.
type Rule struct {
	Name          string `json:"name"`
	When          string `json:"when"`
	Decision      string `json:"decision"`
	Reason        string `json:"reason,omitempty"`
	ModifiedValue string `json:"modifiedValue,omitempty"`
}

// Policy is a compiled Config, safe for concurrent use.
type Policy struct {
	rules     []compiled
	def       string
	costLimit uint64
	hookType  string
	// first is every rule's when in one program that answers the index of the first true one
	// (-1: none): one evaluation instead of one per rule. Any error of it sends Eval through the
	// rules one by one, which names the rule and field. Zero when it does not compile.
	first program
	reads eventReads // what the expressions read of the event variable
	// For CheckReads: the members each expression selects from event and task, the variables
	// each uses, and the expressions as written.
	selects []selection
	vars    []selection // path unset
	sources []selection // variable: the expression
	// variable: a function, path: its arguments written in the rule that CEL reads only when the
	// call runs (see checkLiteral)
	literals []selection
	millis   []selection // path: the member of millisInstants handed to timestamp() as it is
}

// selection is one chain of members an expression selects from a variable: event.context.cwd is
// {field, "event", [context cwd]}.
type selection struct {
	field, variable string
	path            []string
}

type compiled struct {
	name, decision       string
	when, reason, modify program // reason and modify may be zero
	// fits says that first, then this rule's reason and modifiedValue, cost at most costLimit on
	// any input within SizeBound: a decision by this rule need not count its cost (see Eval).
	fits bool
}

// program is one compiled expression: counting its cost, and the same without the counter (a
// third of an evaluation), with CEL's static estimate of the most it costs on inputs within
// SizeBound (math.MaxUint64 when CEL has none).
type program struct {
	counted, uncounted cel.Program
	maxCost            uint64
}

// SizeBound is the size of every string, list and map a rule reads that the static cost bound
// assumes: the request body limit, so that every input through hookd's APIs is within it.
const SizeBound = 1 << 20

// Result is what a policy decided about one event.
type Result struct {
	Decision string `json:"decision"`
	// Rule is the name of the rule that decided; empty when the default did.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// ModifiedValue is the new arguments as JSON text (pre_tool_use) or the new input
	// (user_message, pre_scheduled_task); set for modify only.
	ModifiedValue *string `json:"modifiedValue,omitempty"`
	// Cost is the CEL cost the evaluation spent.
	Cost uint64 `json:"cost"`
}

// EvalError is an evaluation that could not decide: an expression failed or the cost limit was
// reached. The hook's failureMode decides instead.
type EvalError struct {
	Rule  string // the rule's name
	Field string // when, reason or modifiedValue
	// CostExceeded says the cost limit stopped the evaluation, or refused a call before it ran
	// (Err is then a *PatternCostError).
	CostExceeded bool
	Err          error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("policy rule %q: %s: %v", e.Rule, e.Field, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// PatternCostError is a call of glob, matches or a regex function with a computed pattern,
// refused before it ran: its price, Cost, which grows with StringBytes times the size of the
// pattern, is more than the Left of the cost limit. It is an EvalError's Err, with CostExceeded.
type PatternCostError struct {
	Function                  string
	StringBytes, PatternBytes int
	Cost, Left                uint64
}

func (e *PatternCostError) Error() string {
	return fmt.Sprintf("cost limit exceeded: %s of a %d-byte string with a %d-byte pattern may cost %d, more than the %d left",
		e.Function, e.StringBytes, e.PatternBytes, e.Cost, e.Left)
}

// hook types whose modify replaces a string (the input) rather than JSON arguments.
var stringModify = []string{"user_message", "pre_scheduled_task"}

// Compile parses and type-checks every expression of c for hooks of hookType (an interceptive
// type). Errors are *hookdtype.ValidationError naming the field, as policyConfig.rules[1].when.
func Compile(c Config, hookType string) (*Policy, error) {
	p := &Policy{def: c.Default, costLimit: c.CostLimit, hookType: hookType}
	if p.def == "" {
		p.def = Allow
	}
	if p.costLimit == 0 {
		p.costLimit = DefaultCostLimit
	}
	if p.costLimit > MaxCostLimit {
		return nil, invalid("policyConfig.costLimit", "must be at most %d", MaxCostLimit)
	}
	switch p.def {
	case Allow, Deny, Ask:
	default:
		return nil, invalid("policyConfig.default", "%s", notOneOf(c.Default, Allow, Deny, Ask))
	}
	if len(c.Rules) > MaxRules {
		return nil, invalid("policyConfig.rules", "has %d rules; at most %d", len(c.Rules), MaxRules)
	}
	env, err := environment()
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i, r := range c.Rules {
		field := fmt.Sprintf("policyConfig.rules[%d]", i)
		name := strings.TrimSpace(r.Name)
		switch {
		case name == "":
			return nil, invalid(field+".name", "is required")
		case name != r.Name:
			// Stored as written and recorded trimmed, the name would not be the one the log shows.
			return nil, invalid(field+".name", "%q has spaces around it", r.Name)
		case len(name) > maxRuleNameBytes:
			return nil, invalid(field+".name", "is %d bytes long; at most %d", len(name), maxRuleNameBytes)
		case strings.ContainsFunc(name, unicode.IsControl):
			return nil, invalid(field+".name", "must not contain control characters (a newline, a tab, …)")
		}
		if j, dup := seen[name]; dup {
			return nil, invalid(field+".name", "%q is also the name of rules[%d]", name, j)
		}
		seen[name] = i
		cr := compiled{name: name, decision: r.Decision}
		switch r.Decision {
		case Allow, Deny, Ask:
			if r.ModifiedValue != "" {
				return nil, invalid(field+".modifiedValue", "only applies to decision modify")
			}
		case Modify:
			if r.ModifiedValue == "" {
				return nil, invalid(field+".modifiedValue", "is required for decision modify")
			}
		case "":
			return nil, invalid(field+".decision", "is required")
		default:
			return nil, invalid(field+".decision", "%s", notOneOf(r.Decision, Allow, Deny, Modify, Ask))
		}
		if cr.when, err = p.program(env, field+".when", r.When, cel.BoolType); err != nil {
			return nil, err
		}
		if r.Reason != "" {
			if cr.reason, err = p.program(env, field+".reason", r.Reason, cel.StringType); err != nil {
				return nil, err
			}
		}
		if r.ModifiedValue != "" {
			want := []*cel.Type{cel.StringType, cel.MapType(cel.StringType, cel.DynType), cel.ListType(cel.DynType)}
			if slices.Contains(stringModify, hookType) {
				want = want[:1]
			}
			if cr.modify, err = p.program(env, field+".modifiedValue", r.ModifiedValue, want...); err != nil {
				return nil, err
			}
		}
		p.rules = append(p.rules, cr)
	}
	if len(c.Rules) > 0 {
		p.first = p.firstProgram(env, c.Rules)
	}
	for i := range p.rules {
		r := &p.rules[i]
		// Each estimate is at most MaxUint64; compared one at a time, nothing overflows.
		left := p.costLimit - min(p.first.maxCost, p.costLimit)
		r.fits = p.first.maxCost <= p.costLimit && r.reason.maxCost <= left && r.modify.maxCost <= left-r.reason.maxCost
	}
	return p, nil
}

// firstSource is the rules' whens as one conditional, each on lines of its own (so that a //
// comment in one ends with it): (when0) ? 0 : ((when1) ? 1 : … -1).
func firstSource(rules []Rule) string {
	var src strings.Builder
	for i, r := range rules {
		fmt.Fprintf(&src, "(\n%s\n) ? %d : (", r.When, i)
	}
	src.WriteString("-1" + strings.Repeat(")", len(rules)))
	return src.String()
}

// firstProgram is firstSource compiled; zero when it does not compile.
func (p *Policy) firstProgram(env *cel.Env, rules []Rule) program {
	ast, iss := env.Compile(firstSource(rules))
	if iss != nil && iss.Err() != nil {
		return program{}
	}
	prg, err := p.programs(env, ast)
	if err != nil {
		return program{}
	}
	return prg
}

// programs builds the two programs of ast and estimates its cost.
func (p *Policy) programs(env *cel.Env, ast *cel.Ast) (program, error) {
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize), cel.CustomDecoratorV2(boundCalls)}
	counted, err := env.Program(ast, append(opts, cel.CostLimit(p.costLimit))...)
	if err != nil {
		return program{}, err
	}
	uncounted, err := env.Program(ast, opts...)
	if err != nil {
		return program{}, err
	}
	prg := program{counted: counted, uncounted: uncounted, maxCost: math.MaxUint64}
	if est, err := env.EstimateCost(ast, sizeBound{}); err == nil {
		prg.maxCost = est.Max
	}
	return prg, nil
}

// sizeBound is the static cost estimator's view of the inputs: every string, list and map of at
// most SizeBound (the sizes of what an expression computes, CEL derives from these).
type sizeBound struct{}

func (sizeBound) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: SizeBound}
}

// EstimateCallCost has no bound for matching against a computed pattern (see boundPatterns), nor
// for a call of callPrices: the price such a call is charged before it runs is not in CEL's
// estimate, so an expression with one is always counted, else a decision the daemon makes
// uncounted could differ from the counted one of a trial (policy test, the evaluate endpoint)
// and go past costLimit. An `in` of a list written in the policy, or of a map, is the exception:
// its price is known (CEL's charge for the call, and ours again, at most one per element).
func (sizeBound) EstimateCallCost(function, _ string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	unbounded := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Max: math.MaxUint64}}
	if _, priced := callPrices[function]; priced {
		if function != "@in" || len(args) < 2 {
			return unbounded
		}
		if args[1].Type().Kind() == types.MapKind {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 2}}
		}
		if size := args[1].ComputedSize(); size != nil && size.Max < SizeBound {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 2 * (size.Max + 1)}}
		}
		return unbounded
	}
	pattern := 1 // the second argument, the first of a member call's
	if target != nil {
		pattern = 0
	}
	if _, ok := patternFuncs[function]; !ok || pattern >= len(args) || args[pattern].Expr().Kind() == ast.LiteralKind {
		return nil
	}
	return unbounded
}

var invalid = hookdtype.Invalid

// program compiles one expression whose result must be one of want (or dyn, checked when it runs).
// notOneOf says that v is none of the decisions opts, with the one it likely means ("Deny").
func notOneOf(v string, opts ...string) string {
	msg := fmt.Sprintf("%q is not one of %s", v, strings.Join(opts, ", "))
	if s := hookdtype.Suggest(strings.ToLower(v), opts); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

func (p *Policy) program(env *cel.Env, field, expr string, want ...*cel.Type) (program, error) {
	if strings.TrimSpace(expr) == "" {
		return program{}, invalid(field, "is required")
	}
	if len(expr) > maxExprBytes {
		return program{}, invalid(field, "is %d bytes; at most %d", len(expr), maxExprBytes)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return program{}, invalid(field, "%s", issues(iss))
	}
	out := ast.OutputType()
	fits := out.IsExactType(cel.DynType)
	for _, w := range want {
		fits = fits || w.IsAssignableType(out)
	}
	if !fits {
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = w.String()
		}
		return program{}, invalid(field, "must evaluate to %s, not %s", strings.Join(names, " or "), out)
	}
	prg, err := p.programs(env, ast)
	if err != nil {
		return program{}, invalid(field, "%v", err)
	}
	p.reads.read(ast.NativeRep().Expr())
	uses(ast.NativeRep().Expr(), func(name string, path []string) {
		if (name == "event" || name == "task") && len(path) > 0 {
			p.selects = append(p.selects, selection{field, name, path})
		}
		p.vars = append(p.vars, selection{field: field, variable: name})
	})
	p.sources = append(p.sources, selection{field: field, variable: expr})
	millisTimestamps(ast.NativeRep().Expr(), func(member string) {
		p.millis = append(p.millis, selection{field: field, variable: "event", path: []string{member}})
	})
	literalArgs(ast.NativeRep().Expr(), func(function string, args []string) {
		p.literals = append(p.literals, selection{field: field, variable: function, path: args})
	})
	return prg, nil
}

// issues is CEL's errors of a compilation, each with its line and column.
func issues(iss *cel.Issues) string {
	errs := iss.Errors()
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := strings.TrimSuffix(e.Message, " (in container '')")
		msgs = append(msgs, fmt.Sprintf("%s (%d:%d)", msg, e.Location.Line(), e.Location.Column()+1))
	}
	return strings.Join(msgs, "; ")
}

// constantVars are the variables that hold something for one hook type alone, with what they
// hold; for the others they are {} or "", and a rule reading them never fires.
var constantVars = map[string]struct{ hookType, holds, empty string }{
	"args":  {"pre_tool_use", "the arguments of a tool call", "{}"},
	"tool":  {"pre_tool_use", "the name of a tool call", `""`},
	"input": {"user_message", "the user's input", `""`},
}

// CheckReads refuses a policy that reads what its hook type's event never has, context being an
// empty value of that type's context (a struct or a pointer to one, whose JSON names are its
// members): a typo there would make has() never true and a read always an error, so a rule that
// fails open under an ALLOW failureMode. It checks event.X (the envelope's members),
// event.context.X and task.X (the context of pre_scheduled_task; {} for the other types), and the
// members of their nested objects (event.context.triggerSource.sourceType) as far as the type
// describes them; args, tool and input outside the one hook type each holds something for; and
// principalId, agentId and sessionId used as anything but an int or null (added to a string,
// compared with one); and a time zone or a regex.replace replacement written in the rule that
// fails every call that reads it (see checkLiteral), or event.occurredAt or event.dispatchedAt,
// milliseconds, handed to timestamp(), which takes seconds. Errors name the rule's field, as Compile's do. It is for registration: a
// policy stored before a check was added still runs as it did.
func (p *Policy) CheckReads(context any) error {
	envelope := append(slices.Clip(envelopeMembers[:]), "context")
	unknown := func(s selection, what, member string, known []string) error {
		msg := fmt.Sprintf("%s has no member %q", what, member)
		if m := hookdtype.Suggest(member, known); m != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", m)
		}
		return invalid(s.field, "%s; it has %s", msg, strings.Join(known, ", "))
	}
	// inContext checks path, selected from the context named what (of, which type's it is),
	// member by member down its nested objects (event.context.triggerSource.sourceType): each is
	// refused as a top-level one is. What a member the context's type does not describe holds (a
	// tool's arguments, any JSON) is the sender's, and what is selected of it is not checked.
	inContext := func(s selection, what, of string, path []string) error {
		for i := range path {
			known, ok := hookdtype.MemberNames(context, path[:i])
			if !ok {
				return nil
			}
			if !slices.Contains(known, path[i]) {
				return unknown(s, strings.Join(append([]string{what}, path[:i]...), ".")+of, path[i], known)
			}
		}
		return nil
	}
	for _, s := range p.selects {
		var err error
		switch {
		case s.variable == "event" && !slices.Contains(envelope, s.path[0]):
			return unknown(s, "event", s.path[0], envelope)
		case s.variable == "event" && s.path[0] == "context":
			err = inContext(s, "event.context", " of "+p.hookType, s.path[1:])
		case s.variable == "task" && p.hookType != "pre_scheduled_task":
			return invalid(s.field, "task is {} for %s: it holds the task of pre_scheduled_task (task.%s is never there)",
				p.hookType, s.path[0])
		case s.variable == "task":
			err = inContext(s, "task", "", s.path)
		}
		if err != nil {
			return err
		}
	}
	for _, v := range p.vars {
		if c, ok := constantVars[v.variable]; ok && c.hookType != p.hookType {
			return invalid(v.field, "%s is %s for %s: it holds %s, at %s", v.variable, c.empty, p.hookType, c.holds, c.hookType)
		}
	}
	if len(p.millis) > 0 {
		m := p.millis[0]
		return invalid(m.field, "event.%s is milliseconds since the epoch and timestamp() takes seconds: write timestamp(event.%[1]s / 1000)",
			m.path[0])
	}
	for _, l := range p.literals {
		if err := checkLiteral(l.variable, l.path); err != nil {
			return invalid(l.field, "%v", err)
		}
	}
	env, err := idsEnvironment()
	if err != nil {
		return err
	}
	for _, src := range p.sources {
		if _, iss := env.Compile(src.variable); iss != nil && iss.Err() != nil {
			return invalid(src.field, "%s (principalId, agentId and sessionId are an int, or null)", issues(iss))
		}
	}
	return nil
}

// Eval decides about in: the first rule whose when is true, else the default. An *EvalError means
// no decision could be made. Its cost is bounded by costLimit: counted as it goes, or, for a
// policy whose static estimate fits the limit and an input within SizeBound, not counted at all
// (Result.Cost is then 0). Anything that goes wrong that way is evaluated again, counted, which
// names the rule and field.
func (p *Policy) Eval(in *Input) (Result, error) {
	in.reads = &p.reads
	if p.first.uncounted != nil && p.first.maxCost <= p.costLimit && in.maxSize() <= SizeBound {
		if res, ok := p.evalUncounted(in); ok {
			return res, nil
		}
	}
	return p.EvalCounted(in)
}

// evalUncounted is Eval without counting; ok false when anything went wrong, or the deciding
// rule's bound does not fit.
func (p *Policy) evalUncounted(in *Input) (Result, bool) {
	v, _, err := p.first.uncounted.Eval(in)
	i, isInt := v.(types.Int)
	switch {
	case err != nil || !isInt || int(i) >= len(p.rules):
		return Result{}, false
	case i < 0:
		return Result{Decision: p.def}, true
	}
	r := &p.rules[i]
	if !r.fits {
		return Result{}, false
	}
	e := &evaluation{p: p, in: in}
	res, err := e.decidedBy(r, r.reason.uncounted, r.modify.uncounted)
	return res, err == nil
}

// EvalCounted is Eval counting the cost of every expression, for the exact Result.Cost of a
// trial evaluation.
func (p *Policy) EvalCounted(in *Input) (Result, error) {
	in.reads = &p.reads
	e := &evaluation{p: p, in: in}
	if i, ok := e.firstTrue(); ok {
		if i < 0 {
			return Result{Decision: p.def, Cost: e.spent}, nil
		}
		return e.decided(&p.rules[i])
	}
	e.spent = 0
	for i := range p.rules {
		r := &p.rules[i]
		v, err := e.run(r, r.when.counted, "when")
		if err != nil {
			return Result{Cost: e.spent}, err
		}
		matched, ok := v.(types.Bool)
		if !ok {
			return Result{Cost: e.spent}, &EvalError{Rule: r.name, Field: "when", Err: fmt.Errorf("evaluated to %s, not bool", v.Type().TypeName())}
		}
		if matched {
			return e.decided(r)
		}
	}
	return Result{Decision: p.def, Cost: e.spent}, nil
}

// evaluation is one Eval: the CEL cost it has spent so far.
type evaluation struct {
	p     *Policy
	in    *Input
	spent uint64
}

// firstTrue is the index of the first rule whose when is true (-1: none), from the policy's
// one-program form; ok false when there is none or it failed in any way, and the rules are then
// tried one by one, which names the rule and field of the failure.
func (e *evaluation) firstTrue() (int, bool) {
	if e.p.first.counted == nil {
		return 0, false
	}
	v, det, err := e.p.first.counted.Eval(e.in)
	i, isInt := v.(types.Int)
	if err != nil || !isInt || det == nil || det.ActualCost() == nil || *det.ActualCost() > e.p.costLimit {
		return 0, false
	}
	e.spent = *det.ActualCost()
	return int(i), true
}

func (e *evaluation) run(r *compiled, prg cel.Program, field string) (ref.Val, error) {
	v, det, err := prg.Eval(e.in)
	if det != nil && det.ActualCost() != nil {
		e.spent += *det.ActualCost()
	}
	if err == nil && e.spent <= e.p.costLimit {
		return v, nil // ahead of the targets of errors.As below, which escape: three allocations
	}
	var cancelled interpreter.EvalCancelledError
	var pattern *PatternCostError
	var call *CallCostError
	switch {
	case err == nil, // over the limit
		errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		return nil, &EvalError{Rule: r.name, Field: field, CostExceeded: true, Err: errors.New("cost limit exceeded")}
	case errors.As(err, &pattern):
		return nil, &EvalError{Rule: r.name, Field: field, CostExceeded: true, Err: pattern}
	case errors.As(err, &call):
		return nil, &EvalError{Rule: r.name, Field: field, CostExceeded: true, Err: call}
	}
	return nil, &EvalError{Rule: r.name, Field: field, Err: err}
}

// decided is the result of rule r, whose when was true: its reason and modifiedValue evaluated.
func (e *evaluation) decided(r *compiled) (Result, error) {
	return e.decidedBy(r, r.reason.counted, r.modify.counted)
}

// decidedBy is decided with the programs given for r's reason and modifiedValue.
func (e *evaluation) decidedBy(r *compiled, reason, modify cel.Program) (Result, error) {
	res := Result{Decision: r.decision, Rule: r.name}
	if reason != nil {
		v, err := e.run(r, reason, "reason")
		if err != nil {
			return Result{Cost: e.spent}, err
		}
		s, ok := v.(types.String)
		if !ok {
			return Result{Cost: e.spent}, &EvalError{Rule: r.name, Field: "reason", Err: fmt.Errorf("evaluated to %s, not string", v.Type().TypeName())}
		}
		res.Reason = string(s)
	}
	if modify != nil {
		v, err := e.run(r, modify, "modifiedValue")
		if err != nil {
			return Result{Cost: e.spent}, err
		}
		s, err := e.p.modifiedText(v, e.in)
		if err != nil {
			return Result{Cost: e.spent}, &EvalError{Rule: r.name, Field: "modifiedValue", Err: err}
		}
		res.ModifiedValue = &s
	}
	res.Cost = e.spent
	return res, nil
}

// modifiedText renders a modifiedValue: a string as it is, a map or list as JSON text (tool
// arguments only), with the numbers of in's arguments that a double does not hold as written.
func (p *Policy) modifiedText(v ref.Val, in *Input) (string, error) {
	if s, ok := v.(types.String); ok {
		return string(s), nil
	}
	if slices.Contains(stringModify, p.hookType) {
		return "", fmt.Errorf("evaluated to %s; %s takes a string", v.Type().TypeName(), p.hookType)
	}
	// A dyn expression (event.sessionId) passes the type check with any value; a bare 12 or true
	// is no tool's arguments.
	switch v.(type) {
	case traits.Mapper, traits.Lister:
	default:
		return "", fmt.Errorf("evaluated to %s; the new arguments are a string, a map or a list", v.Type().TypeName())
	}
	var written func() map[types.Double]string
	if src, ok := in.src.(TextSource); ok {
		written = func() map[types.Double]string { return writtenNumbers(src.ArgumentsText()) }
	}
	b, err := marshalJSON(v, written)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Default is the decision when no rule matches.
func (p *Policy) Default() string { return p.def }
