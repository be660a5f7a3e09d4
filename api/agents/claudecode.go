package agents

import (
	"encoding/json"
	"strings"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// claudeCode is Claude Code: command hooks and HTTP hooks with the same JSON. See docs/agents.md
// for the fields relied on and the date they were read.
type claudeCode struct{}

var claudePoints = map[string]dispatcher.HookType{
	"PreToolUse":         dispatcher.PreToolUse,
	"PostToolUse":        dispatcher.PostToolUse,
	"PostToolUseFailure": dispatcher.PostToolUse,
	"UserPromptSubmit":   dispatcher.UserMessage,
	"SessionStart":       dispatcher.SessionStart,
	"Stop":               dispatcher.AgentCompletion,
	"SessionEnd":         dispatcher.AgentCompletion,
}

func (claudeCode) Kind() string { return ClaudeCode }

func (claudeCode) Point(event string) dispatcher.HookType { return claudePoints[event] }

func (a claudeCode) Map(in Input) (Mapped, error) {
	return mapClaudeShape(ClaudeCode, claudePoints, in)
}

// mapClaudeShape reads the input shape Claude Code defined and Codex and Gemini CLI follow:
// session_id, cwd, permission_mode and hook_event_name on every event; tool_name, tool_input,
// tool_use_id, tool_response, error (Gemini CLI: tool_response.error), prompt, source per event.
func mapClaudeShape(kind string, points map[string]dispatcher.HookType, in Input) (Mapped, error) {
	m := Mapped{Event: in.Event, Point: points[in.Event]}
	if m.Point == "" {
		return m, nil
	}
	m.Cwd, m.PermissionMode = in.str("cwd"), in.str("permission_mode")
	var err error
	if m.Session, err = in.need("session_id"); err != nil {
		return m, err
	}
	switch m.Point {
	case dispatcher.PreToolUse, dispatcher.PostToolUse:
		name, err := in.need("tool_name")
		if err != nil {
			return m, err
		}
		m.ToolInput = in.raw("tool_input")
		pre := toolPoint(name, in.str("tool_use_id"), m.ToolInput)
		if m.Point == dispatcher.PreToolUse {
			m.Context = pre
			return m, needArgs(in, "tool_input", m.ToolInput)
		}
		post := &dispatcher.PostToolUseContext{ToolName: pre.ToolName, ToolCallID: pre.ToolCallID,
			Arguments: pre.Arguments, Output: dispatcher.Value(in.raw("tool_response")), Succeeded: true}
		if msg, failed := toolError(in); failed {
			post.Succeeded, post.ErrorMessage = false, &msg
		}
		m.Context = post
	default:
		return m, lifecycle(kind, &m, in)
	}
	return m, nil
}

// toolError is a failed tool call's error: Claude Code's PostToolUseFailure has it in "error",
// Gemini CLI's AfterTool in tool_response.error (a string or an object).
func toolError(in Input) (string, bool) {
	if msg := in.str("error"); msg != "" || in.Event == "PostToolUseFailure" {
		return msg, true
	}
	var r struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(in.raw("tool_response"), &r) != nil || len(r.Error) == 0 || string(r.Error) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(r.Error, &s) == nil {
		return s, true
	}
	return string(r.Error), true
}

// Answer: PreToolUse answers in hookSpecificOutput (deny, ask, or ask with updatedInput for a
// modify: an allow would approve the rewritten call for the user, whose own rules would perhaps
// have asked, and hookd's verdict is never the user's approval); UserPromptSubmit cannot ask or rewrite, so both become a block with the reason. An allow
// says nothing, so Claude Code's own permission rules still apply; its hint alone is
// hookSpecificOutput.additionalContext without a permissionDecision. A tool event's notice is the
// top-level systemMessage, which Claude Code shows the user.
func (c claudeCode) Answer(m Mapped, v Verdict) []byte {
	v = c.Enforce(m, v)
	switch m.Point {
	case dispatcher.PreToolUse:
		out := claudeSpecific{HookEventName: m.Event, AdditionalContext: v.Hint}
		switch {
		case v.blocks():
			out.PermissionDecision, out.PermissionDecisionReason = v.Decision, v.reason()
			if v.Decision == Ask && v.Modified != nil {
				// A hook rewrote the call before another asked: the person approves the call as
				// rewritten, and that is what runs.
				out.UpdatedInput = modifiedObject(v)
			}
		case v.Decision == dispatcher.Modify: // as Enforce makes it: an ask about the rewritten call
			out.PermissionDecision, out.UpdatedInput = dispatcher.Ask, modifiedObject(v)
			out.PermissionDecisionReason = "hookd modified the tool arguments"
			if v.Reason != "" {
				out.PermissionDecisionReason = v.Reason
			}
		case v.Hint == "" && v.Notice == "":
			return nil
		}
		return (&claudeAnswer{HookSpecificOutput: out.orNil(), SystemMessage: v.Notice}).marshal()
	case dispatcher.UserMessage:
		return claudePrompt(m, v)
	}
	return nil
}

// Enforce: Claude Code asks and takes new tool arguments, as an ask about the rewritten call (an
// allow would approve it for the person, past their own rules), so a modify is an ask, and is
// recorded as one; arguments that are not an object, and anything but an allow on a prompt, block.
func (claudeCode) Enforce(m Mapped, v Verdict) Verdict {
	switch m.Point {
	case dispatcher.PreToolUse:
		if (v.Decision == dispatcher.Modify || v.Decision == Ask) && v.Modified != nil && modifiedObject(v) == nil {
			return v.block(rewriteAsBlock("Claude Code", "tool arguments", v))
		}
		if v.Decision == dispatcher.Modify && v.Modified != nil {
			v.Decision = Ask
			if strings.TrimSpace(v.Reason) == "" {
				v.Reason = "hookd modified the tool arguments"
			}
		}
	case dispatcher.UserMessage:
		return promptEnforced(v, "Claude Code")
	}
	return v
}

// claudeAnswer is the output of Claude Code's hooks, which Codex reads too.
type claudeAnswer struct {
	Decision           string          `json:"decision,omitempty"`
	Reason             string          `json:"reason,omitempty"`
	HookSpecificOutput *claudeSpecific `json:"hookSpecificOutput,omitempty"`
	SystemMessage      string          `json:"systemMessage,omitempty"`
}

type claudeSpecific struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
	AdditionalContext        string          `json:"additionalContext,omitempty"`
}

