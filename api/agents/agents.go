// Package agents lets the coding agents people already run — Claude Code, Codex, Gemini CLI,
// Cursor — through hookd's chain: each harness's own hook input in, that harness's own output out.
//
// One file per harness holds a pure mapping, from its hook input to a dispatcher event and from
// hookd's verdict to its output. An adapter decides nothing itself: the dispatcher decides, and
// where a harness cannot express a verdict the adapter picks the nearest answer that blocks, never
// one that lets through what hookd did not allow.
package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// Adapter maps one harness's hooks onto hookd's points and back.
type Adapter interface {
	// Kind is the harness's name in the route: claude-code, codex, gemini-cli, cursor.
	Kind() string
	// Point is the hookd point of one of the harness's events ("" when hookd has none).
	Point(event string) dispatcher.HookType
	// Map reads one hook input. For an event without a point only Event is set. An error on an
	// event with a point still returns the Mapped, so that the caller can answer it with a block.
	Map(in Input) (Mapped, error)
	// Enforce is the verdict on m as the harness enforces it: an ask it cannot put to a person, a
	// rewrite it cannot apply, is a block whose reason says so. Dispatches record this (Event.
	// Enforce), and Answer renders it.
	Enforce(m Mapped, v Verdict) Verdict
	// Answer renders hookd's verdict on m, as Enforce has it, as the harness's output body; nil
	// means an empty body.
	Answer(m Mapped, v Verdict) []byte
}

// Kinds lists the harnesses in the order the docs give them.
var Kinds = []string{ClaudeCode, Codex, GeminiCLI, Cursor}

// The harness kinds.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
	GeminiCLI  = "gemini-cli"
	Cursor     = "cursor"
)

var adapters = map[string]Adapter{
	ClaudeCode: claudeCode{},
	Codex:      codex{},
	GeminiCLI:  geminiCLI{},
	Cursor:     cursor{},
}

// points are the events of each harness that map onto a hookd point.
var points = map[string]map[string]dispatcher.HookType{
	ClaudeCode: claudePoints, Codex: codexPoints, GeminiCLI: geminiPoints, Cursor: cursorPoints}

// Events lists the events of kind that map onto a hookd point, sorted: what an installer hooks.
func Events(kind string) []string {
	out := make([]string, 0, len(points[kind]))
	for e := range points[kind] {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// For returns the adapter of kind, or nil.
func For(kind string) Adapter { return adapters[kind] }

// Input is one hook input as the harness sent it: its event name and its top-level fields.
type Input struct {
	Event  string
	fields map[string]json.RawMessage
}

// ErrNotHookInput is returned by ParseInput for a body that is not a JSON object naming its event.
var ErrNotHookInput = errors.New("body is not a hook input: a JSON object with hook_event_name")

// ParseInput reads a hook input body. It reads the top-level fields as json.Unmarshal into a
// map of raw values would (the last of a key sent twice kept), without decoding them.
func ParseInput(body []byte) (Input, error) {
	i := hookdtype.SkipSpace(body, 0)
	if !hookdtype.Valid(body) || body[i] != '{' {
		return Input{}, ErrNotHookInput
	}
	in := Input{fields: map[string]json.RawMessage{}}
	for i = hookdtype.SkipSpace(body, i+1); body[i] != '}'; {
		end, decode := hookdtype.StringEnd(body, i)
		k := shared(body[i:end], decode)
		start := hookdtype.SkipSpace(body, hookdtype.SkipSpace(body, end)+1) // after ':'
		i = hookdtype.ValueEnd(body, start)
		in.fields[k] = body[start:i:i]
		if i = hookdtype.SkipSpace(body, i); body[i] == ',' {
			i = hookdtype.SkipSpace(body, i+1)
		}
	}
	if event := in.fields["hook_event_name"]; len(event) > 0 && event[0] == '"' {
		_, decode := hookdtype.StringEnd(event, 0)
		in.Event = shared(event, decode)
	}
	if in.Event == "" {
		return Input{}, ErrNotHookInput
	}
	return in, nil
}

// shared is the content of the JSON string raw (quotes included; decode as StringEnd says): the
// string of names when it is one of them, else a copy.
func shared(raw []byte, decode bool) string {
	if !decode {
		if s, ok := names[string(raw[1:len(raw)-1])]; ok {
			return s
		}
	}
	return hookdtype.StringContent(raw, decode)
}

// names are the harnesses' event names and the top-level fields of their hook inputs (every
// fixture's, TestFixtureNamesShared): ParseInput takes these from here instead of copying each
// out of every body, a third of what the adapter allocated on a call.
var names = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{"attachments", "command", "composer_mode", "content", "conversation_id",
		"cursor_version", "cwd", "duration", "duration_ms", "edits", "error", "error_message", "failure_type",
		"file_path", "generation_id", "hook_event_name", "is_background_agent", "is_interrupt",
		"last_assistant_message", "llm_request", "loop_count", "message", "model", "notification_type", "output",
		"permission_mode", "prompt", "prompt_response", "reason", "result_json", "session_id", "source", "status",
		"stop_hook_active", "timestamp", "tool_input", "tool_name", "tool_output", "tool_response", "tool_use_id",
		"transcript_path", "turn_id", "url", "user_email", "workspace_roots"} {
		m[name] = name
	}
	for _, events := range points {
		for e := range events {
			m[e] = e
		}
	}
	for _, events := range knownEvents {
		for e := range events {
			m[e] = e
		}
	}
	return m
}()

// topLevelString is the string value of the top-level member name of the JSON object b begins,
// the last one when it comes twice (as ParseInput reads it), as far as b goes: b may be cut
// anywhere (a body over the limit), so every step checks its bounds.
func topLevelString(b []byte, name string) (value string, found bool) {
	depth, key := 0, false // key: the next string at depth 1 is a member's name
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
			key = depth == 1 && b[i] == '{'
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		case '"':
			end := quotedEnd(b, i)
			if end < 0 {
				return value, found
			}
			if depth != 1 || !key {
				i = end - 1
				continue
			}
			key = false
			k, _ := hookdtype.Unquote(b[i:end])
			j := hookdtype.SkipSpace(b, end)
			if j >= len(b) || b[j] != ':' {
				return value, found
			}
			if v := hookdtype.SkipSpace(b, j+1); k == name && v < len(b) && b[v] == '"' {
				if vend := quotedEnd(b, v); vend > 0 {
					value, found = hookdtype.Unquote(b[v:vend])
				}
			}
			i = j
		}
	}
	return value, found
}

