package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/hookd/hookd/api/dialect"
	"github.com/hookd/hookd/hookdtype"
)

// RunAgentInput is the body of POST /ag-ui/run (AG-UI 1.0).
type RunAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	ParentRunID     string          `json:"parentRunId,omitempty"`
	State           json.RawMessage `json:"state,omitempty"`
	Messages        []Message       `json:"messages"`
	Tools           []Tool          `json:"tools,omitempty"`
	Context         []Context       `json:"context,omitempty"`
	ForwardedProps  json.RawMessage `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry   `json:"resume,omitempty"`
}

// Message is one message of the thread as the client holds it. hookd keeps the thread's
// history itself: of the messages it reads only the new ones at the end (the user's new
// message, the results of client-side tools).
type Message struct {
	ID             string          `json:"id"`
	Role           string          `json:"role"`
	Content        json.RawMessage `json:"content,omitempty"` // a string, or an array of parts
	Name           string          `json:"name,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ToolCalls      json.RawMessage `json:"toolCalls,omitempty"`
	Error          string          `json:"error,omitempty"`
	EncryptedValue string          `json:"encryptedValue,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	SubagentRunID  string          `json:"subagentRunId,omitempty"`
	ActivityType   string          `json:"activityType,omitempty"`
}

// Tool is a tool the client offers and runs itself (a frontend tool).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Context is ambient information for the run.
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one interrupt of the run before.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // resolved | cancelled
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Approval is the payload of a resume entry for a tool_approval interrupt.
type Approval struct {
	Approved  *bool           `json:"approved"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Props are the forwardedProps hookd reads: the model of a new turn.
type Props struct {
	Model       string   `json:"model,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// validate checks the input's shape and names the first field that is wrong; it returns the
// client's state and forwarded props, decoded.
func (in *RunAgentInput) validate() (map[string]json.RawMessage, Props, error) {
	var props Props
	switch {
	case dialect.Blank(in.ThreadID):
		return nil, props, fmt.Errorf("threadId: is required")
	case dialect.Blank(in.RunID):
		return nil, props, fmt.Errorf("runId: is required")
	case in.Messages == nil:
		return nil, props, fmt.Errorf("messages: is required (an array)")
	}
	var state map[string]json.RawMessage
	if !isNull(in.State) {
		if !dialect.IsObject(in.State) || json.Unmarshal(in.State, &state) != nil {
			return nil, props, fmt.Errorf("state: must be an object (hookd adds its view of the run under \"hookd\")")
		}
		delete(state, "hookd") // hookd's own view, echoed back by the client: replaced, never read
	}
	if !isNull(in.ForwardedProps) {
		if !dialect.IsObject(in.ForwardedProps) {
			return nil, props, fmt.Errorf("forwardedProps: must be an object")
		}
		if err := hookdtype.DecodeStrict(in.ForwardedProps, &props, "forwardedProps"); err != nil {
			return nil, props, fmt.Errorf("%v (hookd reads model and temperature)", err)
		}
		if t := props.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
			return nil, props, fmt.Errorf("forwardedProps.temperature: must be between 0 and 2")
		}
	}
	for i, m := range in.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "user", "assistant", "system", "developer", "tool", "activity", "reasoning":
		default:
			return nil, props, fmt.Errorf("%s.role: %q is not one of user, assistant, system, developer, tool, activity, reasoning", f, m.Role)
		}
		if dialect.Blank(m.ID) {
			return nil, props, fmt.Errorf("%s.id: is required", f)
		}
		if m.Role == "tool" && dialect.Blank(m.ToolCallID) {
			return nil, props, fmt.Errorf("%s.toolCallId: is required for a tool message", f)
		}
	}
	for i, t := range in.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		if dialect.Blank(t.Name) {
			return nil, props, fmt.Errorf("%s.name: is required", f)
		}
		if !isNull(t.Parameters) && !dialect.IsObject(t.Parameters) {
			return nil, props, fmt.Errorf("%s.parameters: must be a JSON schema object", f)
		}
	}
	for i, r := range in.Resume {
		f := fmt.Sprintf("resume[%d]", i)
		if dialect.Blank(r.InterruptID) {
			return nil, props, fmt.Errorf("%s.interruptId: is required", f)
		}
		if r.Status != "resolved" && r.Status != "cancelled" {
			return nil, props, fmt.Errorf("%s.status: %q is not one of resolved, cancelled", f, r.Status)
		}
	}
	return state, props, nil
}

// text is a message's content as plain text: the string, or its text parts joined.
func (m Message) text() (string, error) {
	if isNull(m.Content) {
		return "", nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("content: must be a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content: a %q part; hookd reads text parts only", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// withContext puts the run's context before the user's words, so the hooks on user_message
// see exactly what the model is given.
func withContext(input string, ctx []Context) string {
	if len(ctx) == 0 {
		return input
	}
	var b strings.Builder
	b.WriteString("Context:\n")
	for _, c := range ctx {
		fmt.Fprintf(&b, "- %s: %s\n", c.Description, c.Value)
	}
	b.WriteString("\n")
	b.WriteString(input)
	return b.String()
}
