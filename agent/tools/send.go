package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
)

// NameSendAttachment is the send_attachment tool.
const NameSendAttachment = "send_attachment"

// MaxSendBytes caps a file send_attachment sends: the file travels inline (base64) in the run's
// event log and in its final message, so it is kept well below what a log row should hold.
const MaxSendBytes = 4 << 20

// SendAttachment is the send_attachment tool: the agent hands a workspace file to the user. The
// file becomes a session attachment marked as sent, and its bytes stream to the user as a data
// block that is also part of the turn's final message.
type SendAttachment struct{}

// NewSendAttachment returns the send_attachment tool.
func NewSendAttachment() *SendAttachment { return &SendAttachment{} }

// Spec implements Tool. Sending a file of the user's own workspace to that user changes
// nothing, so the tool is read-only for the default permission.
func (*SendAttachment) Spec() Spec {
	return Spec{
		Name:        NameSendAttachment,
		Description: "Send a file of the workspace to the user (a report, a chart, an export): the user receives it as an attachment.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or under /workspace/ (e.g. report.pdf)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
		ReadOnly: true,
		Subject:  "path",
	}
}

// Run implements Tool.
func (*SendAttachment) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(NameSendAttachment, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ready(ctx, env); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(a.Path) == "" {
		return errorResult("path is required"), nil
	}
	wp, f, fi, failed := openFile(env, a.Path)
	if failed != nil {
		return *failed, nil
	}
	defer f.Close()
	if fi.Size() > MaxSendBytes {
		return errorResult("%s is too large to send (%s, limit %s)", wp.Rel, formatSize(fi.Size()), formatSize(MaxSendBytes)), nil
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSendBytes+1))
	switch {
	case err != nil:
		return errorResult("cannot read %s: %v", wp.Rel, unwrapPathError(err)), nil
	case len(data) > MaxSendBytes: // it grew since Stat
		return errorResult("%s is too large to send (limit %s)", wp.Rel, formatSize(MaxSendBytes)), nil
	}
	media := sendMediaType(wp.Rel, data)
	return Result{
		Text: fmt.Sprintf("sent %s (%s, %d bytes) to the user", wp.Rel, media, len(data)),
		Sent: []Sent{{File: File{Path: wp.Rel, Size: int64(len(data))}, MediaType: media, Bytes: data}},
	}, nil
}

// sendMediaType is a file's media type by its extension, else sniffed from its content (text
// included, unlike the binary-only mediaType).
func sendMediaType(name string, data []byte) string {
	if t := extMediaType(name); t != "" {
		return t
	}
	t, _, err := mime.ParseMediaType(http.DetectContentType(data))
	if err != nil {
		return "application/octet-stream"
	}
	return t
}

// NameOf is a sent file's name: the last element of its path.
func (s Sent) NameOf() string { return path.Base(s.Path) }
