package agui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/dialect"
)

// AG-UI 1.0 event types hookd produces.
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	StateSnapshot           = "STATE_SNAPSHOT"
	Custom                  = "CUSTOM"
)

// Interrupt reasons hookd gives (AG-UI leaves the reason an open string).
const (
	// ReasonToolApproval: a permission rule asks a person to confirm a tool call.
	ReasonToolApproval = "tool_approval"
	// ReasonSuspended: the run paused for another reason (a daemon shutdown, a manual suspend, the
	// token budget); resolving the interrupt lets it go on.
	ReasonSuspended = "hookd_suspended"
)

// Event is one AG-UI event. Which fields are set depends on Type; the JSON names are the
// specification's.
type Event struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`

	ThreadID string `json:"threadId,omitempty"`
	RunID    string `json:"runId,omitempty"`

	MessageID       string  `json:"messageId,omitempty"`
	Role            string  `json:"role,omitempty"`
	Delta           string  `json:"delta,omitempty"`
	ToolCallID      string  `json:"toolCallId,omitempty"`
	ToolCallName    string  `json:"toolCallName,omitempty"`
	ParentMessageID string  `json:"parentMessageId,omitempty"`
	Content         *string `json:"content,omitempty"`
	StepName        string  `json:"stepName,omitempty"`

	Snapshot json.RawMessage `json:"snapshot,omitempty"`
	Name     string          `json:"name,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`

	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`

	Result  json.RawMessage `json:"result,omitempty"`
	Outcome *Outcome        `json:"outcome,omitempty"`
	Usage   []TokenUsage    `json:"usage,omitempty"`
}

// Outcome says how a run that did not fail ended: success, interrupt or cancelled.
type Outcome struct {
	Type               string      `json:"type"`
	PendingToolCallIDs []string    `json:"pendingToolCallIds,omitempty"`
	Interrupts         []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is something the run needs from outside before it goes on; the next run on the
// thread answers it with a resume entry of the same id.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// TokenUsage is the run's token count in AG-UI's accounting (reasoning and cached tokens are
// parts of the totals).
type TokenUsage struct {
	Provider          string `json:"provider,omitempty"`
	Model             string `json:"model,omitempty"`
	InputTokens       int64  `json:"inputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	TotalTokens       int64  `json:"totalTokens"`
	ReasoningTokens   int64  `json:"reasoningTokens,omitempty"`
	CachedInputTokens int64  `json:"cachedInputTokens,omitempty"`
}

// approvalSchema is the payload a resume entry for a tool_approval interrupt carries.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},` +
	`"reason":{"type":"string"},"arguments":{"type":"object"}},"required":["approved"]}`)

// Mapper turns one response's share of a run's canonical events into AG-UI events: from the
// run's start or the resume this request made, to its end or its next pause. It is a pure
// mapping with the little memory AG-UI's pairing rules need (which messages, calls and steps
// are open, the asks a pause waits for). Not safe for concurrent use.
type Mapper struct {
	threadID, runID string
	state           map[string]json.RawMessage // the client's state, echoed in snapshots

	requestID  string
	started    bool
	done       bool
	step       string          // the open step's name
	text       []string        // open text messages
	reasoning  []string        // open reasoning messages
	calls      map[string]bool // open tool calls → whether arguments streamed
	callOrder  []string
	lastText   string                   // the step's text message, the parent of its calls
	asks       map[string]agent.AskCall // by call id, of the step that paused
	clientRuns map[string]bool          // calls the client ran: their results are its own
	// client are the tools the client runs itself. Their calls are held back (call id → parent
	// message) until the run hands them to the client with the arguments the pre_tool_use hooks
	// let through, for the client runs a call with what its TOOL_CALL_ARGS carried; a call the
	// hooks refused is shown with its result, which tells the client not to run it.
	client map[string]bool
	held   map[string]string
	result *agent.ResultInfo
}

// NewMapper maps for the AG-UI run runID of thread threadID; state is the client's state
// object (nil for none); clientTools are the tools the client runs itself.
func NewMapper(threadID, runID string, state map[string]json.RawMessage, clientTools []string) *Mapper {
	if state == nil {
		state = map[string]json.RawMessage{}
	}
	m := &Mapper{threadID: threadID, runID: runID, state: state, calls: map[string]bool{},
		asks: map[string]agent.AskCall{}, clientRuns: map[string]bool{}, client: map[string]bool{}, held: map[string]string{}}
	for _, n := range clientTools {
		m.client[n] = true
	}
	return m
}

// Done reports whether the last event mapped ended this response (RUN_FINISHED or RUN_ERROR).
func (m *Mapper) Done() bool { return m.done }

