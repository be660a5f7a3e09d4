package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hookd/hookd/agent"
)

// Formats of the document: createdAt is ISO-8601 UTC with microseconds; Msg.timestamp is
// yyyy-MM-dd HH:mm:ss.SSS in the server's time zone (as the Java implementation writes it).
const (
	CreatedAtLayout = "2006-01-02T15:04:05.000000Z"
	TimestampLayout = "2006-01-02 15:04:05.000"
)

// Generate reasons this package adds to the runtime's own (agent.Reason*), all from the
// document's enum.
const (
	reasonReasoningStop = "REASONING_STOP_REQUESTED"
	generateReasonKey   = "agentscope_generate_reason"
)

// Names of the CUSTOM events that carry canonical events with no Harness type of their own.
const (
	CustomAttachment    = "attachment"
	CustomStatus        = "status"
	CustomToolEvent     = "tool_event"
	CustomInputConsumed = "input_consumed"
)

// Map turns one canonical event into the Harness events it stands for: none (resumed), one, or
// several (a failed run.ended is an AGENT_RESULT carrying the error and an AGENT_END; a pause
// the document has no event for is a REQUEST_STOP and an AGENT_END). sessionKey is the client's
// session id, reported by AGENT_START. Map is pure: the same event always gives the same events,
// ids included (the canonical id, and for a second and later event a hash of it and the index).
func Map(ev agent.Event, sessionKey string) []Event {
	m := mapper{ev: ev}
	switch ev.Kind {
	case agent.KindRunStarted:
		e := m.base(TypeAgentStart)
		e.SessionID, e.Role, e.Name = sessionKey, "assistant", "assistant"
		if ev.Run != nil {
			if ev.Run.AgentName != "" {
				e.Name = ev.Run.AgentName
			}
			if ev.Source != "" || e.SessionID == "" {
				e.SessionID = ev.Run.SessionKey // a subagent's own session
			}
		}
		m.add(e)
	case agent.KindModelStarted:
		m.add(m.base(TypeModelCallStart))
	case agent.KindModelEnded:
		e := m.base(TypeModelCallEnd)
		e.Usage = usageOf(ev.Usage)
		if e.Usage == nil {
			e.Usage = &Usage{}
		}
		m.add(e)
	case agent.KindBlockStarted, agent.KindBlockDelta, agent.KindBlockEnded:
		m.block()
	case agent.KindHint:
		if ev.Block != nil {
			e := m.base(TypeHintBlock)
			e.BlockID, e.HintSource, e.Hint = ev.Block.ID, ev.Block.HintSource, ptr(ev.Block.Text)
			m.add(e)
		}
	case agent.KindToolCallStarted, agent.KindToolCallDelta, agent.KindToolCallEnded,
		agent.KindToolResultStarted, agent.KindToolResultDelta, agent.KindToolResultEnded:
		m.tool()
	case agent.KindMaxIters:
		if ev.MaxIters != nil {
			e := m.base(TypeExceedMaxIters)
			e.MaxIters, e.CurrentIter = ptr(ev.MaxIters.MaxIters), ptr(ev.MaxIters.CurrentIter)
			m.add(e)
		}
	case agent.KindResult:
		if ev.Result != nil {
			m.add(m.result(resultMsg(ev)))
		}
	case agent.KindRunEnded:
		if ev.End != nil && ev.End.Outcome == agent.OutcomeFailed {
			m.add(m.result(failureMsg(ev)))
		}
		m.add(m.base(TypeAgentEnd))
	case agent.KindSuspended:
		m.suspended()
	case agent.KindAsk:
		if ev.Ask != nil {
			e := m.base(TypeRequireUserConfirm)
			for _, c := range ev.Ask.Calls {
				e.ToolCalls = append(e.ToolCalls, toolUse(c.CallID, c.Name, c.Arguments, "asking"))
			}
			m.add(e)
		}
	case agent.KindAskResolved:
		e := m.base(TypeUserConfirmResult)
		for _, a := range ev.Answers {
			args := a.Arguments
			if a.Input != "" {
				args = a.Input // what the person edited is what runs
			}
			cr := ConfirmResult{Confirmed: a.Approved, ToolCall: toolUse(a.CallID, a.Name, args, "asking")}
			for _, r := range a.Rules {
				cr.Rules = append(cr.Rules, Rule{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior, Source: r.Source})
			}
			e.ConfirmResults = append(e.ConfirmResults, cr)
		}
		m.add(e)
	case agent.KindAllDenied:
		e := m.baseNoReply(TypeAllToolsDenied)
		for _, c := range ev.Calls {
			e.DeniedToolCalls = append(e.DeniedToolCalls, toolUse(c.CallID, c.Name, c.Arguments, "asking"))
		}
		m.add(e)
	case agent.KindExternalCalls:
		e := m.base(TypeRequireExternalExecution)
		for _, c := range ev.Calls {
			e.ToolCalls = append(e.ToolCalls, toolUse(c.CallID, c.Name, c.Arguments, "pending"))
		}
		m.add(e)
	case agent.KindExternalResults:
		e := m.base(TypeExternalExecutionResult)
		for _, r := range ev.Results {
			state := r.State
			if state == "" {
				state = agent.ToolSuccess
			}
			// The blocks as the client sent them; a result another dialect submitted is its text.
			var output []ContentBlock
			if len(r.Blocks) == 0 || json.Unmarshal(r.Blocks, &output) != nil || output == nil {
				output = []ContentBlock{TextBlock(r.Output)}
			}
			e.ToolResults = append(e.ToolResults, ToolResultBlock{ID: r.CallID, Name: r.Name,
				Output: output, Metadata: map[string]any{}, State: state})
		}
		m.add(e)
	case agent.KindStopRequested:
		if ev.Stop != nil {
			m.add(m.stop(ev.Stop.Reason, ev.Stop.GenerateReason))
		}
	case agent.KindSubagentExposed:
		if ev.Subagent != nil {
			e := m.baseNoReply(TypeSubagentExposed)
			e.SubagentID, e.AgentID, e.SessionID, e.Label = ev.Subagent.SubagentID, ev.Subagent.AgentID, ev.Subagent.SessionID, ev.Subagent.Label
			m.add(e)
		}
	case agent.KindCustom:
		if ev.Custom != nil {
			m.custom(ev.Custom.Name, ev.Custom.Value)
		}
	case agent.KindAttachment:
		m.customOf(CustomAttachment, ev.Attachment)
	case agent.KindStatus:
		m.customOf(CustomStatus, ev.Status)
	case agent.KindToolEvent:
		m.customOf(CustomToolEvent, ev.ToolEvent)
	case agent.KindInputConsumed:
		m.customOf(CustomInputConsumed, ev.Input)
	case agent.KindResumed:
		// §6: a resumed response is a response of its own and opens with AGENT_START (the same
		// replyId); what the pause waited for (USER_CONFIRM_RESULT, …) follows.
		e := m.base(TypeAgentStart)
		e.SessionID, e.Role, e.Name = sessionKey, "assistant", "assistant"
		m.add(e)
	}
	return m.out
}

