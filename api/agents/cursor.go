package agents

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// cursor is Cursor's agent hooks: camelCase events, conversation_id as the session, and a
// permission answer (allow, deny, ask; hookd sends no updated_input, which Cursor applies only
// with an allow).
type cursor struct{}

var cursorPoints = map[string]dispatcher.HookType{
	"preToolUse":           dispatcher.PreToolUse,
	"beforeShellExecution": dispatcher.PreToolUse,
	"beforeMCPExecution":   dispatcher.PreToolUse,
	"beforeReadFile":       dispatcher.PreToolUse,
	"postToolUse":          dispatcher.PostToolUse,
	"postToolUseFailure":   dispatcher.PostToolUse,
	"afterShellExecution":  dispatcher.PostToolUse,
	"afterMCPExecution":    dispatcher.PostToolUse,
	"beforeSubmitPrompt":   dispatcher.UserMessage,
	"sessionStart":         dispatcher.SessionStart,
	"stop":                 dispatcher.AgentCompletion,
	"sessionEnd":           dispatcher.AgentCompletion,
}

// The tool names hookd gives Cursor's tool-specific events (Cursor's own preToolUse matcher names),
// and the name, or the "MCP:" prefix of the name, of an MCP tool at preToolUse and postToolUse.
const (
	cursorShell = "Shell"
	cursorRead  = "Read"
	cursorMCP   = "MCP"
)

// cursorDecidedBy names, for the generic tool events, the tool-specific event that Cursor also fires
// for the same call: that one decides or records the call, and the generic one says nothing, so that
// one action is decided once (docs/agents.md, "One action, one decision"). A failed call has no
// tool-specific event, so postToolUseFailure is always recorded.
var cursorDecidedBy = map[string]map[string]string{
	"preToolUse":  {cursorShell: "beforeShellExecution", cursorRead: "beforeReadFile", cursorMCP: "beforeMCPExecution"},
	"postToolUse": {cursorShell: "afterShellExecution", cursorMCP: "afterMCPExecution"},
}

// cursorTool is the tool name as cursorDecidedBy knows it: every MCP tool is MCP.
func cursorTool(name string) string {
	if strings.HasPrefix(name, cursorMCP+":") {
		return cursorMCP
	}
	return name
}

func (cursor) Kind() string { return Cursor }

func (cursor) Point(event string) dispatcher.HookType { return cursorPoints[event] }

func (cursor) Map(in Input) (Mapped, error) {
	m := Mapped{Event: in.Event, Point: cursorPoints[in.Event]}
	if m.Point == "" {
		return m, nil
	}
	m.Cwd = in.str("cwd")
	if m.Cwd == "" {
		var roots []string
		if json.Unmarshal(in.raw("workspace_roots"), &roots) == nil && len(roots) > 0 {
			m.Cwd = roots[0]
		}
	}
	var err error
	if m.Session, err = in.need("conversation_id"); err != nil {
		return m, err
	}
	var name string
	var output json.RawMessage
	switch in.Event {
	case "beforeShellExecution", "afterShellExecution":
		cmd, err := in.need("command")
		if err != nil {
			return m, err
		}
		name, m.ToolInput = cursorShell, stringObject("command", cmd, "cwd", in.str("cwd"))
		output = in.raw("output")
	case "beforeReadFile":
		path, err := in.need("file_path")
		if err != nil {
			return m, err
		}
		name, m.ToolInput = cursorRead, stringObject("file_path", path)
	case "preToolUse", "postToolUse", "postToolUseFailure", "beforeMCPExecution", "afterMCPExecution":
		if name, err = in.need("tool_name"); err != nil {
			return m, err
		}
		// Mapped whole all the same: the call is decided here when the other hook is not installed.
		m.DecidedBy = cursorDecidedBy[in.Event][cursorTool(name)]
		m.ToolInput = jsonText(in.raw("tool_input"))
		output = in.raw("tool_output")
		if in.Event == "afterMCPExecution" {
			output = jsonText(in.raw("result_json"))
		}
	default: // beforeSubmitPrompt, sessionStart, stop, sessionEnd
		return m, lifecycle(Cursor, &m, in)
	}
	pre := toolPoint(name, in.str("tool_use_id"), m.ToolInput)
	if m.Point == dispatcher.PreToolUse {
		m.Context = pre
		return m, needArgs(in, "tool_input", m.ToolInput)
	}
	post := &dispatcher.PostToolUseContext{ToolName: name, ToolCallID: pre.ToolCallID, Arguments: pre.Arguments,
		Output: dispatcher.Value(output), Succeeded: true}
	if in.Event == "postToolUseFailure" {
		// error_message says what failed (error, as the other harnesses name it, when it is not
		// there); failure_type (error, timeout, permission_denied) stands in when neither is.
		msg := cmp.Or(in.str("error_message"), in.str("error"), in.str("failure_type"))
		post.Succeeded, post.ErrorMessage = false, &msg
	}
	var ms float64
	if json.Unmarshal(in.raw("duration"), &ms) == nil {
		post.DurationMs = (time.Duration(ms) * time.Millisecond).Milliseconds()
	}
	m.Context = post
	return m, nil
}

