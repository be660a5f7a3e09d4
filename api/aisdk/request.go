package aisdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/hookd/hookd/api/dialect"
	"github.com/hookd/hookd/hookdtype"
)

// ChatRequest is the body the AI SDK's DefaultChatTransport posts ({id, messages, trigger,
// messageId}), with what hookd reads from useChat's `body` option: client-side tools and the
// model of a new turn.
type ChatRequest struct {
	ID        string      `json:"id"`
	Messages  []UIMessage `json:"messages"`
	Trigger   string      `json:"trigger,omitempty"`
	MessageID string      `json:"messageId,omitempty"`
	// Tools are tools the client runs itself (useChat's onToolCall answers them).
	Tools       []Tool   `json:"tools,omitempty"`
	Model       string   `json:"model,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

// UIMessage is one message of the chat as the client holds it. hookd keeps the chat's history
// itself and reads only the last message: the user's new one, or the assistant's with the
// answers to its approval requests and the outputs of its client-side tools.
type UIMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Parts    []UIPart        `json:"parts"`
}

// UIPart is the part of a message part hookd reads; the protocol's other fields are kept by
// the client and ignored here.
type UIPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	State      string          `json:"state,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Approval   *Approval       `json:"approval,omitempty"`
}

// Approval is a tool part's approval request and, once the user answered, the answer.
type Approval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// checkAnswers reads the approvals of the last message — the answers hookd acts on — strictly,
// unlike the rest of the client's message records: a misspelt field of an answer ("reasn") is
// refused naming it, not dropped.
func checkAnswers(messages json.RawMessage) error {
	var msgs []struct {
		Parts []struct {
			Approval json.RawMessage `json:"approval"`
		} `json:"parts"`
	}
	if json.Unmarshal(messages, &msgs) != nil || len(msgs) == 0 {
		return nil // the full decode says what is wrong
	}
	last := len(msgs) - 1
	for j, p := range msgs[last].Parts {
		if len(p.Approval) == 0 || string(p.Approval) == "null" {
			continue
		}
		var a Approval
		if err := hookdtype.DecodeStrict(p.Approval, &a, fmt.Sprintf("messages[%d].parts[%d].approval", last, j)); err != nil {
			return err
		}
	}
	return nil
}

// Tool declares a client-side tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

func (p UIPart) isTool() bool { return p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-") }

func (r *ChatRequest) validate() error {
	switch {
	case dialect.Blank(r.ID):
		return fmt.Errorf("id: is required (the chat id)")
	case len(r.Messages) == 0:
		return fmt.Errorf("messages: is required (at least the new message)")
	case r.Trigger != "" && r.Trigger != "submit-message":
		return fmt.Errorf("trigger: %q is not supported; hookd's history is append-only, so only submit-message is", r.Trigger)
	}
	if t := r.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return fmt.Errorf("temperature: must be between 0 and 2")
	}
	for i, m := range r.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		switch {
		case dialect.Blank(m.ID):
			return fmt.Errorf("%s.id: is required", f)
		case m.Role != "user" && m.Role != "assistant" && m.Role != "system":
			return fmt.Errorf("%s.role: %q is not one of user, assistant, system", f, m.Role)
		case m.Parts == nil:
			return fmt.Errorf("%s.parts: is required", f)
		}
		for j, p := range m.Parts {
			if dialect.Blank(p.Type) {
				return fmt.Errorf("%s.parts[%d].type: is required", f, j)
			}
		}
	}
	for i, t := range r.Tools {
		switch {
		case dialect.Blank(t.Name):
			return fmt.Errorf("tools[%d].name: is required", i)
		case len(t.InputSchema) > 0 && !dialect.IsObject(t.InputSchema):
			return fmt.Errorf("tools[%d].inputSchema: must be a JSON schema object", i)
		}
	}
	return nil
}

// text is a user message's words: its text parts joined.
func (m UIMessage) text() (string, error) {
	var b strings.Builder
	for i, p := range m.Parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "step-start":
		default:
			if !strings.HasPrefix(p.Type, "data-") {
				return "", fmt.Errorf("parts[%d].type: a %q part; hookd reads the text parts of a user message", i, p.Type)
			}
		}
	}
	return b.String(), nil
}

// outputText is a client-side tool's output as the text the model gets: a string as it is,
// any other JSON value as its JSON.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}