type mapper struct {
	ev  agent.Event
	out []Event
}

// base is an event of type typ with the common fields and the turn's replyId.
func (m *mapper) base(typ string) Event {
	e := m.baseNoReply(typ)
	e.ReplyID = m.ev.ReplyID
	return e
}

// baseNoReply is an event of a type whose section has no replyId.
func (m *mapper) baseNoReply(typ string) Event {
	return Event{Type: typ, CreatedAt: CreatedAt(m.ev.At), Source: m.ev.Source}
}

// add appends e with its id: the canonical id for the first event, a hash for the others.
func (m *mapper) add(e Event) {
	e.ID = DerivedID(m.ev, len(m.out))
	m.out = append(m.out, e)
}

func (m *mapper) block() {
	b := m.ev.Block
	if b == nil {
		return
	}
	var prefix string
	switch b.Type {
	case agent.BlockThinking:
		prefix = "THINKING_BLOCK_"
	case agent.BlockText:
		prefix = "TEXT_BLOCK_"
	case agent.BlockData:
		prefix = "DATA_BLOCK_"
	default:
		return
	}
	var e Event
	switch m.ev.Kind {
	case agent.KindBlockStarted:
		e = m.base(prefix + "START")
	case agent.KindBlockDelta:
		e = m.base(prefix + "DELTA")
		e.Delta = ptr(b.Delta)
	default:
		e = m.base(prefix + "END")
	}
	e.BlockID = b.ID
	m.add(e)
}

