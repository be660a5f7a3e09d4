package agents

import (
	"encoding/json"

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
// carrying the rewrite, as is every rewrite of a prompt.
func (geminiCLI) Answer(m Mapped, v Verdict) []byte {
	if m.Point != dispatcher.PreToolUse && m.Point != dispatcher.UserMessage {
		return nothing
	}
	what := "tool arguments"
	if m.Point == dispatcher.UserMessage {
		what = "prompt"
	}
	var reason string
	switch {
	case v.Decision == Ask:
		reason = v.askAsBlock("Gemini CLI")
	case v.blocks():
		reason = v.reason()
	case v.Decision == dispatcher.Modify && v.Modified != nil:
		if args := modifiedObject(v); m.Point == dispatcher.PreToolUse && args != nil && keepsKeys(m.ToolInput, args) {
			return encode(map[string]any{"hookSpecificOutput": map[string]json.RawMessage{"tool_input": args}})
		}
		reason = rewriteAsBlock("Gemini CLI", what, v)
	default:
		return nothing
	}
	return encode(map[string]string{"decision": dispatcher.Deny, "reason": reason})
}
