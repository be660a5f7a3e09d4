package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/agent"
)

// The 22 event types of the platform stream.
const (
	SessionCreated             = "SESSION_CREATED"
	TextStart                  = "TEXT_START"
	TextDelta                  = "TEXT_DELTA"
	TextEnd                    = "TEXT_END"
	ReasoningStart             = "REASONING_START"
	ReasoningDelta             = "REASONING_DELTA"
	ReasoningEnd               = "REASONING_END"
	ToolStart                  = "TOOL_START"
	ToolRunning                = "TOOL_RUNNING"
	ToolCompleted              = "TOOL_COMPLETED"
	ToolFailed                 = "TOOL_FAILED"
	ToolEvent                  = "TOOL_EVENT"
	PermissionAsk              = "PERMISSION_ASK"
	PermissionAskResolved      = "PERMISSION_ASK_RESOLVED"
	MessageCompleted           = "MESSAGE_COMPLETED"
	MessageSuspended           = "MESSAGE_SUSPENDED"
	MessageFailed              = "MESSAGE_FAILED"
	SupplementaryInputConsumed = "SUPPLEMENTARY_INPUT_CONSUMED"
	AttachmentChanged          = "ATTACHMENT_CHANGED"
	AttachmentSent             = "ATTACHMENT_SENT"
	Heartbeat                  = "HEARTBEAT"
	AgentStatus                = "AGENT_STATUS"
)

// The data.type discriminators, one per family.
const (
	typeSession       = "session"
	typeText          = "text"
	typeReasoning     = "reasoning"
	typeTool          = "tool"
	typeToolSide      = "tool_side"
	typePermAsk       = "permission_ask"
	typePermResolved  = "permission_ask_resolved"
	typeMessage       = "message"
	typeSupplementary = "supplementary_input"
	typeAttachment    = "attachment"
	typeAgentStatus   = "agent_status"
)

// Status codes this dialect adds to the document's list (the list is append-only; clients fall
// back on the level for codes they do not know).
const (
	StatusTokenBudget   = "TOKEN_BUDGET_EXCEEDED"
	StatusMaxIterations = "MAX_ITERATIONS_REACHED"
)

// TimeLayout is the timestamp format: the document's "2026-05-07T10:30:05" shape, in UTC, with
// milliseconds. There is no zone suffix, as in the document; the time is always UTC.
const TimeLayout = "2006-01-02T15:04:05.000"

// Frame is one SSE event of the platform stream: ID goes on the `id:` line, the rest is the JSON
// envelope on the `data:` line.
type Frame struct {
	ID          string `json:"-"`
	EventType   string `json:"eventType"`
	Data        any    `json:"data"`
	Timestamp   string `json:"timestamp"`
	Step        *int   `json:"step"`
	TotalTokens *int64 `json:"totalTokens"`
}

// Terminal reports whether the stream ends after f.
func (f Frame) Terminal() bool {
	return f.EventType == MessageCompleted || f.EventType == MessageFailed
}

// Encode is f's JSON envelope, on one line, with non-ASCII text and <, >, & as they are.
func (f Frame) Encode() []byte { return encodeJSON(f) }