func (m *mapper) tool() {
	t := m.ev.Tool
	if t == nil {
		return
	}
	ev := func(typ string) Event {
		e := m.base(typ)
		e.ToolCallID, e.ToolCallName = t.CallID, t.Name
		return e
	}
	switch m.ev.Kind {
	case agent.KindToolCallStarted:
		m.add(ev(TypeToolCallStart))
	case agent.KindToolCallDelta:
		e := ev(TypeToolCallDelta)
		e.Delta = ptr(t.ArgsDelta)
		m.add(e)
	case agent.KindToolCallEnded:
		m.add(ev(TypeToolCallEnd))
	case agent.KindToolResultStarted:
		m.add(ev(TypeToolResultStart))
	case agent.KindToolResultDelta:
		if t.OutputDelta != "" || t.Data == nil {
			e := ev(TypeToolResultTextDelta)
			e.Delta = ptr(t.OutputDelta)
			m.add(e)
		}
		if t.Data != nil {
			e := ev(TypeToolResultDataDelta)
			b := dataBlock(*t.Data)
			e.Data = &b
			m.add(e)
		}
	case agent.KindToolResultEnded:
		if t.State != agent.ToolSuccess && t.State != "" && t.Output == "" && t.Error != "" {
			// A call that did not run (denied, failed, interrupted) streamed no output: its
			// reason is its text, so a client shows why next to state: error.
			d := ev(TypeToolResultTextDelta)
			d.Delta = ptr(t.Error)
			m.add(d)
		}
		e := ev(TypeToolResultEnd)
		e.State = t.State
		if e.State == "" {
			e.State = agent.ToolSuccess
		}
		m.add(e)
	}
}

func (m *mapper) result(msg Msg) Event {
	e := m.baseNoReply(TypeAgentResult)
	e.Result = &msg
	return e
}

// suspended ends the response of a paused turn: the pause's own event (REQUIRE_USER_CONFIRM,
// REQUIRE_EXTERNAL_EXECUTION, REQUEST_STOP) came before; pauses the document has no event for
// become a REQUEST_STOP with the matching generate reason. AGENT_END closes the response.
func (m *mapper) suspended() {
	s := m.ev.Suspend
	if s == nil {
		s = &agent.SuspendInfo{}
	}
	generate := agent.ReasonMiddleware
	switch s.Reason {
	case agent.SuspendPermissionAsk:
		generate = agent.ReasonPermission
	case agent.SuspendExternalExecution:
		generate = agent.ReasonToolSuspended
	case agent.SuspendRequestStop:
	case agent.SuspendManual:
		generate = reasonReasoningStop
		m.add(m.stop(orDefault(s.Message, "suspended by the user"), generate))
	case agent.SuspendShutdown:
		generate = agent.ReasonInterrupted
		m.add(m.stop(orDefault(s.Message, "the daemon stopped"), generate))
	case agent.SuspendAsyncTool:
		generate = agent.ReasonToolSuspended
		m.add(m.stop(orDefault(s.Message, "waiting for an asynchronous tool"), generate))
	default:
		m.add(m.stop(orDefault(s.Message, "paused: "+s.Reason), generate))
	}
	// §6: every response ends AGENT_RESULT → AGENT_END, a paused one with the answer so far and
	// why it stopped.
	msg := Msg{ID: uuidOf(hashHex(m.ev.ID + "/msg")), Role: "ASSISTANT", Content: []ContentBlock{},
		Metadata: map[string]any{generateReasonKey: generate}, Timestamp: Timestamp(m.ev.At)}
	if s.Answer != "" {
		msg.Content = append(msg.Content, TextBlock(s.Answer))
	}
	m.add(m.result(msg))
	m.add(m.base(TypeAgentEnd))
}

func (m *mapper) stop(reason, generate string) Event {
	e := m.baseNoReply(TypeRequestStop)
	e.Reason, e.GenerateReason = orDefault(reason, "stop requested"), orDefault(generate, agent.ReasonMiddleware)
	return e
}

func (m *mapper) custom(name string, value json.RawMessage) {
	e := m.baseNoReply(TypeCustom)
	e.Name = name
	if v := bytes.TrimSpace(value); len(v) > 0 && !bytes.Equal(v, []byte("null")) && json.Valid(v) {
		e.Value = append(json.RawMessage(nil), v...)
	}
	m.add(e)
}

func (m *mapper) customOf(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	m.custom(name, b)
}

// resultMsg is the Msg of a run's final answer.
func resultMsg(ev agent.Event) Msg {
	r := ev.Result
	msg := Msg{ID: r.MsgUUID, Role: "ASSISTANT", Content: []ContentBlock{},
		Metadata: map[string]any{generateReasonKey: orDefault(r.GenerateReason, agent.ReasonModelStop)},
		Usage:    usageOf(r.Usage)}
	if msg.ID == "" {
		msg.ID = uuidOf(hashHex(ev.ID + "/msg"))
	}
	if r.Name != "" {
		msg.Name = ptr(r.Name)
	}
	if r.Text != "" {
		msg.Content = append(msg.Content, TextBlock(r.Text))
	}
	for _, d := range r.Data {
		msg.Content = append(msg.Content, dataBlock(d))
	}
	at := r.At
	if at.IsZero() {
		at = ev.At
	}
	msg.Timestamp = Timestamp(at)
	return msg
}

