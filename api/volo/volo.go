// Package volo serves the VOLO AI chat dialect (/api/agent/chat/volo-ai/...): a thin mapping of
// the runtime's canonical events to the document's AgentExecutionEvent frames, and of its
// endpoints to the runtime's control API (start, stop, answer, resume, append). See
// docs/chat-volo.md for every endpoint, status and frame.
package volo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/api/dialect"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/hookdtype"
)

// Prefix is where the VOLO routes live.
const Prefix = "/api/agent/chat/volo-ai"

// Deps is what the VOLO routes call into: the same as the other chat dialects'.
type Deps = dialect.Deps

// Register adds the ten VOLO routes to r.
func Register(r gin.IRouter, d Deps) {
	d = d.WithDefaults()
	h := &handler{d: d, rt: d.Runtime}
	g := r.Group(Prefix)
	g.POST("/:sessionId/intent", h.streamQuery(), h.intent)
	g.POST("/:sessionId/stop", h.query(), h.stop)
	g.POST("/resume", h.streamQuery("turnId", "afterSeq"), h.resume)
	g.POST("/:sessionId/append-message", h.query(), h.appendMessage)
	g.POST("/interaction-response/:interactionId", h.query(), h.interactionResponse)
	g.POST("/interaction_response", h.query(), h.interactionResponse)
	g.POST("/tool-approval/:toolCallId", h.query("turnId"), h.toolApproval)
	g.POST("/tool-result/:toolCallId", h.query("turnId"), h.toolResult)
	g.GET("/:sessionId/messages", h.query("since"), h.noBody, h.messages)
	g.GET("/commands", h.query("triggerChar", "query", "sessionId"), h.noBody, h.commands)
}

// query refuses, in the JSON answer of the VOLO routes, a query parameter other than allowed:
// it would be ignored. An empty one means what its absence means.
func (h *handler) query(allowed ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := wire.CheckQuery(c.Request, true, allowed...); err != nil {
			h.fail(c, badRequest("%v", err))
		}
	}
}

// noBody refuses, in the JSON answer of the VOLO routes, a body on a route that takes none.
func (h *handler) noBody(c *gin.Context) {
	if err := wire.CheckNoBody(c.Request, c.FullPath()); err != nil {
		h.fail(c, badRequest("%v", err))
	}
}

// streamQuery is query for the routes that answer with a stream, whose early errors are an ERROR
// frame of a synthetic turn.
func (h *handler) streamQuery(allowed ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := wire.CheckQuery(c.Request, true, allowed...); err != nil {
			h.earlyError(c, TraceInfo{SessionID: c.Param("sessionId"), TurnID: syntheticTurn()}, badRequest("%v", err))
		}
	}
}

type handler struct {
	d  Deps
	rt *agent.Runtime
}

// Message keys of the JSON responses and ERROR frames.
const (
	msgSuccess             = "success"
	msgStopped             = "success.stopped"
	msgAppended            = "success.appended"
	errUnauthorized        = "agent.error.unauthorized"
	errForbidden           = "agent.error.forbidden"
	errBadRequest          = "agent.error.badRequest"
	errTooLarge            = "agent.error.payloadTooLarge"
	errNoRunningTask       = "agent.error.noRunningTask"
	errSessionNotFound     = "agent.error.sessionNotFound"
	errTurnNotFound        = "agent.error.turnNotFound"
	errInteractionNotFound = "agent.error.interactionNotFound"
	errToolCallNotFound    = "agent.error.toolCallNotFound"
	errNotWaiting          = "agent.error.notWaiting"
	errNotPaused           = "agent.error.notPaused"
	errResponseRequired    = "agent.error.responseRequired"
	errAlreadyAnswered     = "agent.error.alreadyAnswered"
	errArgumentsChanged    = "agent.error.argumentsChanged"
	errAppendNotSupported  = "agent.error.appendNotSupported"
	errSessionBusy         = "agent.error.sessionBusy"
	errInternal            = "agent.error.internal"
)

// Response is the shape of every non-SSE VOLO response: {"code":200,"message":"success","data":...}.
// Code equals the HTTP status; Detail says in words what went wrong.
type Response struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Detail  string `json:"detail,omitempty"`
	Data    any    `json:"data,omitempty"`
}

