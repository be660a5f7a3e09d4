// Package harness serves the Harness chat dialect: POST /harness/chat streams a turn of the agent
// as the Harness AgentEvent stream (harness-chat-api.md), as SSE or as a JSON array written as the
// events happen. It is a thin mapping of the runtime's canonical events (Map); pauses resume on
// the next request of the same (userId, sessionId) (CONTRACT §5). See docs/chat-harness.md.
package harness

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The 31 AgentEvent types of harness-chat-api.md §5.
const (
	TypeAgentStart               = "AGENT_START"
	TypeThinkingBlockStart       = "THINKING_BLOCK_START"
	TypeThinkingBlockDelta       = "THINKING_BLOCK_DELTA"
	TypeThinkingBlockEnd         = "THINKING_BLOCK_END"
	TypeModelCallStart           = "MODEL_CALL_START"
	TypeModelCallEnd             = "MODEL_CALL_END"
	TypeToolCallStart            = "TOOL_CALL_START"
	TypeToolCallDelta            = "TOOL_CALL_DELTA"
	TypeToolCallEnd              = "TOOL_CALL_END"
	TypeToolResultStart          = "TOOL_RESULT_START"
	TypeToolResultTextDelta      = "TOOL_RESULT_TEXT_DELTA"
	TypeToolResultDataDelta      = "TOOL_RESULT_DATA_DELTA"
	TypeToolResultEnd            = "TOOL_RESULT_END"
	TypeDataBlockStart           = "DATA_BLOCK_START"
	TypeDataBlockDelta           = "DATA_BLOCK_DELTA"
	TypeDataBlockEnd             = "DATA_BLOCK_END"
	TypeTextBlockStart           = "TEXT_BLOCK_START"
	TypeTextBlockDelta           = "TEXT_BLOCK_DELTA"
	TypeTextBlockEnd             = "TEXT_BLOCK_END"
	TypeAgentResult              = "AGENT_RESULT"
	TypeAgentEnd                 = "AGENT_END"
	TypeExceedMaxIters           = "EXCEED_MAX_ITERS"
	TypeRequireUserConfirm       = "REQUIRE_USER_CONFIRM"
	TypeUserConfirmResult        = "USER_CONFIRM_RESULT"
	TypeAllToolsDenied           = "ALL_TOOLS_DENIED"
	TypeRequireExternalExecution = "REQUIRE_EXTERNAL_EXECUTION"
	TypeExternalExecutionResult  = "EXTERNAL_EXECUTION_RESULT"
	TypeRequestStop              = "REQUEST_STOP"
	TypeSubagentExposed          = "SUBAGENT_EXPOSED"
	TypeHintBlock                = "HINT_BLOCK"
	TypeCustom                   = "CUSTOM"
)

// Types lists the 31 event types in the order of the document.
var Types = []string{
	TypeAgentStart, TypeThinkingBlockStart, TypeThinkingBlockDelta, TypeThinkingBlockEnd,
	TypeModelCallStart, TypeModelCallEnd, TypeToolCallStart, TypeToolCallDelta, TypeToolCallEnd,
	TypeToolResultStart, TypeToolResultTextDelta, TypeToolResultDataDelta, TypeToolResultEnd,
	TypeDataBlockStart, TypeDataBlockDelta, TypeDataBlockEnd, TypeTextBlockStart, TypeTextBlockDelta,
	TypeTextBlockEnd, TypeAgentResult, TypeAgentEnd, TypeExceedMaxIters, TypeRequireUserConfirm,
	TypeUserConfirmResult, TypeAllToolsDenied, TypeRequireExternalExecution, TypeExternalExecutionResult,
	TypeRequestStop, TypeSubagentExposed, TypeHintBlock, TypeCustom,
}

