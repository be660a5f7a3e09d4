package agents

import (
	"github.com/hookd/hookd/dispatcher"
)

// codex is OpenAI Codex CLI: command hooks only, in Claude Code's input shape. Its PreToolUse
// enforces a deny but not an ask (parsed, and it fails open), and applies updatedInput only beside
// an allow, which would approve the rewritten call for the person; so an ask or a modify becomes a
// deny that says why (a modify's carrying the rewrite).
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

// Enforce: Codex neither asks nor rewrites from a hook, so an ask or a modify blocks.
func (codex) Enforce(m Mapped, v Verdict) Verdict {
	switch m.Point {
	case dispatcher.PreToolUse:
		switch {
		case v.Decision == Ask:
			return v.block(v.askAsBlock("Codex", "call"))
		case v.Decision == dispatcher.Modify && v.Modified != nil:
			return v.block(rewriteAsBlock("Codex", "tool arguments", v))
		}
	case dispatcher.UserMessage:
		return promptEnforced(v, "Codex")
	}
	return v
}

// Answer: every block is a deny in hookSpecificOutput; a hint is hookSpecificOutput.additionalContext
// (PreToolUse and UserPromptSubmit take it) and a tool event's notice the top-level systemMessage.
func (c codex) Answer(m Mapped, v Verdict) []byte {
	v = c.Enforce(m, v)
	switch m.Point {
	case dispatcher.PreToolUse:
		out := claudeSpecific{HookEventName: m.Event, AdditionalContext: v.Hint}
		switch {
		case v.blocks():
			out.PermissionDecisionReason = v.reason()
		case v.Hint == "" && v.Notice == "":
			return nothing
		}
		if out.PermissionDecisionReason != "" {
			out.PermissionDecision = dispatcher.Deny
		}
		return (&claudeAnswer{HookSpecificOutput: out.orNil(), SystemMessage: v.Notice}).marshal()
	case dispatcher.UserMessage:
		if b := claudePrompt(m, v); b != nil {
			return b
		}
	}
	return nothing
}