func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // only plain values are encoded
		panic(fmt.Sprintf("platform: encode frame: %v", err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// HeartbeatFrame is the keep-alive event: eventType and timestamp only, and no SSE id.
// Every idle stream sends one per interval, so it is built in one small allocation.
func HeartbeatFrame(now time.Time) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"eventType":"`+Heartbeat+`","timestamp":"`...)
	b = now.UTC().AppendFormat(b, TimeLayout)
	return append(b, `"}`...)
}

// ---- SSE ids ----

// FramesPerEvent bounds the frames one canonical event maps to; it spaces the SSE ids.
const FramesPerEvent = 1000

// FrameID is the SSE id of the k-th frame (0-based) that the canonical event seq maps to:
// seq·FramesPerEvent + k, an integer. Ids derive from the persisted seq alone, so they are the
// same on every replay and after a restart; they increase strictly within a run and stay far
// below 2^53, so a client that reads them as a number (a JS parseInt, a Java long) orders them
// right.
func FrameID(seq int64, k int) string {
	return strconv.FormatInt(seq*FramesPerEvent+int64(k), 10)
}

// Cursor is a position in a run's stream: right after frame K of canonical event Seq. The zero
// cursor is the start.
type Cursor struct {
	Seq int64
	K   int
}

// ParseCursor reads an id FrameID made; "" is the start.
func ParseCursor(id string) (Cursor, error) {
	if id == "" {
		return Cursor{}, nil
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(id, "+") || n > maxFrameID {
		return Cursor{}, errors.New("must be an event id of this stream (a non-negative integer)")
	}
	return Cursor{Seq: n / FramesPerEvent, K: int(n % FramesPerEvent)}, nil
}

// maxFrameID is the largest id a JavaScript number holds exactly (2^53 - 1).
const maxFrameID = 1<<53 - 1

// Newer is the later of two cursors.
func (c Cursor) Newer(o Cursor) Cursor {
	if o.Seq > c.Seq || (o.Seq == c.Seq && o.K > c.K) {
		return o
	}
	return c
}

// After is the canonical seq to subscribe after; Skip says whether frame k of event seq was
// already delivered.
func (c Cursor) After() int64 {
	if c.Seq == 0 {
		return 0
	}
	return c.Seq - 1
}

// Skip reports whether the frame (seq, k) is at or before the cursor.
func (c Cursor) Skip(seq int64, k int) bool {
	return seq < c.Seq || (seq == c.Seq && k <= c.K)
}

// ---- data of each family ----

// SessionData is SESSION_CREATED's data.
type SessionData struct {
	Type               string `json:"type"`
	SessionID          int64  `json:"sessionId"`
	UserMessageID      int64  `json:"userMessageId"`
	AssistantMessageID int64  `json:"assistantMessageId"`
	RequestID          string `json:"requestId"`
}

// TextData is the data of TEXT_* and REASONING_* (type "text" or "reasoning"): text on START and
// DELTA, synthetic on TEXT_START only, nothing on END.
type TextData struct {
	Type      string  `json:"type"`
	Text      *string `json:"text,omitempty"`
	Synthetic *bool   `json:"synthetic,omitempty"`
}

// ToolData is the data of TOOL_START, TOOL_RUNNING, TOOL_COMPLETED and TOOL_FAILED.
type ToolData struct {
	Type         string  `json:"type"`
	ToolCallID   string  `json:"toolCallId"`
	Title        string  `json:"title,omitempty"`
	ToolName     string  `json:"toolName"`
	Arguments    *string `json:"arguments,omitempty"`
	Output       *string `json:"output,omitempty"`
	ErrorMessage *string `json:"errorMessage,omitempty"`
}

// ToolSideData is TOOL_EVENT's data.
type ToolSideData struct {
	Type        string          `json:"type"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Category    string          `json:"category"`
	Payload     json.RawMessage `json:"payload"`
	UserMessage string          `json:"userMessage,omitempty"`
}

// PermissionAskData is PERMISSION_ASK's data, one frame per call waiting for a decision.
type PermissionAskData struct {
	Type            string `json:"type"`
	AskID           string `json:"askId"`
	PrincipalID     *int64 `json:"principalId"`
	ToolName        string `json:"toolName"`
	ToolCallID      string `json:"toolCallId"`
	Arguments       string `json:"arguments"`
	RuleDescription string `json:"ruleDescription"`
	RulePattern     string `json:"rulePattern"`
}

// PermissionResolvedData is PERMISSION_ASK_RESOLVED's data.
type PermissionResolvedData struct {
	Type     string `json:"type"`
	AskID    string `json:"askId"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason"`
}

// MessageData is the data of MESSAGE_COMPLETED, MESSAGE_FAILED and MESSAGE_SUSPENDED.
type MessageData struct {
	Type          string  `json:"type"`
	MessageID     int64   `json:"messageId"`
	ErrorMessage  *string `json:"errorMessage,omitempty"`
	ErrorCode     *string `json:"errorCode,omitempty"`
	Recoverable   *bool   `json:"recoverable,omitempty"`
	NetworkError  *bool   `json:"networkError,omitempty"`
	SuspendReason any     `json:"suspendReason,omitempty"`
}

// PendingToolCall is an item of suspendReason.pendingToolCalls.
type PendingToolCall struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Arguments  string `json:"arguments"`
	State      string `json:"state"` // pending | asking
	AskID      string `json:"askId,omitempty"`
}

// AskSuspend is suspendReason of type PERMISSION_ASK.
type AskSuspend struct {
	Type             string            `json:"type"`
	AskID            string            `json:"askId"`
	ToolCallID       string            `json:"toolCallId"`
	ToolName         string            `json:"toolName"`
	Arguments        string            `json:"arguments"`
	PendingToolCalls []PendingToolCall `json:"pendingToolCalls"`
	Step             int               `json:"step"`
	MessageID        int64             `json:"messageId"`
}

// PlainSuspend is suspendReason of type MANUAL_SUSPEND and SHUTDOWN_INTERRUPT. RuntimeReason is
// set when the runtime's reason has no type of its own here (REQUEST_STOP → MANUAL_SUSPEND).
type PlainSuspend struct {
	Type             string            `json:"type"`
	PendingToolCalls []PendingToolCall `json:"pendingToolCalls"`
	Step             int               `json:"step"`
	MessageID        int64             `json:"messageId"`
	RuntimeReason    string            `json:"runtimeReason,omitempty"`
}

// AsyncSuspend is suspendReason of type ASYNC_TOOL_PENDING. What the runtime does not record is
// null: toolPartId always (there are no parts), timeoutMs for a client-side tool, whose
// RuntimeReason is EXTERNAL_EXECUTION.
type AsyncSuspend struct {
	Type             string            `json:"type"`
	AsyncTaskID      string            `json:"asyncTaskId"`
	ToolCallID       string            `json:"toolCallId"`
	ToolName         string            `json:"toolName"`
	Arguments        string            `json:"arguments"`
	PendingToolCalls []PendingToolCall `json:"pendingToolCalls"`
	Step             int               `json:"step"`
	MessageID        int64             `json:"messageId"`
	SubmittedAtMs    int64             `json:"submittedAtMs"`
	TimeoutMs        *int64            `json:"timeoutMs"`
	AwakeStrategy    string            `json:"awakeStrategy"`
	ToolPartID       *int64            `json:"toolPartId"`
	RuntimeReason    string            `json:"runtimeReason,omitempty"`
}

// SupplementaryData is SUPPLEMENTARY_INPUT_CONSUMED's data.
type SupplementaryData struct {
	Type               string `json:"type"`
	InputID            string `json:"inputId"`
	Content            string `json:"content"`
	UserMessageID      int64  `json:"userMessageId"`
	AssistantMessageID int64  `json:"assistantMessageId"`
}

// AttachmentData is the data of ATTACHMENT_CHANGED and ATTACHMENT_SENT, and an item of
// GET /api/agent/attachment/getByMessage.
type AttachmentData struct {
	Type          string `json:"type"`
	AttachmentID  int64  `json:"attachmentId"`
	SessionID     int64  `json:"sessionId"`
	MessageID     *int64 `json:"messageId"`
	FileName      string `json:"fileName"`
	FileExtension string `json:"fileExtension"`
	ContentType   string `json:"contentType"`
	FileSize      int64  `json:"fileSize"`
	VirtualPath   string `json:"virtualPath"`
	Source        string `json:"source"`
	ChangeType    string `json:"changeType"`
}

// StatusData is AGENT_STATUS's data.
type StatusData struct {
	Type       string         `json:"type"`
	Code       string         `json:"code"`
	Level      string         `json:"level"`
	Message    string         `json:"message"`
	Attributes map[string]any `json:"attributes"`
}

// VirtualPath is the platform's path of a session attachment: the runtime's path inside the
// session workspace ("/workspace/tasks.md") under "/sessions/<sessionId>", so that the path alone
// names the file for GET /api/agent/attachment/download?path=.
func VirtualPath(sessionID int64, runtimePath string) string {
	if !strings.HasPrefix(runtimePath, "/") {
		runtimePath = "/" + runtimePath
	}
	return "/sessions/" + strconv.FormatInt(sessionID, 10) + runtimePath
}

// ---- the mapping ----

// Map turns one canonical event into the frames of the platform stream: none for kinds the
// platform has no type for, several when one event covers several things (an ask of two calls).
// It is a pure function of the event, so a replay yields the very frames a live client saw.
func Map(ev agent.Event) []Frame {
	if ev.Source != "" {
		return nil // a subagent's events: the platform stream shows the run's own agent
	}
	var out []Frame
	add := func(eventType string, data any) {
		if len(out) == FramesPerEvent {
			return // beyond what the ids can tell apart (an ask of a thousand calls)
		}
		f := Frame{ID: FrameID(ev.Seq, len(out)), EventType: eventType, Data: data, Timestamp: ev.At.UTC().Format(TimeLayout)}
		if ev.Step > 0 && ev.Kind != agent.KindRunStarted {
			step, total := ev.Step, ev.TotalTokens
			f.Step, f.TotalTokens = &step, &total
		}
		out = append(out, f)
	}
	switch ev.Kind {
	case agent.KindRunStarted:
		if r := ev.Run; r != nil {
			add(SessionCreated, SessionData{Type: typeSession, SessionID: r.SessionID, UserMessageID: r.UserMessageID,
				AssistantMessageID: r.AssistantMessageID, RequestID: r.RequestID})
		}
	case agent.KindBlockStarted, agent.KindBlockDelta, agent.KindBlockEnded:
		mapBlock(ev, add)
	case agent.KindHint:
		// Supplementary input has its own frame (SUPPLEMENTARY_INPUT_CONSUMED); it is not text. A
		// refused input has none: the hint saying why is the only word of it.
		if b := ev.Block; b != nil && (b.InputID == "" || b.Refused) {
			text, synthetic := b.Text, true
			add(TextStart, TextData{Type: typeText, Text: &text, Synthetic: &synthetic})
			add(TextEnd, TextData{Type: typeText})
		}
	case agent.KindToolCallEnded:
		if t := ev.Tool; t != nil {
			args := t.Arguments
			add(ToolStart, ToolData{Type: typeTool, ToolCallID: t.CallID, Title: title(t), ToolName: t.Name, Arguments: &args})
		}
	case agent.KindToolResultStarted:
		if t := ev.Tool; t != nil && t.State == "" { // a denied or refused call never runs
			add(ToolRunning, ToolData{Type: typeTool, ToolCallID: t.CallID, Title: title(t), ToolName: t.Name})
		}
	case agent.KindToolResultEnded:
		if t := ev.Tool; t != nil {
			mapToolEnd(t, add)
		}
	case agent.KindToolEvent:
		if s := ev.ToolEvent; s != nil {
			payload := s.Payload
			if len(payload) == 0 {
				payload = json.RawMessage(`{}`)
			}
			add(ToolEvent, ToolSideData{Type: typeToolSide, ToolCallID: s.CallID, ToolName: s.Name, Category: s.Category,
				Payload: payload, UserMessage: s.UserMessage})
		}
	case agent.KindAsk:
		if ev.Ask != nil {
			for _, c := range ev.Ask.Calls {
				add(PermissionAsk, PermissionAskData{Type: typePermAsk, AskID: c.AskID, PrincipalID: c.PrincipalID,
					ToolName: c.Name, ToolCallID: c.CallID, Arguments: c.Arguments, RuleDescription: c.RuleDescription,
					RulePattern: c.RulePattern})
			}
		}
	case agent.KindAskResolved:
		for _, a := range ev.Answers {
			add(PermissionAskResolved, PermissionResolvedData{Type: typePermResolved, AskID: a.AskID, Approved: a.Approved, Reason: a.Reason})
		}
	case agent.KindSuspended:
		if s := ev.Suspend; s != nil {
			add(MessageSuspended, MessageData{Type: typeMessage, MessageID: s.MessageID, SuspendReason: suspendReason(ev, s)})
		}
	case agent.KindInputConsumed:
		if in := ev.Input; in != nil {
			add(SupplementaryInputConsumed, SupplementaryData{Type: typeSupplementary, InputID: in.InputID, Content: in.Content,
				UserMessageID: in.UserMessageID, AssistantMessageID: in.AssistantMessageID})
		}
	case agent.KindAttachment:
		if a := ev.Attachment; a != nil {
			t := AttachmentChanged
			if a.Sent {
				t = AttachmentSent
			}
			add(t, AttachmentData{Type: typeAttachment, AttachmentID: a.ID, SessionID: a.SessionID, MessageID: a.MessageID,
				FileName: a.FileName, FileExtension: a.Extension, ContentType: a.ContentType, FileSize: a.Size,
				VirtualPath: VirtualPath(a.SessionID, a.VirtualPath), Source: a.Source, ChangeType: a.ChangeType})
		}
	case agent.KindStatus:
		if s := ev.Status; s != nil {
			attrs := s.Attributes
			if attrs == nil {
				attrs = map[string]any{}
			}
			add(AgentStatus, StatusData{Type: typeAgentStatus, Code: s.Code, Level: s.Level, Message: s.Message, Attributes: attrs})
		}
	case agent.KindStopRequested:
		if s := ev.Stop; s != nil {
			add(AgentStatus, StatusData{Type: typeAgentStatus, Code: StatusTokenBudget, Level: "WARN", Message: s.Reason,
				Attributes: map[string]any{"generateReason": s.GenerateReason}})
		}
	case agent.KindMaxIters:
		if m := ev.MaxIters; m != nil {
			add(AgentStatus, StatusData{Type: typeAgentStatus, Code: StatusMaxIterations, Level: "WARN",
				Message:    fmt.Sprintf("已达到最大迭代次数 %d，结束本轮执行", m.MaxIters),
				Attributes: map[string]any{"maxIters": m.MaxIters, "currentIter": m.CurrentIter}})
		}
	case agent.KindRunEnded:
		if e := ev.End; e != nil {
			mapEnd(e, add)
		}
	}
	// Not mapped: model.started/ended, tool.call.started/delta (TOOL_START waits for the final
	// arguments), tool.result.delta, result (MESSAGE_COMPLETED comes from run.ended), resumed,
	// all_denied, external.calls/results, custom.
	return out
}

func mapBlock(ev agent.Event, add func(string, any)) {
	b := ev.Block
	if b == nil {
		return
	}
	var start, delta, end, typ string
	switch b.Type {
	case agent.BlockText:
		start, delta, end, typ = TextStart, TextDelta, TextEnd, typeText
	case agent.BlockThinking:
		start, delta, end, typ = ReasoningStart, ReasoningDelta, ReasoningEnd, typeReasoning
	default:
		return // data blocks have no platform type
	}
	switch ev.Kind {
	case agent.KindBlockStarted:
		text := ""
		d := TextData{Type: typ, Text: &text}
		if typ == typeText {
			synthetic := b.Synthetic
			d.Synthetic = &synthetic
		}
		add(start, d)
	case agent.KindBlockDelta:
		text := b.Delta
		add(delta, TextData{Type: typ, Text: &text})
	case agent.KindBlockEnded:
		add(end, TextData{Type: typ})
	}
}

func title(t *agent.ToolInfo) string {
	if t.Title != "" {
		return t.Title
	}
	return t.Name
}

func mapToolEnd(t *agent.ToolInfo, add func(string, any)) {
	switch t.State {
	case agent.ToolSuccess:
		out := t.Output
		add(ToolCompleted, ToolData{Type: typeTool, ToolCallID: t.CallID, Title: title(t), ToolName: t.Name, Output: &out})
	case agent.ToolRunning:
		add(ToolRunning, ToolData{Type: typeTool, ToolCallID: t.CallID, Title: title(t), ToolName: t.Name})
	default: // error, denied, interrupted
		msg := t.Error
		if msg == "" {
			msg = t.Output
		}
		if msg == "" {
			msg = t.State
		}
		add(ToolFailed, ToolData{Type: typeTool, ToolCallID: t.CallID, ToolName: t.Name, ErrorMessage: &msg})
	}
}

// interruptedMessage is MESSAGE_FAILED's errorMessage for a run the user stopped.
const interruptedMessage = "执行已被用户停止"

func mapEnd(e *agent.EndInfo, add func(string, any)) {
	if e.Outcome == agent.OutcomeCompleted {
		add(MessageCompleted, MessageData{Type: typeMessage, MessageID: e.MessageID})
		return
	}
	code, msg := e.ErrorCode, e.ErrorMessage
	if e.Outcome == agent.OutcomeInterrupted {
		if code == "" {
			code = agent.CodeInterrupted
		}
		if msg == "" {
			msg = interruptedMessage
		}
	}
	if code == "" {
		code = agent.CodeInternal
	}
	recoverable, network := e.Recoverable, e.NetworkError
	add(MessageFailed, MessageData{Type: typeMessage, MessageID: e.MessageID, ErrorMessage: &msg, ErrorCode: &code,
		Recoverable: &recoverable, NetworkError: &network})
}

// Platform suspend types.
const (
	suspendPermissionAsk = "PERMISSION_ASK"
	suspendManual        = "MANUAL_SUSPEND"
	suspendShutdown      = "SHUTDOWN_INTERRUPT"
	suspendAsyncTool     = "ASYNC_TOOL_PENDING"
)

// suspendReason maps the runtime's reasons: PERMISSION_ASK, MANUAL_SUSPEND, SHUTDOWN_INTERRUPT
// and ASYNC_TOOL_PENDING as they are; EXTERNAL_EXECUTION (a tool the client runs) to
// ASYNC_TOOL_PENDING, the waiting call's ask id as asyncTaskId; REQUEST_STOP (the token budget)
// and reasons added later to MANUAL_SUSPEND, which POST .../resume continues just the same.
func suspendReason(ev agent.Event, s *agent.SuspendInfo) any {
	pending := make([]PendingToolCall, 0, len(s.PendingCalls))
	for _, p := range s.PendingCalls {
		pending = append(pending, PendingToolCall{ToolCallID: p.CallID, ToolName: p.Name, Arguments: p.Arguments, State: p.State, AskID: p.AskID})
	}
	// about picks the call the pause is about and leaves the others in pending.
	about := func(match func(agent.PendingCall) bool) (agent.PendingCall, []PendingToolCall) {
		for i, p := range s.PendingCalls {
			if match(p) {
				rest := append(append([]PendingToolCall{}, pending[:i]...), pending[i+1:]...)
				return p, rest
			}
		}
		return agent.PendingCall{}, pending
	}
	switch s.Reason {
	case agent.SuspendPermissionAsk:
		c, rest := about(func(p agent.PendingCall) bool { return p.State == "asking" })
		return AskSuspend{Type: suspendPermissionAsk, AskID: c.AskID, ToolCallID: c.CallID, ToolName: c.Name, Arguments: c.Arguments,
			PendingToolCalls: rest, Step: s.Step, MessageID: s.MessageID}
	case agent.SuspendAsyncTool:
		if as := s.Async; as != nil {
			_, rest := about(func(p agent.PendingCall) bool { return p.CallID == as.CallID })
			strategy := as.Strategy
			if strategy == "" {
				strategy = "NOTIFY" // the result is posted back
			}
			var timeout *int64
			if as.TimeoutMs > 0 {
				t := as.TimeoutMs
				timeout = &t
			}
			return AsyncSuspend{Type: suspendAsyncTool, AsyncTaskID: as.TaskID, ToolCallID: as.CallID, ToolName: as.Name,
				Arguments: as.Arguments, PendingToolCalls: rest, Step: s.Step, MessageID: s.MessageID,
				SubmittedAtMs: as.SubmittedAtMs, TimeoutMs: timeout, AwakeStrategy: strategy}
		}
		fallthrough
	case agent.SuspendExternalExecution:
		c, rest := about(func(p agent.PendingCall) bool { return p.External || p.AskID != "" })
		a := AsyncSuspend{Type: suspendAsyncTool, AsyncTaskID: c.AskID, ToolCallID: c.CallID, ToolName: c.Name, Arguments: c.Arguments,
			PendingToolCalls: rest, Step: s.Step, MessageID: s.MessageID, SubmittedAtMs: ev.At.UnixMilli(), AwakeStrategy: "NOTIFY"}
		if s.Reason != agent.SuspendAsyncTool {
			a.RuntimeReason = s.Reason
		}
		return a
	case agent.SuspendShutdown:
		return PlainSuspend{Type: suspendShutdown, PendingToolCalls: pending, Step: s.Step, MessageID: s.MessageID}
	case agent.SuspendManual:
		return PlainSuspend{Type: suspendManual, PendingToolCalls: pending, Step: s.Step, MessageID: s.MessageID}
	default: // REQUEST_STOP and reasons added later: a pause that POST .../resume continues
		return PlainSuspend{Type: suspendManual, PendingToolCalls: pending, Step: s.Step, MessageID: s.MessageID, RuntimeReason: s.Reason}
	}
}
