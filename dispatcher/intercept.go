package dispatcher

import (
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

// Decision outcomes.
const (
	Allow  = "allow"
	Deny   = "deny"
	Modify = "modify"
)

// Decision is the verdict of an interceptive chain. ModifiedValue is set when some hook modified
// the value (the last modification wins, and each hook saw the one before it).
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

// Intercept runs the matching hooks of an interceptive event in chain order (priority, then id)
// and returns the verdict: a deny ends the chain; a modify hands the new value to the next hook.
// No matching hook means allow. Each call is written to the decision log.
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
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = time.Now()
	}
	for _, h := range hooks {
		body, err := marshalContext(ev.Context)
		if err != nil {
			return Decision{}, err
		}
		res := d.ask(ctx, h, &ev, body, verdict.DecisionID)
		switch res.Decision {
		case Deny:
			verdict.Decision, verdict.Reason = Deny, res.Reason
			verdict.ModifiedValue = nil
			return verdict, nil
		case Modify:
			next, err := withModified(ev.Context, *res.ModifiedValue)
			if err != nil {
				return Decision{}, &InvalidModifyError{HookID: h.ID, HookName: h.HookName}
			}
			ev.Context = next
			verdict.Decision, verdict.ModifiedValue = Modify, res.ModifiedValue
		}
	}
	return verdict, nil
}

// ask calls one hook and turns whatever happens into a decision, per the source document's
// tolerance rules, and logs it.
func (d *Dispatcher) ask(ctx context.Context, h *boundHook, ev *Event, body json.RawMessage, decisionID string) Decision {
	rec := storage.Decision{DecisionID: decisionID, EventID: storage.NewTSIDString(), HookID: h.ID,
		HookName: h.HookName, HookType: string(h.HookType), SessionID: ev.SessionID, TraceID: strPtr(ev.TraceID),
		CreatedAt: time.Now()}
	start := time.Now()
	dec, status, failure := d.call(ctx, h, ev, body, rec.EventID)
	rec.LatencyMs = time.Since(start).Milliseconds()
	rec.StatusCode = status
	if failure != nil {
		dec = Decision{Decision: strings.ToLower(h.DispatchConfig.FailureMode)}
		if dec.Decision == Deny {
			dec.Reason = "hook " + h.HookName + " unavailable (failureMode DENY)"
		}
		rec.FromFailureMode = true
		rec.Error = failure.Error()
		d.log.Warn("interceptive hook failed; failureMode applied", "hookId", h.ID, "hookName", h.HookName,
			"traceId", ev.TraceID, "failureMode", h.DispatchConfig.FailureMode, "err", failure)
	}
	rec.Outcome, rec.Reason = dec.Decision, dec.Reason
	d.decisions <- rec
	return dec
}

// call performs the exchange and parses the answer; a non-nil failure means the hook's
// failureMode decides.
func (d *Dispatcher) call(ctx context.Context, h *boundHook, ev *Event, body json.RawMessage, eventID string) (Decision, int, error) {
	select {
	case d.interceptSlots <- struct{}{}:
		defer func() { <-d.interceptSlots }()
	default:
		d.bulkheadRejected.Add(1)
		return Decision{}, 0, errors.New("interceptive bulkhead full")
	}
	done, err := d.breakers.Acquire(h.DispatchConfig.URL)
	if err != nil {
		return Decision{}, 0, err
	}
	timeout := time.Duration(h.DispatchConfig.TimeoutMs) * time.Millisecond
	// The cause wraps DeadlineExceeded: net/http returns the cause itself, and the breaker and
	// the retry classifier know a timeout only by it.
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("hook %q timeout %s: %w", h.HookName, timeout, context.DeadlineExceeded))
	defer cancel()
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: eventID, HookType: h.HookType, HookName: h.HookName,
		OccurredAt: ev.OccurredAt.UnixMilli(), DeliveryAttempt: 1, TraceID: strPtr(ev.TraceID),
		SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: body}
	a := d.send.send(ctx, &h.Hook, env)
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

// parseAnswer applies the tolerance rules: an empty body, a missing or unknown decision is allow;
// a body that is not a JSON object is a failure.
func parseAnswer(body []byte) (Decision, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return Decision{Decision: Allow}, nil
	}
	var ans hookAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		return Decision{}, fmt.Errorf("unparsable response body: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(ans.Decision)) {
	case Deny:
		return Decision{Decision: Deny, Reason: ans.Reason}, nil
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
	var tf *TokenFetchError
	if a.status != 0 || errors.Is(a.err, netguard.ErrBlocked) || errors.As(a.err, &tf) {
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

func (d *Dispatcher) decisionLoop() {
	defer d.writers.Done()
	batch := make([]storage.Decision, 0, 256)
	linger := time.NewTimer(decisionLinger)
	linger.Stop()
	for {
		select {
		case rec := <-d.decisions:
			batch = append(batch[:0], rec)
			linger.Reset(decisionLinger)
		fill:
			for len(batch) < cap(batch) {
				select {
				case rec := <-d.decisions:
					batch = append(batch, rec)
				case <-linger.C:
					break fill
				case <-d.closeWrit:
					break fill // write this batch; the next turn drains the rest
				}
			}
			linger.Stop()
			if err := d.db.InsertDecisions(context.Background(), batch); err != nil {
				d.log.Error("decision log write failed", "entries", len(batch), "err", err)
			}
		case <-d.closeWrit:
			for {
				select {
				case rec := <-d.decisions:
					_ = d.db.InsertDecisions(context.Background(), []storage.Decision{rec})
				default:
					return
				}
			}
		}
	}
}
