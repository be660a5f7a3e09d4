package volo

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
)

// Event types: the SSE event names of the VOLO document, which are also the `type` of the JSON.
const (
	TypeProgress         = "PROGRESS"
	TypeAssistantDelta   = "ASSISTANT_DELTA"
	TypeAssistantEnd     = "ASSISTANT_END"
	TypeError            = "ERROR"
	TypeComplete         = "COMPLETE"
	TypeToolStart        = "TOOL_START"
	TypeToolDelta        = "TOOL_DELTA"
	TypeToolEnd          = "TOOL_END"
	TypeRenderUI         = "RENDER_UI"
	TypeInteraction      = "INTERACTION"
	TypeWebSearch        = "WEB_SEARCH"
	TypeWebFetch         = "WEB_FETCH"
	TypeCommandStart     = "COMMAND_START"
	TypeCommandResult    = "COMMAND_RESULT"
	TypeCommandEnd       = "COMMAND_END"
	TypeSubagentDispatch = "SUBAGENT_DISPATCH"
	TypeSubagentNotify   = "SUBAGENT_NOTIFY"
	TypeSubagentComplete = "SUBAGENT_COMPLETE"
)

// PROGRESS phases.
const (
	PhaseTurnStarted        = "TURN_STARTED"
	PhaseModelCall          = "MODEL_CALL"
	PhaseModelDone          = "MODEL_DONE"
	PhaseThinking           = "THINKING"
	PhaseHint               = "HINT"
	PhaseToolRunning        = "TOOL_RUNNING"
	PhaseToolEvent          = "TOOL_EVENT"
	PhaseStatus             = "STATUS"
	PhaseCustom             = "CUSTOM"
	PhaseMaxIterations      = "MAX_ITERATIONS"
	PhasePaused             = "PAUSED"
	PhaseResumed            = "RESUMED"
	PhaseInteractionDone    = "INTERACTION_RESOLVED"
	PhaseAllToolsDenied     = "ALL_TOOLS_DENIED"
	PhaseToolResultsArrived = "TOOL_RESULTS_RECEIVED"
	PhaseStopRequested      = "STOP_REQUESTED"
	PhaseAppendedMessage    = "APPENDED_MESSAGE"
	PhaseEvent              = "EVENT" // a canonical kind this version does not know
)

// Interaction types.
const (
	InteractionToolApproval = "TOOL_APPROVAL" // a tool call waits for a person: interactionId = askId
	InteractionExternalTool = "EXTERNAL_TOOL" // a client-side tool waits for its result: interactionId = its askId
	InteractionAsyncTool    = "ASYNC_TOOL"    // an asynchronous tool's work goes on elsewhere: interactionId = its askId
	InteractionResume       = "RESUME"        // a manual suspend, a token-budget stop, a shutdown: interactionId = turnId
)

// COMPLETE statuses.
const (
	StatusCompleted   = "COMPLETED"
	StatusFailed      = "FAILED"
	StatusInterrupted = "INTERRUPTED"
)

// TraceInfo ties an event to the turn tree: sessionId is the client's session id (the path's),
// turnId the turn (a run's reply id, a command turn's own id, or synthetic-<uuid> for an early
// error), parentTurnId the turn this one continues (null for the first).
type TraceInfo struct {
	SessionID    string  `json:"sessionId"`
	TurnID       string  `json:"turnId"`
	ParentTurnID *string `json:"parentTurnId"`
}