// jsonText is the JSON a field holds, taking a string that holds JSON (Cursor sends MCP arguments
// and results as JSON text) as that JSON.
func jsonText(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return raw
}

type cursorPermission struct {
	Permission   string `json:"permission"`
	UserMessage  string `json:"user_message,omitempty"`
	AgentMessage string `json:"agent_message,omitempty"`
}

// marshal is p as json.Marshal encodes it.
func (p *cursorPermission) marshal() []byte {
	b := hookdtype.AppendJSONString(append(make([]byte, 0, 64+len(p.UserMessage)+len(p.AgentMessage)), `{"permission":`...),
		p.Permission)
	b = appendMember(b, "user_message", p.UserMessage)
	return append(appendMember(b, "agent_message", p.AgentMessage), '}')
}

// Answer: the permission events answer {"permission", "user_message", "agent_message"}; a modify,
// and an ask of beforeReadFile, which cannot ask, is a deny that says why (Enforce). beforeSubmitPrompt can only refuse ({"continue": false}). A hint joins
// agent_message and a tool event's notice user_message; with an allow they are not forwarded, since
// Cursor reads those messages only beside a permission, and hookd's allow is not the user's.
func (c cursor) Answer(m Mapped, v Verdict) []byte {
	v = c.Enforce(m, v)
	switch m.Point {
	case dispatcher.PreToolUse:
		out := cursorPermission{Permission: v.Decision}
		switch {
		case v.blocks():
			out.AgentMessage = v.reason()
		default:
			return nothing
		}
		out.UserMessage = with(out.AgentMessage, v.Notice)
		out.AgentMessage = with(out.AgentMessage, v.Hint)
		return out.marshal()
	case dispatcher.UserMessage:
		if v.Decision == dispatcher.Deny {
			return encode(map[string]any{"continue": false, "user_message": v.reason()})
		}
	}
	return nothing
}

// Enforce: a modify blocks, carrying the rewrite (Cursor applies updated_input only with its allow,
// which would approve the rewritten call for the user); beforeReadFile cannot ask, so there an
// ask blocks; beforeSubmitPrompt can only refuse.
func (cursor) Enforce(m Mapped, v Verdict) Verdict {
	switch m.Point {
	case dispatcher.PreToolUse:
		switch {
		case v.Decision == Ask && m.Event == "beforeReadFile":
			return v.block(v.askAsBlock("Cursor", "call"))
		case v.Decision == Ask && v.Modified != nil:
			// A hook rewrote the call before another asked: Cursor's ask would approve the
			// original, so the original is blocked, carrying the rewrite.
			return v.block(rewriteAsBlock("Cursor", "tool arguments", v))
		case v.Decision == dispatcher.Modify && v.Modified != nil:
			if m.Event == "preToolUse" {
				return v.block("hookd rewrote the tool arguments; Cursor applies a rewrite only with an allow, which would " +
					"approve the call for the user, so the original is blocked; rewritten: " + *v.Modified)
			}
			return v.block(rewriteAsBlock("Cursor", "tool arguments", v))
		}
	case dispatcher.UserMessage:
		return promptEnforced(v, "Cursor")
	}
	return v
}
