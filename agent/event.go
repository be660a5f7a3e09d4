package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/hookd/hookd/agent/model"
)

// Kind names what happened. The kinds are the runtime's own vocabulary; each chat dialect maps
// them to its wire events (see api/harness, api/platform, api/volo).
type Kind string

const (
	// KindRunStarted opens every run: Run holds the ids a client needs.
	KindRunStarted Kind = "run.started"
	// KindModelStarted / KindModelEnded bracket one model call; Usage is on the end event.
	KindModelStarted Kind = "model.started"
	KindModelEnded   Kind = "model.ended"
	// KindBlockStarted / Delta / Ended stream a content block (thinking, text or data).
	KindBlockStarted Kind = "block.started"
	KindBlockDelta   Kind = "block.delta"
	KindBlockEnded   Kind = "block.ended"
	// KindHint is a one-shot block delivered whole (team message, background result, ...).
	KindHint Kind = "hint"
	// KindToolCallStarted / Delta / Ended stream the model's call: name, argument pieces, and on
	// the end event the final (repaired, possibly hook-modified) arguments.
	KindToolCallStarted Kind = "tool.call.started"
	KindToolCallDelta   Kind = "tool.call.delta"
	KindToolCallEnded   Kind = "tool.call.ended"
	// KindToolResultStarted / Delta / Ended stream the tool's output; the end event has the
	// state (success, error, denied, interrupted, running) and the whole output.
	KindToolResultStarted Kind = "tool.result.started"
	KindToolResultDelta   Kind = "tool.result.delta"
	KindToolResultEnded   Kind = "tool.result.ended"
	// KindToolEvent is a tool's side-channel information (auth_required, resource_created, ...).
	KindToolEvent Kind = "tool.event"
	// KindAttachment: a file became a session attachment (or was sent to the user).
	KindAttachment Kind = "attachment"
	// KindStatus is a transient runtime signal (rate limited, retrying, ...); not part of history.
	KindStatus Kind = "status"
	// KindCustom is a named extension event.
	KindCustom Kind = "custom"
	// KindMaxIters: the loop reached agent.maxIters.
	KindMaxIters Kind = "max_iters"
	// KindResult carries the final assistant message of the run.
	KindResult Kind = "result"
	// KindRunEnded closes the run: completed, failed or interrupted.
	KindRunEnded Kind = "run.ended"
	// KindSuspended: the run paused and waits (an ask, an external tool, a manual suspend, a
	// shutdown); KindResumed: it goes on.
	KindSuspended Kind = "suspended"
	KindResumed   Kind = "resumed"
	// KindAsk: tool calls wait for a person's confirmation (one event per step, all its asks);
	// KindAskResolved: the answers, as the run goes on.
	KindAsk         Kind = "ask"
	KindAskResolved Kind = "ask.resolved"
	// KindAllDenied: every tool call of a step was denied; the model is told.
	KindAllDenied Kind = "all_denied"
	// KindExternalCalls: tools the client declared and runs itself; KindExternalResults: the
	// results it sent back.
	KindExternalCalls   Kind = "external.calls"
	KindExternalResults Kind = "external.results"
	// KindStopRequested: a middleware (the token budget) asks the run to pause after this step.
	KindStopRequested Kind = "stop_requested"
	// KindInputConsumed: supplementary input appended during the run became a new user message.
	KindInputConsumed Kind = "input.consumed"
	// KindSubagentExposed: a subagent became a session of its own the user can address.
	KindSubagentExposed Kind = "subagent.exposed"
)

