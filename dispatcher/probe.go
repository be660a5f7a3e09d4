package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/storage"
)

// ProbeResult is what one test call to a hook's receiver showed.
type ProbeResult struct {
	EventID    string  `json:"eventId"`
	StatusCode int     `json:"statusCode"`
	LatencyMs  int64   `json:"latencyMs"`
	Decision   *string `json:"decision"` // interceptive hooks only
	Error      *string `json:"error"`
}

// Probe sends one signed sample event of the hook's type to its receiver now, bypassing the
// breaker and the outbox, so an operator can see what the receiver answers.
func (d *Dispatcher) Probe(ctx context.Context, hookID int64) (ProbeResult, error) {
	h, err := d.reg.Get(ctx, hookID)
	if err != nil {
		return ProbeResult{}, err
	}
	if h.DispatchType == DispatchPolicy {
		return ProbeResult{}, invalid("id", "hook %d is a policy hook, with no receiver to probe; try it with POST /api/policies/evaluate", hookID)
	}
	body, err := marshalContext(SampleContext(h.HookType))
	if err != nil {
		return ProbeResult{}, err
	}
	now := time.Now()
	res := ProbeResult{EventID: storage.NewTSIDString()}
	sessionID, principalID := int64(10001), int64(1001)
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: res.EventID, HookType: h.HookType, HookName: h.HookName,
		OccurredAt: now.UnixMilli(), DeliveryAttempt: 1, TraceID: strPtr("hookd-test-" + res.EventID),
		SessionID: &sessionID, PrincipalID: &principalID, AgentID: h.AgentID, Context: body}
	timeout := time.Duration(h.DispatchConfig.TimeoutMs) * time.Millisecond
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("hook %q timeout %s", h.HookName, timeout))
	defer cancel()
	a := d.send.send(ctx, &h, nil, env, time.Now())
	res.StatusCode, res.LatencyMs = a.status, a.latency.Milliseconds()
	var failure error
	switch {
	case a.err != nil:
		failure = a.err
		if cause := context.Cause(ctx); cause != nil && errors.Is(a.err, context.DeadlineExceeded) {
			failure = cause
		}
	case a.status/100 != 2:
		failure = fmt.Errorf("receiver answered HTTP %d", a.status)
	}
	if h.HookType.Interceptive() {
		var dec string
		if failure == nil {
			var parsed Decision
			if parsed, failure = parseAnswer(a.respBody); failure == nil {
				dec = parsed.Decision
			}
		}
		if failure != nil {
			dec = strings.ToLower(h.DispatchConfig.FailureMode) // what a real dispatch would have decided
		}
		res.Decision = &dec
	}
	if failure != nil {
		msg := failure.Error()
		res.Error = &msg
	}
	return res, nil
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
