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
	"github.com/hookd/hookd/storage"
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
}

// InvalidModifyError is returned when a pre_tool_use hook's modifiedValue is not JSON: the tool
// call must fail rather than run with arguments nobody approved.
type InvalidModifyError struct {
	HookID   int64
	HookName string
}

func (e *InvalidModifyError) Error() string {
	return fmt.Sprintf("hook %q returned a modifiedValue that is not valid JSON arguments", e.HookName)
}

// hookAnswer is the receiver's response body.
type hookAnswer struct {
	Decision      string          `json:"decision"`
	Reason        string          `json:"reason"`
	ModifiedValue json.RawMessage `json:"modifiedValue"`
}

// A decider is one stage of the interceptive chain: it answers for one hook, a webhook by asking
// its receiver, a policy by evaluating its rules. It decides nothing about the chain: the chain
// rules live in Intercept alone, and failureMode, the decision log and the metrics in stage.
type decider interface {
	decide(ctx context.Context, d *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer
}

// answer is one hook's decision with what the decision log records of it. A non-nil failure
// means the hook could not decide: its failureMode does.
type answer struct {
	Decision
	rule    string // the policy rule that decided
	status  int    // the receiver's HTTP status
	failure error
}

var (
	_ decider = webhookDecider{}
	_ decider = (*policyDecider)(nil)
)

// chainEvent is the event as the chain's next stage sees it: the value of the last modify, its
// context rendered once for the webhooks and decoded once for the policies.
type chainEvent struct {
	ev        *Event
	body      json.RawMessage
	canonical bool
	decoded   any // the policies' view of body; nil until a policy needs it
}

func newChainEvent(ev *Event) (*chainEvent, error) {
	c := &chainEvent{ev: ev}
	var err error
	c.body, c.canonical, err = encodeContext(ev.Context)
	return c, err
}

// modified hands a modify on: the next stage sees the new value.
func (c *chainEvent) modified(v string) error {
	next, err := withModified(c.ev.Context, v)
	if err != nil {
		return err
	}
	c.ev.Context, c.decoded = next, nil
	c.body, c.canonical, err = encodeContext(next)
	return err
}

// Intercept runs the matching hooks of an interceptive event in chain order (priority, then id)
// and returns the verdict. The chain rules, all of them here: a deny ends the chain; a modify
// hands the new value to the next hook; an ask is remembered and the chain goes on, so a later
// deny still wins; the verdict is ask when some hook asked and none denied. No matching hook
// means allow. Each hook's answer is written to the decision log.
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
	c, err := newChainEvent(&ev)
	if err != nil {
		return Decision{}, err
	}
	var asked *answer
	for i, h := range hooks {
		if i > 0 {
			now = time.Now()
		}
		a := d.stage(ctx, h, c, verdict.DecisionID, now)
		switch a.Decision.Decision {
		case Deny:
			return Decision{Decision: Deny, Reason: a.Reason, DecisionID: verdict.DecisionID}, nil
		case Ask:
			if asked == nil {
				asked = &a
			}
		case Modify:
			if c.modified(*a.ModifiedValue) != nil {
				return Decision{}, &InvalidModifyError{HookID: h.ID, HookName: h.HookName}
			}
			verdict.Decision, verdict.ModifiedValue = Modify, a.ModifiedValue
		}
	}
	if asked != nil {
		verdict.Decision, verdict.Reason = Ask, asked.Reason
	}
	return verdict, nil
}