// Event is one AgentEvent. Type, ID and CreatedAt are always present; every other field is
// omitted when it has no value (the document's NON_NULL policy), so each type carries exactly
// the fields of its section in §5.
type Event struct {
	Type      string `json:"type"`
	ID        string `json:"id"`        // 32 lowercase hex
	CreatedAt string `json:"createdAt"` // ISO-8601 UTC with microseconds
	// Source is "main/<name>" for events a subagent's run forwarded; absent for the agent's own.
	Source   string         `json:"source,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`

	SessionID string `json:"sessionId,omitempty"` // AGENT_START (the client's key), SUBAGENT_EXPOSED
	ReplyID   string `json:"replyId,omitempty"`
	Name      string `json:"name,omitempty"` // AGENT_START, CUSTOM
	Role      string `json:"role,omitempty"` // AGENT_START
	BlockID   string `json:"blockId,omitempty"`

	ToolCallID   string `json:"toolCallId,omitempty"`
	ToolCallName string `json:"toolCallName,omitempty"`

	Delta *string       `json:"delta,omitempty"`
	Usage *Usage        `json:"usage,omitempty"` // MODEL_CALL_END
	Data  *ContentBlock `json:"data,omitempty"`  // TOOL_RESULT_DATA_DELTA
	State string        `json:"state,omitempty"` // TOOL_RESULT_END

	Result *Msg `json:"result,omitempty"` // AGENT_RESULT

	MaxIters    *int `json:"maxIters,omitempty"`
	CurrentIter *int `json:"currentIter,omitempty"`

	ToolCalls       []ToolUseBlock    `json:"toolCalls,omitempty"`
	ConfirmResults  []ConfirmResult   `json:"confirmResults,omitempty"`
	DeniedToolCalls []ToolUseBlock    `json:"deniedToolCalls,omitempty"`
	ToolResults     []ToolResultBlock `json:"toolResults,omitempty"`

	Reason         string `json:"reason,omitempty"`         // REQUEST_STOP
	GenerateReason string `json:"generateReason,omitempty"` // REQUEST_STOP

	SubagentID string `json:"subagentId,omitempty"` // SUBAGENT_EXPOSED
	AgentID    string `json:"agentId,omitempty"`
	Label      string `json:"label,omitempty"`

	HintSource *string `json:"hintSource,omitempty"` // HINT_BLOCK
	Hint       *string `json:"hint,omitempty"`

	Value json.RawMessage `json:"value,omitempty"` // CUSTOM
}

// Usage is the token count of a model call or of a turn; TotalTokens is derived.
type Usage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CachedTokens int64   `json:"cachedTokens"`
	Time         float64 `json:"time"` // seconds
	TotalTokens  int64   `json:"totalTokens"`
}

// Msg is a message (AGENT_RESULT.result). Unlike the top level, its empty fields are written as
// null: name and usage are always present.
type Msg struct {
	ID        string         `json:"id"` // a UUID
	Name      *string        `json:"name"`
	Role      string         `json:"role"` // USER | ASSISTANT | SYSTEM | TOOL
	Content   []ContentBlock `json:"content"`
	Metadata  map[string]any `json:"metadata"`
	Timestamp string         `json:"timestamp"` // yyyy-MM-dd HH:mm:ss.SSS
	Usage     *Usage         `json:"usage"`
}

// ToolUseBlock is a tool call: Input is the arguments object; Content the raw streamed
// arguments when they are not a JSON object (else null); State pending | asking | allowed |
// submitted | finished.
type ToolUseBlock struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Content  *string         `json:"content"`
	Metadata map[string]any  `json:"metadata"`
	State    string          `json:"state"`
}

// ToolResultBlock is a tool's result: State success | error | interrupted | denied | running.
type ToolResultBlock struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Output   []ContentBlock `json:"output"`
	Metadata map[string]any `json:"metadata"`
	State    string         `json:"state"`
}

// ConfirmResult is a person's answer to one REQUIRE_USER_CONFIRM call.
type ConfirmResult struct {
	Confirmed bool         `json:"confirmed"`
	ToolCall  ToolUseBlock `json:"toolCall"`
	Rules     []Rule       `json:"rules"` // null when none
}

// Rule is a permission rule a person added while confirming.
type Rule struct {
	ToolName    string `json:"tool_name"`
	RuleContent string `json:"rule_content"`
	Behavior    string `json:"behavior"`
	Source      string `json:"source"`
}

// Content block types.
const (
	BlockText       = "text"
	BlockThinking   = "thinking"
	BlockImage      = "image"
	BlockAudio      = "audio"
	BlockVideo      = "video"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
	BlockHint       = "hint"
	BlockData       = "data"
)

// Source is where binary content is: inline base64 ({type, media_type, data}) or a URL ({type,
// url, mime_type}), spelt as the document spells them.
type Source struct {
	Type      string `json:"type"` // base64 | url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	MimeType  string `json:"mime_type,omitempty"`
}

// ContentBlock is a polymorphic content block; Type selects which fields it has on the wire:
//
//	text        {type, text}
//	thinking    {type, thinking}
//	image|audio|video {type, source}
//	data        {type, source, id, name}
//	tool_use    {type, id, name, input, content, metadata, state}
//	tool_result {type, id, name, output, metadata, state}
//	hint        {type, hint, hintSource}
type ContentBlock struct {
	Type       string
	Text       string           // text
	Thinking   string           // thinking
	Source     *Source          // image, audio, video, data
	ID         string           // data
	Name       string           // data
	ToolUse    *ToolUseBlock    // tool_use
	ToolResult *ToolResultBlock // tool_result
	Hint       string           // hint
	HintSource *string          // hint
	// Raw keeps a block of a type this package does not know, as it came.
	Raw json.RawMessage
}