// Event is one AgentExecutionEvent, the data of one SSE frame whose event name is Type. Only the
// fields of its type are set (see docs/chat-volo.md for the full list).
type Event struct {
	Type      string    `json:"type"`
	TraceInfo TraceInfo `json:"traceInfo"`
	// EventID and Seq are those of the canonical event the frame comes from (absent on frames the
	// API makes itself: commands, early errors). Timestamp is when it happened (RFC 3339, ms,
	// UTC); it is what GET messages?since= takes after a dropped connection.
	EventID   string `json:"eventId,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	Timestamp string `json:"timestamp"`
	Step      int    `json:"step,omitempty"`
	// Source is the subagent ("main/<name>") a SUBAGENT_* frame (or a subagent's INTERACTION)
	// comes from.
	Source string `json:"source,omitempty"`

	Phase          string `json:"phase,omitempty"`          // PROGRESS
	ExecutionMode  string `json:"executionMode,omitempty"`  // PROGRESS TURN_STARTED
	Content        string `json:"content,omitempty"`        // ASSISTANT_DELTA, ASSISTANT_END, PROGRESS THINKING/HINT/APPENDED_MESSAGE
	BlockID        string `json:"blockId,omitempty"`        // ASSISTANT_DELTA, PROGRESS THINKING
	Message        string `json:"message,omitempty"`        // ERROR, PROGRESS, INTERACTION
	Code           int    `json:"code,omitempty"`           // ERROR: the HTTP status of an early error
	ErrorCode      string `json:"errorCode,omitempty"`      // ERROR
	Recoverable    bool   `json:"recoverable,omitempty"`    // ERROR
	Status         string `json:"status,omitempty"`         // COMPLETE
	GenerateReason string `json:"generateReason,omitempty"` // ASSISTANT_END
	MessageID      int64  `json:"messageId,omitempty"`      // ASSISTANT_END, COMPLETE

	Tool        *ToolInfo    `json:"tool,omitempty"`        // TOOL_*, PROGRESS TOOL_RUNNING
	Interaction *Interaction `json:"interaction,omitempty"` // INTERACTION
	UI          *UIComponent `json:"ui,omitempty"`          // RENDER_UI
	Web         *WebResult   `json:"web,omitempty"`         // WEB_FETCH
	Search      *SearchInfo  `json:"search,omitempty"`      // WEB_SEARCH
	Command     *Command     `json:"command,omitempty"`     // COMMAND_*
	Subagent    *Subagent    `json:"subagent,omitempty"`    // SUBAGENT_*
	Usage       *agent.Usage `json:"usage,omitempty"`       // PROGRESS MODEL_DONE, ASSISTANT_END
	// Data is the structured detail of PROGRESS and COMPLETE frames.
	Data any `json:"data,omitempty"`
}

// ToolInfo is a tool call on TOOL_START / TOOL_DELTA / TOOL_END.
type ToolInfo struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// Stream says what a TOOL_DELTA carries: "arguments" (the model writing the call; Final with
	// the whole Arguments once they are repaired and cleared by the hooks) or "output".
	Stream     string `json:"stream,omitempty"`
	Delta      string `json:"delta,omitempty"`
	Final      bool   `json:"final,omitempty"`
	Arguments  string `json:"arguments,omitempty"`
	Status     string `json:"status,omitempty"` // TOOL_END: success | error | denied | interrupted
	Output     string `json:"output,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
}

// Interaction is a pause that needs the user: answer it with interaction-response/{interactionId}
// (or tool-approval/{toolCallId}, tool-result/{toolCallId}), or resume?turnId= with a response.
type Interaction struct {
	InteractionID   string   `json:"interactionId"`
	InteractionType string   `json:"interactionType"`
	Reason          string   `json:"reason,omitempty"` // the runtime's suspend reason (RESUME)
	ToolCallID      string   `json:"toolCallId,omitempty"`
	ToolName        string   `json:"toolName,omitempty"`
	Arguments       string   `json:"arguments,omitempty"`
	RuleDescription string   `json:"ruleDescription,omitempty"`
	RulePattern     string   `json:"rulePattern,omitempty"`
	ExpiresAt       string   `json:"expiresAt,omitempty"`
	Options         []string `json:"options,omitempty"`
}

// UIComponent is what RENDER_UI renders: an IMAGE (with a url or a data: URL) or a FILE card.
type UIComponent struct {
	ComponentType string `json:"componentType"` // IMAGE | FILE
	Name          string `json:"name,omitempty"`
	MediaType     string `json:"mediaType,omitempty"`
	URL           string `json:"url,omitempty"` // http(s) or data: URL
	Size          int64  `json:"size,omitempty"`
	VirtualPath   string `json:"virtualPath,omitempty"` // a workspace file: /workspace/...
	AttachmentID  int64  `json:"attachmentId,omitempty"`
	ChangeType    string `json:"changeType,omitempty"` // CREATED | UPDATED
	Origin        string `json:"origin,omitempty"`     // ATTACHMENT | TOOL_RESULT | ASSISTANT | BLOCK
	ToolCallID    string `json:"toolCallId,omitempty"`
}

