// Package model is how the agent loop talks to a language model: one small interface, a scripted
// provider (the embedded default, replaying a script) and an OpenAI-compatible provider.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Model streams one completion. Stream calls emit for every piece as it arrives (in order, from
// the calling goroutine) and returns the whole response at the end. Errors are *Error so the loop
// can tell what is worth retrying.
type Model interface {
	Stream(ctx context.Context, req Request, emit func(Chunk)) (Response, error)
}

// Request is one model call.
type Request struct {
	// Model overrides the configured model name when a dialect supplies one.
	Model       string
	Temperature *float64
	Messages    []Message
	Tools       []ToolSpec
	// RunInput is the (possibly hook-modified) user input that started the run, and Step the
	// number of model calls the run made before this one. The scripted provider picks its script
	// and step from them, which makes it stateless: a resumed run goes on where it stopped.
	RunInput string
	Step     int
	// Attempt counts the tries of this same call: 0 for the first, 1 for the first retry after a
	// retryable *Error, and so on (the loop sets it). A scripted step with an "error" fails only
	// on attempt 0, so the retry succeeds.
	Attempt int
}

// Roles of a message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation the model sees.
type Message struct {
	Role string `json:"role"`
	// Text is the message text (user input, assistant answer, tool output as text).
	Text string `json:"text,omitempty"`
	// Thinking is the assistant's reasoning, kept for the record; providers do not resend it.
	Thinking string `json:"thinking,omitempty"`
	// Images are data URLs or https URLs given to the model with a user message.
	Images []string `json:"images,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and Name say which call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema of the arguments
}

// ToolCall is a call the model made. Arguments is the JSON text as the model produced it (it may
// be invalid; the loop repairs or refuses it).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage counts the tokens of one call. InputTokens includes CachedTokens.
type Usage struct {
	InputTokens     int64         `json:"inputTokens"`
	OutputTokens    int64         `json:"outputTokens"`
	CachedTokens    int64         `json:"cachedTokens"`
	ReasoningTokens int64         `json:"reasoningTokens"`
	Duration        time.Duration `json:"duration"`
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// ChunkKind says what a streamed piece is.
type ChunkKind int

const (
	ChunkThinking      ChunkKind = iota // Text is reasoning
	ChunkText                           // Text is answer text
	ChunkToolCallStart                  // a tool call began: Index, ToolCallID, ToolName
	ChunkToolCallDelta                  // Index, ArgsDelta: a piece of the arguments JSON
	// ChunkRecovering: the stream broke off and the provider goes on from where it broke (Attempt
	// of MaxAttempts; Text says what broke). What streamed before stays; what follows continues it.
	ChunkRecovering
)

// Chunk is a streamed piece of a response.
type Chunk struct {
	Kind       ChunkKind
	Text       string
	Index      int // which tool call of this response
	ToolCallID string
	ToolName   string
	ArgsDelta  string
	// Attempt and MaxAttempts count the recoveries of a ChunkRecovering.
	Attempt     int
	MaxAttempts int
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// Response is a whole model answer.
type Response struct {
	Model        string // the model that answered
	Thinking     string
	Text         string
	ToolCalls    []ToolCall
	Usage        Usage
	FinishReason string
}

// ErrorKind classifies a failed call.
type ErrorKind string

const (
	ErrRateLimited ErrorKind = "rate_limited" // 429: retry after a while
	ErrNetwork     ErrorKind = "network"      // no answer, reset, 5xx: retry
	ErrEmpty       ErrorKind = "empty"        // an answer with nothing in it: retry
	ErrFatal       ErrorKind = "fatal"        // bad request, auth, unknown model: give up
)

// Error is a failed model call.
type Error struct {
	Kind       ErrorKind
	StatusCode int           // HTTP status when there was one
	RetryAfter time.Duration // the provider's hint, 0 when none
	Err        error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("model %s (HTTP %d): %v", e.Kind, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("model %s: %v", e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying again may succeed.
func (e *Error) Retryable() bool { return e.Kind != ErrFatal }