// apiError is a failure with its status, message key and detail.
type apiError struct {
	status int
	key    string
	detail string
}

func (e *apiError) Error() string { return e.detail }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, key: errBadRequest, detail: sprintf(format, args...)}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func reply(c *gin.Context, status int, msg string, data any) {
	c.JSON(status, Response{Code: status, Message: msg, Data: data})
}

func (h *handler) fail(c *gin.Context, e *apiError) {
	if e.status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="volo-ai"`)
	}
	if e.status >= 500 {
		h.d.Log.ErrorContext(c.Request.Context(), "volo request failed", "method", c.Request.Method, "path", c.FullPath(), "err", e.detail)
		e.detail = "internal error"
	}
	c.AbortWithStatusJSON(e.status, Response{Code: e.status, Message: e.key, Detail: e.detail})
}

// internal wraps an unexpected error.
func internal(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, key: errInternal, detail: err.Error()}
}

// readJSON decodes the request body into v. An empty body is an error only when required.
func readJSON(r *http.Request, v any, required bool) *apiError {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, key: errTooLarge, detail: sprintf("request body over %d bytes", tooBig.Limit)}
		}
		return badRequest("body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if required {
			return badRequest("body: is empty; a JSON object is required")
		}
		return nil
	}
	// Strictly, as every API of the daemon: a field a request type does not have would be ignored.
	if err := hookdtype.DecodeStrict(body, v, ""); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// authError is the failure of Identify.
func authError(err error) *apiError {
	st := wire.Status(err)
	key := errUnauthorized
	if st == http.StatusForbidden {
		key = errForbidden
	}
	return &apiError{status: st, key: key, detail: "Authentication failed: " + err.Error()}
}

// begin reads an optional JSON body (which may name the userId) and identifies the caller. An
// auth failure wins over a malformed body.
func (h *handler) begin(c *gin.Context, body any, required bool, userID func() string) (wire.Caller, bool) {
	if err := h.d.Keys.Authenticate(c.Request); err != nil { // before the body is read, for anyone
		h.fail(c, authError(err))
		return wire.Caller{}, false
	}
	perr := readJSON(c.Request, body, required)
	uid := ""
	if perr == nil && userID != nil {
		uid = userID()
	}
	caller, err := h.d.Keys.Identify(c.Request, uid)
	if err != nil {
		h.fail(c, authError(err))
		return caller, false
	}
	if perr != nil {
		h.fail(c, perr)
		return caller, false
	}
	return caller, true
}

// ---- SSE ----

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// SyntheticPrefix starts the turn id of an early error, a turn that never ran.
const SyntheticPrefix = "synthetic-"

func syntheticTurn() string { return SyntheticPrefix + newUUID() }

// earlyError answers an SSE endpoint that could not start or resume a turn: the error's HTTP
// status, and an event stream of exactly one ERROR frame whose turnId a client can attach to its
// turn tree (a synthetic one when there is no real turn).
func (h *handler) earlyError(c *gin.Context, tr TraceInfo, e *apiError) {
	if e.status >= 500 {
		h.d.Log.ErrorContext(c.Request.Context(), "volo stream failed", "path", c.FullPath(), "err", e.detail)
		e.detail = "internal error"
	}
	f := Event{Type: TypeError, TraceInfo: tr, Timestamp: Timestamp(time.Now()), Code: e.status, ErrorCode: e.key, Message: e.detail}
	b, _ := json.Marshal(f)
	w := c.Writer
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="volo-ai"`)
	}
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte("event: " + TypeError + "\ndata: " + string(b) + "\n\n"))
	c.Abort()
}

func writeFrame(s *wire.SSE, f Event) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return s.Event("", f.Type, b)
}

// streamSpec says which part of which run a response streams.
type streamSpec struct {
	userID    string
	requestID string
	after     int64 // stream the events with seq > after
	// skip drops the first frames of event skipSeq: a reconnecting client has them (afterSeq N.k).
	skipSeq int64
	skip    int
	// endFrom: only a pause or end with seq ≥ endFrom ends the stream; the pauses before it, which
	// a replay from an earlier frame passes, were answered.
	endFrom int64
	trace   TraceInfo
	pre     []Event // frames written before the run's (commands)
	mode    Mode    // set on PROGRESS TURN_STARTED
	// noTools drops the frames of tool calls a tool-less (FAST) run's model still streamed: the
	// runtime discards those calls, so no TOOL_END would ever follow.
	noTools bool
}