// WebResult is a page the agent fetched (an http_request call).
type WebResult struct {
	ToolCallID string `json:"toolCallId"`
	URL        string `json:"url"`
	Method     string `json:"method"`
	StatusCode int    `json:"statusCode,omitempty"`
	StatusLine string `json:"statusLine,omitempty"`
	Success    bool   `json:"success"`
	Content    string `json:"content,omitempty"`
	Error      string `json:"error,omitempty"`
}

// SearchInfo is a web search the agent made (a web_search call): the query and its results, or
// the error.
type SearchInfo struct {
	ToolCallID string               `json:"toolCallId"`
	Query      string               `json:"query"`
	Success    bool                 `json:"success"`
	Results    []tools.SearchResult `json:"results"`
	Error      string               `json:"error,omitempty"`
}

// Command is a built-in command turn (or the @file part of a turn).
type Command struct {
	Trigger string `json:"trigger"` // / # @
	Name    string `json:"name"`    // help, tools, clear, file
	Args    string `json:"args,omitempty"`
	Success *bool  `json:"success,omitempty"` // COMMAND_RESULT, COMMAND_END
	Result  any    `json:"result,omitempty"`  // COMMAND_RESULT
	Error   string `json:"error,omitempty"`
}

// Subagent says which subagent a SUBAGENT_* frame is about. On SUBAGENT_NOTIFY, EventType is the
// type the frame would have had for the main agent (whose fields it keeps), or SUBAGENT_EXPOSED,
// or TASK_PROGRESS.
type Subagent struct {
	Source     string `json:"source"` // main/<name>
	Name       string `json:"name"`
	Kind       string `json:"kind"` // the canonical kind
	EventType  string `json:"eventType,omitempty"`
	Status     string `json:"status,omitempty"`     // SUBAGENT_COMPLETE: COMPLETED | FAILED | INTERRUPTED; TASK_PROGRESS: RUNNING | SUSPENDED | COMPLETED | FAILED
	Progress   *int   `json:"progress,omitempty"`   // TASK_PROGRESS, percent
	SubagentID string `json:"subagentId,omitempty"` // the subagent run's requestId
	SessionID  string `json:"sessionId,omitempty"`  // the subagent's own session (DISPATCH, SUBAGENT_EXPOSED)
	Label      string `json:"label,omitempty"`      // SUBAGENT_EXPOSED
}

// Timestamp formats a time as frames and responses do: RFC 3339, milliseconds, UTC.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// Map turns one canonical runtime event into the VOLO frames it stands for (none for the events
// VOLO has no use for). It is pure: the frames depend on ev and tr only.
func Map(ev agent.Event, tr TraceInfo) []Event {
	if ev.Source != "" {
		return mapSubagent(ev, tr)
	}
	return mapMain(ev, tr)
}

// Terminal reports whether a stream ends after ev: the turn ended, or it paused and waits (the
// client goes on with resume?turnId=).
func Terminal(ev agent.Event) bool {
	return ev.Source == "" && (ev.Kind == agent.KindRunEnded || ev.Kind == agent.KindSuspended)
}

func mapSubagent(ev agent.Event, tr TraceInfo) []Event {
	switch ev.Kind {
	case agent.KindRunStarted:
		f := subagentFrame(ev, tr, TypeSubagentDispatch, "")
		if ev.Run != nil {
			f.Subagent.SubagentID, f.Subagent.SessionID = ev.Run.RequestID, ev.Run.SessionKey
		}
		return []Event{f}
	case agent.KindRunEnded:
		f := subagentFrame(ev, tr, TypeSubagentComplete, "")
		if ev.End != nil {
			f.Subagent.Status = completeStatus(ev.End.Outcome)
			f.ErrorCode, f.Message = ev.End.ErrorCode, ev.End.ErrorMessage
		}
		return []Event{f}
	}
	var out []Event
	for _, inner := range mapMain(ev, tr) {
		if inner.Type == TypeInteraction { // a person must still see and answer it
			inner.Source = ev.Source
			out = append(out, inner)
			continue
		}
		f := inner
		f.Type, f.Source = TypeSubagentNotify, ev.Source
		f.Subagent = &Subagent{Source: ev.Source, Name: subagentName(ev.Source), Kind: string(ev.Kind), EventType: inner.Type}
		out = append(out, f)
	}
	return out
}

