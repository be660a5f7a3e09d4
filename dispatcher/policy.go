package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
	"github.com/hookd/hookd/storage"
)

// policyDecider evaluates a policy hook's compiled rules in-process.
type policyDecider struct {
	p       *policy.Policy
	counted bool // count the cost of every evaluation (a trial reports it)
}

func (pd *policyDecider) decide(_ context.Context, _ *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer {
	eval := pd.p.Eval
	if pd.counted {
		eval = pd.p.EvalCounted
	}
	res, err := eval(c.policyInput(h, eventID, now))
	if err != nil {
		a := answer{cost: res.Cost, failure: err}
		var ee *policy.EvalError
		if errors.As(err, &ee) {
			a.rule = ee.Rule
		}
		return a
	}
	return answer{dec: Decision{Decision: res.Decision, Reason: res.Reason, ModifiedValue: res.ModifiedValue},
		rule: res.Rule, cost: res.Cost}
}

// brokenDecider stands for a stored policy that no longer compiles (it was checked when it was
// stored): its failureMode decides every call, and the error says why, rather than the hook
// silently dropping out of the chain.
type brokenDecider struct{ err error }

func (b brokenDecider) decide(context.Context, *Dispatcher, *boundHook, *chainEvent, string, time.Time) answer {
	return answer{failure: b.err}
}

// newDecider builds the decider of a stored hook.
func newDecider(h *Hook, log *slog.Logger) decider {
	if h.DispatchType != DispatchPolicy {
		return webhookDecider{}
	}
	if h.PolicyConfig == nil {
		return brokenDecider{errors.New("policy hook without policyConfig")}
	}
	p, err := policy.Compile(*h.PolicyConfig, string(h.HookType))
	if err != nil {
		log.Error("stored policy does not compile; its failureMode decides", "hookId", h.ID, "err", err)
		return brokenDecider{fmt.Errorf("stored policy does not compile: %w", err)}
	}
	return &policyDecider{p: p}
}

// reuseDecider keeps the compiled policy of the previous snapshot when the hook's rules did not
// change, so a reload after another hook's update compiles nothing.
func reuseDecider(old *boundHook, h *Hook) decider {
	if old == nil || h.DispatchType != DispatchPolicy || old.DispatchType != DispatchPolicy ||
		old.HookType != h.HookType || !reflect.DeepEqual(old.PolicyConfig, h.PolicyConfig) {
		return nil
	}
	if _, ok := old.decider.(*policyDecider); !ok {
		return nil
	}
	return old.decider
}

// policyInput is the event as a policy sees it: the envelope a webhook of h would receive, as
// values, its context read through c.
func (c *chainEvent) policyInput(h *boundHook, eventID string, now time.Time) *policy.Input {
	ev := &c.ev
	var src policy.Source = c
	if _, ok := c.toolCall(); ok {
		src = toolCallSource{c}
	}
	// The chain asks its hooks one at a time, so one envelope and one input serve each in turn.
	c.env = policy.Envelope{SchemaVersion: SchemaVersion, EventID: eventID, HookType: string(h.HookType),
		HookName: h.HookName, OccurredAt: ev.OccurredAt.UnixMilli(), DispatchedAt: now.UnixMilli(), DeliveryAttempt: 1,
		TraceID: ev.TraceID, SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID}
	c.in.Reset(&c.env, src)
	return &c.in
}

var (
	_ policy.TextSource   = (*chainEvent)(nil)
	_ policy.ObjectSource = toolCallSource{}
)

// Context implements policy.Source: the context a webhook would receive, decoded.
func (c *chainEvent) Context() (any, error) {
	if c.decoded == nil {
		if m, ok := c.toolCallContext(); ok {
			c.decoded = m
			return m, nil
		}
		body, canonical, err := c.rendered()
		switch {
		case err != nil:
			return nil, fmt.Errorf("context for the policy: %w", err)
		case canonical: // json.Marshal's own output
			c.decoded = policy.DecodeValid(body)
		default:
			if c.decoded, err = policy.DecodeJSON(body); err != nil {
				return nil, fmt.Errorf("context for the policy: %w", err)
			}
		}
	}
	return c.decoded, nil
}

// toolCall is the pre_tool_use context whose text is all UTF-8, which rendering leaves as it is:
// what a policy reads of it is read from its fields (toolCallContext, toolCallSource).
func (c *chainEvent) toolCall() (*PreToolUseContext, bool) {
	pc, ok := c.ev.Context.(*PreToolUseContext)
	if !ok || pc == nil {
		return nil, false
	}
	var agent CodingAgent
	if pc.CodingAgent != nil {
		agent = *pc.CodingAgent
	}
	for _, s := range [...]string{pc.ToolName, pc.ToolCallID, string(pc.Arguments), agent.AgentKind,
		agent.ExternalSessionID, agent.Cwd, agent.PermissionMode} {
		if !utf8.ValidString(s) {
			return nil, false
		}
	}
	return pc, true
}

// toolCallMembers are the members a tool call's context may have.
var toolCallMembers = [...]string{"toolName", "toolCallId", "arguments", "agentKind", "externalSessionId", "cwd", "permissionMode"}

// toolCallContext is a pre_tool_use context as Context decodes it, built from its fields instead,
// unless some text is not UTF-8, which rendering would change (FuzzPolicySource holds the two
// alike). A rule that reads event.context of a coding agent's call then costs neither the
// rendering nor the decoding of the whole context: 15 % of the CPU such a call took in the daemon
// (ClaudeCodePolicy). One that only selects members of it reads those alone (toolCallSource).
func (c *chainEvent) toolCallContext() (map[string]any, bool) {
	pc, ok := c.toolCall()
	if !ok {
		return nil, false
	}
	m := make(map[string]any, len(toolCallMembers))
	for _, k := range toolCallMembers {
		if v, ok := c.toolCallMember(pc, k); ok {
			m[k] = v
		}
	}
	return m, true
}

// toolCallMember is the member k of tool call pc's context, as its rendering decodes.
func (c *chainEvent) toolCallMember(pc *PreToolUseContext, k string) (any, bool) {
	switch k {
	case "toolName":
		return types.String(pc.ToolName), true
	case "toolCallId":
		return types.String(pc.ToolCallID), true
	case "arguments":
		if a := c.Arguments(); a != nil {
			return a, true // the args variable's own map: values in CEL are never changed in place
		}
		if pc.Arguments.opensContainer() && hookdtype.Valid([]byte(pc.Arguments)) {
			return policy.DecodeValidString(string(pc.Arguments)), true // an array
		}
		return types.String(pc.Arguments), true // text, as Value renders what is not a JSON container
	}
	a := pc.CodingAgent
	if a == nil {
		return nil, false
	}
	switch k {
	case "agentKind":
		return types.String(a.AgentKind), true
	case "externalSessionId":
		return types.String(a.ExternalSessionID), true
	case "cwd":
		if a.Cwd != "" { // omitted when empty, as rendering does
			return types.String(a.Cwd), true
		}
	case "permissionMode":
		if a.PermissionMode != "" {
			return types.String(a.PermissionMode), true
		}
	}
	return nil, false
}

// toolCallSource is the chain event of a tool call (toolCall): a rule that selects a member of its
// context, event.context.permissionMode, reads that member alone.
type toolCallSource struct{ *chainEvent }

// Member implements policy.ObjectSource.
func (s toolCallSource) Member(k string) (any, bool) {
	return s.toolCallMember(s.ev.Context.(*PreToolUseContext), k)
}

// Arguments implements policy.Source: pre_tool_use's arguments when they are an object, decoded
// from their own text, which is what the rendered context holds of them (FuzzPolicySource).
func (c *chainEvent) Arguments() map[string]any {
	if !c.argsRead {
		c.argsRead = true
		pc, ok := c.ev.Context.(*PreToolUseContext)
		switch {
		case !ok || !pc.Arguments.opensContainer():
		case !utf8.ValidString(string(pc.Arguments)):
			c.args = c.whole().Arguments() // rendering replaces what is not UTF-8
		case hookdtype.Valid([]byte(pc.Arguments)):
			c.args, _ = policy.DecodeValidString(string(pc.Arguments)).(map[string]any)
		}
	}
	return c.args
}

// ArgumentsText implements policy.TextSource: the text of a tool call's arguments, whose numbers
// are the ones Arguments decoded (rendering a text that is not UTF-8 changes none of them).
func (c *chainEvent) ArgumentsText() string {
	if pc, ok := c.ev.Context.(*PreToolUseContext); ok {
		return string(pc.Arguments)
	}
	return ""
}

// ToolName implements policy.Source.
func (c *chainEvent) ToolName() string {
	if pc, ok := c.ev.Context.(*PreToolUseContext); ok {
		return c.text(pc.ToolName, policy.Source.ToolName)
	}
	return ""
}

// UserInput implements policy.Source.
func (c *chainEvent) UserInput() string {
	if uc, ok := c.ev.Context.(*UserMessageContext); ok {
		return c.text(uc.UserInput, policy.Source.UserInput)
	}
	return ""
}

// text is a field's text as the rendered context has it: itself when it is UTF-8, else what
// field reads of the whole context (rendering replaces each bad byte with U+FFFD).
func (c *chainEvent) text(s string, field func(policy.Source) string) string {
	if utf8.ValidString(s) {
		return s
	}
	return field(c.whole())
}

// MaxSize implements policy.Source: a bound of what a rule reads of the context from the sizes
// of its fields (each decoded string or container is at most the text it came from, with what is
// not UTF-8 replaced), or from the rendered context of a kind without such a bound here.
func (c *chainEvent) MaxSize() int {
	switch pc := c.ev.Context.(type) {
	case *PreToolUseContext:
		// Every field of it (TestPolicySourceSize); 32 is more than its keys' lengths and count,
		// and 3× what rendering makes of a byte that is not UTF-8 (U+FFFD).
		return 32 + 3*(max(len(pc.ToolName), len(pc.ToolCallID), len(pc.Arguments))+codingAgentLen(pc.CodingAgent))
	}
	body, _, err := c.rendered()
	if err != nil {
		return math.MaxInt
	}
	return len(body)
}

// whole is the whole context as a Source: null when it cannot be rendered.
func (c *chainEvent) whole() policy.Source {
	v, _ := c.Context()
	return policy.Decoded(v)
}

// Evaluation is what a trial evaluation of a policy decided, recording nothing.
type Evaluation struct {
	Decision      string  `json:"decision"`
	Rule          string  `json:"rule,omitempty"` // the rule that decided, or failed; empty for the default
	Reason        string  `json:"reason,omitempty"`
	ModifiedValue *string `json:"modifiedValue,omitempty"`
	Cost          uint64  `json:"cost"` // CEL cost units spent
	// FromFailureMode says the policy could not decide (Error says why) and failureMode did.
	FromFailureMode bool   `json:"fromFailureMode"`
	Error           string `json:"error,omitempty"`
}

// EvaluatePolicy decides about ev as the policy hook h (stored or not) would in a chain —
// failureMode and the modify check included — and records nothing: the "try before you trust" of
// POST /api/policies/evaluate and of `hookd policy test`. A modify that cannot be applied is decision "error".
func EvaluatePolicy(ctx context.Context, h Hook, ev Event) (Evaluation, error) {
	if !ev.HookType.Interceptive() {
		return Evaluation{}, invalid("event.hookType", "%q is not an interceptive hook type", ev.HookType)
	}
	h.HookType, h.DispatchType = ev.HookType, DispatchPolicy
	if err := h.Normalize(); err != nil {
		return Evaluation{}, err
	}
	p, err := policy.Compile(*h.PolicyConfig, string(h.HookType))
	if err != nil {
		return Evaluation{}, err
	}
	if ev.Context, err = normalizeContext(ev.HookType, ev.Context); err != nil {
		return Evaluation{}, err
	}
	now := time.Now()
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = now
	}
	c, err := newChainEvent(&ev, false)
	if err != nil {
		return Evaluation{}, err
	}
	// A trial has no dispatcher: a policy needs none, and its failure is reported, not logged.
	d := &Dispatcher{log: slog.New(slog.DiscardHandler)}
	r := d.evaluate(ctx, &boundHook{Hook: h, decider: &policyDecider{p: p, counted: true}}, c, now)
	out := Evaluation{Decision: r.dec.Decision, Rule: r.rule, Reason: r.dec.Reason, ModifiedValue: r.dec.ModifiedValue,
		Cost: r.cost, FromFailureMode: r.failure != nil}
	switch {
	case r.failure != nil:
		out.Error = r.failure.Error()
	case r.invalid != nil:
		out.Decision, out.ModifiedValue, out.Error = storage.OutcomeError, nil, r.invalid.Error()
	}
	return out, nil
}