// failureMsg is the Msg that reports a failed run: its content is the error, its generate
// reason INTERRUPTED, and metadata.error has the runtime's code, message and recoverability.
func failureMsg(ev agent.Event) Msg {
	end := ev.End
	text := end.ErrorMessage
	if text == "" {
		text = "the run failed: " + orDefault(end.ErrorCode, "unknown error")
	}
	return Msg{ID: uuidOf(hashHex(ev.ID + "/msg")), Role: "ASSISTANT", Content: []ContentBlock{TextBlock(text)},
		Metadata: map[string]any{generateReasonKey: agent.ReasonInterrupted,
			"error": map[string]any{"code": end.ErrorCode, "message": end.ErrorMessage, "recoverable": end.Recoverable}},
		Timestamp: Timestamp(ev.At)}
}

func usageOf(u *agent.Usage) *Usage {
	if u == nil {
		return nil
	}
	return &Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
		Time: math.Round(u.Seconds*1000) / 1000, TotalTokens: u.InputTokens + u.OutputTokens}
}

// dataBlock is binary content as a `data` block: base64 inline, else by URL.
func dataBlock(d agent.DataContent) ContentBlock {
	b := ContentBlock{Type: BlockData, ID: d.ID, Name: d.Name}
	if d.Base64 == "" && d.URL != "" {
		b.Source = &Source{Type: "url", URL: d.URL, MimeType: d.MediaType}
	} else {
		b.Source = &Source{Type: "base64", MediaType: d.MediaType, Data: d.Base64}
	}
	if !isHex32(b.ID) {
		b.ID = hashHex(d.ID + "\x00" + d.Name + "\x00" + d.URL + "\x00" + d.Base64)
	}
	return b
}

// toolUse is a ToolUseBlock of arguments text: an object is the input; anything else (arguments
// the model broke) leaves input empty and is kept as the raw content.
func toolUse(id, name, args, state string) ToolUseBlock {
	tu := ToolUseBlock{ID: id, Name: name, Input: json.RawMessage(`{}`), Metadata: map[string]any{}, State: state}
	var buf bytes.Buffer
	if t := bytes.TrimSpace([]byte(args)); len(t) > 0 && t[0] == '{' && json.Compact(&buf, t) == nil {
		tu.Input = buf.Bytes()
	} else if args != "" {
		tu.Content = ptr(args)
	}
	return tu
}

// CreatedAt formats an event time as the document does: 2026-09-18T02:30:45.123456Z.
func CreatedAt(t time.Time) string { return t.UTC().Format(CreatedAtLayout) }

// Timestamp formats a message time: 2026-09-18 10:30:48.200, in the server's time zone.
func Timestamp(t time.Time) string { return t.In(time.Local).Format(TimestampLayout) }

// DerivedID is the id of the i-th Harness event of canonical event ev: its own 32-hex id for the
// first, a hash of it and i for the others (stable across replays).
func DerivedID(ev agent.Event, i int) string {
	base := ev.ID
	if !isHex32(base) { // an event made outside the runtime: derive from what identifies it
		base = hashHex(fmt.Sprintf("%s\x00%d\x00%s\x00%s\x00%d", ev.RunID, ev.Seq, ev.Kind, ev.Source, ev.At.UnixNano()))
	}
	if i == 0 {
		return base
	}
	return hashHex(base + "/" + strconv.Itoa(i))
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// uuidOf formats 32 hex digits as a UUID.
func uuidOf(id string) string {
	h := id
	if !isHex32(h) {
		h = hashHex(id)
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// DataOf is the binary content of blocks (image, audio, video, data blocks with a source), as
// the runtime streams it.
func DataOf(blocks []ContentBlock) []agent.DataContent {
	var out []agent.DataContent
	for _, b := range blocks {
		src := b.Source
		if src == nil || (b.Type != BlockImage && b.Type != BlockAudio && b.Type != BlockVideo && b.Type != BlockData) {
			continue
		}
		d := agent.DataContent{ID: b.ID, Name: b.Name, MediaType: src.MediaType, Base64: src.Data}
		if src.Type == "url" {
			d.MediaType, d.Base64, d.URL = src.MimeType, "", src.URL
		}
		out = append(out, d)
	}
	return out
}