// quotedEnd is the index after the JSON string that starts at b[i], or -1 when b ends first.
func quotedEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// str is a string field ("" when absent or not a string).
func (in Input) str(name string) string {
	raw := in.fields[name]
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	_, decode := hookdtype.StringEnd(raw, 0)
	return hookdtype.StringContent(raw, decode)
}

// need is a string field that must be there.
func (in Input) need(name string) (string, error) {
	if s := in.str(name); s != "" {
		return s, nil
	}
	return "", &FieldError{Event: in.Event, Field: name}
}

// raw is a field's JSON ("" when absent).
func (in Input) raw(name string) json.RawMessage {
	if r, ok := in.fields[name]; ok && string(r) != "null" {
		return r
	}
	return nil
}

// FieldError names a field a hook input lacks, or holds in a shape hookd cannot read.
type FieldError struct {
	Event, Field string
	// Want is the shape the field must have ("" when it is missing).
	Want string
}

func (e *FieldError) Error() string {
	if e.Want != "" {
		return fmt.Sprintf("%s input: %s must be %s", e.Event, e.Field, e.Want)
	}
	return fmt.Sprintf("%s input: %s is required", e.Event, e.Field)
}

// needArgs checks a pre-tool call's arguments, args (the value of field), which must be a JSON
// object: every harness sends one, even for a tool without parameters, and a call whose arguments
// are missing or of another shape would be decided on nothing (a rule on args.command never
// matching, the call let through) rather than on what the tool will be given.
func needArgs(in Input, field string, args json.RawMessage) error {
	if len(args) == 0 {
		return &FieldError{Event: in.Event, Field: field}
	}
	if args[0] != '{' {
		return &FieldError{Event: in.Event, Field: field, Want: "a JSON object (the tool's arguments)"}
	}
	return nil
}

// Mapped is what an adapter makes of one hook input.
type Mapped struct {
	Event string              // the harness's event name
	Point dispatcher.HookType // "" when hookd has no point for the event
	// Session is the harness's own session id; Cwd and PermissionMode as it reported them.
	Session, Cwd, PermissionMode string
	// Context is the point's context (*dispatcher.PreToolUseContext, …) without its CodingAgent,
	// which the caller adds.
	Context any
	// ToolInput is the tool's arguments as the harness sent them (tool points).
	ToolInput json.RawMessage
	// DecidedBy is the harness's other event that decides or records this same action, when the
	// harness fires two for it: with that one installed too (ToolEventsHeader), this one is
	// answered with nothing to say and not dispatched, so the action is decided once; otherwise
	// it is dispatched as mapped.
	DecidedBy string
}

