package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"path"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/hookd/hookd/hookdtype"
)

// Input is what a policy sees of one event: the envelope a webhook would receive, and shortcuts
// into its context. Values are the JSON decoding of DecodeJSON (CEL's own scalars).
type Input struct {
	// Event is the envelope; with InputOf it is built when a rule first reads it whole (a policy
	// that only selects members of it is given a map of those, see eventReads).
	Event map[string]any
	Tool  string         // pre_tool_use: context.toolName
	Args  map[string]any // pre_tool_use: context.arguments when they are a JSON object, else {}; with InputOf, read when a rule first does
	Input string         // user_message: context.userInput
	Task  map[string]any // pre_scheduled_task: {taskId, taskName}, else {}; with InputOf, read when a rule first does

	PrincipalID, AgentID, SessionID *int64

	env  *Envelope
	src  Source
	task bool
	size int // maxSize, once known
	// reads is what the policy evaluating the input reads of the event variable; sel, the map of
	// the members it selects, built for selOf (see selectedEvent).
	reads, selOf *eventReads
	sel          map[string]any
}

// Source is an event's context as a policy reads it, each part taken when a rule first needs it:
// most rules read args or tool and never the whole context, which then is never decoded.
type Source interface {
	// Context is the whole context as DecodeJSON returns it; an error fails the rule that reads it.
	Context() (any, error)
	// Arguments is context.arguments when they are a JSON object, as DecodeJSON returns it; nil
	// otherwise.
	Arguments() map[string]any
	ToolName() string  // context.toolName
	UserInput() string // context.userInput
	// MaxSize is at least the length of every string and the size of every list and map in the
	// context, as a rule reads them: what Eval checks against SizeBound.
	MaxSize() int
}

// An ObjectSource is a Source whose context is an object it reads one member at a time, without
// decoding the rest, and whose Context never fails: a rule that selects event.context.permissionMode
// then costs neither the decoding of the arguments beside it nor a map of the whole context.
type ObjectSource interface {
	Source
	// Member is the member k of the object Context returns, and whether it has one.
	Member(k string) (any, bool)
}

// Decoded is the Source of a context DecodeJSON returned.
func Decoded(context any) Source { return decoded{context} }

type decoded struct{ c any }

func (d decoded) Context() (any, error) { return d.c, nil }

func (d decoded) Arguments() map[string]any {
	a, _ := d.field("arguments").(map[string]any)
	return a
}

func (d decoded) ToolName() string  { s, _ := d.field("toolName").(types.String); return string(s) }
func (d decoded) UserInput() string { s, _ := d.field("userInput").(types.String); return string(s) }

func (d decoded) MaxSize() int { return sizeOf(d.c) }

// sizeOf is the largest length of a string, list or map in v, a value as DecodeJSON returns it.
func sizeOf(v any) int {
	switch v := v.(type) {
	case types.String:
		return len(v)
	case []any:
		n := len(v)
		for _, e := range v {
			n = max(n, sizeOf(e))
		}
		return n
	case map[string]any:
		n := len(v)
		for k, e := range v {
			n = max(n, len(k), sizeOf(e))
		}
		return n
	}
	return 0
}

func (d decoded) field(k string) any {
	m, _ := d.c.(map[string]any)
	return m[k]
}

// NewInput derives the shortcuts from an envelope as DecodeJSON returns it.
func NewInput(event map[string]any) *Input {
	id := func(k string) *int64 {
		if v, ok := event[k].(types.Int); ok {
			id := int64(v)
			return &id
		}
		return nil
	}
	src := Decoded(event["context"])
	in := &Input{Event: event, PrincipalID: id("principalId"), AgentID: id("agentId"), SessionID: id("sessionId"),
		Tool: src.ToolName(), Input: src.UserInput(), src: src, task: event["hookType"] == types.String("pre_scheduled_task")}
	in.args() // the shortcuts filled at once: NewInput's callers read them
	in.taskVar()
	return in
}

