package policy

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/hookd/hookd/hookdtype"
)

// members is an ObjectSource over a decoded object, read member by member.
type members struct{ decoded }

func (m members) Member(k string) (any, bool) {
	v, ok := m.c.(map[string]any)[k]
	return v, ok
}

// failing is a Source whose context cannot be had.
type failing struct{ decoded }

func (failing) Context() (any, error) { return nil, errors.New("context unavailable") }

// eventExprs read the event variable every way: members selected, tested, missing, of the wrong
// type; and the whole of it or of its context, compared, iterated, sized, passed on, shadowed.
var eventExprs = []string{
	`event.hookType`, `event.hookType == 'pre_tool_use'`, `event.hookName.size()`, `event.traceId`,
	`event.traceId == null`, `has(event.traceId)`, `has(event.nope)`, `event.nope`, `event.sessionId`,
	`event.sessionId > 3`, `event.principalId + 1`, `event.agentId == null`, `event.occurredAt < event.dispatchedAt`,
	`event.deliveryAttempt`, `event.schemaVersion + event.eventId`, `event.hookType.nope`, `has(event.hookType.nope)`,
	`event.context.permissionMode`, `event.context.permissionMode == 'bypassPermissions'`, `has(event.context.cwd)`,
	`has(event.context.permissionMode) && event.context.permissionMode == 'default'`, `event.context.nope`,
	`has(event.context.nope)`, `event.context.toolName.matches('^B')`, `event.context.arguments`,
	`event.context.arguments.command`, `has(event.context.arguments.command)`, `size(event.context.arguments)`,
	`event.context.arguments.exists(k, k == 'command')`, `event.context.userInput`, `event.context.taskId`,
	`event.context.toolName + args.command`, `has(event.context)`, `has(event.context) && event.context.toolName == 'Bash'`,
	`event.context`, `event.context == {'toolName': 'Bash'}`, `event.context.size()`, `'cwd' in event.context`,
	`event.context.all(k, k != '')`, `event.context.with({'a': 1}).a`, `event`, `size(event)`, `'context' in event`,
	`event == event`, `event.all(k, k != '')`, `event.map(k, k).size()`, `event.with({'a': 1}).hookType`,
	`type(event) == map`, `[event][0].hookType`, `{'e': event}.e.hookType`, `event['hookType']`, `event[?'traceId']`,
	`event.?traceId.orValue('none')`, `event.?context.?cwd.orValue('none')`, `event.context[?'cwd'].orValue('x')`,
	`[1].exists(event, event == 1) && event.hookType == 'pre_tool_use'`, `cel.bind(event, 2, event + 1)`,
	`cel.bind(e, event.context, e.toolName)`, `event.context.arguments == args`, `'%s'.format([event.context])`,
	`string(event.sessionId)`, `event.occurredAt / 0`, `dyn(event).hookType`, `dyn(event.context).cwd`,
}