// Map returns the AG-UI events of one canonical event. Events of subagents (Source set) are
// not shown: their work reaches this stream as the result of the tool call that started them.
func (m *Mapper) Map(ev agent.Event) []Event {
	if m.done || ev.Source != "" {
		return nil
	}
	at := ev.At.UnixMilli()
	out := m.open(ev, at)
	e := func(x Event) { x.Timestamp = at; out = append(out, x) }
	switch ev.Kind {
	case agent.KindModelStarted:
		out = append(out, m.endStep(at)...)
		m.step, m.lastText = fmt.Sprintf("step %d", ev.Step), ""
		e(Event{Type: StepStarted, StepName: m.step})
	case agent.KindModelEnded:
		out = append(out, m.closeBlocks(at)...)
		out = append(out, m.endStep(at)...)
	case agent.KindBlockStarted:
		switch ev.Block.Type {
		case agent.BlockText:
			m.text, m.lastText = append(m.text, ev.Block.ID), ev.Block.ID
			e(Event{Type: TextMessageStart, MessageID: ev.Block.ID, Role: "assistant"})
		case agent.BlockThinking:
			m.reasoning = append(m.reasoning, ev.Block.ID)
			e(Event{Type: ReasoningStart, MessageID: ev.Block.ID})
			e(Event{Type: ReasoningMessageStart, MessageID: ev.Block.ID, Role: "reasoning"})
		case agent.BlockData:
			e(custom("hookd.data", ev.Block.Data))
		}
	case agent.KindBlockDelta:
		switch {
		case ev.Block.Delta == "":
		case slices.Contains(m.text, ev.Block.ID):
			e(Event{Type: TextMessageContent, MessageID: ev.Block.ID, Delta: ev.Block.Delta})
		case slices.Contains(m.reasoning, ev.Block.ID):
			e(Event{Type: ReasoningMessageContent, MessageID: ev.Block.ID, Delta: ev.Block.Delta})
		}
	case agent.KindBlockEnded:
		out = append(out, m.closeBlock(ev.Block.ID, at)...)
	case agent.KindHint:
		e(custom("hookd.hint", map[string]any{"text": ev.Block.Text, "source": ev.Block.HintSource}))
	case agent.KindToolCallStarted:
		if m.client[ev.Tool.Name] {
			m.held[ev.Tool.CallID] = m.lastText // the hooks have not decided yet
			break
		}
		m.calls[ev.Tool.CallID] = false
		m.callOrder = append(m.callOrder, ev.Tool.CallID)
		e(Event{Type: ToolCallStart, ToolCallID: ev.Tool.CallID, ToolCallName: ev.Tool.Name, ParentMessageID: m.lastText})
	case agent.KindToolCallDelta:
		if _, open := m.calls[ev.Tool.CallID]; open && ev.Tool.ArgsDelta != "" {
			m.calls[ev.Tool.CallID] = true
			e(Event{Type: ToolCallArgs, ToolCallID: ev.Tool.CallID, Delta: ev.Tool.ArgsDelta})
		}
	case agent.KindToolCallEnded:
		if streamed, open := m.calls[ev.Tool.CallID]; open {
			if !streamed && ev.Tool.Arguments != "" {
				e(Event{Type: ToolCallArgs, ToolCallID: ev.Tool.CallID, Delta: ev.Tool.Arguments})
			}
			m.endCall(ev.Tool.CallID)
			e(Event{Type: ToolCallEnd, ToolCallID: ev.Tool.CallID})
		}
	case agent.KindToolResultEnded:
		if m.clientRuns[ev.Tool.CallID] {
			break // the client ran it: the result is already in its messages
		}
		if parent, held := m.held[ev.Tool.CallID]; held { // refused before it reached the client
			delete(m.held, ev.Tool.CallID)
			out = append(out, callEvents(ev.Tool.CallID, ev.Tool.Name, ev.Tool.Arguments, parent, at)...)
		}
		content := toolContent(ev.Tool)
		e(Event{Type: ToolCallResult, MessageID: "result-" + ev.Tool.CallID, ToolCallID: ev.Tool.CallID, Content: &content, Role: "tool"})
	case agent.KindAsk:
		for _, a := range ev.Ask.Calls {
			m.asks[a.CallID] = a
		}
	case agent.KindExternalResults:
		for _, r := range ev.Results {
			m.clientRuns[r.CallID] = true
		}
		e(custom("hookd.client_tool_results", ev.Results))
	case agent.KindAskResolved:
		e(custom("hookd.ask_resolved", ev.Answers))
	case agent.KindResult:
		m.result = ev.Result
	case agent.KindCustom:
		if ev.Custom.Name == "state_updated" {
			var v map[string]any
			_ = json.Unmarshal(ev.Custom.Value, &v)
			e(m.snapshot(v))
		} else {
			e(Event{Type: Custom, Name: ev.Custom.Name, Value: dialect.RawOrNull(ev.Custom.Value)})
		}
	case agent.KindStatus:
		e(custom("hookd.status", ev.Status))
	case agent.KindToolEvent:
		e(custom("hookd.tool_event", ev.ToolEvent))
	case agent.KindAttachment:
		e(custom("hookd.attachment", ev.Attachment))
	case agent.KindMaxIters:
		e(custom("hookd.max_iters", ev.MaxIters))
	case agent.KindAllDenied:
		e(custom("hookd.all_denied", ev.Calls))
	case agent.KindStopRequested:
		e(custom("hookd.stop_requested", ev.Stop))
	case agent.KindInputConsumed:
		e(custom("hookd.input_consumed", ev.Input))
	case agent.KindSubagentExposed:
		e(custom("hookd.subagent", ev.Subagent))
	case agent.KindSuspended:
		out = append(out, m.closeAll(at)...)
		for _, p := range ev.Suspend.PendingCalls {
			if p.External && p.State != "asking" { // the client's to run now, as the hooks let it
				out = append(out, callEvents(p.CallID, p.Name, p.Arguments, m.held[p.CallID], at)...)
				delete(m.held, p.CallID)
			}
		}
		out = append(out, m.pause(ev, at))
		m.done = true
	case agent.KindRunEnded:
		out = append(out, m.closeAll(at)...)
		out = append(out, m.end(ev, at)...)
		m.done = true
	}
	return out
}