// Event is one thing that happened in a run. Exactly the sub-struct of its kind is set. Events
// are persisted as they are and replayed identically.
type Event struct {
	Seq         int64     `json:"seq"`
	RunID       string    `json:"runId"` // the run's requestId
	ID          string    `json:"id"`    // 32 lowercase hex, unique
	Kind        Kind      `json:"kind"`
	At          time.Time `json:"at"`
	Source      string    `json:"source,omitempty"` // "" for the run's own agent, "main/<name>" for a subagent's
	ReplyID     string    `json:"replyId,omitempty"`
	Step        int       `json:"step,omitempty"`        // the model call (1-based) the event belongs to
	TotalTokens int64     `json:"totalTokens,omitempty"` // tokens the run used so far

	Run        *RunInfo        `json:"run,omitempty"`
	Usage      *Usage          `json:"usage,omitempty"`
	Block      *Block          `json:"block,omitempty"`
	Tool       *ToolInfo       `json:"tool,omitempty"`
	ToolEvent  *ToolSideEvent  `json:"toolEvent,omitempty"`
	Attachment *AttachmentInfo `json:"attachment,omitempty"`
	Status     *StatusInfo     `json:"status,omitempty"`
	Custom     *CustomInfo     `json:"custom,omitempty"`
	MaxIters   *MaxItersInfo   `json:"maxIters,omitempty"`
	Result     *ResultInfo     `json:"result,omitempty"`
	End        *EndInfo        `json:"end,omitempty"`
	Suspend    *SuspendInfo    `json:"suspend,omitempty"`
	Ask        *AskInfo        `json:"ask,omitempty"`
	Answers    []AskAnswer     `json:"answers,omitempty"`
	Calls      []PendingCall   `json:"calls,omitempty"`   // all_denied, external.calls
	Results    []ToolOutput    `json:"results,omitempty"` // external.results
	Stop       *StopInfo       `json:"stop,omitempty"`
	Input      *InputInfo      `json:"input,omitempty"`
	Subagent   *SubagentInfo   `json:"subagent,omitempty"`
}

// SubagentInfo describes a subagent a run spawned.
type SubagentInfo struct {
	SubagentID string `json:"subagentId"` // the child run's requestId
	AgentID    string `json:"agentId"`    // the subagent's name
	SessionID  string `json:"sessionId"`  // the child session's key
	Label      string `json:"label"`
}

// AsyncInfo describes a tool call whose work goes on outside the run.
type AsyncInfo struct {
	TaskID        string `json:"asyncTaskId"`
	CallID        string `json:"toolCallId"`
	Name          string `json:"toolName"`
	Arguments     string `json:"arguments"`
	SubmittedAtMs int64  `json:"submittedAtMs"`
	TimeoutMs     int64  `json:"timeoutMs"`
	Strategy      string `json:"awakeStrategy"`
}

// AskInfo lists the calls of a step that wait for confirmation.
type AskInfo struct {
	Calls []AskCall `json:"calls"`
}

// AskCall is one call waiting for confirmation.
type AskCall struct {
	AskID           string    `json:"askId"`
	CallID          string    `json:"callId"`
	Name            string    `json:"name"`
	Arguments       string    `json:"arguments"`
	RuleDescription string    `json:"ruleDescription"`
	RulePattern     string    `json:"rulePattern"`
	PrincipalID     *int64    `json:"principalId,omitempty"`
	ExpiresAt       time.Time `json:"expiresAt"`
}

// AskAnswer is how one ask was resolved.
type AskAnswer struct {
	AskID     string     `json:"askId"`
	CallID    string     `json:"callId"`
	Name      string     `json:"name"`
	Arguments string     `json:"arguments"`       // what was asked about
	Input     string     `json:"input,omitempty"` // the arguments the person edited, if any
	Approved  bool       `json:"approved"`
	Reason    string     `json:"reason"`
	Rules     []RuleSpec `json:"rules,omitempty"`
}

// RuleSpec is a permission rule as people write it.
type RuleSpec struct {
	ToolName    string `json:"tool_name"`
	RuleContent string `json:"rule_content"`
	Behavior    string `json:"behavior"`
	Source      string `json:"source"`
}

// ToolOutput is a result the client sent for a tool it ran.
type ToolOutput struct {
	CallID string `json:"callId"`
	Name   string `json:"name"`
	Output string `json:"output"` // the result as text: what the model reads
	State  string `json:"state"`  // success | error | ...
	// Data are the result's binary parts (an image, a file); they stream as data deltas of the
	// call's result.
	Data []DataContent `json:"data,omitempty"`
	// Blocks is the result as the client sent it, in its dialect's content blocks; the dialect
	// echoes it as it came.
	Blocks json.RawMessage `json:"blocks,omitempty"`
}

// StopInfo says why a run was asked to pause.
type StopInfo struct {
	Reason         string `json:"reason"`
	GenerateReason string `json:"generateReason"`
}

// InputInfo is supplementary input that was consumed.
type InputInfo struct {
	InputID            string `json:"inputId"`
	Content            string `json:"content"`
	UserMessageID      int64  `json:"userMessageId"`
	AssistantMessageID int64  `json:"assistantMessageId"`
}

