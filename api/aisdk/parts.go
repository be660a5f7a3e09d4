package aisdk

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/dialect"
)

// Part is one UI message stream part (the AI SDK's UIMessageChunk). Which fields are set
// depends on Type; the JSON names are the protocol's.
type Part struct {
	Type string `json:"type"`

	ID        string `json:"id,omitempty"`
	Delta     string `json:"delta,omitempty"`
	MessageID string `json:"messageId,omitempty"`

	ToolCallID     string          `json:"toolCallId,omitempty"`
	ToolName       string          `json:"toolName,omitempty"`
	InputTextDelta string          `json:"inputTextDelta,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	Dynamic        bool            `json:"dynamic,omitempty"`
	ApprovalID     string          `json:"approvalId,omitempty"`
	Approved       *bool           `json:"approved,omitempty"`
	Reason         string          `json:"reason,omitempty"`

	ErrorText       string          `json:"errorText,omitempty"`
	FinishReason    string          `json:"finishReason,omitempty"`
	MessageMetadata *Metadata       `json:"messageMetadata,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	Transient       bool            `json:"transient,omitempty"`
}

// Metadata is the assistant message's metadata: which hookd run and session it is, and at the
// finish the run's token usage.
type Metadata struct {
	RequestID      string `json:"requestId,omitempty"`
	SessionKey     string `json:"sessionKey,omitempty"`
	Model          string `json:"model,omitempty"`
	GenerateReason string `json:"generateReason,omitempty"`
	Usage          *Usage `json:"usage,omitempty"`
}

// Usage is the run's token usage, in the AI SDK's names.
type Usage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	TotalTokens       int64 `json:"totalTokens"`
	ReasoningTokens   int64 `json:"reasoningTokens,omitempty"`
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
}

// Finish reasons of the protocol.
const (
	FinishStop        = "stop"
	FinishLength      = "length"
	FinishToolCalls   = "tool-calls"
	FinishError       = "error"
	FinishInterrupted = "interrupted"
	FinishOther       = "other"
)

// Mapper turns one response's share of a run's canonical events into UI message stream parts:
// from the run's start (or the resume this request made) to its end or its next pause. It is a
// pure mapping with the little memory the protocol needs (which parts are open, which calls are
// the client's, which were refused). Not safe for concurrent use.
type Mapper struct {
	sessionKey string
	client     map[string]bool // the client-side tools, by name
	// replay: the parts rebuild the message from nothing, so the outputs of client-side
	// calls, which the client once sent, are sent back to it.
	replay bool

	requestID string
	started   bool
	done      bool
	step      bool
	text      []string
	reasoning []string
	calls     map[string]string // open tool calls → their tool's name
	// held are the tool-input-available parts of client-side calls, sent only when the run hands
	// the call to the client (a pause waiting for its output): the AI SDK runs a client-side tool
	// (onToolCall) on that part, and the hooks decide after the model has made the call.
	held      map[string]Part
	refused   map[string]bool // calls a person refused: output-denied
	ranByUser map[string]bool // client-side calls: their output is the client's own
	result    *agent.ResultInfo
}

// NewMapper maps for the chat sessionKey; clientTools are the tools the client runs itself
// (their parts are static, tool-<name>; hookd's own are dynamic).
func NewMapper(sessionKey string, clientTools []string) *Mapper {
	m := &Mapper{sessionKey: sessionKey, client: map[string]bool{}, calls: map[string]string{}, held: map[string]Part{},
		refused: map[string]bool{}, ranByUser: map[string]bool{}}
	for _, n := range clientTools {
		m.client[n] = true
	}
	return m
}

// Replay is a mapper for the parts that rebuild the whole message of a run: NewMapper's, but
// the outputs of the client's own calls are sent back (the client holds nothing to keep them in).
func Replay(sessionKey string, clientTools []string) *Mapper {
	m := NewMapper(sessionKey, clientTools)
	m.replay = true
	return m
}

// Next is the mapper of the run's next response (a resume, or the end of a paused run): what
// m knows of the chat, nothing of the response m mapped.
func (m *Mapper) Next() *Mapper {
	n := NewMapper(m.sessionKey, nil)
	n.client, n.replay = m.client, m.replay
	return n
}

// Done reports whether the last event mapped ended the response (a finish part was written).
func (m *Mapper) Done() bool { return m.done }

// MessageID is the assistant message a run's parts belong to, the same across its pauses, so
// a resumed response continues the message the client holds.
func MessageID(requestID string) string { return "msg-" + requestID }