// open starts the AG-UI run at the first event of the response.
func (m *Mapper) open(ev agent.Event, at int64) []Event {
	if m.started {
		return nil
	}
	m.started = true
	m.requestID = ev.RunID
	out := []Event{{Type: RunStarted, Timestamp: at, ThreadID: m.threadID, RunID: m.runID}}
	if ev.Kind != agent.KindCustom { // a state_updated custom event is a snapshot of its own
		out = append(out, m.snapshot(map[string]any{"status": "running"}))
		out[1].Timestamp = at
	}
	return out
}

// snapshot is the client's state with hookd's view of the run under the key "hookd".
func (m *Mapper) snapshot(run map[string]any) Event {
	if run == nil {
		run = map[string]any{}
	}
	run["requestId"] = m.requestID
	s := make(map[string]any, len(m.state)+1)
	for k, v := range m.state {
		s[k] = v
	}
	s["hookd"] = run
	b, _ := json.Marshal(s)
	return Event{Type: StateSnapshot, Snapshot: b}
}

func (m *Mapper) pause(ev agent.Event, at int64) Event {
	s := ev.Suspend
	done := Event{Type: RunFinished, Timestamp: at, ThreadID: m.threadID, RunID: m.runID}
	var pending []string
	var interrupts []Interrupt
	for _, p := range s.PendingCalls {
		switch {
		case p.External:
			pending = append(pending, p.CallID)
		case p.State == "asking":
			a := m.asks[p.CallID]
			it := Interrupt{ID: p.AskID, Reason: ReasonToolApproval, ToolCallID: p.CallID, ResponseSchema: approvalSchema,
				Message:  fmt.Sprintf("Allow %s with %s?", p.Name, p.Arguments),
				Metadata: map[string]any{"toolName": p.Name, "arguments": p.Arguments}}
			if a.AskID != "" {
				it.ExpiresAt = a.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z")
				it.Metadata["rule"] = a.RuleDescription
			}
			interrupts = append(interrupts, it)
		}
	}
	switch {
	case len(interrupts) > 0:
		done.Outcome = &Outcome{Type: "interrupt", Interrupts: interrupts}
	case len(pending) > 0:
		done.Outcome = &Outcome{Type: "success", PendingToolCallIDs: pending}
	default:
		msg := s.Message
		if msg == "" {
			msg = "the run paused: " + strings.ToLower(s.Reason)
		}
		done.Outcome = &Outcome{Type: "interrupt", Interrupts: []Interrupt{{ID: SuspendedInterruptID(ev.RunID, ev.Seq),
			Reason: ReasonSuspended, Message: msg, Metadata: map[string]any{"suspendReason": s.Reason}}}}
	}
	return done
}

// SuspendedInterruptID names the interrupt of a pause that waits for nothing but a go-ahead.
func SuspendedInterruptID(requestID string, seq int64) string {
	return fmt.Sprintf("suspended:%s:%d", requestID, seq)
}