// TestSelectedEventMatchesWhole: an expression given the map of the event's members the policy
// selects (eventReads) evaluates to what it evaluates to given the whole envelope, error message
// included — on envelopes and contexts of every shape, read whole or member by member, and with
// a context that cannot be had.
func TestSelectedEventMatchesWhole(t *testing.T) {
	env, err := environment()
	if err != nil {
		t.Fatal(err)
	}
	p, s := int64(7), int64(10001)
	envelopes := []*Envelope{
		{SchemaVersion: "1.0", EventID: "e1", HookType: "pre_tool_use", HookName: "h", OccurredAt: 1, DispatchedAt: 2,
			DeliveryAttempt: 1, TraceID: "t", SessionID: &s, PrincipalID: &p},
		{SchemaVersion: "1.0", EventID: "e2", HookType: "user_message", HookName: "", DeliveryAttempt: 1, AgentID: &p},
	}
	contexts := []string{
		`{"toolName":"Bash","toolCallId":"c1","arguments":{"command":"make test","timeout":120000}}`,
		`{"toolName":"Bash","toolCallId":"c1","arguments":{"command":"ls"},"agentKind":"claude-code",
			"externalSessionId":"s","cwd":"/home","permissionMode":"bypassPermissions"}`,
		`{"toolName":"x","toolCallId":"","arguments":[1,"a"],"agentKind":"codex","externalSessionId":"","permissionMode":"default"}`,
		`{"toolName":"x","toolCallId":"c","arguments":"not json"}`,
		`{"userInput":"hello"}`, `{"taskId":3,"taskName":"nightly"}`, `{}`,
	}
	selective := 0
	for _, expr := range eventExprs {
		ast, iss := env.Compile(expr)
		if iss != nil && iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		var r eventReads
		r.read(ast.NativeRep().Expr())
		if !r.whole {
			selective++
		}
		for _, e := range envelopes {
			for _, text := range contexts {
				ctx := DecodeValid([]byte(text))
				for _, src := range []Source{Decoded(ctx), members{decoded{ctx}}, failing{decoded{ctx}}} {
					in := InputOf(e, src)
					in.reads = &r
					got, _, gerr := prg.Eval(in)
					want, _, werr := prg.Eval(InputOf(e, src))
					if !sameResult(got, gerr, want, werr) {
						t.Fatalf("%s on %s through %T (reads %+v):\n got %v %v\nwant %v %v", expr, text, src, r, got, gerr, want, werr)
					}
				}
			}
		}
	}
	if selective < 30 {
		t.Fatalf("only %d expressions read selected members: the test says little", selective)
	}
}

// sameResult tells whether two evaluations came to the same value or the same error.
func sameResult(got ref.Val, gerr error, want ref.Val, werr error) bool {
	if gerr != nil || werr != nil {
		return fmt.Sprint(gerr) == fmt.Sprint(werr)
	}
	return got.Type() == want.Type() && types.Equal(got, want) == types.True
}