// Map returns the parts of one canonical event. Subagents' own events are not shown.
func (m *Mapper) Map(ev agent.Event) []Part {
	if m.done || ev.Source != "" {
		return nil
	}
	var out []Part
	if !m.started {
		m.started, m.requestID = true, ev.RunID
		out = append(out, Part{Type: "start", MessageID: MessageID(ev.RunID),
			MessageMetadata: &Metadata{RequestID: ev.RunID, SessionKey: m.sessionKey}})
	}
	p := func(x Part) { out = append(out, x) }
	switch ev.Kind {
	case agent.KindModelStarted:
		out = append(out, m.endStep()...)
		m.step = true
		p(Part{Type: "start-step"})
	case agent.KindModelEnded:
		out = append(out, m.closeBlocks()...)
		out = append(out, m.endStep()...)
	case agent.KindBlockStarted:
		switch ev.Block.Type {
		case agent.BlockText:
			m.text = append(m.text, ev.Block.ID)
			p(Part{Type: "text-start", ID: ev.Block.ID})
		case agent.BlockThinking:
			m.reasoning = append(m.reasoning, ev.Block.ID)
			p(Part{Type: "reasoning-start", ID: ev.Block.ID})
		case agent.BlockData:
			p(data("data-hookd-file", ev.Block.Data, false))
		}
	case agent.KindBlockDelta:
		switch {
		case ev.Block.Delta == "":
		case slices.Contains(m.text, ev.Block.ID):
			p(Part{Type: "text-delta", ID: ev.Block.ID, Delta: ev.Block.Delta})
		case slices.Contains(m.reasoning, ev.Block.ID):
			p(Part{Type: "reasoning-delta", ID: ev.Block.ID, Delta: ev.Block.Delta})
		}
	case agent.KindBlockEnded:
		out = append(out, m.closeBlock(ev.Block.ID)...)
	case agent.KindHint:
		p(data("data-hookd-hint", map[string]any{"text": ev.Block.Text, "source": ev.Block.HintSource}, false))
	case agent.KindToolCallStarted:
		m.calls[ev.Tool.CallID] = ev.Tool.Name
		p(Part{Type: "tool-input-start", ToolCallID: ev.Tool.CallID, ToolName: ev.Tool.Name, Dynamic: !m.client[ev.Tool.Name]})
	case agent.KindToolCallDelta:
		if _, open := m.calls[ev.Tool.CallID]; open && ev.Tool.ArgsDelta != "" {
			p(Part{Type: "tool-input-delta", ToolCallID: ev.Tool.CallID, InputTextDelta: ev.Tool.ArgsDelta})
		}
	case agent.KindToolCallEnded:
		if _, open := m.calls[ev.Tool.CallID]; open {
			delete(m.calls, ev.Tool.CallID)
			part := Part{Type: "tool-input-available", ToolCallID: ev.Tool.CallID, ToolName: ev.Tool.Name, Input: jsonOf(ev.Tool.Arguments),
				Dynamic: !m.client[ev.Tool.Name]}
			if m.client[ev.Tool.Name] {
				m.held[ev.Tool.CallID] = part // a hook may still deny it: the client must not run it yet
			} else {
				p(part)
			}
		}
	case agent.KindAsk:
		for _, a := range ev.Ask.Calls {
			p(Part{Type: "tool-approval-request", ApprovalID: a.AskID, ToolCallID: a.CallID})
		}
	case agent.KindAskResolved:
		for _, a := range ev.Answers {
			approved := a.Approved
			if !approved {
				m.refused[a.CallID] = true
			}
			p(Part{Type: "tool-approval-response", ApprovalID: a.AskID, Approved: &approved, Reason: a.Reason})
		}
	case agent.KindExternalResults:
		for _, r := range ev.Results {
			m.ranByUser[r.CallID] = true
		}
	case agent.KindToolResultEnded:
		switch {
		case !m.ranByUser[ev.Tool.CallID]:
			out = append(out, m.toolResult(ev.Tool)...)
		case m.replay:
			out = append(out, clientResult(ev.Tool))
		}
	case agent.KindResult:
		m.result = ev.Result
	case agent.KindCustom:
		if ev.Custom.Name == "state_updated" {
			p(Part{Type: "data-hookd-state", Data: ev.Custom.Value, Transient: true})
		} else {
			p(Part{Type: "data-" + ev.Custom.Name, Data: dialect.RawOrNull(ev.Custom.Value)})
		}
	case agent.KindStatus:
		p(data("data-hookd-status", ev.Status, true))
	case agent.KindToolEvent:
		p(data("data-hookd-tool-event", ev.ToolEvent, false))
	case agent.KindAttachment:
		p(data("data-hookd-attachment", ev.Attachment, false))
	case agent.KindMaxIters:
		p(data("data-hookd-max-iters", ev.MaxIters, false))
	case agent.KindAllDenied:
		p(data("data-hookd-all-denied", ev.Calls, false))
	case agent.KindStopRequested:
		p(data("data-hookd-stop-requested", ev.Stop, false))
	case agent.KindInputConsumed:
		p(data("data-hookd-input-consumed", ev.Input, false))
	case agent.KindSubagentExposed:
		p(data("data-hookd-subagent", ev.Subagent, false))
	case agent.KindSuspended:
		out = append(out, m.closeAll()...)
		reason := FinishOther
		for _, c := range ev.Suspend.PendingCalls {
			if c.External || c.State == "asking" {
				reason = FinishToolCalls
			}
			if c.External && c.State != "asking" {
				// The hooks let the call on, and the run waits for the client to run it.
				part, ok := m.held[c.CallID]
				if !ok { // made before this response (an approval's resume): told again, with its arguments as approved
					part = Part{Type: "tool-input-available", ToolCallID: c.CallID, ToolName: c.Name, Input: jsonOf(c.Arguments)}
				}
				delete(m.held, c.CallID)
				p(part)
			}
		}
		p(Part{Type: "finish", FinishReason: reason, MessageMetadata: &Metadata{RequestID: ev.RunID, GenerateReason: ev.Suspend.Reason}})
		m.done = true
	case agent.KindRunEnded:
		out = append(out, m.closeAll()...)
		out = append(out, m.end(ev)...)
		m.done = true
	}
	return out
}

