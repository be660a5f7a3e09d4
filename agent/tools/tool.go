// Package tools holds the tools an agent can call: one registry, JSON-schema parameters, and the
// workspace, HTTP and shell tools.
package tools

import (
	"context"
	"encoding/json"
	"time"
)

// Tool is something the model can call.
type Tool interface {
	Spec() Spec
	// Run executes the call. A failure the model should see (bad path, HTTP error, non-zero exit)
	// is a Result with IsError set; an error return is for the runtime (it is shown as an error
	// result too, and logged).
	Run(ctx context.Context, env Env, args json.RawMessage) (Result, error)
}

// Spec describes a tool.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema
	// ReadOnly tools change nothing; the default permission allows them, and asks for the rest.
	ReadOnly bool `json:"readOnly"`
	// Subject names the argument that identifies what the call acts on (the command, the URL,
	// the path) for permission rules; empty means the whole JSON arguments.
	Subject string `json:"-"`
}

// Env is what a tool call may use of its run.
type Env struct {
	SessionID int64
	// Workspace is the session's directory; workspace tools refuse paths outside it.
	Workspace string
	// Progress reports output as it is produced (a terminal stream, a status line); may be nil.
	Progress func(text string)
}

// Result is a tool's output.
type Result struct {
	Text    string
	IsError bool
	// Data are binary results (an image, a file) sent on as data blocks.
	Data []Data
	// Files are workspace files the call created or changed; they become session attachments.
	Files []File
	// Sent are workspace files the call sends to the user: each becomes a session attachment
	// marked as sent, and its bytes a data block of the turn's answer.
	Sent []Sent
	// Async, when set, means the work goes on elsewhere: the run pauses until the result is
	// posted back (or the timeout turns the call into an error).
	Async *Async
}

// Async describes work a tool started outside the run.
type Async struct {
	TaskID   string
	Timeout  time.Duration
	Strategy string // POLL | NOTIFY: how the result is expected to come back
}

// Data is a binary result.
type Data struct {
	Name      string
	MediaType string
	Bytes     []byte
}

// Sent is a workspace file sent to the user, with its content.
type Sent struct {
	File
	MediaType string
	Bytes     []byte
}

// File is a workspace file a call created or updated.
type File struct {
	Path    string // relative to the workspace, slash-separated
	Size    int64
	Created bool // false: updated
}