// Envelope is the event a policy decides about, beside its context: the fields of the envelope
// a webhook would receive.
type Envelope struct {
	SchemaVersion, EventID, HookType, HookName string
	OccurredAt, DispatchedAt, DeliveryAttempt  int64
	TraceID                                    string // "" is null
	SessionID, PrincipalID, AgentID            *int64
}

// InputOf is the Input of the envelope env with its context read from src. The event variable's
// map, args and task are only built if a rule reads them.
func InputOf(env *Envelope, src Source) *Input {
	in := new(Input)
	in.Reset(env, src)
	return in
}

// Reset makes in what InputOf(env, src) returns, in place: a caller that asks policies one at a
// time keeps one Input rather than allocating one for each.
func (in *Input) Reset(env *Envelope, src Source) {
	*in = Input{PrincipalID: env.PrincipalID, AgentID: env.AgentID, SessionID: env.SessionID, env: env, src: src,
		Tool: src.ToolName(), Input: src.UserInput(), task: env.HookType == "pre_scheduled_task"}
}

// maxSize is at least the length of every string and the size of every list and map a rule can
// read of in (see SizeBound).
func (in *Input) maxSize() int {
	if in.size > 0 {
		return in.size
	}
	n := max(16, len(in.Tool), len(in.Input)) // 16: more than the envelope's fields
	if e := in.env; e != nil {
		n = max(n, len(e.SchemaVersion), len(e.EventID), len(e.HookType), len(e.HookName), len(e.TraceID))
	}
	if in.src != nil {
		n = max(n, in.src.MaxSize())
	}
	in.size = max(n, sizeOf(in.Event)) // NewInput's envelope, the rest of what a rule reads
	return in.size
}

// args is the args variable.
func (in *Input) args() map[string]any {
	if in.Args == nil {
		if in.src != nil {
			in.Args = in.src.Arguments()
		}
		if in.Args == nil {
			in.Args = map[string]any{}
		}
	}
	return in.Args
}

// taskVar is the task variable.
func (in *Input) taskVar() any {
	if in.Task == nil {
		if in.task && in.src != nil {
			c, err := in.src.Context()
			if err != nil {
				return types.WrapErr(err)
			}
			in.Task, _ = c.(map[string]any)
		}
		if in.Task == nil {
			in.Task = map[string]any{}
		}
	}
	return in.Task
}

// event is the event variable: the envelope as DecodeJSON would return it, or only the members
// of it the policy selects (see eventReads).
func (in *Input) event() any {
	if in.Event != nil || in.env == nil {
		return in.Event
	}
	if r := in.reads; r != nil && !r.whole {
		return in.selectedEvent(r)
	}
	context, err := in.src.Context()
	if err != nil {
		return types.WrapErr(err)
	}
	in.Event = make(map[string]any, len(envelopeMembers)+1)
	for _, k := range envelopeMembers {
		in.Event[k], _ = in.env.member(k)
	}
	in.Event["context"] = context
	return in.Event
}

// selectedEvent is the event variable of a policy that only selects members of it (r): a map of
// those members alone, holding each as the whole envelope holds it, event.context included (only
// the members r selects of it, when the source reads them one at a time).
func (in *Input) selectedEvent(r *eventReads) any {
	if in.selOf == r {
		return in.sel
	}
	obj, isObj := in.src.(ObjectSource)
	var context any
	if !isObj || r.contextWhole {
		// Read whole; and an error fails the whole event variable, as it does the whole envelope.
		var err error
		if context, err = in.src.Context(); err != nil {
			return types.WrapErr(err)
		}
	} else if slices.Contains(r.members, "context") {
		m := make(map[string]any, len(r.contextMembers))
		for _, k := range r.contextMembers {
			if v, ok := obj.Member(k); ok {
				m[k] = v
			}
		}
		context = m
	}
	in.sel, in.selOf = make(map[string]any, len(r.members)), r
	for _, k := range r.members {
		if k == "context" {
			in.sel[k] = context
		} else if v, ok := in.env.member(k); ok {
			in.sel[k] = v
		}
	}
	return in.sel
}

// envelopeMembers are the members of the event variable beside its context.
var envelopeMembers = [...]string{"schemaVersion", "eventId", "hookType", "hookName", "occurredAt", "dispatchedAt",
	"deliveryAttempt", "traceId", "sessionId", "principalId", "agentId"}