func (m *Mapper) toolResult(t *agent.ToolInfo) []Part {
	switch {
	case t.State == agent.ToolSuccess || t.State == "":
		return []Part{{Type: "tool-output-available", ToolCallID: t.CallID, Output: jsonString(t.Output)}}
	case t.State == agent.ToolDenied && m.refused[t.CallID]:
		return []Part{{Type: "tool-output-denied", ToolCallID: t.CallID}}
	}
	text := t.State
	switch {
	case t.Error != "" && t.Output != "":
		text += ": " + t.Error + "\n" + t.Output
	case t.Error != "":
		text += ": " + t.Error
	case t.Output != "":
		text += ": " + t.Output
	}
	return []Part{{Type: "tool-output-error", ToolCallID: t.CallID, ErrorText: text}}
}

// clientResult is the output a client-side call's client sent, as the part it had: the
// runtime keeps it as text (outputText), so JSON text goes back as its JSON value and other
// text as a string.
func clientResult(t *agent.ToolInfo) Part {
	if t.State == agent.ToolError {
		return Part{Type: "tool-output-error", ToolCallID: t.CallID, ErrorText: t.Output}
	}
	out := json.RawMessage(t.Output)
	if !json.Valid(out) {
		out = jsonString(t.Output)
	}
	return Part{Type: "tool-output-available", ToolCallID: t.CallID, Output: out}
}

func (m *Mapper) end(ev agent.Event) []Part {
	e := ev.End
	md := &Metadata{RequestID: ev.RunID, Usage: usageOf(e.Usage)}
	if e.Usage != nil {
		md.Model = e.Usage.Model
	}
	switch e.Outcome {
	case agent.OutcomeFailed:
		return []Part{{Type: "error", ErrorText: e.ErrorCode + ": " + e.ErrorMessage},
			{Type: "finish", FinishReason: FinishError, MessageMetadata: md}}
	case agent.OutcomeInterrupted:
		return []Part{{Type: "finish", FinishReason: FinishInterrupted, MessageMetadata: md}}
	}
	reason := FinishStop
	if r := m.result; r != nil {
		md.GenerateReason = r.GenerateReason
		switch r.GenerateReason {
		case agent.ReasonModelStop:
		case agent.ReasonMaxIterations:
			reason = FinishLength
		default:
			reason = FinishOther
		}
	}
	return []Part{{Type: "finish", FinishReason: reason, MessageMetadata: md}}
}

func usageOf(u *agent.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.Total(),
		ReasoningTokens: u.ReasoningTokens, CachedInputTokens: u.CachedTokens}
}

func (m *Mapper) closeBlock(id string) []Part {
	switch {
	case slices.Contains(m.text, id):
		m.text = dialect.Without(m.text, id)
		return []Part{{Type: "text-end", ID: id}}
	case slices.Contains(m.reasoning, id):
		m.reasoning = dialect.Without(m.reasoning, id)
		return []Part{{Type: "reasoning-end", ID: id}}
	}
	return nil
}

// closeBlocks ends the text and reasoning parts a model call left open (it failed
// mid-stream). Its tool calls stay open: the runtime ends them after the call, with their
// final arguments.
func (m *Mapper) closeBlocks() []Part {
	var out []Part
	for len(m.text) > 0 {
		out = append(out, m.closeBlock(m.text[0])...)
	}
	for len(m.reasoning) > 0 {
		out = append(out, m.closeBlock(m.reasoning[0])...)
	}
	return out
}

// closeStreams ends everything still open at the response's end.
func (m *Mapper) closeStreams() []Part {
	out := m.closeBlocks()
	ids := make([]string, 0, len(m.calls))
	for id := range m.calls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		delete(m.calls, id)
		out = append(out, Part{Type: "tool-input-error", ToolCallID: id, ErrorText: "the model call ended before the call's arguments did"})
	}
	return out
}

func (m *Mapper) endStep() []Part {
	if !m.step {
		return nil
	}
	m.step = false
	return []Part{{Type: "finish-step"}}
}

func (m *Mapper) closeAll() []Part { return append(m.closeStreams(), m.endStep()...) }

// jsonOf is a tool call's arguments as JSON: as they are when they parse, else as a string.
func jsonOf(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	return jsonString(args)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func data(typ string, v any, transient bool) Part {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		b = []byte(`{}`)
	}
	return Part{Type: typ, Data: b, Transient: transient}
}