func (m *Mapper) end(ev agent.Event, at int64) []Event {
	end := ev.End
	usage := tokenUsage(end.Usage)
	switch end.Outcome {
	case agent.OutcomeFailed:
		return []Event{{Type: RunError, Timestamp: at, Message: end.ErrorMessage, Code: end.ErrorCode, Usage: usage}}
	case agent.OutcomeInterrupted:
		return []Event{m.snapshotAt(map[string]any{"status": "interrupted"}, at),
			{Type: RunFinished, Timestamp: at, ThreadID: m.threadID, RunID: m.runID, Outcome: &Outcome{Type: "cancelled"}, Usage: usage}}
	}
	done := Event{Type: RunFinished, Timestamp: at, ThreadID: m.threadID, RunID: m.runID, Outcome: &Outcome{Type: "success"}, Usage: usage}
	if r := m.result; r != nil {
		done.Result, _ = json.Marshal(map[string]any{"text": r.Text, "generateReason": r.GenerateReason, "requestId": ev.RunID})
	}
	return []Event{m.snapshotAt(map[string]any{"status": "completed"}, at), done}
}

func (m *Mapper) snapshotAt(run map[string]any, at int64) Event {
	s := m.snapshot(run)
	s.Timestamp = at
	return s
}

func tokenUsage(u *agent.Usage) []TokenUsage {
	if u == nil {
		return nil
	}
	return []TokenUsage{{Provider: "hookd", Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		TotalTokens: u.Total(), ReasoningTokens: u.ReasoningTokens, CachedInputTokens: u.CachedTokens}}
}

// closeBlock ends the text or reasoning message id, if it is open.
func (m *Mapper) closeBlock(id string, at int64) []Event {
	switch {
	case slices.Contains(m.text, id):
		m.text = dialect.Without(m.text, id)
		return []Event{{Type: TextMessageEnd, Timestamp: at, MessageID: id}}
	case slices.Contains(m.reasoning, id):
		m.reasoning = dialect.Without(m.reasoning, id)
		return []Event{{Type: ReasoningMessageEnd, Timestamp: at, MessageID: id}, {Type: ReasoningEnd, Timestamp: at, MessageID: id}}
	}
	return nil
}

// closeBlocks ends the text and reasoning messages a model call left open (it failed
// mid-stream). Its tool calls stay open: the runtime ends them after the call, with their
// final arguments.
func (m *Mapper) closeBlocks(at int64) []Event {
	var out []Event
	for len(m.text) > 0 {
		out = append(out, m.closeBlock(m.text[0], at)...)
	}
	for len(m.reasoning) > 0 {
		out = append(out, m.closeBlock(m.reasoning[0], at)...)
	}
	return out
}

// closeStreams ends everything still open, so the run can end as AG-UI requires: no message
// or call open.
func (m *Mapper) closeStreams(at int64) []Event {
	out := m.closeBlocks(at)
	for len(m.callOrder) > 0 {
		id := m.callOrder[0]
		m.endCall(id)
		out = append(out, Event{Type: ToolCallEnd, Timestamp: at, ToolCallID: id})
	}
	return out
}

func (m *Mapper) endCall(id string) {
	delete(m.calls, id)
	m.callOrder = dialect.Without(m.callOrder, id)
}

func (m *Mapper) endStep(at int64) []Event {
	if m.step == "" {
		return nil
	}
	name := m.step
	m.step = ""
	return []Event{{Type: StepFinished, Timestamp: at, StepName: name}}
}

func (m *Mapper) closeAll(at int64) []Event { return append(m.closeStreams(at), m.endStep(at)...) }

// toolContent is what a tool call's result message says: its output, or why there is none.
func toolContent(t *agent.ToolInfo) string {
	switch {
	case t.State == agent.ToolSuccess || t.State == "":
		return t.Output
	case t.Error != "" && t.Output != "":
		return t.State + ": " + t.Error + "\n" + t.Output
	case t.Error != "":
		return t.State + ": " + t.Error
	case t.Output != "":
		return t.State + ": " + t.Output
	}
	return t.State
}

// callEvents are a whole tool call at once: its start, its arguments, its end.
func callEvents(id, name, args, parent string, at int64) []Event {
	out := []Event{{Type: ToolCallStart, Timestamp: at, ToolCallID: id, ToolCallName: name, ParentMessageID: parent}}
	if args != "" {
		out = append(out, Event{Type: ToolCallArgs, Timestamp: at, ToolCallID: id, Delta: args})
	}
	return append(out, Event{Type: ToolCallEnd, Timestamp: at, ToolCallID: id})
}

func custom(name string, v any) Event {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		b = []byte(`{}`)
	}
	return Event{Type: Custom, Name: name, Value: b}
}