// RunInfo identifies a run to clients.
type RunInfo struct {
	RequestID          string  `json:"requestId"`
	ReplyID            string  `json:"replyId"` // the turn id
	SessionID          int64   `json:"sessionId"`
	SessionKey         string  `json:"sessionKey"`
	UserID             string  `json:"userId"`
	UserMessageID      int64   `json:"userMessageId"`
	AssistantMessageID int64   `json:"assistantMessageId"`
	AgentName          string  `json:"agentName"`
	NewSession         bool    `json:"newSession"`
	ParentTurnID       *string `json:"parentTurnId,omitempty"`
}

// Usage of one model call, or of a run so far.
type Usage struct {
	InputTokens     int64   `json:"inputTokens"`
	OutputTokens    int64   `json:"outputTokens"`
	CachedTokens    int64   `json:"cachedTokens"`
	ReasoningTokens int64   `json:"reasoningTokens"`
	Seconds         float64 `json:"time"`
	Model           string  `json:"model,omitempty"`
}

// Total is input plus output.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

func (u *Usage) add(o model.Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CachedTokens += o.CachedTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.Seconds += o.Duration.Seconds()
}

func usageOf(u model.Usage, modelName string) *Usage {
	return &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
		ReasoningTokens: u.ReasoningTokens, Seconds: u.Duration.Seconds(), Model: modelName}
}

// Block types.
const (
	BlockThinking = "thinking"
	BlockText     = "text"
	BlockData     = "data"
	BlockHint     = "hint"
)

// Block is a streamed content block; Delta carries the piece (base64 for data blocks).
type Block struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"`
	Delta      string  `json:"delta,omitempty"`
	Text       string  `json:"text,omitempty"` // a hint's whole text
	HintSource *string `json:"hintSource,omitempty"`
	// InputID is set on the hint that shows supplementary input as it joins the turn (after its
	// input.consumed): a dialect with its own event for that input skips the hint. It is set too
	// on the hint that says why an input was refused (Refused), which no other event shows.
	InputID   string       `json:"inputId,omitempty"`
	Refused   bool         `json:"refused,omitempty"`
	Data      *DataContent `json:"data,omitempty"` // a data block's description (media type, name)
	Synthetic bool         `json:"synthetic,omitempty"`
}

// DataContent is binary content: inline base64 or a URL.
type DataContent struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"mediaType"`
	Base64    string `json:"base64,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Tool call states on result end.
const (
	ToolSuccess     = "success"
	ToolError       = "error"
	ToolInterrupted = "interrupted"
	ToolDenied      = "denied"
	ToolRunning     = "running"
)

// ToolInfo describes a tool call or result event.
type ToolInfo struct {
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Title     string `json:"title,omitempty"`
	ArgsDelta string `json:"argsDelta,omitempty"` // tool.call.delta
	Arguments string `json:"arguments,omitempty"` // tool.call.ended (final JSON), and result events
	// Result side.
	OutputDelta string       `json:"outputDelta,omitempty"` // tool.result.delta (text)
	Data        *DataContent `json:"data,omitempty"`        // tool.result.delta (binary)
	State       string       `json:"state,omitempty"`       // tool.result.ended
	Output      string       `json:"output,omitempty"`      // tool.result.ended: the whole text output
	Error       string       `json:"error,omitempty"`       // tool.result.ended when not success
	DurationMs  int64        `json:"durationMs,omitempty"`
}