// stage asks one hook's decider, starting at start, resolves a failure by the hook's failureMode,
// and records the answer: the same decision log row for every kind of decider.
func (d *Dispatcher) stage(ctx context.Context, h *boundHook, c *chainEvent, decisionID string, start time.Time) answer {
	ev := c.ev
	rec := storage.Decision{DecisionID: decisionID, EventID: storage.NewTSIDString(), HookID: h.ID,
		HookName: h.HookName, HookType: string(h.HookType), SessionID: ev.SessionID, TraceID: strPtr(ev.TraceID),
		CreatedAt: start}
	a := h.decider.decide(ctx, d, h, c, rec.EventID, start)
	took := time.Since(start)
	rec.LatencyMs = took.Milliseconds()
	rec.StatusCode = a.status
	rec.RuleName = a.rule
	if a.failure != nil {
		a.Decision = Decision{Decision: strings.ToLower(h.DispatchConfig.FailureMode)}
		if a.Decision.Decision == Deny {
			a.Reason = "hook " + h.HookName + " unavailable (failureMode DENY)"
		}
		rec.FromFailureMode = true
		rec.Error = a.failure.Error()
		d.log.Warn("interceptive hook failed; failureMode applied", "hookId", h.ID, "hookName", h.HookName,
			"traceId", ev.TraceID, "failureMode", h.DispatchConfig.FailureMode, "err", a.failure)
	}
	rec.Outcome, rec.Reason = a.Decision.Decision, a.Reason
	d.logDecision(rec)
	d.metrics.decided(h.HookType, a.Decision.Decision, rec.FromFailureMode, took)
	return a
}

// webhookDecider asks the hook's receiver.
type webhookDecider struct{}

func (webhookDecider) decide(ctx context.Context, d *Dispatcher, h *boundHook, c *chainEvent, eventID string, now time.Time) answer {
	dec, status, failure := d.call(ctx, h, c.ev, strPtr(c.ev.TraceID), c.body, c.canonical, eventID, now)
	return answer{Decision: dec, status: status, failure: failure}
}

// call performs the exchange and parses the answer; a non-nil failure means the hook's
// failureMode decides.
func (d *Dispatcher) call(ctx context.Context, h *boundHook, ev *Event, traceID *string, body json.RawMessage, canonical bool, eventID string, now time.Time) (Decision, int, error) {
	if d.interceptInFlight.Add(1) > int64(d.set.InterceptiveConcurrency) {
		d.interceptInFlight.Add(-1)
		d.bulkheadRejected.Add(1)
		d.metrics.bulkheadRejected(true)
		return Decision{}, 0, errors.New("interceptive bulkhead full")
	}
	defer d.interceptInFlight.Add(-1)
	done, err := d.breakers.Acquire(h.DispatchConfig.URL)
	if err != nil {
		return Decision{}, 0, err
	}
	cctx := d.deadlines.start(ctx, &h.Hook, now)
	defer d.deadlines.end(cctx)
	ctx = cctx
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: eventID, HookType: h.HookType, HookName: h.HookName,
		OccurredAt: ev.OccurredAt.UnixMilli(), DeliveryAttempt: 1, TraceID: traceID,
		SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: body, canonical: canonical}
	a := d.send.send(ctx, &h.Hook, h.wire, env, now)
	done(breakerOutcome(a))
	if a.err != nil {
		if cause := context.Cause(ctx); cause != nil && errors.Is(a.err, context.DeadlineExceeded) {
			return Decision{}, a.status, cause
		}
		return Decision{}, a.status, a.err
	}
	if a.status/100 != 2 {
		return Decision{}, a.status, fmt.Errorf("receiver answered HTTP %d", a.status)
	}
	dec, err := parseAnswer(a.respBody)
	if err != nil {
		return Decision{}, a.status, err
	}
	if dec.Decision == Modify && dec.ModifiedValue == nil {
		d.log.Warn("hook answered modify without modifiedValue; treated as allow", "hookId", h.ID, "hookName", h.HookName, "traceId", ev.TraceID)
		dec.Decision = Allow
	}
	return dec, a.status, nil
}

// The answers most receivers give, which parseAnswer recognises without decoding.
var (
	answerAllow        = []byte(`{"decision":"allow"}`)
	answerAllowSpaced  = []byte(`{"decision": "allow"}`)
	answerAllowSpaced2 = []byte(`{ "decision": "allow" }`)
)

