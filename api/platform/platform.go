// Package platform serves the developer platform's run-stream API (platform-sse-and-webhooks.md,
// "SSE 事件结构"; CONTRACT §5): POST /api/agent/run/stream starts a run and streams it as SSE
// frames of the envelope {eventType, data, timestamp, step, totalTokens}; GET resumes a stream
// after an SSE id; the control routes answer permission asks and stop, suspend, resume or feed a
// run; the attachment routes list and serve a session's files.
//
// The dialect is a mapping: Map turns each canonical agent.Event into frames. Everything else —
// runs, pauses, persistence, replay — is the agent runtime's.
package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/wire"
)

// DefaultHeartbeat is sse.heartbeat's default (CONTRACT §1).
const DefaultHeartbeat = 15 * time.Second

// Deps is what the platform routes call into.
type Deps struct {
	Runtime *agent.Runtime
	// Workspaces is the runtime's workspace root: attachments are files in a session's
	// workspace. Nil: the runtime's own (Runtime.Workspace).
	Workspaces *tools.Workspaces
	Keys       *wire.Keys
	// Heartbeat is the interval of HEARTBEAT frames (sse.heartbeat); 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	Log       *slog.Logger
}

type api struct {
	Deps
}

// Register adds the platform routes under /api/agent to r.
func Register(r gin.IRouter, d Deps) {
	if d.Heartbeat <= 0 {
		d.Heartbeat = DefaultHeartbeat
	}
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Keys == nil {
		d.Keys = wire.NewKeys(nil)
	}
	a := &api{Deps: d}
	g := r.Group("/api/agent", a.authenticate)
	g.POST("/run/stream", wire.NoQuery, a.start)
	g.GET("/run/stream", wire.NoBody, a.resume) // its query is checked with its Last-Event-ID header
	g.POST("/permission/reply", wire.NoQuery, a.reply)
	g.POST("/run/:requestId/stop", wire.NoQuery, wire.NoBody, a.stop)
	g.POST("/run/:requestId/suspend", wire.NoQuery, wire.NoBody, a.suspend)
	g.POST("/run/:requestId/resume", wire.NoQuery, wire.NoBody, a.resumeRun)
	g.POST("/run/:requestId/input", wire.NoQuery, a.input)
	g.GET("/attachment/getByMessage", wire.Query("messageId", "sessionId"), wire.NoBody, a.attachmentsByMessage)
	g.GET("/attachment/download", wire.Query("path"), wire.NoBody, a.download)
}

// identify answers 401/403 itself and reports whether the caller is known.
func (a *api) identify(c *gin.Context, bodyUserID string) (wire.Caller, bool) {
	caller, err := a.Keys.Identify(c.Request, bodyUserID)
	if err != nil {
		a.refuse(c, err)
		return wire.Caller{}, false
	}
	return caller, true
}

// authenticate refuses a request without a valid key before anything of it is read: the routes
// read their bodies before they know the userId to identify the caller with.
func (a *api) authenticate(c *gin.Context) {
	if err := a.Keys.Authenticate(c.Request); err != nil {
		a.refuse(c, err)
	}
}

