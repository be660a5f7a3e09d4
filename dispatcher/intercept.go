package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// Decision outcomes. Ask sends the call to a person: in hookd's own runtime it becomes the
// dialect's permission ask; through the dispatch API it is returned as it is.
const (
	Allow  = "allow"
	Deny   = "deny"
	Modify = "modify"
	Ask    = "ask"
)

// Decision is the verdict of an interceptive chain. ModifiedValue is set when some hook modified
// the value (the last modification wins, and each hook saw the one before it); it stays set on
// ask, for the call the person is asked about.
type Decision struct {
	Decision      string  `json:"decision"`
	Reason        string  `json:"reason,omitempty"`
	ModifiedValue *string `json:"modifiedValue,omitempty"`
	DecisionID    string  `json:"decisionId,omitempty"`
	// Extras are what the hooks asked to be shown besides their verdict, in chain order, one per
	// hook that sent any (docs/receivers.md, "Extras"). They come with every verdict, a deny
	// included: an auth_required tool event says how to get past the deny.
	Extras []Extra `json:"extras,omitempty"`
}

// Extra is what one hook's answer carried besides its decision. hookd's runtime shows the hint
// to the model and streams it (HINT_BLOCK, hintSource the hook's name), streams the events
// (CUSTOM) and the tool event (TOOL_EVENT).
type Extra struct {
	HookName  string        `json:"hookName"`
	Hint      string        `json:"hint,omitempty"`
	Events    []CustomEvent `json:"events,omitempty"`
	ToolEvent *ToolEvent    `json:"toolEvent,omitempty"`
}