// stream writes a run's frames until the turn ends or pauses, or the client goes away (the run
// does not stop then: the client reconnects with resume?turnId=&afterSeq=).
func (h *handler) stream(c *gin.Context, s streamSpec) {
	ctx := c.Request.Context()
	run, err := h.rt.Follow(ctx, s.userID, s.requestID, s.after)
	if err != nil {
		h.earlyError(c, s.trace, internal(err))
		return
	}
	defer run.Close()
	sse := wire.StartSSE(c.Writer, nil)
	for _, f := range s.pre {
		if writeFrame(sse, f) != nil {
			return
		}
	}
	tick := time.NewTicker(h.d.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-run.Ready():
			evs, err := run.Next(ctx)
			if err != nil {
				return // the run's end, or a failed read (logged)
			}
			for _, ev := range evs {
				if s.noTools && ev.Source == "" && (ev.Kind == agent.KindToolCallStarted || ev.Kind == agent.KindToolCallDelta) {
					continue
				}
				frames := Map(ev, s.trace)
				if s.skip > 0 && ev.Seq == s.skipSeq {
					frames = frames[min(s.skip, len(frames)):]
				}
				for _, f := range frames {
					if f.Phase == PhaseTurnStarted && s.mode != "" {
						f.ExecutionMode = string(s.mode)
					}
					if writeFrame(sse, f) != nil {
						return
					}
				}
				if Terminal(ev) && ev.Seq >= s.endFrom {
					return
				}
			}
		case <-tick.C:
			if sse.Comment("ping") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// writeFrames answers with a stream of frames that exist already (a command turn).
func writeFrames(c *gin.Context, frames []Event) {
	sse := wire.StartSSE(c.Writer, nil)
	for _, f := range frames {
		if writeFrame(sse, f) != nil {
			return
		}
	}
}

// ---- intent ----

// ChatRequest is the body of POST {sessionId}/intent.
type ChatRequest struct {
	SessionID     string       `json:"sessionId"`
	UserID        string       `json:"userId"` // development mode only; with API keys it must be the key's user
	UserMessage   string       `json:"userMessage"`
	ParentTurnID  *string      `json:"parentTurnId"`
	ExecutionMode string       `json:"executionMode"`
	Attachments   []Attachment `json:"attachments"`
	// ExternalTools (a hookd extension) are tools the client runs itself: a call to one pauses
	// the turn with an INTERACTION until tool-result/{toolCallId} brings its result.
	ExternalTools []model.ToolSpec `json:"externalTools"`
}

func (h *handler) intent(c *gin.Context) {
	key := c.Param("sessionId")
	var req ChatRequest
	perr := readJSON(c.Request, &req, true)
	if perr != nil {
		req = ChatRequest{}
	}
	if req.ParentTurnID != nil && strings.TrimSpace(*req.ParentTurnID) == "" {
		req.ParentTurnID = nil
	}
	tr := TraceInfo{SessionID: key, TurnID: syntheticTurn(), ParentTurnID: req.ParentTurnID}
	caller, err := h.d.Keys.Identify(c.Request, req.UserID)
	if err != nil {
		h.earlyError(c, tr, authError(err))
		return
	}
	if perr != nil {
		h.earlyError(c, tr, perr)
		return
	}
	if e := validateIntent(key, &req); e != nil {
		h.earlyError(c, tr, e)
		return
	}
	mode, err := ParseMode(req.ExecutionMode)
	if err != nil {
		h.earlyError(c, tr, badRequest("%v", err))
		return
	}
	msg := strings.TrimSpace(req.UserMessage)
	if trig, name, args, ok := parseCommand(msg); ok {
		h.commandTurn(c, caller, TraceInfo{SessionID: key, TurnID: newUUID(), ParentTurnID: req.ParentTurnID}, trig, name, args)
		return
	}
	text, paths := req.UserMessage, []string(nil)
	if strings.HasPrefix(msg, "@") {
		paths, text = splitFileRefs(msg)
	}
	input, images, e := attachmentContent(text, req.Attachments)
	if e != nil {
		h.earlyError(c, tr, e)
		return
	}
	var pre []Event
	if len(paths) > 0 {
		refs, ferr := h.readFiles(c.Request.Context(), caller, key, paths)
		if ferr != nil {
			h.fileFailure(c, TraceInfo{SessionID: key, TurnID: newUUID(), ParentTurnID: req.ParentTurnID}, ferr)
			return
		}
		input, images = addFiles(input, images, refs)
		pre = fileFrames(refs)
	}
	if mode == ModeAuto {
		mode = Classify(text, len(req.Attachments)+len(paths))
	}
	start := agent.StartRequest{UserID: caller.UserID, PrincipalID: caller.PrincipalID, AgentID: caller.AgentID, SessionKey: key, Input: input,
		Images: images, ParentTurnID: req.ParentTurnID, ExternalTools: req.ExternalTools}
	if mode == ModeFast {
		start.NoTools, start.MaxIters = true, 1
	}
	info, err := h.rt.StartRun(c.Request.Context(), start)
	if errors.Is(err, agent.ErrSessionBusy) {
		h.earlyError(c, tr, &apiError{status: http.StatusConflict, key: errSessionBusy,
			detail: "the session already has a turn in progress: stop it, or answer its interaction"})
		return
	}
	if err != nil {
		h.earlyError(c, tr, internal(err))
		return
	}
	run, err := h.rt.Run(c.Request.Context(), caller.UserID, info.RequestID)
	if err != nil {
		h.earlyError(c, tr, internal(err))
		return
	}
	tr.TurnID = run.ReplyID
	for i := range pre {
		pre[i].TraceInfo = tr
	}
	h.stream(c, streamSpec{userID: caller.UserID, requestID: info.RequestID, trace: tr, pre: pre, mode: mode, noTools: start.NoTools})
}

// maxKeyLen bounds session ids and turn ids.
const maxKeyLen = 200

func validateIntent(key string, req *ChatRequest) *apiError {
	switch {
	case strings.TrimSpace(key) == "" || len(key) > maxKeyLen:
		return badRequest("sessionId: must be 1 to %d characters", maxKeyLen)
	case req.SessionID != "" && req.SessionID != key:
		return badRequest("sessionId: the body's %q differs from the path's %q", req.SessionID, key)
	case strings.TrimSpace(req.UserMessage) == "":
		return badRequest("userMessage: is required")
	case req.ParentTurnID != nil && len(*req.ParentTurnID) > maxKeyLen:
		return badRequest("parentTurnId: longer than %d characters", maxKeyLen)
	}
	seen := map[string]bool{}
	for i, t := range req.ExternalTools {
		if strings.TrimSpace(t.Name) == "" || seen[t.Name] {
			return badRequest("externalTools[%d].name: must be a non-empty name used once", i)
		}
		seen[t.Name] = true
		if len(t.Parameters) == 0 {
			req.ExternalTools[i].Parameters = json.RawMessage(`{"type":"object"}`)
		}
	}
	return nil
}

// ---- stop, append ----

// liveRun finds the caller's running or suspended turn in a session; another user's session is
// no session for this one.
func (h *handler) liveRun(ctx context.Context, caller wire.Caller, key string) (agent.RunView, *apiError) {
	none := &apiError{status: http.StatusNotFound, key: errNoRunningTask, detail: "the session has no running turn"}
	sess, err := h.rt.Session(ctx, caller.UserID, key)
	if errors.Is(err, agent.ErrNotFound) {
		return agent.RunView{}, none
	} else if err != nil {
		return agent.RunView{}, internal(err)
	}
	run, err := h.rt.LiveRun(ctx, sess.ID)
	if errors.Is(err, agent.ErrNotFound) {
		return agent.RunView{}, none
	} else if err != nil {
		return agent.RunView{}, internal(err)
	}
	return run, nil
}

type userBody struct {
	UserID string `json:"userId"`
}

func (h *handler) stop(c *gin.Context) {
	var body userBody
	caller, ok := h.begin(c, &body, false, func() string { return body.UserID })
	if !ok {
		return
	}
	ctx := c.Request.Context()
	run, e := h.liveRun(ctx, caller, c.Param("sessionId"))
	if e != nil {
		h.fail(c, e)
		return
	}
	if err := h.rt.Stop(ctx, caller.UserID, run.RequestID); err != nil {
		if errors.Is(err, agent.ErrNotLive) || errors.Is(err, agent.ErrNotFound) {
			h.fail(c, &apiError{status: http.StatusNotFound, key: errNoRunningTask, detail: "the session has no running turn"})
			return
		}
		h.fail(c, internal(err))
		return
	}
	reply(c, http.StatusOK, msgStopped, nil)
}

// AppendRequest is the body of POST {sessionId}/append-message.
type AppendRequest struct {
	AppendedText string `json:"appendedText"`
	UserID       string `json:"userId"`
}

func (h *handler) appendMessage(c *gin.Context) {
	var body AppendRequest
	caller, ok := h.begin(c, &body, true, func() string { return body.UserID })
	if !ok {
		return
	}
	if strings.TrimSpace(body.AppendedText) == "" {
		h.fail(c, badRequest("appendedText: is required"))
		return
	}
	ctx := c.Request.Context()
	run, e := h.liveRun(ctx, caller, c.Param("sessionId"))
	if e != nil {
		h.fail(c, e)
		return
	}
	if run.Request.NoTools {
		h.fail(c, &apiError{status: http.StatusConflict, key: errAppendNotSupported,
			detail: "the running turn is FAST (a single model call): appended text would never be read"})
		return
	}
	id, err := h.rt.AppendInput(ctx, caller.UserID, run.RequestID, body.AppendedText)
	if errors.Is(err, agent.ErrNotLive) || errors.Is(err, agent.ErrNotFound) {
		h.fail(c, &apiError{status: http.StatusNotFound, key: errNoRunningTask, detail: "the session has no running turn"})
		return
	} else if err != nil {
		h.fail(c, internal(err))
		return
	}
	reply(c, http.StatusOK, msgAppended, gin.H{"inputId": id, "turnId": run.ReplyID, "timestamp": time.Now().Format(time.RFC3339)})
}

// ---- messages ----

// ChatMessage is one message of GET {sessionId}/messages (ChatMessageVO).
type ChatMessage struct {
	ID           int64            `json:"id"`
	SessionID    string           `json:"sessionId"`
	TurnID       string           `json:"turnId,omitempty"`
	ParentTurnID *string          `json:"parentTurnId,omitempty"`
	Role         string           `json:"role"`
	Content      string           `json:"content"`
	Thinking     string           `json:"thinking,omitempty"`
	ToolCalls    []model.ToolCall `json:"toolCalls,omitempty"`
	// ToolResults are the results of the turn's tool calls, as its TOOL_END frames carried them.
	ToolResults []*ToolInfo  `json:"toolResults,omitempty"`
	Usage       *agent.Usage `json:"usage,omitempty"`
	CreatedAt   string       `json:"createdAt"`
	UpdatedAt   string       `json:"updatedAt"`
}

// ParseSince reads the since parameter: RFC 3339 (with or without fractional seconds), or Unix
// milliseconds.
func ParseSince(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	// The document's own example, messages?since=2026-05-13T00:00:00+08:00, sent as it is written
	// arrives with its "+" read as a space (form encoding): a space before the offset is its "+".
	if i := strings.LastIndexByte(s, ' '); i > 0 && len(s)-i == len(" 08:00") && strings.IndexByte(s, 'T') > 0 {
		s = s[:i] + "+" + s[i+1:]
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("since: want an RFC 3339 time (2026-05-13T00:00:00+08:00) or Unix milliseconds")
	}
	return t, nil
}

func (h *handler) messages(c *gin.Context) {
	caller, err := h.d.Keys.Identify(c.Request, "")
	if err != nil {
		h.fail(c, authError(err))
		return
	}
	since, err := ParseSince(c.Query("since"))
	if err != nil {
		h.fail(c, badRequest("%v", err))
		return
	}
	ctx := c.Request.Context()
	key := c.Param("sessionId")
	sess, err := h.rt.Session(ctx, caller.UserID, key)
	if errors.Is(err, agent.ErrNotFound) {
		h.fail(c, &apiError{status: http.StatusNotFound, key: errSessionNotFound, detail: "no such session"})
		return
	} else if err != nil {
		h.fail(c, internal(err))
		return
	}
	hist, err := h.rt.History(ctx, sess.ID, since)
	if err != nil {
		h.fail(c, internal(err))
		return
	}
	turns, err := h.turnsOf(ctx, sess.ID, hist)
	if err != nil {
		h.fail(c, internal(err))
		return
	}
	records, err := h.answerRecords(ctx, caller.UserID, hist)
	if err != nil {
		h.fail(c, internal(err))
		return
	}
	out := make([]ChatMessage, 0, len(hist))
	for _, m := range hist {
		if m.Role == model.RoleSystem { // a context reset marker (/clear)
			continue
		}
		t := turns[m.ID]
		msg := ChatMessage{ID: m.ID, SessionID: key, TurnID: t.turnID, ParentTurnID: t.parent, Role: m.Role,
			Content: m.Text, Thinking: m.Thinking, ToolCalls: m.ToolCalls, Usage: m.Usage,
			CreatedAt: Timestamp(m.CreatedAt), UpdatedAt: Timestamp(m.UpdatedAt)}
		if rec := records[m.ID]; rec != nil {
			msg.Thinking, msg.ToolResults = firstNonEmpty(rec.thinking.String(), m.Thinking), rec.toolResults
		}
		out = append(out, msg)
	}
	reply(c, http.StatusOK, msgSuccess, out)
}

type turnRef struct {
	turnID string
	parent *string
}

// turnsOf maps the session's messages (changed since) to their turns.
func (h *handler) turnsOf(ctx context.Context, sessionID int64, hist []agent.HistoryMessage) (map[int64]turnRef, error) {
	runs, err := h.rt.SessionRuns(ctx, sessionID, 1000)
	if err != nil {
		return nil, err
	}
	byRequest := map[string]turnRef{}
	for _, r := range runs {
		byRequest[r.RequestID] = turnRef{turnID: r.ReplyID, parent: r.Request.ParentTurnID}
	}
	out := map[int64]turnRef{}
	for _, m := range hist {
		if t, ok := byRequest[m.RunID]; ok {
			out[m.ID] = t
		}
	}
	return out, nil
}

// answerRecord is what the turn of an assistant message did besides its text, rebuilt from the
// run's events: the runtime keeps only the last step's reasoning with a message
// (runState.Thinking), and no tool results.
type answerRecord struct {
	thinking    strings.Builder // every step's, as the PROGRESS THINKING frames streamed it
	toolResults []*ToolInfo
}

// answerRecords rebuilds the records of the assistant messages in hist from their runs' events.
// A run's events go to its assistant message, and after a supplementary input
// (input.consumed) to the message that input started.
func (h *handler) answerRecords(ctx context.Context, userID string, hist []agent.HistoryMessage) (map[int64]*answerRecord, error) {
	out := map[int64]*answerRecord{}
	done := map[string]bool{}
	for _, m := range hist {
		if m.Role != model.RoleAssistant || m.RunID == "" || done[m.RunID] {
			continue
		}
		done[m.RunID] = true
		evs, err := h.rt.Replay(ctx, userID, m.RunID, 0)
		if err != nil {
			return nil, err
		}
		var rec *answerRecord
		to := func(messageID int64) {
			if rec = out[messageID]; rec == nil {
				rec = &answerRecord{}
				out[messageID] = rec
			}
		}
		for _, ev := range evs {
			switch {
			case ev.Source != "":
			case ev.Kind == agent.KindRunStarted && ev.Run != nil:
				to(ev.Run.AssistantMessageID)
			case ev.Kind == agent.KindInputConsumed && ev.Input != nil:
				to(ev.Input.AssistantMessageID)
			case rec == nil:
			case ev.Kind == agent.KindBlockDelta && ev.Block != nil && ev.Block.Type == agent.BlockThinking:
				rec.thinking.WriteString(ev.Block.Delta)
			case ev.Kind == agent.KindToolResultEnded && ev.Tool != nil:
				rec.toolResults = append(rec.toolResults, toolEnd(ev))
			}
		}
	}
	return out, nil
}