func (a *api) refuse(c *gin.Context, err error) {
	if wire.Status(err) == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="hookd"`)
	}
	wire.Fail(c, wire.Status(err), "%v", err)
}

// fail maps the runtime's errors: another user's or an unknown run or ask is 404; a run that is
// not in the state the request needs is 409.
func (a *api) fail(c *gin.Context, what string, err error) {
	switch {
	case errors.Is(err, agent.ErrNotFound):
		wire.Fail(c, http.StatusNotFound, "%s: not found", what)
	case errors.Is(err, agent.ErrSessionBusy), errors.Is(err, agent.ErrNotWaiting), errors.Is(err, agent.ErrAlreadyAnswered),
		errors.Is(err, agent.ErrArgumentsChanged), errors.Is(err, agent.ErrNotLive):
		wire.Fail(c, http.StatusConflict, "%v", err)
	default:
		wire.FailErr(c, err)
	}
}

// runRequest is the body of POST /api/agent/run/stream.
type runRequest struct {
	// SessionID is a session's numeric id (as SESSION_CREATED gives it), or a string: the client's
	// own session key. Absent, a new session is started.
	SessionID json.RawMessage `json:"sessionId"`
	UserInput *string         `json:"userInput"`
	AgentID   *int64          `json:"agentId"`
	BizKey    string          `json:"bizKey"`
	// UserID is only for the development mode without API keys (CONTRACT §5).
	UserID string `json:"userId"`
}

func (a *api) start(c *gin.Context) {
	var body runRequest
	if !wire.BindStrict(c, &body) {
		return
	}
	caller, ok := a.identify(c, body.UserID)
	if !ok {
		return
	}
	if body.UserInput == nil || strings.TrimSpace(*body.UserInput) == "" {
		wire.Fail(c, http.StatusBadRequest, "userInput: is required")
		return
	}
	if body.AgentID != nil && *body.AgentID <= 0 {
		// No agent has such an id (hooks, tasks and the dispatch API take positive ones only); it
		// would go to every hook as the envelope's agentId.
		wire.Fail(c, http.StatusBadRequest, "agentId: must be a positive id, or absent")
		return
	}
	agentID, err := caller.RunAgent(body.AgentID)
	if err != nil {
		wire.Fail(c, http.StatusForbidden, "%v", err)
		return
	}
	key, ok := a.sessionKey(c, caller, body.SessionID)
	if !ok {
		return
	}
	info, err := a.Runtime.StartRun(c.Request.Context(), agent.StartRequest{UserID: caller.UserID, PrincipalID: caller.PrincipalID,
		AgentID: agentID, SessionKey: key, Input: *body.UserInput, BizKey: body.BizKey})
	if errors.Is(err, agent.ErrSessionBusy) {
		msg := "sessionId: the session has a run in progress"
		if s, err := a.Runtime.Session(c.Request.Context(), caller.UserID, key); err == nil {
			if live, err := a.Runtime.LiveRun(c.Request.Context(), s.ID); err == nil {
				msg += fmt.Sprintf(" (requestId %s; follow it with GET /api/agent/run/stream?requestId=%s)", live.RequestID, live.RequestID)
			}
		}
		wire.Fail(c, http.StatusConflict, "%s", msg)
		return
	}
	if err != nil {
		a.fail(c, "run", err)
		return
	}
	a.stream(c, caller.UserID, info.RequestID, Cursor{}, "", false)
}

// sessionKey resolves the body's sessionId to the runtime's session key.
func (a *api) sessionKey(c *gin.Context, caller wire.Caller, raw json.RawMessage) (string, bool) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return "plat_" + hex.EncodeToString(b[:]), true
	}
	var key string
	if json.Unmarshal(raw, &key) == nil {
		if key = strings.TrimSpace(key); key == "" {
			wire.Fail(c, http.StatusBadRequest, "sessionId: must not be empty")
			return "", false
		}
		return key, true
	}
	var id int64
	if err := json.Unmarshal(raw, &id); err != nil || id <= 0 {
		wire.Fail(c, http.StatusBadRequest, "sessionId: must be a positive integer (a session id) or a string (a session key)")
		return "", false
	}
	s, err := a.Runtime.SessionByID(c.Request.Context(), caller.UserID, id)
	if err != nil {
		a.fail(c, "sessionId", err)
		return "", false
	}
	return s.Key, true
}

// resume is GET /api/agent/run/stream?requestId=&lastEventId= (or the Last-Event-ID header).
func (a *api) resume(c *gin.Context) {
	if userID, requestID, cur, from, ok := a.resumeRequest(c); ok {
		a.stream(c, userID, requestID, cur, from, true)
	}
}

// resumeRequest reads a resume; when it is not valid, it has answered. (Apart from resume, so
// its frame is not on the stack while the stream idles.)
func (a *api) resumeRequest(c *gin.Context) (userID, requestID string, cur Cursor, from string, ok bool) {
	caller, ok := a.identify(c, "")
	if !ok || !wire.KnownQuery(c, "requestId", "lastEventId") {
		return "", "", cur, "", false
	}
	// Parsed here rather than with c.Query, whose cache would live as long as the stream.
	q := c.Request.URL.Query()
	requestID = strings.TrimSpace(q.Get("requestId"))
	if requestID == "" {
		wire.Fail(c, http.StatusBadRequest, "requestId: is required")
		return "", "", cur, "", false
	}
	// A browser's EventSource reconnects to the URL it was given and sends its newest id in the
	// header, so of a query id and a header id the newer wins.
	for _, src := range []struct{ field, id string }{{"lastEventId", q.Get("lastEventId")}, {"Last-Event-ID", c.GetHeader("Last-Event-ID")}} {
		c2, err := ParseCursor(src.id)
		if err != nil {
			wire.Fail(c, http.StatusBadRequest, "%s: %v", src.field, err)
			return "", "", cur, "", false
		}
		if cur.Newer(c2) != cur {
			cur, from = c2, src.field
		}
	}
	return caller.UserID, requestID, cur, from, true
}

// stream sends the run's frames after cur until a terminal frame or the client leaves, with a
// heartbeat (no id) whenever the interval passes. An idle stream waits in this loop for as long
// as the run is paused, so its frame is kept small (a GC can then shrink the goroutine's stack to
// 8 KB); the writing happens in calls that return.
//
// reconnect says the client comes back to the run (GET): if the run has ended by then, its
// AGENT_STATUS frames are left out. The stream of the POST that started the run shows them even
// when the run ended before the stream began: that client sees the run for the first time.
func (a *api) stream(c *gin.Context, userID, requestID string, cur Cursor, from string, reconnect bool) {
	ctx := c.Request.Context()
	run, err := a.Runtime.Follow(ctx, userID, requestID, cur.After())
	if err != nil {
		a.fail(c, "requestId", err)
		return
	}
	defer run.Close()
	status, last := run.Start()
	switch {
	case cur.Seq > last:
		wire.Fail(c, http.StatusBadRequest, "%s: %s is beyond the last event of run %s", from, FrameID(cur.Seq, cur.K), requestID)
		return
	case cur.Seq == last && last > 0 && agent.Final(status):
		c.Status(http.StatusNoContent) // the end of a finished run: nothing follows, and an EventSource stops
		return
	}
	sse := wire.StartSSE(c.Writer, http.Header{"X-Request-Id": {requestID}})
	beat := time.NewTicker(a.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if sse.Event("", "", HeartbeatFrame(time.Now())) != nil {
				return
			}
		case <-run.Ready():
			if !sendNext(ctx, sse, run, &cur, reconnect && agent.Final(status)) {
				return
			}
		}
	}
}

// sendNext writes the frames of the run's next events; false when the stream is over (a
// terminal frame was sent, the run's events ended, or the client went away, in which case the
// run goes on and can be resumed). ended says the run had ended when a reconnect began: its
// AGENT_STATUS frames are left out, for the document has them "任务终态后不可见" (not visible
// once the task is in its final state); their ids are gaps, like those of events with no frame.
func sendNext(ctx context.Context, sse *wire.SSE, run *agent.Follower, cur *Cursor, ended bool) bool {
	evs, err := run.Next(ctx)
	if err != nil {
		return false // the run's end, or a failed read (logged)
	}
	for _, ev := range evs {
		for k, f := range Map(ev) {
			if cur.Skip(ev.Seq, k) || (ended && f.EventType == AgentStatus) {
				continue
			}
			if sse.Event(f.ID, "", f.Encode()) != nil || f.Terminal() {
				return false
			}
		}
	}
	return true
}