// TextBlock is a text content block.
func TextBlock(text string) ContentBlock { return ContentBlock{Type: BlockText, Text: text} }

// MarshalJSON writes the fields of the block's type.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	switch b.Type {
	case BlockText:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	case BlockThinking:
		return json.Marshal(struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
		}{b.Type, b.Thinking})
	case BlockImage, BlockAudio, BlockVideo:
		return json.Marshal(struct {
			Type   string  `json:"type"`
			Source *Source `json:"source"`
		}{b.Type, b.Source})
	case BlockData:
		var name *string
		if b.Name != "" {
			name = &b.Name
		}
		return json.Marshal(struct {
			Type   string  `json:"type"`
			Source *Source `json:"source"`
			ID     string  `json:"id"`
			Name   *string `json:"name"`
		}{b.Type, b.Source, b.ID, name})
	case BlockToolUse:
		tu := ToolUseBlock{}
		if b.ToolUse != nil {
			tu = *b.ToolUse
		}
		return json.Marshal(struct {
			Type string `json:"type"`
			ToolUseBlock
		}{b.Type, tu})
	case BlockToolResult:
		tr := ToolResultBlock{}
		if b.ToolResult != nil {
			tr = *b.ToolResult
		}
		return json.Marshal(struct {
			Type string `json:"type"`
			ToolResultBlock
		}{b.Type, tr})
	case BlockHint:
		return json.Marshal(struct {
			Type       string  `json:"type"`
			Hint       string  `json:"hint"`
			HintSource *string `json:"hintSource"`
		}{b.Type, b.Hint, b.HintSource})
	}
	if len(b.Raw) > 0 {
		return b.Raw, nil
	}
	return nil, fmt.Errorf("harness: content block type %q", b.Type)
}

// UnmarshalJSON reads a block of any type; unknown types keep their JSON in Raw.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	var w struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		Thinking   string          `json:"thinking"`
		Source     *Source         `json:"source"`
		ID         string          `json:"id"`
		Name       string          `json:"name"`
		Input      json.RawMessage `json:"input"`
		Content    *string         `json:"content"`
		Metadata   map[string]any  `json:"metadata"`
		State      string          `json:"state"`
		Output     []ContentBlock  `json:"output"`
		Hint       string          `json:"hint"`
		HintSource *string         `json:"hintSource"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*b = ContentBlock{Type: w.Type, Text: w.Text, Thinking: w.Thinking, Source: w.Source, ID: w.ID, Name: w.Name,
		Hint: w.Hint, HintSource: w.HintSource}
	switch w.Type {
	case BlockText, BlockThinking, BlockImage, BlockAudio, BlockVideo, BlockData, BlockHint:
	case BlockToolUse:
		b.ToolUse = &ToolUseBlock{ID: w.ID, Name: w.Name, Input: w.Input, Content: w.Content, Metadata: w.Metadata, State: w.State}
	case BlockToolResult:
		b.ToolResult = &ToolResultBlock{ID: w.ID, Name: w.Name, Output: w.Output, Metadata: w.Metadata, State: w.State}
	case "": // refused by the request's validation, which can name the field
	default:
		b.Raw = append(json.RawMessage(nil), data...)
	}
	return nil
}

// PlainText renders blocks as the text a tool result carries: text blocks as they are, binary
// blocks as a line that says what they are, other blocks as their JSON, joined by newlines.
func PlainText(blocks []ContentBlock) string {
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case BlockText:
			parts = append(parts, b.Text)
		case BlockThinking:
			parts = append(parts, b.Thinking)
		case BlockImage, BlockAudio, BlockVideo, BlockData:
			// Binary content reaches the client as data deltas; the model reads what it is,
			// not its bytes.
			parts = append(parts, describe(b))
		default:
			j, err := json.Marshal(b)
			if err == nil {
				parts = append(parts, string(j))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// describe is the text that stands for a binary block: "[image chart.png image/png]", with the
// URL of content by URL.
func describe(b ContentBlock) string {
	words := []string{b.Type}
	if b.Name != "" {
		words = append(words, b.Name)
	}
	if src := b.Source; src != nil {
		if t := src.MediaType + src.MimeType; t != "" {
			words = append(words, t)
		}
		if src.URL != "" {
			words = append(words, src.URL)
		}
	}
	return "[" + strings.Join(words, " ") + "]"
}