// marshal is a as json.Marshal encodes it.
func (a *claudeAnswer) marshal() []byte {
	b := append(make([]byte, 0, 256), '{')
	b = appendMember(appendMember(b, "decision", a.Decision), "reason", a.Reason)
	if s := a.HookSpecificOutput; s != nil {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = hookdtype.AppendJSONString(append(b, `"hookSpecificOutput":{"hookEventName":`...), s.HookEventName)
		b = appendMember(b, "permissionDecision", s.PermissionDecision)
		b = appendMember(b, "permissionDecisionReason", s.PermissionDecisionReason)
		if len(s.UpdatedInput) > 0 {
			// Compacted and HTML-escaped, as json.Marshal writes a json.RawMessage.
			b = append(append(b, `,"updatedInput":`...), encode(s.UpdatedInput)...)
		}
		b = append(appendMember(b, "additionalContext", s.AdditionalContext), '}')
	}
	return append(appendMember(b, "systemMessage", a.SystemMessage), '}')
}

// orNil is s, or nil when it says nothing but the event's name.
func (s *claudeSpecific) orNil() *claudeSpecific {
	if s.PermissionDecision == "" && s.AdditionalContext == "" {
		return nil
	}
	return s
}

// claudePrompt is the answer of a prompt hook (Claude Code and Codex) on an enforced verdict:
// {"decision": "block", "reason"} for a deny; an allow's hint as
// hookSpecificOutput.additionalContext, which joins the prompt. A refused prompt starts no turn,
// so its hint has no one to reach.
func claudePrompt(m Mapped, v Verdict) []byte {
	if v.Decision == dispatcher.Deny {
		return (&claudeAnswer{Decision: "block", Reason: v.reason()}).marshal()
	}
	if v.Hint == "" {
		return nil
	}
	return (&claudeAnswer{HookSpecificOutput: &claudeSpecific{HookEventName: m.Event, AdditionalContext: v.Hint}}).marshal()
}