// CustomEvent is a named event a hook asks to be streamed.
type CustomEvent struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// ToolEvent is side-channel information on the tool call a pre_tool_use hook decided about
// (auth_required with an approval URL, resource_created, ...).
type ToolEvent struct {
	Category    string          `json:"category"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	UserMessage string          `json:"userMessage,omitempty"`
}

// ReservedEventName is the custom event the runtime itself owns (a run's status); a hook may
// not send it, or clients would take a hook's value for the run's state.
const ReservedEventName = "state_updated"

// InvalidModifyError is returned when a hook's modifiedValue cannot take the place of what it
// modifies (pre_tool_use arguments that are not a JSON object, a blank user input or task
// input): the call, the turn or the firing must fail rather than run with something nobody
// approved.
type InvalidModifyError struct {
	HookID   int64
	HookName string
	// Problem says what is wrong with the value ("is not valid JSON arguments").
	Problem string
}

func (e *InvalidModifyError) Error() string {
	return fmt.Sprintf("hook %q returned a modifiedValue that %s", e.HookName, e.Problem)
}

// CallerGoneError ends a chain whose caller went away (its request context ended: a client's
// timeout, a disconnect) while a hook was deciding: the hook did not fail, so its failureMode is
// not what happened; the caller was told nothing, and the record says so.
type CallerGoneError struct {
	HookID   int64
	HookName string
	Err      error // the caller's context's error
}

func (e *CallerGoneError) Error() string {
	return fmt.Sprintf("the caller went away while hook %q decided (%v): it was told nothing, and what it did is its own (the command-hook forwarder blocks)", e.HookName, e.Err)
}

func (e *CallerGoneError) Unwrap() error { return e.Err }

// StoppedError ends a chain that hookd's own shutdown cut short while a hook was deciding: the
// request's context ended with ErrShutdown as its cause (serve ends the requests still open that
// way). The caller is still there and waits for an answer, which its API gives for a chain that
// ended in an error: a block at the coding agents' adapters, never the nothing to say that a
// harness takes for no objection.
type StoppedError struct {
	HookID   int64
	HookName string
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("hookd stopped while hook %q decided", e.HookName)
}

func (e *StoppedError) Unwrap() error { return ErrStopped }

// hookAnswer is the receiver's response body.
type hookAnswer struct {
	Decision      string          `json:"decision"`
	Reason        string          `json:"reason"`
	ModifiedValue json.RawMessage `json:"modifiedValue"`
	// The extras, decoded strictly by parseExtras.
	Hint      json.RawMessage `json:"hint"`
	Events    json.RawMessage `json:"events"`
	ToolEvent json.RawMessage `json:"toolEvent"`
}

// A decider is one stage of the interceptive chain: it answers for one hook, a webhook by asking
// its receiver, a policy by evaluating its rules. It decides nothing about the chain: the chain
// rules live in Intercept alone; failureMode and the modify check in evaluate, for every kind.
type decider interface {
	decide(ctx context.Context, d *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer
}

// answer is one hook's decision with what the decision log records of it. A non-nil failure
// means the hook could not decide: its failureMode does.
type answer struct {
	dec     Decision
	rule    string // the policy rule that decided
	status  int    // the receiver's HTTP status
	breaker string // the receiver URL's breaker state when it was asked
	cost    uint64 // the CEL cost a policy spent
	failure error
	// flaw is what hookd could not use of an answer whose decision stands all the same: a deny
	// (or an ask) whose extras are malformed, or that sent a field twice. On the record as the
	// row's error; the decision is the receiver's, not its failureMode's.
	flaw error
}

var (
	_ decider = webhookDecider{}
	_ decider = (*policyDecider)(nil)
	_ decider = brokenDecider{}
)

// chainEvent is the event as the chain's next stage sees it: the value of the last modify, its
// context rendered once for the webhooks and read by the policies as far as their rules need
// (policy.Source), each part at most once per value of the chain.
type chainEvent struct {
	ev        Event           // its own copy: the event and the chain are one allocation
	body      json.RawMessage // nil until rendered
	canonical bool
	decoded   any            // the whole context as a policy sees it; nil until one reads it
	args      map[string]any // its arguments; nil until a policy reads them
	argsRead  bool
	env       policy.Envelope // the envelope of the policy being asked (policyInput)
	in        policy.Input    // and its input
}

// newChainEvent is a copy of ev at the head of the chain; its context is rendered now when a
// webhook will send it (an error then is the call's, before any hook is asked), else when a
// policy first reads it whole.
func newChainEvent(ev *Event, render bool) (*chainEvent, error) {
	c := &chainEvent{ev: *ev}
	if !render {
		return c, nil
	}
	return c, c.render()
}

func (c *chainEvent) render() error {
	var err error
	c.body, c.canonical, err = encodeContext(c.ev.Context)
	return err
}

// rendered is the context's JSON, rendered now if it was not yet.
func (c *chainEvent) rendered() (json.RawMessage, bool, error) {
	if c.body == nil {
		if err := c.render(); err != nil {
			return nil, false, err
		}
	}
	return c.body, c.canonical, nil
}

// handOn makes a modify's context the one the next stage sees.
func (c *chainEvent) handOn(next any) error {
	render := c.body != nil
	*c = chainEvent{ev: c.ev}
	c.ev.Context = next
	if !render {
		return nil
	}
	return c.render()
}

// Intercept runs the matching hooks of an interceptive event in chain order (priority, then id)
// and returns the verdict. The chain rules, all of them here, whatever kind each stage is: a deny
// ends the chain; a modify hands the new value to the next hook; an ask is remembered and the
// chain goes on, so a later deny still wins; the verdict is ask when some hook asked and none
// denied. No matching hook means allow. Every hook asked adds a row to the decision log holding
// what it was asked about and what was enforced; with decisions.durability sync the rows are
// committed before Intercept returns, and a decision that cannot be recorded is an error, not a
// verdict. A chain that ends in an InvalidModifyError returns it with a Decision that holds only
// the DecisionID of its rows.
func (d *Dispatcher) Intercept(ctx context.Context, ev Event) (Decision, error) {
	if !ev.HookType.Interceptive() {
		return Decision{}, fmt.Errorf("dispatcher: %s is not interceptive", ev.HookType)
	}
	var err error
	if ev.Context, err = normalizeContext(ev.HookType, ev.Context); err != nil {
		return Decision{}, err
	}
	hooks := d.reg.Match(ev.HookType, ev.AgentID, ev.toolName())
	verdict := Decision{Decision: Allow}
	if len(hooks) == 0 {
		return verdict, nil
	}
	verdict.DecisionID = storage.NewTSIDString()
	now := time.Now()
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = now
	}
	// The context is rendered once when a webhook will send it, and again only after a modify.
	c, err := newChainEvent(&ev, anyWebhook(hooks))
	if err != nil {
		return Decision{}, err
	}
	subj := subjectOf(c.ev.Context)
	write := decisionReq(len(hooks))
	// What the caller enforces of a verdict, with the rows that answered it recorded as that.
	enforce := func(v Decision) Decision {
		if c.ev.Enforce == nil {
			return v
		}
		return enforced(write.decisions, v, c.ev.Enforce(v))
	}
	verdict, err = func() (Decision, error) {
		// The first ask's reason. Kept as a value: a pointer into res would move every res to the heap.
		var asked bool
		var askReason string
		for i, h := range hooks {
			if i > 0 {
				now = time.Now()
			}
			res := d.evaluate(ctx, h, c, now)
			write.decisions = append(write.decisions, d.decisionRow(h, &c.ev, &subj, verdict.DecisionID, now, res))
			write.subjects = append(write.subjects, subj)
			d.metrics.decided(h.HookType, res.dec.Decision, res.failure != nil, time.Since(now))
			if res.invalid != nil {
				return Decision{DecisionID: verdict.DecisionID}, res.invalid
			}
			if x := res.dec.Extras; len(x) > 0 {
				x[0].HookName = h.HookName
				verdict.Extras = append(verdict.Extras, x[0])
			}
			switch res.dec.Decision {
			case Deny:
				return enforce(Decision{Decision: Deny, Reason: res.dec.Reason, DecisionID: verdict.DecisionID, Extras: verdict.Extras}), nil
			case Ask:
				if !asked {
					asked, askReason = true, res.dec.Reason
				}
			case Modify:
				if err := c.handOn(res.next); err != nil {
					return Decision{}, err
				}
				subj = subjectOf(c.ev.Context)
				verdict.Decision, verdict.ModifiedValue = Modify, res.dec.ModifiedValue
			}
		}
		if asked {
			verdict.Decision, verdict.Reason = Ask, askReason
		}
		return enforce(verdict), nil
	}()
	if rerr := d.recordDecisions(ctx, write); rerr != nil {
		return Decision{}, rerr
	}
	return verdict, err
}

// RefuseAsk is the Event.Enforce of a caller with nobody to ask (why says so): an ask is
// refused, and recorded as the deny it is, its reason saying why.
func RefuseAsk(why string) func(Decision) Decision {
	return func(d Decision) Decision {
		if d.Decision == Ask {
			reason := d.Reason
			if reason == "" {
				reason = "a hook asks a person to approve this"
			}
			d.Decision, d.ModifiedValue, d.Reason = Deny, nil, reason+" ("+why+", so it is refused)"
		}
		return d
	}
}

// enforced is what the caller enforces in place of verdict (Event.Enforce): the rows that
// answered verdict's decision, which did not take effect, are recorded as what did, with its
// reason. Where only the reason changed (a blank one the caller words for the person it tells),
// the rows that gave verdict its reason record the one the caller was told.
func enforced(recs []storage.Decision, verdict, e Decision) Decision {
	if e.Decision == verdict.Decision && e.Reason == verdict.Reason {
		return e
	}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Outcome != verdict.Decision:
		case e.Decision != verdict.Decision:
			r.Outcome, r.Reason = e.Decision, e.Reason
		case r.Reason == verdict.Reason:
			r.Reason = e.Reason
		}
	}
	return e
}

// hookResult is what asking one hook came to, as a dispatch enforces it.
type hookResult struct {
	answer
	eventID string
	invalid error // non-nil: a modify that cannot be applied, the caller gone or hookd stopping; the chain ends in this error
	next    any   // the context the next hook sees after a modify
	took    time.Duration
}

// evaluate asks one hook's decider, starting at start, and turns whatever happens into what a
// dispatch enforces, per the source document's tolerance rules: the answer, the failureMode when
// the hook could not decide, or an error when a modify cannot be applied. The hook test endpoint
// goes through here too, so it answers what a dispatch would decide.
func (d *Dispatcher) evaluate(ctx context.Context, h *boundHook, c *chainEvent, start time.Time) hookResult {
	res := hookResult{eventID: storage.NewTSIDString()}
	ctx, endSpan := tracing.StartHookCall(ctx, h.ID, h.HookName, string(h.HookType))
	defer func() {
		endSpan(tracing.HookResult{Decision: res.dec.Decision, Latency: res.took, FromFailureMode: res.failure != nil, Status: res.status, Err: res.failure})
	}()
	res.answer = h.decider.decide(ctx, d, h, c, res.eventID, start)
	res.took = time.Since(start)
	if res.failure != nil && ctx.Err() != nil {
		// Not the hook's failure (its own timeout is a context of its own, in call).
		if errors.Is(context.Cause(ctx), ErrStopped) {
			res.invalid = &StoppedError{HookID: h.ID, HookName: h.HookName}
		} else {
			res.invalid = &CallerGoneError{HookID: h.ID, HookName: h.HookName, Err: ctx.Err()}
		}
		res.failure = nil
		return res
	}
	if res.failure != nil {
		res.dec = Decision{Decision: strings.ToLower(h.DispatchConfig.FailureMode)}
		if res.dec.Decision == Deny {
			// A receiver that did not answer is unavailable; one that did, answered what hookd
			// cannot use; a policy is there, and failed.
			what := " unavailable"
			var unusable *UnusableAnswerError
			switch {
			case h.DispatchType == DispatchPolicy:
				what = " could not decide: its policy failed"
			case errors.As(res.failure, &unusable):
				what = " answered what hookd cannot use"
			}
			res.dec.Reason = "hook " + h.HookName + what + " (failureMode DENY)"
		}
		d.log.WarnContext(ctx, "interceptive hook failed; failureMode applied", "hookId", h.ID, "hookName", h.HookName,
			"traceId", c.ev.TraceID, "failureMode", h.DispatchConfig.FailureMode, "err", res.failure)
		return res
	}
	if res.flaw != nil {
		d.log.WarnContext(ctx, "interceptive hook's answer partly unusable; its "+res.dec.Decision+" stands", "hookId", h.ID,
			"hookName", h.HookName, "traceId", c.ev.TraceID, "err", res.flaw)
	}
	if res.dec.Decision == Modify {
		next, err := withModified(c.ev.Context, *res.dec.ModifiedValue)
		if err != nil {
			res.invalid = &InvalidModifyError{HookID: h.ID, HookName: h.HookName, Problem: err.Error()}
			return res
		}
		res.next = next
	}
	return res
}

// webhookDecider asks the hook's receiver.
type webhookDecider struct{}

func (webhookDecider) decide(ctx context.Context, d *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer {
	body, canonical, err := c.rendered()
	if err != nil {
		return answer{failure: err}
	}
	return d.call(ctx, h, &c.ev, strPtr(c.ev.TraceID), body, canonical, eventID, now)
}

// anyWebhook tells whether a chain of hooks sends its event to some receiver.
func anyWebhook(hooks []*boundHook) bool {
	for _, h := range hooks {
		if _, ok := h.decider.(webhookDecider); ok {
			return true
		}
	}
	return false
}

// decisionRow is the decision log row of one hook's result: what was enforced, which for an
// invalid modify is the error the caller got. The subject's digest is filled in by
// recordDecisions.
func (d *Dispatcher) decisionRow(h *boundHook, ev *Event, subj *subject, decisionID string, start time.Time, res hookResult) storage.Decision {
	rec := storage.Decision{DecisionID: decisionID, EventID: res.eventID, HookID: h.ID, HookName: h.HookName,
		HookPriority: h.Priority, HookType: string(h.HookType), SessionID: ev.SessionID, PrincipalID: ev.PrincipalID,
		AgentID: ev.AgentID, TraceID: strPtr(ev.TraceID), ToolName: subj.toolName, ToolCallID: subj.toolCallID,
		TaskID: subj.taskID, RuleName: res.rule, Outcome: res.dec.Decision,
		Reason: res.dec.Reason, FromFailureMode: res.failure != nil, BreakerState: res.breaker,
		StatusCode: res.status, LatencyMs: res.took.Milliseconds(), CreatedAt: start, AgentKind: codingAgentKind(ev.Context)}
	if res.dec.ModifiedValue != nil {
		rec.ModifiedHash = sha256Hex([]byte(*res.dec.ModifiedValue))
	}
	switch {
	case res.failure != nil:
		rec.Error = res.failure.Error()
	case res.flaw != nil:
		rec.Error = res.flaw.Error()
	case res.invalid != nil:
		rec.Outcome, rec.Error = storage.OutcomeError, res.invalid.Error()
		var bad *InvalidModifyError
		if errors.As(res.invalid, &bad) {
			rec.Error += "; the call was refused"
		}
	}
	return rec
}

// call performs the exchange and parses the answer; a non-nil failure means the hook's
// failureMode decides. The answer's breaker is the URL's breaker as the call found it.
func (d *Dispatcher) call(ctx context.Context, h *boundHook, ev *Event, traceID *string, body json.RawMessage, canonical bool, eventID string, now time.Time) answer {
	if h.SecretUnreadable {
		return answer{breaker: d.breakers.State(h.DispatchConfig.URL), failure: ErrSecretUnreadable}
	}
	if d.interceptInFlight.Add(1) > int64(d.set.InterceptiveConcurrency) {
		d.interceptInFlight.Add(-1)
		d.bulkheadRejected.Add(1)
		d.metrics.bulkheadRejected(true)
		return answer{breaker: d.breakers.State(h.DispatchConfig.URL), failure: errors.New("interceptive bulkhead full")}
	}
	defer d.interceptInFlight.Add(-1)
	done, err := d.breakers.Acquire(h.DispatchConfig.URL)
	if err != nil {
		return answer{breaker: breaker.StateOpen, failure: err}
	}
	res := answer{breaker: d.breakers.State(h.DispatchConfig.URL)}
	cctx := d.deadlines.start(ctx, &h.Hook, now)
	defer d.deadlines.end(cctx)
	ctx = cctx
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: eventID, HookType: h.HookType, HookName: h.HookName,
		OccurredAt: ev.OccurredAt.UnixMilli(), DeliveryAttempt: 1, TraceID: traceID,
		SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: body, canonical: canonical}
	a := d.send.send(ctx, &h.Hook, h.wire, env, now)
	done(breakerOutcome(a))
	res.status = a.status
	switch {
	case a.err != nil:
		res.failure = a.err
		if cause := context.Cause(ctx); cause != nil && errors.Is(a.err, context.DeadlineExceeded) {
			res.failure = cause
		}
		return res
	case a.status/100 != 2:
		res.failure = fmt.Errorf("receiver answered HTTP %d", a.status)
		return res
	}
	res.dec, res.flaw, err = parseAnswer(a.respBody, ev.HookType)
	if err != nil {
		if a.bodyOver {
			// Not the receiver's JSON that broke: its answer went on past what hookd reads.
			err = fmt.Errorf("the answer is over %d KiB, more than hookd reads of an answer, and no whole answer ends within them",
				maxResponseBody>>10)
		}
		res.dec, res.failure = Decision{}, &UnusableAnswerError{Err: err}
		return res
	}
	if res.dec.Decision == Modify && res.dec.ModifiedValue == nil {
		d.log.WarnContext(ctx, "hook answered modify without modifiedValue; treated as allow", "hookId", h.ID, "hookName", h.HookName, "traceId", ev.TraceID)
		res.dec.Decision = Allow
	}
	return res
}

// UnusableAnswerError is a receiver's 2xx answer that hookd cannot use (not a JSON object, a
// field of the wrong type, more than hookd reads): the hook's failureMode decides, as when the
// receiver is unavailable, but the record says the receiver answered.
type UnusableAnswerError struct{ Err error }

func (e *UnusableAnswerError) Error() string { return e.Err.Error() }
func (e *UnusableAnswerError) Unwrap() error { return e.Err }

// The answers most receivers give, which parseAnswer recognises without decoding.
var (
	answerAllow        = []byte(`{"decision":"allow"}`)
	answerAllowSpaced  = []byte(`{"decision": "allow"}`)
	answerAllowSpaced2 = []byte(`{ "decision": "allow" }`)
)

// parseAnswer applies the tolerance rules: an empty body, a missing or unknown decision is allow;
// a body that is not a JSON object is a failure (err: the failureMode decides). ask and the
// extras are hookd's extensions (docs/receivers.md); extras that are malformed, or that the hook
// point cannot carry, are a failure too, naming the field: a receiver that meant to show
// something is never silently dropped. Only a deny or an ask outlives what is wrong around it:
// an answer that says deny is a deny, whatever else in it hookd cannot use (flaw says what), so
// that a hook's failureMode ALLOW never turns a receiver's deny into an allow.
func parseAnswer(body []byte, t HookType) (dec Decision, flaw, err error) {
	// The common answer, give or take JSON whitespace around it, is an allow: what decoding it
	// would decide too.
	if trimmed := bytes.Trim(body, " \t\r\n"); bytes.Equal(trimmed, answerAllow) ||
		bytes.Equal(trimmed, answerAllowSpaced) || bytes.Equal(trimmed, answerAllowSpaced2) {
		return Decision{Decision: Allow}, nil, nil
	}
	// RFC 8259 lets a reader ignore a byte order mark, which some receivers' frameworks write:
	// {"decision":"deny"} after one is a deny, not an unparsable answer for the failureMode.
	body = bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF"))
	if len(bytes.TrimSpace(body)) == 0 {
		return Decision{Decision: Allow}, nil, nil
	}
	var ans hookAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		te, ok := errors.AsType[*json.UnmarshalTypeError](err)
		if !ok || te.Field == "" {
			unparsable := fmt.Errorf("unparsable response body: %w", err)
			// A whole JSON object that says deny or ask, followed by what is not JSON (a
			// framework's trailing newline and log line): the receiver's decision stands.
			var first json.RawMessage
			if json.NewDecoder(bytes.NewReader(body)).Decode(&first) == nil {
				if d := saysDenyOrAsk(first); d != "" {
					return Decision{Decision: d, Reason: stringMember(first, "reason")}, fmt.Errorf("%w; the %s stands", unparsable, d), nil
				}
			}
			return Decision{}, nil, unparsable
		}
		// A JSON object with a member of the wrong type ("reason": 5): a deny or an ask in it is
		// still the receiver's, and failureMode ALLOW must not turn it into an allow.
		wrong := hookdtype.Invalid(te.Field, "is a JSON %s, not a string", te.Value)
		if d := saysDenyOrAsk(body); d != "" {
			return Decision{Decision: d, Reason: stringMember(body, "reason")}, fmt.Errorf("%w; the %s stands", wrong, d), nil
		}
		return Decision{}, nil, wrong
	}
	if f := sentTwice(body); f != "" {
		// encoding/json would take the last one: which the receiver meant is not known, and
		// {"decision":"deny","decision":"allow"} must not pass as an allow, under any failureMode.
		twice := hookdtype.Invalid(f, "sent twice (names are matched without case); send each field once")
		if saysDenyOrAsk(body) == Deny {
			return Decision{Decision: Deny, Reason: ans.Reason}, fmt.Errorf("%w; one of them says deny; the deny stands", twice), nil
		}
		return Decision{}, nil, twice
	}
	decision := strings.ToLower(strings.TrimSpace(ans.Decision))
	extra, err := parseExtras(&ans, t)
	if err != nil {
		if decision == Deny || decision == Ask {
			// Nothing of the extras is shown; the decision is the receiver's.
			return Decision{Decision: decision, Reason: ans.Reason}, fmt.Errorf("%w; the %s stands, its extras not shown", err, decision), nil
		}
		return Decision{}, nil, err
	}
	switch decision {
	case Deny:
		dec = Decision{Decision: Deny, Reason: ans.Reason}
	case Ask:
		dec = Decision{Decision: Ask, Reason: ans.Reason}
	case Modify:
		dec = Decision{Decision: Modify}
		if len(ans.ModifiedValue) > 0 && string(ans.ModifiedValue) != "null" {
			var s string
			if json.Unmarshal(ans.ModifiedValue, &s) != nil {
				if t != PreToolUse {
					// The new input is a text; an object's JSON in the user's place is no answer.
					return Decision{}, nil, hookdtype.Invalid("modifiedValue", "must be a string, the new input of %s, not %s",
						t, jsonKindOf(ans.ModifiedValue))
				}
				if !Value(ans.ModifiedValue).opensContainer() {
					// A bare 5 or true is no tool's arguments: which were meant is not known.
					return Decision{}, nil, hookdtype.Invalid("modifiedValue",
						"must be the new arguments, as a JSON string, an object or an array, not %s", jsonKindOf(ans.ModifiedValue))
				}
				s = string(ans.ModifiedValue) // arguments as an object instead of its JSON text: take the text
			}
			dec.ModifiedValue = &s
		}
	case Allow, "":
		dec = Decision{Decision: Allow}
	default:
		// The contract reads a decision it does not know as allow; the record says so, so that an
		// auditor can tell it from an allow the receiver meant ("block" is no deny).
		dec = Decision{Decision: Allow}
		flaw = hookdtype.Invalid("decision", "%q is not allow, deny, modify or ask: read as allow", ans.Decision)
	}
	if extra != nil {
		dec.Extras = []Extra{*extra}
	}
	return dec, flaw, nil
}

// answerFields are the members of an answer that hookd reads (hookAnswer's), each matched
// without case as encoding/json matches them.
var answerFields = [...]string{"decision", "reason", "modifiedValue", "hint", "events", "toolEvent"}

// sentTwice names a member of answerFields that the answer body (valid JSON) holds more than
// once, or "".
func sentTwice(body []byte) string {
	i := hookdtype.SkipSpace(body, 0)
	if body[i] != '{' {
		return ""
	}
	var seen [len(answerFields)]bool
	for i++; ; {
		if i = hookdtype.SkipSpace(body, i); body[i] == '}' {
			return ""
		}
		end, decode := hookdtype.StringEnd(body, i)
		k := hookdtype.StringContent(body[i:end], decode)
		for n, f := range answerFields {
			if strings.EqualFold(k, f) {
				if seen[n] {
					return f
				}
				seen[n] = true
			}
		}
		i = hookdtype.ValueEnd(body, hookdtype.SkipSpace(body, end)+1)
		if i = hookdtype.SkipSpace(body, i); body[i] == ',' {
			i++
		}
	}
}

// saysDenyOrAsk is Deny when some "decision" member of the answer body (a valid JSON object
// whose members may repeat), matched without case, is a deny; else Ask when one is an ask; else "".
func saysDenyOrAsk(body []byte) string {
	said := ""
	for _, v := range stringMembers(body, "decision") {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case Deny:
			return Deny
		case Ask:
			said = Ask
		}
	}
	return said
}

// stringMember is the first member name of the answer body (a valid JSON object), matched
// without case, whose value is a string; "" when none is.
func stringMember(body []byte, name string) string {
	if vs := stringMembers(body, name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// stringMembers are the string values of the members name of body, a valid JSON object whose
// members may repeat, matched without case as encoding/json matches them, in order.
func stringMembers(body []byte, name string) []string {
	var out []string
	i := hookdtype.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil
	}
	for i++; ; {
		if i = hookdtype.SkipSpace(body, i); body[i] == '}' {
			return out
		}
		end, decode := hookdtype.StringEnd(body, i)
		key := hookdtype.StringContent(body[i:end], decode)
		v := hookdtype.SkipSpace(body, hookdtype.SkipSpace(body, end)+1)
		i = hookdtype.ValueEnd(body, v)
		if strings.EqualFold(key, name) && body[v] == '"' {
			vend, vdecode := hookdtype.StringEnd(body, v)
			out = append(out, hookdtype.StringContent(body[v:vend], vdecode))
		}
		if i = hookdtype.SkipSpace(body, i); body[i] == ',' {
			i++
		}
	}
}

// jsonKindOf names the kind of a JSON value, one that is valid and not blank.
func jsonKindOf(v json.RawMessage) string {
	switch bytes.TrimSpace(v)[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case 'n':
		return "null"
	}
	return "a number"
}

// parseExtras decodes an answer's hint, events and toolEvent strictly; nil when it has none.
// null is the same as absent. The hint and the events need a run to be shown in, which
// pre_scheduled_task has not yet; a tool event needs the tool call of pre_tool_use.
func parseExtras(ans *hookAnswer, t HookType) (*Extra, error) {
	present := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	if !present(ans.Hint) && !present(ans.Events) && !present(ans.ToolEvent) {
		return nil, nil
	}
	if t != UserMessage && t != PreToolUse {
		return nil, hookdtype.Invalid("hint", "%s answers cannot carry hint, events or toolEvent: no run shows them", t)
	}
	var x Extra
	if present(ans.Hint) {
		if err := hookdtype.DecodeStrict(ans.Hint, &x.Hint, "hint"); err != nil {
			return nil, err
		}
		if strings.TrimSpace(x.Hint) == "" {
			return nil, hookdtype.Invalid("hint", "is empty; omit it or send the text to show")
		}
	}
	if present(ans.Events) {
		if err := hookdtype.DecodeStrict(ans.Events, &x.Events, "events"); err != nil {
			return nil, err
		}
		for i, e := range x.Events {
			at := fmt.Sprintf("events[%d]", i)
			switch {
			case strings.TrimSpace(e.Name) == "":
				return nil, hookdtype.Invalid(at+".name", "is required")
			case e.Name == ReservedEventName:
				return nil, hookdtype.Invalid(at+".name", "%q is the runtime's own event (the run's status)", e.Name)
			case !isObject(e.Value):
				return nil, hookdtype.Invalid(at+".value", "must be a JSON object")
			}
		}
	}
	if present(ans.ToolEvent) {
		if t != PreToolUse {
			return nil, hookdtype.Invalid("toolEvent", "only a pre_tool_use answer has a tool call to attach it to")
		}
		x.ToolEvent = &ToolEvent{}
		if err := hookdtype.DecodeStrict(ans.ToolEvent, x.ToolEvent, "toolEvent"); err != nil {
			return nil, err
		}
		te := x.ToolEvent
		if strings.TrimSpace(te.Category) == "" {
			return nil, hookdtype.Invalid("toolEvent.category", "is required")
		}
		if len(te.Payload) > 0 && string(te.Payload) != "null" && !isObject(te.Payload) {
			return nil, hookdtype.Invalid("toolEvent.payload", "must be a JSON object")
		}
		if string(te.Payload) == "null" {
			te.Payload = nil
		}
	}
	if x.Hint == "" && len(x.Events) == 0 && x.ToolEvent == nil {
		return nil, nil // an empty events list
	}
	return &x, nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && hookdtype.Valid(raw)
}

// hookTimeout is the cause of a hook call's deadline (callDeadlines). It wraps DeadlineExceeded:
// net/http returns the cause itself, and the breaker and the retry classifier know a timeout only
// by it. Its text is only built when someone reads it.
type hookTimeout struct {
	hook    string
	timeout time.Duration
}

func (e *hookTimeout) Error() string {
	return fmt.Sprintf("hook %q timeout %s: %v", e.hook, e.timeout, context.DeadlineExceeded)
}

func (e *hookTimeout) Unwrap() error { return context.DeadlineExceeded }

// withModified returns the context the next hook sees after a modify.
func withModified(c any, v string) (any, error) {
	switch c := c.(type) {
	case *PreToolUseContext:
		if !hookdtype.Valid([]byte(v)) {
			return nil, errors.New("is not valid JSON arguments")
		}
		// A tool's arguments are an object of them: a bare 5, true, "text" or null, or an array,
		// names none, and the tool would run with what nobody wrote as its arguments.
		if k := jsonKindOf(json.RawMessage(v)); k != "an object" {
			return nil, fmt.Errorf("is %s, not a JSON object of arguments", k)
		}
		n := *c
		n.Arguments = Value(v)
		return &n, nil
	case *UserMessageContext:
		// The source document's modify is the new userInput; an input the chat APIs would refuse
		// as empty is no input to run.
		if strings.TrimSpace(v) == "" {
			return nil, errors.New("is blank: the user input it would replace cannot be empty")
		}
		n := *c
		n.UserInput = v
		return &n, nil
	case *PreScheduledTaskContext:
		// The scheduler runs the value as the task's input, which may not be blank either.
		if strings.TrimSpace(v) == "" {
			return nil, errors.New("is blank: the task input it would replace cannot be empty")
		}
	}
	return c, nil
}

// breakerOutcome is the error the breaker judges: only a missing response counts against a URL,
// and a request we refused to send (SSRF guard) or could not prepare says nothing about it.
func breakerOutcome(a attempt) error {
	if a.status != 0 || a.err == nil {
		return nil
	}
	var tf *TokenFetchError
	if errors.Is(a.err, netguard.ErrBlocked) || errors.As(a.err, &tf) {
		return nil
	}
	if a.err != nil && !breaker.IsNoResponse(a.err) {
		if errors.Is(a.err, context.Canceled) {
			// Our own giving up (caller gone, shutdown): the breaker ignores it, where nil would
			// count as a success and reset the failures, or close a half-open breaker.
			return a.err
		}
		return nil
	}
	return a.err
}
