package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// ProbeResult is what one test call to a hook's receiver showed. For an interceptive hook it is
// what a dispatch would have enforced: the answer under the tolerance rules, or the failureMode
// (FromFailureMode, Error says why), or decision "error" for a modify that cannot be applied.
type ProbeResult struct {
	EventID         string  `json:"eventId"`
	StatusCode      int     `json:"statusCode"`
	LatencyMs       int64   `json:"latencyMs"`
	Decision        *string `json:"decision"` // interceptive hooks only
	Reason          *string `json:"reason,omitempty"`
	ModifiedValue   *string `json:"modifiedValue,omitempty"`
	FromFailureMode bool    `json:"fromFailureMode"`
	BreakerState    string  `json:"breakerState,omitempty"`
	Error           *string `json:"error"`
	// Note says when the sample event is not one a dispatch would ask the hook (a toolNameMatch
	// regex the sample tool does not match): the answer is the receiver's to that event all the same.
	Note *string `json:"note,omitempty"`
	// Request is the signed request as it was sent (credentials shown as ***), Response the
	// receiver's answer; absent when no request was made.
	Request  *ProbeRequest  `json:"request,omitempty"`
	Response *ProbeResponse `json:"response,omitempty"`
}

// ProbeRequest is the request a probe sent.
type ProbeRequest struct {
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

// ProbeResponse is what the receiver answered a probe.
type ProbeResponse struct {
	StatusCode int                 `json:"statusCode"`
	Headers    map[string][]string `json:"headers"`
	Body       string              `json:"body"`
}

// exchange records one request and its answer for a probe; a nil exchange (every call that is
// not a probe) records nothing.
type exchange struct {
	masked []string // header names whose values are credentials
	req    *ProbeRequest
	resp   *ProbeResponse
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// request keeps a copy of req, its credentials shown as ***: the secret behind a signature never
// appears, but a bearer token or a basic password would.
func (x *exchange) request(req *http.Request, body []byte) {
	if x == nil {
		return
	}
	h := req.Header.Clone()
	for _, k := range x.masked {
		if k = http.CanonicalHeaderKey(k); k != "" && h[k] != nil {
			h[k] = []string{"***"}
		}
	}
	x.req = &ProbeRequest{URL: hookdtype.RedactedURL(req.URL), Headers: h, Body: string(body)}
}

func (x *exchange) response(status int, h http.Header, body []byte) {
	if x == nil {
		return
	}
	x.resp = &ProbeResponse{StatusCode: status, Headers: h.Clone(), Body: string(body)}
}

// Probe sends one signed sample event of the hook's type to its receiver now, so an operator can
// see what the receiver answers. An interceptive hook is asked through the same path as a
// dispatch (bulkhead, breaker, timeout, tolerance rules, modify check) but nothing is recorded;
// an observational one bypasses the outbox and the breaker.
func (d *Dispatcher) Probe(ctx context.Context, hookID int64) (ProbeResult, error) {
	x := &exchange{masked: []string{"Authorization", "Proxy-Authorization", "Cookie"}}
	if h := d.reg.byID(hookID); h != nil && h.DispatchConfig.Auth != nil {
		// The headers the hook's credentials go in, whatever their names.
		a := h.DispatchConfig.Auth
		x.masked = append(x.masked, a.Header)
		for k := range a.Headers {
			x.masked = append(x.masked, k)
		}
		if a.TokenFetchConfig != nil {
			x.masked = append(x.masked, a.TokenFetchConfig.Header)
		}
	}
	res, err := d.probe(context.WithValue(ctx, exchangeKey{}, x), hookID)
	res.Request, res.Response = x.req, x.resp
	return res, err
}

func (d *Dispatcher) probe(ctx context.Context, hookID int64) (ProbeResult, error) {
	h := d.reg.byID(hookID)
	if h == nil {
		if _, err := d.reg.Get(ctx, hookID); err != nil {
			return ProbeResult{}, err
		}
		// Made on another replica, whose change has not arrived here yet: load it now.
		if err := d.reg.Reload(ctx); err != nil {
			return ProbeResult{}, err
		}
		if h = d.reg.byID(hookID); h == nil {
			return ProbeResult{}, storage.ErrNotFound // deleted meanwhile
		}
	}
	sessionID, principalID := int64(10001), int64(1001)
	now := time.Now()
	ev := Event{HookType: h.HookType, SessionID: &sessionID, PrincipalID: &principalID, AgentID: h.AgentID,
		Context: SampleContext(h.HookType), OccurredAt: now}
	note := sampleTool(h, &ev)
	if h.Enabled != nil && !*h.Enabled {
		off := "the hook is disabled, so no dispatch asks it until it is enabled again; the answer is its receiver's all the same"
		if note != nil {
			off += "; and " + *note
		}
		note = &off
	}
	c, err := newChainEvent(&ev, true)
	if err != nil {
		return ProbeResult{}, err
	}
	body, canonical := c.body, c.canonical
	if h.HookType.Interceptive() {
		c.ev.TraceID = "hookd-test-" + storage.NewTSIDString()
		r := d.evaluate(ctx, h, c, now)
		res := ProbeResult{EventID: r.eventID, StatusCode: r.status, LatencyMs: r.took.Milliseconds(),
			Decision: &r.dec.Decision, Reason: nullIfEmpty(r.dec.Reason), ModifiedValue: r.dec.ModifiedValue,
			FromFailureMode: r.failure != nil, BreakerState: r.breaker}
		switch {
		case r.failure != nil:
			res.Error = nullIfEmpty(r.failure.Error())
		case r.flaw != nil:
			res.Error = nullIfEmpty(r.flaw.Error())
		case r.invalid != nil:
			res.Decision, res.ModifiedValue = strPtr(storage.OutcomeError), nil
			res.Error = nullIfEmpty(r.invalid.Error())
		}
		res.Note = note
		return res, nil
	}
	res := ProbeResult{EventID: storage.NewTSIDString(), Note: note}
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: res.EventID, HookType: h.HookType, HookName: h.HookName,
		OccurredAt: now.UnixMilli(), DeliveryAttempt: 1, TraceID: strPtr("hookd-test-" + res.EventID),
		SessionID: &sessionID, PrincipalID: &principalID, AgentID: h.AgentID, Context: body, canonical: canonical}
	actx := d.deadlines.start(ctx, &h.Hook, now)
	a := d.send.send(actx, &h.Hook, h.wire, env, now)
	var failure error
	switch {
	case a.err != nil:
		failure = a.err
		if cause := context.Cause(actx); cause != nil && errors.Is(a.err, context.DeadlineExceeded) {
			failure = cause
		}
	case a.status/100 != 2:
		failure = fmt.Errorf("receiver answered HTTP %d", a.status)
	}
	d.deadlines.end(actx)
	res.StatusCode, res.LatencyMs = a.status, a.latency.Milliseconds()
	if failure != nil {
		res.Error = nullIfEmpty(failure.Error())
	}
	return res, nil
}

// sampleTool names, in the sample event of a tool hook, a tool the hook's toolNameMatch selects,
// so that the probe is a call a dispatch would ask it about (the source document's transferFunds
// is no tool of a hook on "queryOrder|refund"). When the match is a regex the sample tool misses,
// no name can be made up for it: the sample stays, and the note returned says so.
func sampleTool(h *boundHook, ev *Event) *string {
	var tool *string
	switch c := ev.Context.(type) {
	case *PreToolUseContext:
		tool = &c.ToolName
	case *PostToolUseContext:
		tool = &c.ToolName
	default:
		return nil
	}
	if h.match.Match(*tool) {
		return nil
	}
	if name := h.match.Name(); name != "" {
		*tool = name
		return nil
	}
	return strPtr(fmt.Sprintf("the sample tool %q is not one toolNameMatch %q selects, so a dispatch of this event would not ask this hook; "+
		"the answer is its receiver's all the same", *tool, h.ToolNameMatch))
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SampleContext is a context of type t filled with the source document's example values.
func SampleContext(t HookType) any {
	provider, im := "dingtalk", "im"
	reqID := "0E7G6R01AB234567"
	asst, user := int64(20003), int64(20002)
	switch t {
	case PreToolUse:
		return &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_abc123", Arguments: `{"amount":50000,"target":"ACC-002"}`}
	case PostToolUse:
		return &PostToolUseContext{ToolName: "queryOrder", ToolCallID: "call_abc123", Arguments: `{"orderId":"ORD-2026001"}`,
			Output: `{"status":"已发货"}`, Succeeded: true, DurationMs: 320}
	case UserMessage:
		biz, nick := "order-2026-001", "张三"
		return &UserMessageContext{UserInput: "帮我查一下 Q3 财报", ChatMode: "single_chat",
			TriggerSource: TriggerSource{SourceType: SourceHuman, ChannelType: &im, ChannelProvider: &provider},
			BizKey:        &biz, UserNickname: &nick}
	case SessionStart:
		return &SessionStartContext{NewSession: true}
	case AgentCompletion:
		return &AgentCompletionContext{Succeeded: true, Model: "qwen-max", DurationMs: 8420, TotalTokens: 2048, StepCount: 3,
			TriggerSourceType: SourceHuman, RequestID: reqID, AssistantMessageID: &asst, UserMessageID: &user,
			NewSession: true, AgentName: "财报助手", ChannelProvider: &provider}
	case PostLLMCall:
		return &PostLLMCallContext{Model: "qwen-max", Step: 2, DurationMs: 2150, PromptTokens: 850, CompletionTokens: 320,
			TotalTokens: 1170, ReasoningTokens: 128}
	case PreScheduledTask:
		return &PreScheduledTaskContext{TaskID: 9001, TaskName: "每日财报生成"}
	case PostScheduledTask:
		id := "0E7G6R01AB234568"
		return &PostScheduledTaskContext{TaskID: 9001, TaskName: "每日财报生成", Succeeded: true, DurationMs: 60000, RequestID: &id}
	}
	return nil
}
