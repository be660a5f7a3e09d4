package agents

import (
	"github.com/hookd/hookd/dispatcher"
)

// codex is OpenAI Codex CLI: command hooks only, in Claude Code's input shape. Its PreToolUse
// enforces a deny but not ask or updatedInput (they are parsed and fail open), so an ask or a
// modify becomes a deny that says why.
type codex struct{}

var codexPoints = map[string]dispatcher.HookType{
	"PreToolUse":       dispatcher.PreToolUse,
	"PostToolUse":      dispatcher.PostToolUse,
	"UserPromptSubmit": dispatcher.UserMessage,
	"SessionStart":     dispatcher.SessionStart,
	"Stop":             dispatcher.AgentCompletion,
}

// nothing is the answer of a command hook with nothing to say: an empty JSON object, which every
// harness that parses stdout as JSON reads as no decision.
var nothing = []byte("{}")

func (codex) Kind() string { return Codex }

func (codex) Point(event string) dispatcher.HookType { return codexPoints[event] }

func (codex) Map(in Input) (Mapped, error) { return mapClaudeShape(Codex, codexPoints, in) }

func (codex) Answer(m Mapped, v Verdict) []byte {
	switch m.Point {
	case dispatcher.PreToolUse:
		var reason string
		switch {
		case v.Decision == Ask:
			reason = v.askAsBlock("Codex")
		case v.blocks():
			reason = v.reason()
		case v.Decision == dispatcher.Modify && v.Modified != nil:
			reason = rewriteAsBlock("Codex", "tool arguments", v)
		default:
			return nothing
		}
		return encode(map[string]any{"hookSpecificOutput": claudeToolAnswer{HookEventName: m.Event,
			PermissionDecision: dispatcher.Deny, PermissionDecisionReason: reason}})
	case dispatcher.UserMessage:
		if b := promptBlock(v, "Codex"); b != nil {
			return b
		}
	}
	return nothing
}
