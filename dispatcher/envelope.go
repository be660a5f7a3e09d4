package dispatcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookd/hookd/hookdtype"
)

// SchemaVersion of the envelope.
const SchemaVersion = "1.0"

// Event is one occurrence at a lifecycle point, as a caller hands it to Intercept or Observe.
type Event struct {
	HookType    HookType
	TraceID     string
	SessionID   *int64
	PrincipalID *int64
	AgentID     *int64
	// Context is the hookType's context struct (PreToolUseContext, …) or raw JSON of that shape.
	Context any
	// OccurredAt defaults to now.
	OccurredAt time.Time
	// Enforce, when set, turns the chain's verdict into what the caller will enforce where that
	// differs: a caller with nobody to ask refuses an ask, a coding agent that cannot take new
	// arguments blocks a modify. Intercept returns what it returns, and the decision log records
	// that: the rows that answered the verdict it replaced take its outcome and reason.
	Enforce func(Decision) Decision
}

// normalizeContext turns the other accepted forms of a context into the pointer form that
// toolNameMatch and modify work on: a struct value or raw JSON would otherwise match no
// tool-scoped hook (an approval hook silently skipped) and ignore a modify, and raw JSON would go
// out in the caller's field order instead of the document's.
func normalizeContext(t HookType, c any) (any, error) {
	switch v := c.(type) {
	case json.RawMessage:
		return DecodeContext(t, v)
	case PreToolUseContext:
		return &v, nil
	case PostToolUseContext:
		return &v, nil
	case UserMessageContext:
		return &v, nil
	}
	return c, nil
}

// toolName is what toolNameMatch is tested against.
func (e *Event) toolName() string {
	switch c := e.Context.(type) {
	case *PreToolUseContext:
		return c.ToolName
	case *PostToolUseContext:
		return c.ToolName
	}
	return ""
}