func subagentFrame(ev agent.Event, tr TraceInfo, typ, eventType string) Event {
	f := base(ev, tr, typ)
	f.Source = ev.Source
	f.Subagent = &Subagent{Source: ev.Source, Name: subagentName(ev.Source), Kind: string(ev.Kind), EventType: eventType}
	return f
}

// taskProgress is the value of the runtime's task_progress custom event (a subagent's state).
type taskProgress struct {
	TaskID   string `json:"taskId"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Progress int    `json:"progress"`
}

func subagentName(source string) string {
	if i := strings.LastIndexByte(source, '/'); i >= 0 {
		return source[i+1:]
	}
	return source
}

func base(ev agent.Event, tr TraceInfo, typ string) Event {
	return Event{Type: typ, TraceInfo: tr, EventID: ev.ID, Seq: ev.Seq, Timestamp: Timestamp(ev.At), Step: ev.Step}
}

func progress(ev agent.Event, tr TraceInfo, phase, msg string, data any) Event {
	f := base(ev, tr, TypeProgress)
	f.Phase, f.Message, f.Data = phase, msg, data
	return f
}

// turnStarted is the data of PROGRESS TURN_STARTED.
type turnStarted struct {
	RequestID          string `json:"requestId"`
	UserMessageID      int64  `json:"userMessageId"`
	AssistantMessageID int64  `json:"assistantMessageId"`
	AgentName          string `json:"agentName"`
	NewSession         bool   `json:"newSession"`
}

// completion is the data of COMPLETE.
type completion struct {
	StepCount   int   `json:"stepCount"`
	DurationMs  int64 `json:"durationMs"`
	TotalTokens int64 `json:"totalTokens"`
}

func mapMain(ev agent.Event, tr TraceInfo) []Event {
	one := func(f Event) []Event { return []Event{f} }
	switch ev.Kind {
	case agent.KindRunStarted:
		var d *turnStarted
		if r := ev.Run; r != nil {
			d = &turnStarted{RequestID: r.RequestID, UserMessageID: r.UserMessageID, AssistantMessageID: r.AssistantMessageID,
				AgentName: r.AgentName, NewSession: r.NewSession}
		}
		return one(progress(ev, tr, PhaseTurnStarted, "turn started", d))
	case agent.KindModelStarted:
		return one(progress(ev, tr, PhaseModelCall, "calling the model", nil))
	case agent.KindModelEnded:
		f := progress(ev, tr, PhaseModelDone, "the model answered", nil)
		f.Usage = ev.Usage
		return one(f)
	case agent.KindBlockStarted, agent.KindBlockDelta, agent.KindBlockEnded:
		return mapBlock(ev, tr)
	case agent.KindHint:
		if ev.Block != nil && ev.Block.InputID != "" && !ev.Block.Refused {
			return nil // the input's APPENDED_MESSAGE progress says it (a refused one has none)
		}
		f := progress(ev, tr, PhaseHint, "", nil)
		if ev.Block != nil {
			f.Content, f.BlockID = ev.Block.Text, ev.Block.ID
			if ev.Block.HintSource != nil {
				data := map[string]string{"hintSource": *ev.Block.HintSource}
				if ev.Block.Refused {
					data["inputId"] = ev.Block.InputID // the appended message it refuses
				}
				f.Data = data
			}
		}
		return one(f)
	case agent.KindToolCallStarted:
		f := base(ev, tr, TypeToolStart)
		f.Tool = toolOf(ev)
		return one(f)
	case agent.KindToolCallDelta:
		f := base(ev, tr, TypeToolDelta)
		f.Tool = toolOf(ev)
		f.Tool.Stream = "arguments"
		if ev.Tool != nil {
			f.Tool.Delta = ev.Tool.ArgsDelta
		}
		return one(f)
	case agent.KindToolCallEnded:
		f := base(ev, tr, TypeToolDelta)
		f.Tool = toolOf(ev)
		f.Tool.Stream, f.Tool.Final = "arguments", true
		if ev.Tool != nil {
			f.Tool.Arguments = ev.Tool.Arguments
		}
		return one(f)
	case agent.KindToolResultStarted:
		if ev.Tool != nil && ev.Tool.State != "" {
			return nil // a denied or refused call never runs
		}
		f := progress(ev, tr, PhaseToolRunning, "running the tool", nil)
		f.Tool = toolOf(ev)
		return one(f)
	case agent.KindToolResultDelta:
		if ev.Tool == nil {
			return nil
		}
		if ev.Tool.Data != nil {
			f := base(ev, tr, TypeRenderUI)
			f.UI = dataComponent(*ev.Tool.Data, "TOOL_RESULT")
			f.UI.ToolCallID = ev.Tool.CallID
			return one(f)
		}
		f := base(ev, tr, TypeToolDelta)
		f.Tool = toolOf(ev)
		f.Tool.Stream, f.Tool.Delta = "output", ev.Tool.OutputDelta
		return one(f)
	case agent.KindToolResultEnded:
		f := base(ev, tr, TypeToolEnd)
		f.Tool = toolEnd(ev)
		if t := ev.Tool; t != nil {
			switch t.Name {
			case tools.NameHTTPRequest:
				w := base(ev, tr, TypeWebFetch)
				w.Web = webFetch(*t)
				return []Event{f, w}
			case tools.NameWebSearch:
				w := base(ev, tr, TypeWebSearch)
				w.Search = webSearch(*t)
				return []Event{f, w}
			}
		}
		return one(f)
	case agent.KindToolEvent:
		f := progress(ev, tr, PhaseToolEvent, "", ev.ToolEvent)
		if ev.ToolEvent != nil {
			f.Message = ev.ToolEvent.UserMessage
			f.Tool = &ToolInfo{ToolCallID: ev.ToolEvent.CallID, ToolName: ev.ToolEvent.Name}
		}
		return one(f)
	case agent.KindAttachment:
		if ev.Attachment == nil {
			return nil
		}
		a := ev.Attachment
		f := base(ev, tr, TypeRenderUI)
		f.UI = &UIComponent{ComponentType: componentType(a.ContentType), Name: a.FileName, MediaType: a.ContentType, Size: a.Size,
			VirtualPath: a.VirtualPath, AttachmentID: a.ID, ChangeType: a.ChangeType, Origin: "ATTACHMENT"}
		return one(f)
	case agent.KindStatus:
		f := progress(ev, tr, PhaseStatus, "", ev.Status)
		if ev.Status != nil {
			f.Message = ev.Status.Message
		}
		return one(f)
	case agent.KindCustom:
		if c := ev.Custom; c != nil && c.Name == "task_progress" {
			var p taskProgress
			if json.Unmarshal(c.Value, &p) == nil && p.Name != "" {
				f := base(ev, tr, TypeSubagentNotify)
				f.Source = "main/" + p.Name
				f.Subagent = &Subagent{Source: f.Source, Name: p.Name, Kind: string(ev.Kind), EventType: "TASK_PROGRESS",
					Status: p.Status, Progress: &p.Progress, SubagentID: p.TaskID}
				return one(f)
			}
		}
		return one(progress(ev, tr, PhaseCustom, "", ev.Custom))
	case agent.KindSubagentExposed:
		f := base(ev, tr, TypeSubagentNotify)
		if a := ev.Subagent; a != nil {
			f.Source = "main/" + a.AgentID
			f.Subagent = &Subagent{Source: f.Source, Name: a.AgentID, Kind: string(ev.Kind), EventType: "SUBAGENT_EXPOSED",
				SubagentID: a.SubagentID, SessionID: a.SessionID, Label: a.Label}
		}
		return one(f)
	case agent.KindMaxIters:
		return one(progress(ev, tr, PhaseMaxIterations, "the turn reached its step limit", ev.MaxIters))
	case agent.KindResult:
		f := base(ev, tr, TypeAssistantEnd)
		out := []Event{f}
		if r := ev.Result; r != nil {
			out[0].Content, out[0].GenerateReason, out[0].MessageID, out[0].Usage = r.Text, r.GenerateReason, r.MessageID, r.Usage
			for _, d := range r.Data {
				u := base(ev, tr, TypeRenderUI)
				u.UI = dataComponent(d, "ASSISTANT")
				out = append(out, u)
			}
		}
		return out
	case agent.KindRunEnded:
		end := agent.EndInfo{}
		if ev.End != nil {
			end = *ev.End
		}
		c := base(ev, tr, TypeComplete)
		c.Status, c.MessageID = completeStatus(end.Outcome), end.MessageID
		c.Data = completion{StepCount: end.StepCount, DurationMs: end.DurationMs, TotalTokens: ev.TotalTokens}
		if end.Outcome != agent.OutcomeFailed {
			return one(c)
		}
		e := base(ev, tr, TypeError)
		e.ErrorCode, e.Message, e.Recoverable = end.ErrorCode, end.ErrorMessage, end.Recoverable
		return []Event{e, c}
	case agent.KindSuspended:
		s := agent.SuspendInfo{}
		if ev.Suspend != nil {
			s = *ev.Suspend
		}
		switch s.Reason {
		case agent.SuspendPermissionAsk, agent.SuspendExternalExecution:
			// The INTERACTION frames came with the ask / external.calls event.
			return one(progress(ev, tr, PhasePaused, "the turn waits for the user", ev.Suspend))
		case agent.SuspendAsyncTool:
			var out []Event
			for _, c := range s.PendingCalls {
				if c.AskID == "" {
					continue
				}
				f := base(ev, tr, TypeInteraction)
				f.Message = s.Message
				f.Interaction = &Interaction{InteractionID: c.AskID, InteractionType: InteractionAsyncTool, Reason: s.Reason,
					ToolCallID: c.CallID, ToolName: c.Name, Arguments: c.Arguments}
				if s.Async != nil && s.Async.CallID == c.CallID {
					f.Data = s.Async
				}
				out = append(out, f)
			}
			return append(out, progress(ev, tr, PhasePaused, "the turn waits for an asynchronous tool", ev.Suspend))
		}
		f := base(ev, tr, TypeInteraction)
		f.Message = s.Message
		f.Interaction = &Interaction{InteractionID: tr.TurnID, InteractionType: InteractionResume, Reason: s.Reason,
			Options: []string{"continue"}}
		return one(f)
	case agent.KindResumed:
		return one(progress(ev, tr, PhaseResumed, "the turn goes on", nil))
	case agent.KindAsk:
		if ev.Ask == nil {
			return nil
		}
		var out []Event
		for _, c := range ev.Ask.Calls {
			f := base(ev, tr, TypeInteraction)
			f.Message = "confirm the tool call " + c.Name
			f.Interaction = &Interaction{InteractionID: c.AskID, InteractionType: InteractionToolApproval, ToolCallID: c.CallID,
				ToolName: c.Name, Arguments: c.Arguments, RuleDescription: c.RuleDescription, RulePattern: c.RulePattern,
				ExpiresAt: timeOrEmpty(c.ExpiresAt), Options: []string{"approve", "deny"}}
			out = append(out, f)
		}
		return out
	case agent.KindAskResolved:
		return one(progress(ev, tr, PhaseInteractionDone, "the interaction was answered", ev.Answers))
	case agent.KindAllDenied:
		return one(progress(ev, tr, PhaseAllToolsDenied, "every tool call of the step was denied", ev.Calls))
	case agent.KindExternalCalls:
		var out []Event
		for _, c := range ev.Calls {
			f := base(ev, tr, TypeInteraction)
			f.Message = "run the client-side tool " + c.Name + " and send its result"
			f.Interaction = &Interaction{InteractionID: c.AskID, InteractionType: InteractionExternalTool, ToolCallID: c.CallID,
				ToolName: c.Name, Arguments: c.Arguments}
			out = append(out, f)
		}
		return out
	case agent.KindExternalResults:
		return one(progress(ev, tr, PhaseToolResultsArrived, "client-side tool results arrived", ev.Results))
	case agent.KindStopRequested:
		f := progress(ev, tr, PhaseStopRequested, "", ev.Stop)
		if ev.Stop != nil {
			f.Message = ev.Stop.Reason
		}
		return one(f)
	case agent.KindInputConsumed:
		f := progress(ev, tr, PhaseAppendedMessage, "appended text joined the turn", ev.Input)
		if ev.Input != nil {
			f.Content = ev.Input.Content
		}
		return one(f)
	}
	return one(progress(ev, tr, PhaseEvent, string(ev.Kind), map[string]string{"kind": string(ev.Kind)}))
}

func mapBlock(ev agent.Event, tr TraceInfo) []Event {
	b := ev.Block
	if b == nil {
		return nil
	}
	switch b.Type {
	case agent.BlockText:
		if ev.Kind != agent.KindBlockDelta {
			return nil // ASSISTANT_END comes with the turn's result
		}
		f := base(ev, tr, TypeAssistantDelta)
		f.Content, f.BlockID = b.Delta, b.ID
		return []Event{f}
	case agent.BlockThinking:
		if ev.Kind != agent.KindBlockDelta {
			return nil
		}
		f := progress(ev, tr, PhaseThinking, "", nil)
		f.Content, f.BlockID = b.Delta, b.ID
		return []Event{f}
	case agent.BlockData:
		if b.Data == nil || (b.Data.URL == "" && b.Data.Base64 == "") {
			return nil
		}
		f := base(ev, tr, TypeRenderUI)
		f.UI = dataComponent(*b.Data, "BLOCK")
		return []Event{f}
	}
	return nil
}

func toolOf(ev agent.Event) *ToolInfo {
	if ev.Tool == nil {
		return &ToolInfo{}
	}
	return &ToolInfo{ToolCallID: ev.Tool.CallID, ToolName: ev.Tool.Name}
}

// toolEnd is the tool of a TOOL_END: the call with its result.
func toolEnd(ev agent.Event) *ToolInfo {
	ti := toolOf(ev)
	if t := ev.Tool; t != nil {
		ti.Arguments, ti.Status, ti.Output, ti.Error, ti.DurationMs = t.Arguments, t.State, t.Output, t.Error, t.DurationMs
	}
	return ti
}

func dataComponent(d agent.DataContent, origin string) *UIComponent {
	u := &UIComponent{ComponentType: componentType(d.MediaType), Name: d.Name, MediaType: d.MediaType, URL: d.URL, Origin: origin}
	if u.URL == "" && d.Base64 != "" {
		u.URL = "data:" + d.MediaType + ";base64," + d.Base64
		u.Size = int64(len(d.Base64)) / 4 * 3
	}
	return u
}

func componentType(mediaType string) string {
	if strings.HasPrefix(mediaType, "image/") {
		return "IMAGE"
	}
	return "FILE"
}

func completeStatus(outcome string) string {
	switch outcome {
	case agent.OutcomeFailed:
		return StatusFailed
	case agent.OutcomeInterrupted:
		return StatusInterrupted
	}
	return StatusCompleted
}

func timeOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return Timestamp(t)
}

// webFetch reads an http_request call's arguments and output: the status line is the output's
// first line that starts with "HTTP/" (redirect notes come before it).
func webFetch(t agent.ToolInfo) *WebResult {
	var args struct {
		URL    string `json:"url"`
		Method string `json:"method"`
	}
	_ = json.Unmarshal([]byte(t.Arguments), &args)
	w := &WebResult{ToolCallID: t.CallID, URL: args.URL, Method: strings.ToUpper(args.Method), Success: t.State == agent.ToolSuccess,
		Content: t.Output, Error: t.Error}
	if w.Method == "" {
		w.Method = "GET"
	}
	if u, err := url.Parse(args.URL); err == nil && u.Scheme != "" {
		w.URL = u.String()
	}
	for _, line := range strings.SplitN(t.Output, "\n", 4) {
		if strings.HasPrefix(line, "HTTP/") {
			w.StatusLine = line
			if f := strings.Fields(line); len(f) > 1 {
				w.StatusCode, _ = strconv.Atoi(f[1])
			}
			break
		}
	}
	return w
}

// webSearch reads a web_search call's arguments and output (a JSON array of results when it
// succeeded, the error text otherwise).
func webSearch(t agent.ToolInfo) *SearchInfo {
	var args struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal([]byte(t.Arguments), &args)
	s := &SearchInfo{ToolCallID: t.CallID, Query: args.Query, Results: []tools.SearchResult{}, Error: t.Error}
	if hits, ok := tools.ParseSearchResults(t.Output); ok && t.State == agent.ToolSuccess {
		s.Success, s.Results = true, hits
	} else if s.Error == "" {
		s.Error = t.Output
	}
	return s
}