// Verdict is hookd's answer to a mapped event.
type Verdict struct {
	// Decision is allow, deny, ask or modify for an interceptive point; "" for an observational
	// one (queued) or when hookd has no point.
	Decision string
	Reason   string
	// Modified is the new value of a modify: the tool's arguments as JSON, or the new prompt.
	Modified *string
	// Hint is what the hooks asked to be shown to the model beside their verdict, their hints in
	// chain order; Notice is what their tool events ask to be shown to the person (an approval
	// URL on a deny, say). Each adapter puts them where its harness has a place for them
	// (docs/agents.md, "Extras").
	Hint, Notice string
}

// ExtrasOf is the verdict's hint and notice made of a decision's extras, and the number of custom
// events among them, which no harness has a place for.
func ExtrasOf(xs []dispatcher.Extra) (hint, notice string, events int) {
	var hints, notices []string
	for _, x := range xs {
		if x.Hint != "" {
			hints = append(hints, x.Hint)
		}
		if x.ToolEvent != nil && x.ToolEvent.UserMessage != "" {
			notices = append(notices, x.ToolEvent.UserMessage)
		}
		events += len(x.Events)
	}
	return strings.Join(hints, "\n\n"), strings.Join(notices, "\n\n"), events
}

// with is text followed by more, a blank line between them; either may be empty.
func with(text, more string) string {
	if text == "" || more == "" {
		return text + more
	}
	return text + "\n\n" + more
}

// Decisions a verdict may carry besides the dispatcher's allow, deny and modify.
const Ask = "ask"

// blocks says whether v stops the harness's action.
func (v Verdict) blocks() bool { return v.Decision == dispatcher.Deny || v.Decision == Ask }

// reason is v's reason, never empty (nor only spaces) for a block: Codex throws out a deny or a
// block whose reason is blank, and runs the call or submits the prompt.
func (v Verdict) reason() string {
	if strings.TrimSpace(v.Reason) != "" {
		return v.Reason
	}
	switch v.Decision {
	case Ask:
		return "hookd: this call needs a person's approval"
	case dispatcher.Deny:
		return "hookd: denied"
	}
	return ""
}

// askAsBlock is the reason of an ask that the harness cannot ask: it blocks what (the call, the
// prompt), saying why.
func (v Verdict) askAsBlock(harness, what string) string {
	return v.reason() + " (" + harness + " cannot ask from this hook, so hookd blocks the " + what + " until a person allows it)"
}

// rewriteAsBlock is the reason of a modify that the harness cannot apply: it blocks, carrying the
// rewrite, so the agent can try again with it.
func rewriteAsBlock(harness, what string, v Verdict) string {
	return fmt.Sprintf("hookd rewrote the %s, which %s cannot apply here, so the original is blocked; rewritten: %s",
		what, harness, *v.Modified)
}

// block is v as a deny with reason, its hint and notice kept.
func (v Verdict) block(reason string) Verdict {
	v.Decision, v.Reason, v.Modified = dispatcher.Deny, reason, nil
	return v
}

// promptEnforced is a prompt hook's verdict as every harness enforces it: anything but allow
// refuses the prompt, since no harness can ask about or rewrite a prompt from its hook.
func promptEnforced(v Verdict, harness string) Verdict {
	switch {
	case v.Decision == Ask:
		return v.block(v.askAsBlock(harness, "prompt"))
	case v.Decision == dispatcher.Deny:
		return v.block(v.reason())
	case v.Decision == dispatcher.Modify && v.Modified != nil:
		return v.block(rewriteAsBlock(harness, "prompt", v))
	}
	return v
}

// modifiedObject is a modify's new arguments as a JSON object, or nil when they are not one.
func modifiedObject(v Verdict) json.RawMessage {
	if v.Modified == nil {
		return nil
	}
	b := bytes.TrimSpace([]byte(*v.Modified))
	if len(b) == 0 || b[0] != '{' || !hookdtype.Valid(b) {
		return nil
	}
	return b
}

// keepsKeys says whether the object next has every top-level key of orig: a harness that merges a
// rewrite into the original arguments would otherwise keep a key hookd removed.
func keepsKeys(orig, next json.RawMessage) bool {
	var o, n map[string]json.RawMessage
	if json.Unmarshal(orig, &o) != nil {
		return len(bytes.TrimSpace(orig)) == 0
	}
	if json.Unmarshal(next, &n) != nil {
		return false
	}
	for k := range o {
		if _, ok := n[k]; !ok {
			return false
		}
	}
	return true
}