// member is the envelope's member k as DecodeJSON would return it, for k in envelopeMembers.
func (e *Envelope) member(k string) (any, bool) {
	id := func(v *int64) any {
		if v == nil {
			return nil
		}
		return types.Int(*v)
	}
	switch k {
	case "schemaVersion":
		return types.String(e.SchemaVersion), true
	case "eventId":
		return types.String(e.EventID), true
	case "hookType":
		return types.String(e.HookType), true
	case "hookName":
		return types.String(e.HookName), true
	case "occurredAt":
		return types.Int(e.OccurredAt), true
	case "dispatchedAt":
		return types.Int(e.DispatchedAt), true
	case "deliveryAttempt":
		return types.Int(e.DeliveryAttempt), true
	case "traceId":
		if e.TraceID == "" {
			return nil, true
		}
		return types.String(e.TraceID), true
	case "sessionId":
		return id(e.SessionID), true
	case "principalId":
		return id(e.PrincipalID), true
	case "agentId":
		return id(e.AgentID), true
	}
	return nil, false
}

// ResolveName implements interpreter.Activation.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case "event":
		return in.event(), true
	case "tool": // as CEL values: a Go string would be converted to one at every read, an allocation more
		return types.String(in.Tool), true
	case "args":
		return in.args(), true
	case "input":
		return types.String(in.Input), true
	case "task":
		return in.taskVar(), true
	case "principalId":
		return optionalID(in.PrincipalID), true
	case "agentId":
		return optionalID(in.AgentID), true
	case "sessionId":
		return optionalID(in.SessionID), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *Input) Parent() interpreter.Activation { return nil }

func optionalID(v *int64) ref.Val {
	if v == nil {
		return types.NullValue
	}
	return types.Int(*v)
}

// DecodeJSON decodes JSON into the values policies see: objects as map[string]any, arrays as []any,
// strings as types.String, whole numbers as types.Int (so args.amount > 10000 compares integers
// and string(args.amount) has no ".0"), other numbers as types.Double, true, false and null as
// bool and nil. The scalars are CEL's own values, so that a rule reading one takes it as it is: as
// Go strings and numbers each read converted it anew (ten rules reading args.command, ten
// allocations).
func DecodeJSON(b []byte) (any, error) {
	if hookdtype.Valid(b) {
		return DecodeValid(b), nil
	}
	dec := json.NewDecoder(bytes.NewReader(b)) // for the error
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("policy: trailing data after JSON value")
	}
	return celScalars(v), nil
}

// DecodeValid is DecodeJSON of b that is known to be valid JSON (json.Marshal's output, say); of
// anything else its result means nothing.
func DecodeValid(b []byte) any {
	v, _ := decodeValid(b, string(b), 0)
	return v
}

// DecodeValidString is DecodeValid of the text s.
func DecodeValidString(s string) any {
	v, _ := decodeValid([]byte(s), s, 0)
	return v
}

// decodeValid decodes the valid JSON value at b[i] as DecodeJSON does (as encoding/json decodes
// into an any, the last of a key sent twice kept) and returns the index after it. s is b as a
// string: a key, a string without escapes and a number are slices of it, not a copy each.
func decodeValid(b []byte, s string, i int) (any, int) {
	i = hookdtype.SkipSpace(b, i)
	switch b[i] {
	case '{':
		m := map[string]any{}
		for i = hookdtype.SkipSpace(b, i+1); b[i] != '}'; {
			end, decode := hookdtype.StringEnd(b, i)
			k := stringAt(b, s, i, end, decode)
			m[k], i = decodeValid(b, s, hookdtype.SkipSpace(b, end)+1) // after ':'
			if i = hookdtype.SkipSpace(b, i); b[i] == ',' {
				i = hookdtype.SkipSpace(b, i+1)
			}
		}
		return m, i + 1
	case '[':
		a := []any{}
		for i = hookdtype.SkipSpace(b, i+1); b[i] != ']'; {
			var v any
			v, i = decodeValid(b, s, i)
			a = append(a, v)
			if i = hookdtype.SkipSpace(b, i); b[i] == ',' {
				i = hookdtype.SkipSpace(b, i+1)
			}
		}
		return a, i + 1
	case '"':
		end, decode := hookdtype.StringEnd(b, i)
		return types.String(stringAt(b, s, i, end, decode)), end
	case 't':
		return true, i + 4
	case 'f':
		return false, i + 5
	case 'n':
		return nil, i + 4
	}
	end := hookdtype.ValueEnd(b, i)
	return celScalars(json.Number(s[i:end])), end
}

