package aisdk_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// uiMessage is the assistant message the AI SDK's chat client builds from a stream's parts (its
// processUIMessageStream, as far as hookd's parts go). A part the SDK cannot apply fails the
// test where the SDK fails the chat (AI_UIMessageStreamError).
type uiMessage struct {
	id     string
	parts  []*uiPart
	open   map[string]*uiPart // text and reasoning parts by id
	finish string
}

type uiPart struct {
	typ, name, callID, approvalID, state, text, output string
	approved                                           *bool
}

// rebuild is the message a resumed stream builds (resumeStreamIsReplay: the first start drops
// what the client held), or, given the responses a client read live one after the other, the
// message it held: a start with the message's own id continues it.
func rebuild(t *testing.T, responses ...[]map[string]any) *uiMessage {
	t.Helper()
	m := &uiMessage{open: map[string]*uiPart{}}
	for _, parts := range responses {
		for i, p := range parts {
			if err := m.apply(p); err != nil {
				t.Fatalf("part %d %v: %v", i, p, err)
			}
		}
	}
	return m
}

func (m *uiMessage) apply(p map[string]any) error {
	s := func(k string) string { v, _ := p[k].(string); return v }
	tool := func(callID string) (*uiPart, error) {
		for i := len(m.parts) - 1; i >= 0; i-- {
			if m.parts[i].callID == callID {
				return m.parts[i], nil
			}
		}
		return nil, fmt.Errorf("no tool invocation found for tool call ID %q", callID)
	}
	switch typ := s("type"); typ {
	case "start":
		if m.id != "" && s("messageId") != m.id {
			return fmt.Errorf("start of message %q in message %q", s("messageId"), m.id)
		}
		m.id = s("messageId")
	case "start-step":
		m.parts = append(m.parts, &uiPart{typ: "step-start"})
	case "finish-step":
	case "text-start", "reasoning-start":
		x := &uiPart{typ: strings.TrimSuffix(typ, "-start")}
		m.parts = append(m.parts, x)
		m.open[s("id")] = x
	case "text-delta", "reasoning-delta":
		x := m.open[s("id")]
		if x == nil || x.typ != strings.TrimSuffix(typ, "-delta") {
			return fmt.Errorf("a %s for the missing part %q", typ, s("id"))
		}
		x.text += s("delta")
	case "text-end", "reasoning-end":
		if m.open[s("id")] == nil {
			return fmt.Errorf("a %s for the missing part %q", typ, s("id"))
		}
		delete(m.open, s("id"))
	case "tool-input-start":
		kind := "tool-" + s("toolName")
		if p["dynamic"] == true {
			kind = "dynamic-tool"
		}
		m.parts = append(m.parts, &uiPart{typ: kind, name: s("toolName"), callID: s("toolCallId"), state: "input-streaming"})
	case "tool-input-delta":
		x, err := tool(s("toolCallId"))
		if err != nil || x.state != "input-streaming" {
			return fmt.Errorf("a tool-input-delta for a call not streaming its input: %v", err)
		}
	case "tool-input-available", "tool-input-error":
		x, err := tool(s("toolCallId"))
		if err != nil {
			return err
		}
		x.state = map[string]string{"tool-input-available": "input-available", "tool-input-error": "output-error"}[typ]
	case "tool-approval-request":
		x, err := tool(s("toolCallId"))
		if err != nil {
			return err
		}
		x.state, x.approvalID = "approval-requested", s("approvalId")
	case "tool-approval-response":
		var x *uiPart
		for _, q := range m.parts {
			if q.approvalID != "" && q.approvalID == s("approvalId") {
				x = q
			}
		}
		if x == nil {
			return fmt.Errorf("no tool invocation found for approval ID %q", s("approvalId"))
		}
		approved := p["approved"] == true
		x.state, x.approved = "approval-responded", &approved
	case "tool-output-available", "tool-output-error", "tool-output-denied":
		x, err := tool(s("toolCallId"))
		if err != nil {
			return err
		}
		x.state = "output-" + strings.TrimPrefix(typ, "tool-output-")
		if typ == "tool-output-available" {
			b, _ := json.Marshal(p["output"])
			x.output = string(b)
		}
	case "finish":
		m.finish = s("finishReason")
	case "error":
	default:
		if !strings.HasPrefix(typ, "data-") {
			return fmt.Errorf("a part of type %q", typ)
		}
		if p["transient"] != true { // transient data reaches onData only
			m.parts = append(m.parts, &uiPart{typ: typ})
		}
	}
	return nil
}

// summary is the message without its ids: one line per part.
func (m *uiMessage) summary() string {
	var b strings.Builder
	for _, p := range m.parts {
		b.WriteString(p.typ)
		if p.state != "" {
			b.WriteString(" [" + p.state + "]")
		}
		if p.approved != nil {
			fmt.Fprintf(&b, " approved=%v", *p.approved)
		}
		if p.text != "" || p.output != "" {
			b.WriteString(" " + p.text + p.output)
		}
		b.WriteString("\n")
	}
	return b.String() + "finish " + m.finish
}

// text is the message's text parts joined.
func (m *uiMessage) text() string {
	var b strings.Builder
	for _, p := range m.parts {
		if p.typ == "text" {
			b.WriteString(p.text)
		}
	}
	return b.String()
}