// encode renders an answer; the answers are maps and structs of strings, which always encode.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// The answers of every call a policy decides, and the arguments Cursor's tool events are given,
// are written by hand below, as json.Marshal writes them (TestHandWrittenJSONIsMarshals): its
// reflection was a fifth of what the adapter itself spent on a denied call.

// appendMember appends the member name of an object being written, as json.Marshal writes a
// string field tagged omitempty: nothing when value is empty.
func appendMember(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(append(append(b, '"'), name...), `":`...)
	return hookdtype.AppendJSONString(b, value)
}

// stringObject is the JSON object of names and their string values, given in pairs, as
// json.Marshal writes a map[string]string of them: the names must come sorted, as its keys do.
func stringObject(pairs ...string) json.RawMessage {
	b := []byte{'{'}
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = hookdtype.AppendJSONString(append(hookdtype.AppendJSONString(b, pairs[i]), ':'), pairs[i+1])
	}
	return append(b, '}')
}

// WithAgent adds the coding agent's fields to an event context built by Map.
func WithAgent(c any, a *dispatcher.CodingAgent) any {
	switch c := c.(type) {
	case *dispatcher.PreToolUseContext:
		c.CodingAgent = a
	case *dispatcher.PostToolUseContext:
		c.CodingAgent = a
	case *dispatcher.UserMessageContext:
		c.CodingAgent = a
	case *dispatcher.SessionStartContext:
		c.CodingAgent = a
	case *dispatcher.AgentCompletionContext:
		c.CodingAgent = a
	}
	return c
}

// SessionID is the numeric hookd session of a harness session: stable for one principal, one
// harness and one session id, and different across them, so one user's sessions never meet
// another's. It fits in 53 bits, so that JavaScript receivers read the envelope's sessionId exactly.
func SessionID(kind string, principal *int64, external string) int64 {
	var buf [128]byte // the hashed text of most sessions, without an allocation
	b := append(append(buf[:0], kind...), 0)
	if principal != nil {
		b = strconv.AppendInt(b, *principal, 10)
	}
	sum := sha256.Sum256(append(append(b, 0), external...))
	id := int64(binary.BigEndian.Uint64(sum[:]) >> 11)
	if id == 0 {
		id = 1
	}
	return id
}

// Known says whether event is one of kind's hook events as hookd knows them: one it maps to a
// point, or a documented one it answers with nothing to say.
func Known(kind, event string) bool {
	a := For(kind)
	return a != nil && (a.Point(event) != "" || knownEvents[kind][event])
}

// Interceptive says whether hookd decides the event of kind (a pre-tool or prompt point), which the
// command-hook forwarder must block when the daemon cannot be asked.
func Interceptive(kind, event string) bool {
	a := For(kind)
	return a != nil && a.Point(event).Interceptive()
}

// humanPrompt is the trigger source of a prompt typed into a coding agent.
var humanPrompt = dispatcher.TriggerSource{SourceType: dispatcher.SourceHuman}

// toolPoint builds a pre_tool_use context.
func toolPoint(name, callID string, args json.RawMessage) *dispatcher.PreToolUseContext {
	return &dispatcher.PreToolUseContext{ToolName: name, ToolCallID: callID, Arguments: dispatcher.Value(args)}
}

// lifecycle sets the context of the points every harness reads alike: a prompt in "prompt", a
// session's start with its "source", a turn's or session's end with its "model" and (Cursor) its
// "status".
func lifecycle(kind string, m *Mapped, in Input) error {
	switch m.Point {
	case dispatcher.UserMessage:
		prompt, err := in.need("prompt")
		if err != nil {
			return err
		}
		m.Context = &dispatcher.UserMessageContext{UserInput: prompt, ChatMode: kind, TriggerSource: humanPrompt}
	case dispatcher.SessionStart:
		src := in.str("source")
		m.Context = &dispatcher.SessionStartContext{NewSession: src == "" || src == "startup"}
	case dispatcher.AgentCompletion:
		c := &dispatcher.AgentCompletionContext{Succeeded: true, Model: in.str("model"),
			TriggerSourceType: dispatcher.SourceHuman, RequestID: m.Session, AgentName: kind}
		if s := in.str("status"); s != "" && s != "completed" {
			msg := "agent loop ended: " + s
			c.Succeeded, c.ErrorMessage = false, &msg
		}
		m.Context = c
	}
	return nil
}