// stringAt is the content of the JSON string b[i:end] (StringEnd's decode said whether it differs
// from its text), s being b as a string.
func stringAt(b []byte, s string, i, end int, decode bool) string {
	if decode {
		return hookdtype.StringContent(b[i:end], true)
	}
	return s[i+1 : end-1]
}

// celScalars is v, as encoding/json decodes it with UseNumber, with the values of DecodeJSON: every
// json.Number as types.Int when whole, else types.Double, and every string as types.String.
func celScalars(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return types.Int(i)
		}
		f, _ := v.Float64()
		return types.Double(f)
	case string:
		return types.String(v)
	case map[string]any:
		for k, e := range v {
			v[k] = celScalars(e)
		}
	case []any:
		for i, e := range v {
			v[i] = celScalars(e)
		}
	}
	return v
}

// marshalJSON renders a CEL value as JSON, each double that written holds (see writtenNumbers) as
// the number written there; written is called at the first double, and may be nil.
func marshalJSON(v ref.Val, written func() map[types.Double]string) ([]byte, error) {
	var numbers map[types.Double]string
	g, err := native(v, func(d types.Double) (string, bool) {
		if numbers == nil && written != nil {
			numbers = written()
		}
		t, ok := numbers[d]
		return t, ok
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(g)
}

func native(v ref.Val, written func(types.Double) (string, bool)) (any, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		if t, ok := written(v); ok {
			return json.Number(t), nil
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%v has no JSON form", float64(v))
		}
		return float64(v), nil
	case types.String:
		return string(v), nil
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			e, err := native(v.Get(k), written)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		out := []any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			e, err := native(it.Next(), written)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s has no JSON form", v.Type().TypeName())
}

// A TextSource is a Source that has the JSON text its arguments were decoded from: a modify then
// hands on each of its numbers that a double does not hold as it was written (writtenNumbers).
type TextSource interface {
	Source
	ArgumentsText() string
}

// writtenNumbers are the numbers of the JSON text s that no int64 or double holds (DecodeJSON made
// each the nearest double: 12345678901234567890123 1.2345678901234568e+22, 0.10000000000000000001
// 0.1, 1e400 +Inf), by that double, each as written. The arguments a modify hands on are those of
// the call but for what the rule changed, and the tool may read numbers exactly (Python's json
// does): rendered from the double, a field the rule never touched would change, or, beyond the
// doubles, fail the rule. A double that two numbers of s are read as (0.1 beside
// 0.10000000000000000001) is left out, which was meant not being known; a double the rule
// computed that equals one of them is written as it, the same number to a reader of doubles.
func writtenNumbers(s string) map[types.Double]string {
	out := map[types.Double]string{}
	ambiguous := map[types.Double]bool{}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if _, err := n.Int64(); err == nil {
			continue
		}
		f, _ := n.Float64() // ±Inf beyond the doubles, as DecodeJSON has it
		d, text := types.Double(f), string(n)
		if heldByDouble(text, f) {
			text = "" // the double itself
		}
		if w, seen := out[d]; seen && w != text {
			ambiguous[d] = true
		}
		out[d] = text
	}
	for d, text := range out {
		if text == "" || ambiguous[d] {
			delete(out, d)
		}
	}
	return out
}

// heldByDouble says f, the double nearest the JSON number n, is n: its JSON form, the shortest
// text that reads as f, is the same number.
func heldByDouble(n string, f float64) bool {
	if math.IsInf(f, 0) {
		return false
	}
	var written, held big.Rat
	_, ok1 := written.SetString(n)
	_, ok2 := held.SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok1 && ok2 && written.Cmp(&held) == 0
}

var (
	envOnce        sync.Once
	envVal, envIDs *cel.Env
	envErr         error
)

// environment is the one CEL environment of every policy: its variables, the standard
// extensions, and hookd's own functions (see docs/policies.md).
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		if envVal, envErr = newEnvironment(cel.DynType); envErr == nil {
			envIDs, envErr = newEnvironment(cel.NullableType(cel.IntType))
		}
	})
	return envVal, envErr
}