// TestSelectedEventIsSmall: a policy that selects members of event and event.context is given
// those alone, each read once per evaluation; one that reads them whole, the whole envelope.
func TestSelectedEventIsSmall(t *testing.T) {
	ctx := DecodeValid([]byte(`{"toolName":"Bash","arguments":{"command":"ls"},"cwd":"/home","permissionMode":"plan"}`))
	e := &Envelope{HookType: "pre_tool_use", TraceID: "t"}
	for _, c := range []struct {
		whens []string
		want  map[string]any
	}{
		{[]string{"event.context.permissionMode == 'bypass'", "has(event.traceId) && args.command == 'rm'"},
			map[string]any{"traceId": types.String("t"), "context": map[string]any{"permissionMode": types.String("plan")}}},
		{[]string{"has(event.context.nope)", "event.hookType == 'x'"}, map[string]any{"hookType": types.String("pre_tool_use"), "context": map[string]any{}}},
		{[]string{"event.context.cwd == '/'", "size(event.context) > 9"}, map[string]any{"context": ctx}},
	} {
		cfg := Config{}
		for i, w := range c.whens {
			cfg.Rules = append(cfg.Rules, Rule{Name: fmt.Sprint(i), When: w, Decision: Deny})
		}
		pol, err := Compile(cfg, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		src := &countingMembers{members: members{decoded{ctx}}}
		in := InputOf(e, src)
		if res, err := pol.EvalCounted(in); err != nil || res.Decision != Allow {
			t.Fatalf("%v: %+v %v", c.whens, res, err)
		}
		if in.Event != nil || !reflect.DeepEqual(in.sel, c.want) {
			t.Fatalf("%v: event %v, selected %v; want selected %v", c.whens, in.Event, in.sel, c.want)
		}
		for k, n := range src.reads {
			if n > 1 {
				t.Fatalf("%v: member %s read %d times", c.whens, k, n)
			}
		}
	}
	whole, err := Compile(Config{Rules: []Rule{{Name: "w", When: "size(event) == 0", Decision: Deny}}}, "pre_tool_use")
	if err != nil {
		t.Fatal(err)
	}
	in := InputOf(e, members{decoded{ctx}})
	if _, err := whole.Eval(in); err != nil || len(in.Event) != 12 {
		t.Fatalf("whole event: %v %v", in.Event, err)
	}
}

type countingMembers struct {
	members
	reads map[string]int
}

func (c *countingMembers) Member(k string) (any, bool) {
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[k]++
	return c.members.Member(k)
}

// TestSelectedEventPolicies: whole policies decide the same (decision, rule, reason,
// modifiedValue, cost, error) given the members they select of an event as given the whole
// envelope (NewInput), in each evaluation, counted and not.
func TestSelectedEventPolicies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	rules := []Rule{
		{Name: "bypass", When: "event.context.permissionMode == 'bypassPermissions'", Decision: Ask, Reason: "'bypass in ' + event.context.cwd"},
		{Name: "root", When: "has(event.context.arguments.command) && event.context.arguments.command.contains('rm -rf /')", Decision: Deny},
		{Name: "traced", When: "has(event.traceId) && event.traceId == 'deny'", Decision: Deny, Reason: "event.hookName"},
		{Name: "nope", When: "event.context.nope == 1", Decision: Deny},
		{Name: "mode", When: "event.context.permissionMode.size() > 10", Decision: Modify, ModifiedValue: "args.with({'mode': event.context.permissionMode})"},
		{Name: "whole", When: "event.context.size() > 6", Decision: Ask},
		{Name: "session", When: "event.sessionId == 1", Decision: Deny},
	}
	modes := []string{"", "default", "bypassPermissions", "acceptEditsLonger"}
	for range 400 {
		var cfg Config
		for _, i := range rng.Perm(len(rules))[:1+rng.IntN(4)] {
			cfg.Rules = append(cfg.Rules, rules[i])
		}
		pol, err := Compile(cfg, "pre_tool_use")
		if err != nil {
			t.Fatal(err)
		}
		ctx := map[string]any{"toolName": "Bash", "toolCallId": "c", "arguments": map[string]any{"command": []string{"ls", "rm -rf /"}[rng.IntN(2)]}}
		if m := modes[rng.IntN(len(modes))]; m != "" {
			ctx["permissionMode"] = m
		}
		if rng.IntN(2) == 0 {
			ctx["cwd"] = "/srv"
		}
		if rng.IntN(3) == 0 {
			delete(ctx, "arguments")
		}
		var session *int64
		if rng.IntN(2) == 0 {
			id := rng.Int64N(2)
			session = &id
		}
		e := &Envelope{SchemaVersion: "1.0", EventID: "e", HookType: "pre_tool_use", HookName: "h",
			TraceID: []string{"", "deny", "t"}[rng.IntN(3)], SessionID: session}
		for _, eval := range []func(*Policy, *Input) (Result, error){(*Policy).Eval, (*Policy).EvalCounted} {
			src := members{decoded{maps.Clone(ctx)}}
			whole := InputOf(e, src)
			event, _ := whole.ResolveName("event")
			got, gerr := eval(pol, InputOf(e, src))
			want, werr := eval(pol, NewInput(event.(map[string]any)))
			if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Fatalf("%+v on %v %+v:\n got %+v %v\nwant %+v %v", cfg, ctx, e, got, gerr, want, werr)
			}
		}
	}
}

// TestDecodeValidString: a text decodes as its bytes do.
func TestDecodeValidString(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for n := 0; n < 5000; {
		var b bytes.Buffer
		randomJSON(rng, &b, 0)
		if !hookdtype.Valid(b.Bytes()) {
			continue
		}
		n++
		if got, want := DecodeValidString(b.String()), DecodeValid(b.Bytes()); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, want %#v", b.Bytes(), got, want)
		}
	}
}