// Envelope is the body of every webhook request, in the field order of the source document.
// EventID and OccurredAt are fixed when the event is queued; DispatchedAt and DeliveryAttempt
// change with every attempt, and the body is signed anew each time.
type Envelope struct {
	SchemaVersion   string          `json:"schemaVersion"`
	EventID         string          `json:"eventId"`
	HookType        HookType        `json:"hookType"`
	HookName        string          `json:"hookName"`
	OccurredAt      int64           `json:"occurredAt"`
	DispatchedAt    int64           `json:"dispatchedAt"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
	TraceID         *string         `json:"traceId"`
	SessionID       *int64          `json:"sessionId"`
	PrincipalID     *int64          `json:"principalId"`
	AgentID         *int64          `json:"agentId"`
	Context         json.RawMessage `json:"context"`

	// canonical says Context is json.Marshal's own output (encodeContext), which the encoder
	// embeds as it is instead of checking it.
	canonical bool
}

// Value is a tool's arguments or output: the JSON itself when the text is a JSON object or array,
// else the text as a JSON string — a bare number, true or "quoted" too, since a tool's arguments
// and output are an object, an array or the raw text (平台 SSE 与 Webhook, 各 hookType 的 context).
type Value string

// opensContainer reports whether v's text begins (after space) as an object or an array does;
// whether it is one is for a JSON parser to say.
func (v Value) opensContainer() bool {
	i := hookdtype.SkipSpace([]byte(v), 0)
	return i < len(v) && (v[i] == '{' || v[i] == '[')
}

// MarshalJSON implements the rule above.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.opensContainer() {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(v)); err == nil { // Compact refuses what is not JSON
			return buf.Bytes(), nil
		}
	}
	return json.Marshal(string(v))
}

// UnmarshalJSON keeps JSON as its text and a string as its content.
func (v *Value) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		if s, ok := hookdtype.Unquote(b); ok {
			*v = Value(s)
			return nil
		}
		var s string // for the error
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = Value(s)
		return nil
	}
	if string(b) == "null" {
		*v = ""
		return nil
	}
	*v = Value(b)
	return nil
}

// PreToolUseContext is the context of pre_tool_use. A modify decision's value is the new
// arguments as a JSON string.
type PreToolUseContext struct {
	ToolName   string `json:"toolName"`
	ToolCallID string `json:"toolCallId"`
	Arguments  Value  `json:"arguments"`
	*CodingAgent
}

// CodingAgent says which coding agent's own hook an event came from (Claude Code, Codex, … through
// /v1/agents/{kind}/hooks). Its fields sit beside the source document's in the context, so that
// webhooks and policies can tell them apart; events of hookd's own runtime carry none of them.
type CodingAgent struct {
	AgentKind         string `json:"agentKind"`
	ExternalSessionID string `json:"externalSessionId"`
	Cwd               string `json:"cwd,omitempty"`
	PermissionMode    string `json:"permissionMode,omitempty"`
}

// PostToolUseContext is the context of post_tool_use.
type PostToolUseContext struct {
	ToolName     string  `json:"toolName"`
	ToolCallID   string  `json:"toolCallId"`
	Arguments    Value   `json:"arguments"`
	Output       Value   `json:"output"`
	Succeeded    bool    `json:"succeeded"`
	ErrorMessage *string `json:"errorMessage"`
	DurationMs   int64   `json:"durationMs"`
	*CodingAgent
}

// codingAgentKind is the kind of the coding agent an event's context names, or "".
func codingAgentKind(c any) string {
	var a *CodingAgent
	switch c := c.(type) {
	case *PreToolUseContext:
		a = c.CodingAgent
	case *UserMessageContext:
		a = c.CodingAgent
	}
	if a == nil {
		return ""
	}
	return a.AgentKind
}

// TriggerSource says where a run came from; channel fields are null for non-channel messages.
type TriggerSource struct {
	SourceType      string  `json:"sourceType"`
	ChannelType     *string `json:"channelType"`
	ChannelProvider *string `json:"channelProvider"`
}

// Trigger source types (lower case on the wire).
const (
	SourceHuman     = "human_message"
	SourceScheduled = "scheduled_task"
	SourceAPI       = "api_call"
	SourceInternal  = "internal"
)

// UserMessageContext is the context of user_message. A modify decision's value is the new input.
type UserMessageContext struct {
	UserInput     string        `json:"userInput"`
	ChatMode      string        `json:"chatMode"`
	TriggerSource TriggerSource `json:"triggerSource"`
	BizKey        *string       `json:"bizKey"`
	UserNickname  *string       `json:"userNickname"`
	*CodingAgent
}

// SessionStartContext is the context of session_start.
type SessionStartContext struct {
	NewSession bool `json:"newSession"`
	*CodingAgent
}

// AgentCompletionContext is the context of agent_completion.
type AgentCompletionContext struct {
	Succeeded          bool    `json:"succeeded"`
	ErrorMessage       *string `json:"errorMessage"`
	ErrorCode          *string `json:"errorCode"`
	Model              string  `json:"model"`
	DurationMs         int64   `json:"durationMs"`
	TotalTokens        int64   `json:"totalTokens"`
	StepCount          int     `json:"stepCount"`
	TriggerSourceType  string  `json:"triggerSourceType"`
	RequestID          string  `json:"requestId"`
	AssistantMessageID *int64  `json:"assistantMessageId"`
	UserMessageID      *int64  `json:"userMessageId"`
	NewSession         bool    `json:"newSession"`
	AgentName          string  `json:"agentName"`
	ChannelProvider    *string `json:"channelProvider"`
	*CodingAgent
}

// PostLLMCallContext is the context of post_llm_call.
type PostLLMCallContext struct {
	Model            string `json:"model"`
	Step             int    `json:"step"`
	DurationMs       int64  `json:"durationMs"`
	PromptTokens     int64  `json:"promptTokens"`
	CompletionTokens int64  `json:"completionTokens"`
	TotalTokens      int64  `json:"totalTokens"`
	CachedTokens     int64  `json:"cachedTokens"`
	ReasoningTokens  int64  `json:"reasoningTokens"`
}

// PreScheduledTaskContext is the context of pre_scheduled_task. The envelope's sessionId is the
// task's bound session only when the task reuses one, else null.
type PreScheduledTaskContext struct {
	TaskID   int64  `json:"taskId"`
	TaskName string `json:"taskName"`
}

// PostScheduledTaskContext is the context of post_scheduled_task. RequestID is null when the
// task failed before a run existed.
type PostScheduledTaskContext struct {
	TaskID       int64   `json:"taskId"`
	TaskName     string  `json:"taskName"`
	Succeeded    bool    `json:"succeeded"`
	ErrorMessage *string `json:"errorMessage"`
	ErrorCode    *string `json:"errorCode"`
	DurationMs   int64   `json:"durationMs"`
	RequestID    *string `json:"requestId"`
}

// newContext returns an empty context of t's shape.
func newContext(t HookType) any {
	switch t {
	case PreToolUse:
		return &PreToolUseContext{}
	case PostToolUse:
		return &PostToolUseContext{}
	case UserMessage:
		return &UserMessageContext{}
	case SessionStart:
		return &SessionStartContext{}
	case AgentCompletion:
		return &AgentCompletionContext{}
	case PostLLMCall:
		return &PostLLMCallContext{}
	case PreScheduledTask:
		return &PreScheduledTaskContext{}
	case PostScheduledTask:
		return &PostScheduledTaskContext{}
	}
	return nil
}

// DecodeContext reads a context in the JSON shape of hook type t, as agents outside hookd send it:
// strictly (an unknown field is an error naming `context.<field>`), and only with its subject —
// the field that says what a decision is about (checkSubject).
func DecodeContext(t HookType, raw json.RawMessage) (any, error) {
	c := newContext(t)
	if c == nil {
		return nil, invalid("hookType", "%q is not a hook type", t)
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, invalid("context", "is required for %s", t)
	}
	if err := hookdtype.DecodeStrict(raw, c, "context"); err != nil {
		return nil, err
	}
	if err := checkSubject(t, c); err != nil {
		return nil, err
	}
	if id, ok := scheduledTaskID(c); ok && id == 0 {
		// Decoded, a taskId of 0 reads as none: the task named by taskName alone, recorded without
		// an id. One sent is a task id nothing has; the text says whether it was.
		var sent struct {
			TaskID *int64 `json:"taskId"`
		}
		if json.Unmarshal(raw, &sent) == nil && sent.TaskID != nil && *sent.TaskID == 0 {
			return nil, invalid("context.taskId", "must be a positive task id, or absent")
		}
	}
	// Arguments sent as text are JSON all the same: a key in them twice is as ambiguous as in the
	// object form, which DecodeStrict refuses (a policy reads the last, a receiver may read the first).
	var args Value
	switch c := c.(type) {
	case *PreToolUseContext:
		args = c.Arguments
	case *PostToolUseContext:
		args = c.Arguments
	}
	if args.opensContainer() {
		// Text that begins as JSON but is not ("{\"amount\":20000} x") is read as no object by a
		// policy (args is {}, a has() guard never true) and maybe as one by a lenient reader
		// downstream: which was meant is not known.
		if !hookdtype.Valid([]byte(args)) {
			return nil, invalid("context.arguments", "begins as JSON but is not valid JSON; send the arguments as a JSON "+
				"object or array, or as text that does not begin with { or [")
		}
		if err := hookdtype.Duplicate([]byte(args), "context.arguments"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// MaxTraceIDBytes bounds a caller's traceId, which every call to a receiver carries as a header.
const MaxTraceIDBytes = 256

// CheckTraceID refuses a traceId that a request to a receiver could not carry as its
// X-Request-Id header: every call would fail before reaching its receiver, and the chain fall to
// its failureModes without anyone asked.
func CheckTraceID(traceID string) error {
	if len(traceID) > MaxTraceIDBytes {
		return invalid("traceId", "is %d bytes long; at most %d are accepted", len(traceID), MaxTraceIDBytes)
	}
	return checkHeaderValue("traceId", traceID)
}

// checkSubject refuses a context without the fields that identify its subject: the tool of the
// tool points, the input of user_message, the task of the scheduled points. A decision about
// nothing in particular would match no tool-scoped hook and be an allow nobody was asked for.
func checkSubject(t HookType, c any) error {
	switch c := c.(type) {
	case *PreToolUseContext:
		return requireName("context.toolName", c.ToolName, t, "the tool the event is about")
	case *PostToolUseContext:
		if err := noneNegative(tally{"durationMs", c.DurationMs}); err != nil {
			return err
		}
		return requireName("context.toolName", c.ToolName, t, "the tool the event is about")
	case *UserMessageContext:
		if strings.TrimSpace(c.UserInput) == "" {
			return invalid("context.userInput", "is required for %s: it is the input the decision is about", t)
		}
		modes := chatModes
		if c.CodingAgent != nil && c.AgentKind != "" {
			modes = append(slices.Clip(modes), c.AgentKind) // a coding agent's prompt (the adapters' chatMode)
		}
		if err := oneOf("context.chatMode", c.ChatMode, modes); err != nil {
			return err
		}
		if err := oneOf("context.triggerSource.sourceType", c.TriggerSource.SourceType, sourceTypes); err != nil {
			return err
		}
		return oneOf("context.triggerSource.channelProvider", valueOf(c.TriggerSource.ChannelProvider), channelProviders)
	case *AgentCompletionContext:
		if err := oneOf("context.triggerSourceType", c.TriggerSourceType, sourceTypes); err != nil {
			return err
		}
		if err := noneNegative(tally{"durationMs", c.DurationMs}, tally{"totalTokens", c.TotalTokens},
			tally{"stepCount", int64(c.StepCount)}); err != nil {
			return err
		}
		for _, id := range []struct {
			name string
			v    *int64
		}{{"assistantMessageId", c.AssistantMessageID}, {"userMessageId", c.UserMessageID}} {
			if id.v != nil && *id.v <= 0 {
				return invalid("context."+id.name, "must be a positive message id, or absent")
			}
		}
		return oneOf("context.channelProvider", valueOf(c.ChannelProvider), channelProviders)
	case *PostLLMCallContext:
		return noneNegative(tally{"step", int64(c.Step)}, tally{"durationMs", c.DurationMs}, tally{"promptTokens", c.PromptTokens},
			tally{"completionTokens", c.CompletionTokens}, tally{"totalTokens", c.TotalTokens},
			tally{"cachedTokens", c.CachedTokens}, tally{"reasoningTokens", c.ReasoningTokens})
	case *PreScheduledTaskContext:
		return requireTask(c.TaskID, c.TaskName, t)
	case *PostScheduledTaskContext:
		if err := noneNegative(tally{"durationMs", c.DurationMs}); err != nil {
			return err
		}
		return requireTask(c.TaskID, c.TaskName, t)
	}
	return nil
}

// scheduledTaskID is the taskId of a scheduled task point's context c.
func scheduledTaskID(c any) (int64, bool) {
	switch c := c.(type) {
	case *PreScheduledTaskContext:
		return c.TaskID, true
	case *PostScheduledTaskContext:
		return c.TaskID, true
	}
	return 0, false
}

// tally is a context field that counts something (milliseconds, tokens, steps).
type tally struct {
	name string
	v    int64
}

// noneNegative refuses a negative count: a receiver summing durations or tokens would take it
// as given, and what was meant is not known.
func noneNegative(counts ...tally) error {
	for _, c := range counts {
		if c.v < 0 {
			return invalid("context."+c.name, "must not be negative (it is %d)", c.v)
		}
	}
	return nil
}

// The values the source document lists, in lower case, for the context fields that take one of a
// few: a policy's chatMode == 'group_chat' never matches "GROUP_CHAT", so a caller's other spelling
// is refused rather than passed on.
var (
	chatModes        = []string{"single_chat", "group_chat"}
	sourceTypes      = []string{SourceHuman, SourceScheduled, SourceAPI, SourceInternal}
	channelProviders = []string{"dingtalk", "wecom", "wechat", "feishu", "qq"}
)

// oneOf refuses v, when set, unless it is one of values.
func oneOf(field, v string, values []string) error {
	if v == "" || slices.Contains(values, v) {
		return nil
	}
	msg := fmt.Sprintf("%q is not one of %s", v, strings.Join(values, ", "))
	if s := hookdtype.Suggest(strings.ToLower(v), values); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return invalid(field, "%s", msg)
}

func valueOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func requireName(field, v string, t HookType, what string) error {
	if strings.TrimSpace(v) == "" {
		return invalid(field, "is required for %s: it names %s", t, what)
	}
	return nil
}

func requireTask(id int64, name string, t HookType) error {
	switch {
	case id < 0:
		return invalid("context.taskId", "must be a positive task id, or absent")
	case id == 0 && strings.TrimSpace(name) == "":
		return invalid("context.taskId", "taskId or taskName is required for %s: it names the task the event is about", t)
	}
	return nil
}

// marshalContext renders the event's context once; every hook's envelope embeds the same bytes.
func marshalContext(c any) (json.RawMessage, error) {
	b, _, err := encodeContext(c)
	return b, err
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	v := s // escapes here only: &s would move s to the heap before the test
	return &v
}