// ToolSideEvent is a tool's side-channel information.
type ToolSideEvent struct {
	CallID      string          `json:"callId"`
	Name        string          `json:"name"`
	Category    string          `json:"category"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	UserMessage string          `json:"userMessage,omitempty"`
}

// AttachmentInfo is a session attachment a run created, updated or sent.
type AttachmentInfo struct {
	ID          int64  `json:"id"`
	SessionID   int64  `json:"sessionId"`
	MessageID   *int64 `json:"messageId"`
	FileName    string `json:"fileName"`
	Extension   string `json:"fileExtension"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"fileSize"`
	VirtualPath string `json:"virtualPath"`
	Source      string `json:"source"`     // AGENT_GENERATED | USER_UPLOAD
	ChangeType  string `json:"changeType"` // CREATED | UPDATED
	Sent        bool   `json:"sent,omitempty"`
}

// Status codes of KindStatus.
const (
	StatusRateLimited     = "LLM_RATE_LIMITED"
	StatusNetworkRetrying = "LLM_NETWORK_RETRYING"
	StatusEmptyRetrying   = "LLM_EMPTY_RESPONSE_RETRYING"
	StatusAutoRecovering  = "LLM_AUTO_RECOVERING"
	StatusCompacting      = "CONTEXT_COMPACTING"
)

// StatusInfo is a transient runtime signal.
type StatusInfo struct {
	Code       string         `json:"code"`
	Level      string         `json:"level"` // INFO | WARN | ERROR
	Message    string         `json:"message"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// CustomInfo is a named extension event.
type CustomInfo struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// MaxItersInfo says the loop stopped at its iteration cap.
type MaxItersInfo struct {
	MaxIters    int `json:"maxIters"`
	CurrentIter int `json:"currentIter"`
}

// Generate reasons: why the final message ended.
const (
	ReasonModelStop     = "MODEL_STOP"
	ReasonToolCalls     = "TOOL_CALLS"
	ReasonMaxIterations = "MAX_ITERATIONS"
	ReasonInterrupted   = "INTERRUPTED"
	ReasonAllDenied     = "ALL_TOOLS_DENIED"
	ReasonMiddleware    = "MIDDLEWARE_STOP_REQUESTED"
	ReasonPermission    = "PERMISSION_ASKING"
	ReasonToolSuspended = "TOOL_SUSPENDED"
)

// ResultInfo is the run's final assistant message.
type ResultInfo struct {
	MessageID      int64         `json:"messageId"`
	MsgUUID        string        `json:"msgUuid"`
	Name           string        `json:"name"`
	Text           string        `json:"text"`
	Data           []DataContent `json:"data,omitempty"`
	GenerateReason string        `json:"generateReason"`
	Usage          *Usage        `json:"usage,omitempty"` // the run's total
	At             time.Time     `json:"at"`
}

// Run outcomes.
const (
	OutcomeCompleted   = "completed"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
)

// EndInfo closes a run.
type EndInfo struct {
	Outcome      string `json:"outcome"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Recoverable  bool   `json:"recoverable,omitempty"`
	NetworkError bool   `json:"networkError,omitempty"`
	StepCount    int    `json:"stepCount"`
	DurationMs   int64  `json:"durationMs"`
	MessageID    int64  `json:"messageId"`
	Usage        *Usage `json:"usage,omitempty"` // the run's total
}

// Error codes of failed runs.
const (
	CodeHookDenied  = "HOOK_DENIED"
	CodeHookInvalid = "HOOK_INVALID_MODIFY"
	CodeLLMError    = "LLM_ERROR"
	CodeLLMNetwork  = "LLM_NETWORK_ERROR"
	CodeInternal    = "INTERNAL_ERROR"
	CodeInterrupted = "INTERRUPTED"
)

// Suspend reasons.
const (
	SuspendPermissionAsk     = "PERMISSION_ASK"
	SuspendManual            = "MANUAL_SUSPEND"
	SuspendShutdown          = "SHUTDOWN_INTERRUPT"
	SuspendAsyncTool         = "ASYNC_TOOL_PENDING"
	SuspendExternalExecution = "EXTERNAL_EXECUTION"
	SuspendRequestStop       = "REQUEST_STOP"
)

// SuspendInfo says why a run paused and what waits.
type SuspendInfo struct {
	Reason       string        `json:"reason"`
	Message      string        `json:"message,omitempty"`
	PendingCalls []PendingCall `json:"pendingCalls"`
	MessageID    int64         `json:"messageId"`
	Step         int           `json:"step"`            // model calls made (as of the last checkpoint, after a crash)
	Async        *AsyncInfo    `json:"async,omitempty"` // ASYNC_TOOL_PENDING
	// Answer is what the turn said before it paused (a dialect that closes each response with
	// the turn's result shows it).
	Answer string `json:"answer,omitempty"`
}

// PendingCall is a tool call waiting at a pause.
type PendingCall struct {
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	State     string `json:"state"` // pending | asking
	AskID     string `json:"askId,omitempty"`
	External  bool   `json:"external,omitempty"` // a client-side tool
}

// newEventID is a 32-hex id.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newUUID is a random (v4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