// parseAnswer applies the tolerance rules: an empty body, a missing or unknown decision is allow;
// a body that is not a JSON object is a failure. ask is hookd's extension (docs/receivers.md).
func parseAnswer(body []byte) (Decision, error) {
	// The common answer, give or take JSON whitespace around it, is an allow: what decoding it
	// would decide too.
	if trimmed := bytes.Trim(body, " \t\r\n"); bytes.Equal(trimmed, answerAllow) ||
		bytes.Equal(trimmed, answerAllowSpaced) || bytes.Equal(trimmed, answerAllowSpaced2) {
		return Decision{Decision: Allow}, nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Decision{Decision: Allow}, nil
	}
	var ans hookAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return Decision{}, fmt.Errorf("unparsable response body: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(ans.Decision)) {
	case Deny:
		return Decision{Decision: Deny, Reason: ans.Reason}, nil
	case Ask:
		return Decision{Decision: Ask, Reason: ans.Reason}, nil
	case Modify:
		dec := Decision{Decision: Modify}
		if len(ans.ModifiedValue) > 0 && string(ans.ModifiedValue) != "null" {
			var s string
			if json.Unmarshal(ans.ModifiedValue, &s) != nil {
				s = string(ans.ModifiedValue) // an object instead of its JSON text: take the text
			}
			dec.ModifiedValue = &s
		}
		return dec, nil
	default:
		return Decision{Decision: Allow}, nil
	}
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
		if !json.Valid([]byte(v)) {
			return nil, errors.New("not JSON")
		}
		n := *c
		n.Arguments = Value(v)
		return &n, nil
	case *UserMessageContext:
		n := *c
		n.UserInput = v
		return &n, nil
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

// decisionLinger is how long the decision log writer waits for more entries after the first one
// of a batch. The log is written asynchronously anyway; without the wait, a steady trickle of
// decisions costs one transaction and one fsync each, which on SQLite took a fifth of the CPU
// from the calls being decided.
const decisionLinger = 10 * time.Millisecond

// decisionBatch is the most entries one decision log write takes.
const decisionBatch = 256

// logDecision hands rec to the decision log writer. The writer does not wait on the channel while
// it lingers, so most hand-overs wake nobody: it wakes for the first entry after a write, and when
// a whole batch is waiting.
func (d *Dispatcher) logDecision(rec storage.Decision) {
	d.decisions <- rec
	if len(d.decisions) >= decisionBatch {
		select {
		case d.decisionsFull <- struct{}{}:
		default:
		}
	}
}

func (d *Dispatcher) decisionLoop() {
	defer d.writers.Done()
	batch := make([]storage.Decision, 0, decisionBatch)
	write := func() {
		if err := d.db.InsertDecisions(context.Background(), batch); err != nil {
			d.log.Error("decision log write failed", "entries", len(batch), "err", err)
		}
		batch = batch[:0]
	}
	// writeQueued writes what is queued now, a batch at a time; only this goroutine receives, so
	// the entries counted are there to take.
	writeQueued := func() {
		for n := len(d.decisions); ; {
			for ; n > 0 && len(batch) < cap(batch); n-- {
				batch = append(batch, <-d.decisions)
			}
			if len(batch) > 0 {
				write()
			}
			if n == 0 {
				return
			}
		}
	}
	linger := time.NewTimer(decisionLinger)
	linger.Stop()
	for {
		select {
		case rec := <-d.decisions:
			batch = append(batch, rec)
			if len(d.decisions) < decisionBatch-1 {
				select { // a stale signal from the previous turn
				case <-d.decisionsFull:
				default:
				}
				linger.Reset(decisionLinger)
				select {
				case <-linger.C:
				case <-d.decisionsFull:
				case <-d.closeWrit: // write what is there; the next turn drains the rest
				}
				linger.Stop()
			}
			writeQueued()
		case <-d.closeWrit:
			writeQueued()
			return
		}
	}
}