// idsEnvironment is environment with principalId, agentId and sessionId declared as what they
// are, an int or null, rather than dyn: a registration check (CheckReads) type-checks the rules
// in it, so that a rule adding one to a string or comparing it with one is refused, where in dyn
// it always fails or is never true. Stored rules are compiled in environment, as they were.
func idsEnvironment() (*cel.Env, error) {
	if _, err := environment(); err != nil {
		return nil, err
	}
	return envIDs, nil
}

func newEnvironment(ids *cel.Type) (*cel.Env, error) {
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable("event", dynMap),
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", dynMap),
		cel.Variable("input", cel.StringType),
		cel.Variable("task", dynMap),
		cel.Variable("principalId", ids),
		cel.Variable("agentId", ids),
		cel.Variable("sessionId", ids),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(), ext.Lists(), ext.Math(), ext.Regex(), ext.Sets(), ext.Encoders(), ext.Bindings(),
		ext.Network(),
		cel.Function("with",
			cel.MemberOverload("map_with_map", []*cel.Type{dynMap, dynMap}, dynMap,
				cel.BinaryBinding(mapWith))),
		cel.Function("mask",
			cel.MemberOverload("string_mask_int", []*cel.Type{cel.StringType, cel.IntType}, cel.StringType,
				cel.BinaryBinding(mask))),
		cel.Function("pathWithin",
			cel.Overload("path_within_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(pathWithin))),
		cel.Function("glob",
			cel.MemberOverload("string_glob_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(glob))),
		cel.CostModel(
			// As CEL prices s.matches(p): a pattern written in the policy is matched in about
			// linear time. A computed one is charged its work on top (see computedPattern),
			// as are the calls of callPrices.
			cost.MemberOverload("string_glob_string", cost.EvalCost(cost.Mul(
				cost.Scale(cost.Sum(cost.Target(), cost.Const(1)), cost.StringTraversalCostFactor),
				cost.Scale(cost.Arg(0), cost.RegexStringLengthCostFactor)))),
			cost.Overload(callWorkOverload, cost.EvalCost(cost.IntArg(0, 0)))),
	)
}

// mapWith is m.with(other): m with the keys of other replaced or added.
func mapWith(a, b ref.Val) ref.Val {
	m, ok1 := a.(traits.Mapper)
	o, ok2 := b.(traits.Mapper)
	if !ok1 || !ok2 {
		return types.NewErr("with: needs two maps")
	}
	out := map[ref.Val]ref.Val{}
	for _, src := range []traits.Mapper{m, o} {
		for it := src.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			out[k] = src.Get(k)
		}
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, out)
}

// mask is s.mask(keep): every character of s but the last keep ones replaced by '*'.
func mask(a, b ref.Val) ref.Val {
	s, ok1 := a.(types.String)
	keep, ok2 := b.(types.Int)
	if !ok1 || !ok2 || keep < 0 {
		return types.NewErr("mask: needs a string and a count of at least 0")
	}
	n := utf8.RuneCountInString(string(s))
	if int(keep) >= n {
		return s
	}
	var sb strings.Builder
	i := 0
	for _, r := range string(s) {
		if i < n-int(keep) {
			sb.WriteByte('*')
		} else {
			sb.WriteRune(r)
		}
		i++
	}
	return types.String(sb.String())
}

// pathWithin is pathWithin(p, dir): p, with . and .. resolved, is dir or inside it. A relative p
// is never within an absolute dir: its place depends on a working directory the policy cannot see.
func pathWithin(a, b ref.Val) ref.Val {
	p, ok1 := a.(types.String)
	dir, ok2 := b.(types.String)
	if !ok1 || !ok2 {
		return types.NewErr("pathWithin: needs two strings")
	}
	cp, cd := path.Clean(string(p)), path.Clean(string(dir))
	if path.IsAbs(cp) != path.IsAbs(cd) {
		return types.False
	}
	return types.Bool(cp == cd || cd == "/" || strings.HasPrefix(cp, cd+"/"))
}

var (
	globMu    sync.Mutex
	globCache = map[string]*regexp.Regexp{}
)

// maxCachedGlob is the longest glob pattern kept compiled.
const maxCachedGlob = 256

// glob is s.glob(pattern): * matches within one path segment, ** across segments (**/ any
// number of directories, none included), ? one character; everything else literally. s is
// matched with . and .. resolved, as pathWithin does: '/tmp/../etc/passwd' is /etc/passwd to a
// deny on '/etc/**', and '/srv/app/../../etc/passwd' is not under '/srv/**'. The pattern is
// resolved the same way, so that one written './secrets/*' or '/etc/ssh/' matches what it names
// rather than nothing.
func glob(a, b ref.Val) ref.Val {
	s, ok1 := a.(types.String)
	pat, ok2 := b.(types.String)
	if !ok1 || !ok2 {
		return types.NewErr("glob: needs two strings")
	}
	if pat != "" {
		pat = types.String(path.Clean(string(pat)))
	}
	globMu.Lock()
	re, ok := globCache[string(pat)]
	if !ok {
		re = regexp.MustCompile(globRegexp(string(pat)))
		// Patterns are nearly always literals of the policy, short: one taken from an input may
		// be long, its program large, and kept it would hold its memory for good.
		if len(globCache) < 1024 && len(pat) <= maxCachedGlob {
			globCache[string(pat)] = re
		}
	}
	globMu.Unlock()
	p := string(s)
	if p != "" {
		p = path.Clean(p)
	}
	return types.Bool(re.MatchString(p))
}

func globRegexp(pat string) string {
	var sb strings.Builder
	sb.WriteString(`(?s)^`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; {
		case c == '/' && i+3 == len(rs) && rs[i+1] == '*' && rs[i+2] == '*':
			sb.WriteString(`(?:/.*)?`) // a trailing /**: the directory itself and all below it
			i += 2
		case c == '*' && i+2 < len(rs) && rs[i+1] == '*' && rs[i+2] == '/' && (i == 0 || rs[i-1] == '/'):
			sb.WriteString(`(?:.*/)?`) // **/: any number of directories, none included
			i += 2
		case c == '*' && i+1 < len(rs) && rs[i+1] == '*':
			sb.WriteString(`.*`)
			i++
		case c == '*':
			sb.WriteString(`[^/]*`)
		case c == '?':
			sb.WriteString(`[^/]`)
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString(`$`)
	return sb.String()
}

// patternFuncs are the functions that match a string, their first argument, against a pattern,
// their second, with RE2 (Go's regexp); each with the RE2 expression its pattern stands for.
var patternFuncs = map[string]func(pattern string) string{
	"glob":             globRegexp,
	"matches":          func(p string) string { return p },
	"regex.extract":    func(p string) string { return p },
	"regex.extractAll": func(p string) string { return p },
	"regex.replace":    func(p string) string { return p },
}

// oneGroupFuncs are the patternFuncs that fail on a pattern with more than one capturing group.
var oneGroupFuncs = []string{"regex.extract", "regex.extractAll"}

// boundPatterns (a cel.CustomDecoratorV2) wraps each call of a patternFuncs function whose
// pattern is not a literal, so that it costs what it may do. A literal pattern is checked here,
// at registration, and its call left as CEL plans it: the policy's author chose it, and the static
// estimate sees it.
func boundPatterns(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	toRegexp, ok := patternFuncs[call.Function()]
	if !ok || len(call.Args()) < 2 {
		return i, nil
	}
	if c, literal := call.Args()[1].(interpreter.InterpretableConst); literal {
		if p, ok := c.Value().(types.String); ok {
			return i, checkPattern(call.Function(), toRegexp(string(p)))
		}
		return i, nil
	}
	return &computedPattern{InterpretableCall: call, toRegexp: toRegexp}, nil
}

// checkPattern refuses expr, the RE2 expression of a literal pattern of function, when function
// would fail on it at every call. CEL compiles only matches' literal patterns when it plans a
// program; the regex functions compile theirs at each call, so a typo in one failed the rule on
// every input, and a deny rule under failureMode ALLOW let everything through.
func checkPattern(function, expr string) error {
	re, err := regexp.Compile(expr) // as the functions compile it at run time
	if err != nil {
		return fmt.Errorf("%s: %w", function, err)
	}
	if slices.Contains(oneGroupFuncs, function) && re.NumSubexp() > 1 {
		return fmt.Errorf("%s: the pattern %q has %d capturing groups; at most one", function, expr, re.NumSubexp())
	}
	return nil
}

// zoneFuncs are the timestamp accessors that take a time zone, an IANA name or a ±HH:MM offset.
var zoneFuncs = []string{overloads.TimeGetFullYear, overloads.TimeGetMonth, overloads.TimeGetDayOfYear,
	overloads.TimeGetDate, overloads.TimeGetDayOfMonth, overloads.TimeGetDayOfWeek, overloads.TimeGetHours,
	overloads.TimeGetMinutes, overloads.TimeGetSeconds, overloads.TimeGetMilliseconds}

// literalArgs calls f with every call of e, a checked expression, whose arguments CEL reads only
// when the call runs and that are written in the rule: a timestamp accessor's time zone
// (ts.getHours('Asia/Shanghai'): "getHours", [Asia/Shanghai]) and regex.replace's pattern and
// replacement ("regex.replace", [pattern replacement]).
func literalArgs(e ast.Expr, f func(function string, args []string)) {
	literal := func(e ast.Expr) (string, bool) {
		if e.Kind() != ast.LiteralKind {
			return "", false
		}
		s, ok := e.AsLiteral().(types.String)
		return string(s), ok
	}
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		switch args := c.Args(); {
		case c.IsMemberFunction() && len(args) == 1 && slices.Contains(zoneFuncs, c.FunctionName()):
			if zone, ok := literal(args[0]); ok {
				f(c.FunctionName(), []string{zone})
			}
		case c.FunctionName() == "regex.replace" && len(args) >= 3:
			pattern, ok1 := literal(args[1])
			repl, ok2 := literal(args[2])
			if ok1 && ok2 {
				f(c.FunctionName(), []string{pattern, repl})
			}
		}
	}))
}

// checkLiteral refuses arguments that literalArgs found written in a rule and that fail every
// call that reads them: a time zone CEL cannot read ('Asia/Shangai', '+8'), a replacement naming
// a group its pattern lacks (r'\3' of two groups). CEL reads them only when the call runs, the
// replacement only once the pattern matched, so the rule failed on exactly the inputs it was
// for, and under failureMode ALLOW a deny let them through and a modify that masks them passed
// them on as they were.
func checkLiteral(function string, args []string) error {
	if function == "regex.replace" {
		re, err := regexp.Compile(args[0])
		if err != nil {
			return nil // refused as the pattern it is (checkPattern)
		}
		return checkReplacement(re.NumSubexp(), args[1])
	}
	// The zone is read by CEL itself, on a timestamp of its own: what is refused is exactly what
	// would fail.
	v := types.Timestamp{Time: time.Unix(0, 0).UTC()}.Receive(function, "", []ref.Val{types.String(args[0])})
	if err, isErr := v.(*types.Err); isErr {
		return fmt.Errorf("%s: time zone %q: %v", function, args[0], err)
	}
	return nil
}

// checkReplacement checks a regex.replace replacement as CEL reads it: \\ is a backslash, a \
// and a digit the group of that number (\0 the whole match), and any other \ an error.
func checkReplacement(groups int, repl string) error {
	for i := 0; i < len(repl); i++ {
		if repl[i] != '\\' {
			continue
		}
		i++
		switch {
		case i == len(repl):
			return fmt.Errorf("regex.replace: the replacement %q ends in a \\; write \\\\ for a backslash", repl)
		case repl[i] == '\\':
		case repl[i] < '0' || repl[i] > '9':
			return fmt.Errorf("regex.replace: the replacement %q has a \\ before neither a digit nor a \\; write \\\\ for a backslash", repl)
		case int(repl[i]-'0') > groups:
			return fmt.Errorf("regex.replace: the replacement %q names group %c; the pattern has %d", repl, repl[i], groups)
		}
	}
	return nil
}

// computedPattern is a string-matching call whose pattern is computed, from the input mostly.
// RE2 matches in time up to the string's length times the size of the pattern's compiled program
// (120 KB of input held a glob for over a minute), and the cost tracker adds a call's cost only
// after the call returns, too late to stop it. So the call is priced before it runs, refused with
// a *PatternCostError when the price is more than what is left of the cost limit, and else
// charged and run.
type computedPattern struct {
	interpreter.InterpretableCall
	toRegexp func(string) string
}

// Exec evaluates the string and the pattern to price the call, then runs the call itself, which
// evaluates them again (cel-go's own regex size limit does the same): the alternative is
// reimplementing each function's dispatch here.
func (c *computedPattern) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	// A computed pattern has no static bound, so its expression is always counted.
	args, left := evalArgs(frame, c)
	s, ok1 := args[0].(types.String)
	p, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return c.InterpretableCall.Exec(frame) // an error, or not strings: as CEL reports it
	}
	refused := func(price uint64) ref.Val {
		return types.WrapErr(&PatternCostError{Function: c.Function(), StringBytes: len(s), PatternBytes: len(p),
			Cost: price, Left: left})
	}
	// By the expression's length first: parsing a long one takes long too.
	expr := c.toRegexp(string(p))
	price := patternPrice(len(s), uint64(len(expr)))
	if price > left {
		return refused(price)
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return types.WrapErr(fmt.Errorf("%s: %w", c.Function(), err))
	}
	if price = patternPrice(len(s), max(uint64(len(expr)), programBound(re))); price > left {
		return refused(price)
	}
	charge(frame, c, price)
	return c.InterpretableCall.Exec(frame)
}

