package agents

import (
	"github.com/hookd/hookd/dispatcher"
)

// geminiCLI is Gemini CLI: command hooks whose BeforeTool may deny or merge new arguments into the
// model's (hookSpecificOutput.tool_input), and whose BeforeAgent may deny a prompt. It has no ask.
type geminiCLI struct{}

var geminiPoints = map[string]dispatcher.HookType{
	"BeforeTool":   dispatcher.PreToolUse,
	"AfterTool":    dispatcher.PostToolUse,
	"BeforeAgent":  dispatcher.UserMessage,
	"SessionStart": dispatcher.SessionStart,
	"AfterAgent":   dispatcher.AgentCompletion,
	"SessionEnd":   dispatcher.AgentCompletion,
}

func (geminiCLI) Kind() string { return GeminiCLI }

func (geminiCLI) Point(event string) dispatcher.HookType { return geminiPoints[event] }

func (geminiCLI) Map(in Input) (Mapped, error) { return mapClaudeShape(GeminiCLI, geminiPoints, in) }

// Answer: a deny is {"decision": "deny", "reason"}; an ask, which Gemini CLI cannot ask, is a deny
// that says so; a modify of a tool's arguments is merged by Gemini CLI into the model's, so it is
// sent only when it keeps every key (a removed key would survive the merge), else it is a deny
// carrying the rewrite, as is every rewrite of a prompt. A hint is BeforeAgent's
// hookSpecificOutput.additionalContext; BeforeTool has no such field, so there a hint joins the
// deny's reason (which the model reads) and is not forwarded with an allow. A tool event's notice
// is the top-level systemMessage, which Gemini CLI shows the user.
func (g geminiCLI) Answer(m Mapped, v Verdict) []byte {
	if m.Point != dispatcher.PreToolUse && m.Point != dispatcher.UserMessage {
		return nothing
	}
	v = g.Enforce(m, v)
	out := geminiAnswer{SystemMessage: v.Notice}
	switch {
	case v.blocks():
		out.Reason = v.reason()
	case v.Decision == dispatcher.Modify && v.Modified != nil:
		out.HookSpecificOutput = map[string]any{"tool_input": modifiedObject(v)}
	case m.Point == dispatcher.UserMessage && v.Hint != "":
		out.HookSpecificOutput = map[string]any{"hookEventName": m.Event, "additionalContext": v.Hint}
	}
	if out.Reason != "" {
		out.Decision = dispatcher.Deny
		if m.Point == dispatcher.PreToolUse {
			out.Reason = with(out.Reason, v.Hint)
		}
	}
	if out.Decision == "" && out.Reason == "" && len(out.HookSpecificOutput) == 0 && out.SystemMessage == "" {
		return nothing // what json.Marshal writes of it: every allow's answer
	}
	return encode(out)
}

// Enforce: Gemini CLI cannot ask from a hook; it merges new tool arguments into the model's, so
// it takes only a rewrite that keeps every key, and it cannot rewrite a prompt. The rest blocks.
func (geminiCLI) Enforce(m Mapped, v Verdict) Verdict {
	if m.Point != dispatcher.PreToolUse && m.Point != dispatcher.UserMessage {
		return v
	}
	what, blocked := "tool arguments", "call"
	if m.Point == dispatcher.UserMessage {
		what, blocked = "prompt", "prompt"
	}
	switch {
	case v.Decision == Ask:
		return v.block(v.askAsBlock("Gemini CLI", blocked))
	case v.Decision == dispatcher.Modify && v.Modified != nil:
		if args := modifiedObject(v); m.Point == dispatcher.PreToolUse && args != nil && keepsKeys(m.ToolInput, args) {
			return v
		}
		return v.block(rewriteAsBlock("Gemini CLI", what, v))
	}
	return v
}

type geminiAnswer struct {
	Decision           string         `json:"decision,omitempty"`
	Reason             string         `json:"reason,omitempty"`
	HookSpecificOutput map[string]any `json:"hookSpecificOutput,omitempty"`
	SystemMessage      string         `json:"systemMessage,omitempty"`
}
