// Package dialect is the handler skeleton the chat dialects that follow one agent run per
// response share (AG-UI, AI SDK): their dependencies and defaults, the run statuses they tell
// apart, and the answers every such handler gives — a refused resume, an internal failure, a
// stream whose run's events broke off. Each dialect keeps only its own wire format and flow.
package dialect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
)

// Deps is what a dialect needs.
type Deps struct {
	Runtime *agent.Runtime
	Keys    *wire.Keys   // nil: no API keys (the loopback-only development mode)
	Log     *slog.Logger // nil: discard
	// Heartbeat is the SSE keep-alive interval (an SSE comment); 0 means 15 s.
	Heartbeat time.Duration
}

// The agent's run statuses a dialect tells apart.
const (
	StatusRunning   = "running"
	StatusSuspended = "suspended"
)

// Handler is the part of a dialect's handler that does not depend on its wire format. Name
// prefixes its log lines ("ag-ui"); Noun names the dialect's conversation in its errors
// ("thread", "chat").
type Handler struct {
	Deps
	Name, Noun string
}

// New is the handler of a dialect named name over d, with d's defaults filled in.
func New(d Deps, name, noun string) Handler {
	return Handler{Deps: d.WithDefaults(), Name: name, Noun: noun}
}

// WithDefaults is d with what it leaves unset filled in: no API keys, a discarding log, 15 s
// heartbeats.
func (d Deps) WithDefaults() Deps {
	if d.Keys == nil {
		d.Keys = wire.NewKeys(nil)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Heartbeat <= 0 {
		d.Heartbeat = 15 * time.Second
	}
	return d
}

// Pausing reports whether a run that is still running has announced its pause: the runtime
// records the pause a moment after it announces it, and a client acts on the announcement.
func (h Handler) Pausing(ctx context.Context, userID, requestID string) bool {
	_, err := h.Runtime.Pause(ctx, userID, requestID)
	return err == nil
}

// Refused answers a resume the run would not take: 409 naming field and the conversation key
// for what the run's state forbids, else an internal failure.
func (h Handler) Refused(c *gin.Context, field, key string, err error) {
	switch {
	case errors.Is(err, agent.ErrNotWaiting), errors.Is(err, agent.ErrAlreadyAnswered), errors.Is(err, agent.ErrArgumentsChanged),
		errors.Is(err, agent.ErrNotLive), errors.Is(err, agent.ErrNotFound):
		wire.Fail(c, http.StatusConflict, "%s: %s %q: %v", field, h.Noun, key, err)
	default:
		h.Internal(c, "resuming the run failed", err)
	}
}

// Internal logs a failure and answers 500 saying what failed.
func (h Handler) Internal(c *gin.Context, what string, err error) {
	h.Log.ErrorContext(c.Request.Context(), h.Name+": "+what, "path", c.FullPath(), "err", err)
	wire.Fail(c, http.StatusInternalServerError, "internal error: %s", what)
}

// BrokeOff is what a stream does when its run's events stopped before its end (a failed read):
// nothing when the client went away (false), else it logs and the dialect writes its error (true).
func (h Handler) BrokeOff(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	h.Log.ErrorContext(ctx, h.Name+": the run's events ended early", "err", err)
	return true
}

// Blank reports whether s is empty or only spaces.
func Blank(s string) bool { return strings.TrimSpace(s) == "" }

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// RawOrNull is v, or JSON null when v is empty.
func RawOrNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage(`null`)
	}
	return v
}

// Without is s without v.
func Without(s []string, v string) []string {
	return slices.DeleteFunc(s, func(x string) bool { return x == v })
}