// Eval implements interpreter.Interpretable: the embedded call's Eval would skip Exec above.
func (c *computedPattern) Eval(vars interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(vars, c.Exec)
}

// RE2's work priced like the rest of CEL's: one step of its NFA (a byte of the string against an
// instruction of the program) takes about a fifth of the time of a CEL cost unit, and compiling
// an instruction up to as long as matching compileSteps bytes against it. At MaxCostLimit a call
// then takes less than a second, as a comprehension does.
const (
	nfaStepsPerCostUnit = 5
	compileSteps        = 128
)

// patternPrice is what matching a string of n bytes against a pattern that compiles to at most
// size instructions may cost, compiling included.
func patternPrice(n int, size uint64) uint64 {
	return cost.SafeMultiply(uint64(n)+compileSteps, size)/nfaStepsPerCostUnit + 1
}

// programBound is more than the number of instructions RE2 compiles re to, worked out without
// compiling it: the pattern's length is no bound, as Simplify turns x{n,m} into m copies of x, and
// a{1000} compiles to 1000 instructions.
func programBound(re *syntax.Regexp) uint64 {
	return cost.SafeAdd(nodeBound(re), 1) // and RE2's fail and match instructions
}

// nodeBound is more than the instructions of re: two for each node (one of its own or of its
// parent's), one for each character of a literal.
func nodeBound(re *syntax.Regexp) uint64 {
	var n uint64
	for _, sub := range re.Sub {
		n = cost.SafeAdd(n, nodeBound(sub))
	}
	if re.Op == syntax.OpRepeat {
		copies := re.Max // x{n,m}: m copies of x, the last m-n of them optional
		if copies < 0 {
			copies = max(re.Min, 1) // x{n,}: n-1 copies, then x+
		}
		n = cost.SafeMultiply(n, uint64(copies))
	}
	if re.Op == syntax.OpLiteral {
		n = cost.SafeAdd(n, uint64(len(re.Rune)))
	}
	return cost.SafeAdd(n, 2)
}
