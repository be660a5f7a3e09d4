package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/hookd/hookd/policy"
	"github.com/hookd/hookd/storage"
)

// policyDecider evaluates a policy hook's compiled rules in-process.
type policyDecider struct {
	p *policy.Policy
}

func (pd *policyDecider) decide(_ context.Context, _ *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer {
	in, err := c.policyInput(h, eventID, now)
	if err != nil {
		return answer{failure: err}
	}
	res, err := pd.p.Eval(in)
	if err != nil {
		var ee *policy.EvalError
		if errors.As(err, &ee) {
			return answer{rule: ee.Rule, failure: err}
		}
		return answer{failure: err}
	}
	return answer{Decision: Decision{Decision: res.Decision, Reason: res.Reason, ModifiedValue: res.ModifiedValue}, rule: res.Rule}
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
// values. The context is decoded once per value of the chain.
func (c *chainEvent) policyInput(h *boundHook, eventID string, now time.Time) (*policy.Input, error) {
	if c.decoded == nil {
		v, err := policy.DecodeJSON(c.body)
		if err != nil {
			return nil, fmt.Errorf("context for the policy: %w", err)
		}
		c.decoded = v
	}
	ev := c.ev
	id := func(v *int64) any {
		if v == nil {
			return nil
		}
		return *v
	}
	var trace any
	if ev.TraceID != "" {
		trace = ev.TraceID
	}
	return policy.NewInput(map[string]any{"schemaVersion": SchemaVersion, "eventId": eventID,
		"hookType": string(h.HookType), "hookName": h.HookName, "occurredAt": ev.OccurredAt.UnixMilli(),
		"dispatchedAt": now.UnixMilli(), "deliveryAttempt": int64(1), "traceId": trace,
		"sessionId": id(ev.SessionID), "principalId": id(ev.PrincipalID), "agentId": id(ev.AgentID),
		"context": c.decoded}), nil
}

// Evaluation is what a trial evaluation of a policy decided, recording nothing.
type Evaluation struct {
	policy.Result
	// Error is set when the policy could not decide: the decision is then the failureMode's.
	Error           string `json:"error,omitempty"`
	FromFailureMode bool   `json:"fromFailureMode"`
}

// EvaluatePolicy evaluates a policy against ev as a hook of ev's type would, without recording a
// decision: the "try before you trust" of POST /api/policies/evaluate. h is the hook (stored or
// not; its PolicyConfig is compiled here); failureMode decides an evaluation error as in a chain.
func (d *Dispatcher) EvaluatePolicy(h Hook, ev Event) (Evaluation, error) {
	if h.PolicyConfig == nil {
		return Evaluation{}, invalid("policyConfig", "is required")
	}
	if !ev.HookType.Interceptive() {
		return Evaluation{}, invalid("event.hookType", "%q is not an interceptive hook type", ev.HookType)
	}
	p, err := policy.Compile(*h.PolicyConfig, string(ev.HookType))
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
	c, err := newChainEvent(&ev)
	if err != nil {
		return Evaluation{}, err
	}
	h.HookType = ev.HookType
	in, err := c.policyInput(&boundHook{Hook: h}, storage.NewTSIDString(), now)
	if err != nil {
		return Evaluation{}, err
	}
	res, err := p.Eval(in)
	if err == nil {
		return Evaluation{Result: res}, nil
	}
	var ee *policy.EvalError
	if !errors.As(err, &ee) {
		return Evaluation{}, err
	}
	out := Evaluation{Result: policy.Result{Decision: Allow, Rule: ee.Rule, Cost: res.Cost}, Error: err.Error(), FromFailureMode: true}
	if strings.EqualFold(h.DispatchConfig.FailureMode, FailClosed) {
		out.Decision, out.Reason = Deny, "hook "+h.HookName+" unavailable (failureMode DENY)"
	}
	return out, nil
}
