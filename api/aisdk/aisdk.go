// Package aisdk is the Vercel AI SDK dialect: POST /ai-sdk/chat answers useChat's default
// transport with the UI message stream protocol (SSE `data:` parts, header
// x-vercel-ai-ui-message-stream: v1), and GET /ai-sdk/chat/{id}/stream resumes a chat's stream
// from hookd's event log. The chat id is hookd's session; a permission ask is the protocol's
// tool approval, a client-side tool a tool call without a server result. docs/chat-ai-sdk.md
// has the whole mapping.
package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/api/dialect"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// Deps is what the AI SDK dialect needs.
type Deps = dialect.Deps

// Register adds POST /ai-sdk/chat and GET /ai-sdk/chat/:id/stream to r.
func Register(r gin.IRouter, d Deps) {
	h := &handler{dialect.New(d, "ai-sdk", "chat")}
	r.POST("/ai-sdk/chat", wire.NoQuery, h.chat)
	r.GET("/ai-sdk/chat/:id/stream", wire.NoBody, h.resumeStream)
}

// Header is the header that names the protocol on every stream.
const Header = "X-Vercel-Ai-Ui-Message-Stream"

type handler struct{ dialect.Handler }

// chatBody is the request's top level, decoded strictly; the messages are the client's own
// records and are read leniently (the SDK adds fields to them release by release).
type chatBody struct {
	ChatRequest
	Messages json.RawMessage `json:"messages"`
}

func (h *handler) chat(c *gin.Context) {
	caller, err := h.Keys.Identify(c.Request, "")
	if err != nil {
		wire.Fail(c, wire.Status(err), "%v", err)
		return
	}
	var raw json.RawMessage
	if !wire.BindStrict(c, &raw) {
		return
	}
	var body chatBody
	if err := hookdtype.DecodeStrict(raw, &body, ""); err != nil {
		wire.Fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	req := body.ChatRequest
	if len(body.Messages) > 0 {
		if err := checkAnswers(body.Messages); err != nil {
			wire.Fail(c, http.StatusBadRequest, "%v", err)
			return
		}
		if err := json.Unmarshal(body.Messages, &req.Messages); err != nil {
			wire.Fail(c, http.StatusBadRequest, "messages: must be an array of UI messages: %s", strings.TrimPrefix(err.Error(), "json: "))
			return
		}
	}
	if err := req.validate(); err != nil {
		wire.Fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	ctx := c.Request.Context()
	rt := h.Runtime
	var requestID string
	var after int64
	live, found, err := h.liveRun(ctx, caller.UserID, req.ID)
	switch {
	case err != nil:
		h.Internal(c, "looking up the chat's run failed", err)
		return
	case found && live.Status == dialect.StatusRunning && !h.Pausing(ctx, caller.UserID, live.RequestID):
		wire.Fail(c, http.StatusConflict, "id: chat %q has a run in progress; resume its stream with GET /ai-sdk/chat/%s/stream", req.ID, req.ID)
		return
	case found:
		requestID = live.RequestID
		if after, err = h.resume(c, caller, &req, live.RequestID); err != nil {
			return // answered
		}
	default:
		if requestID, err = h.start(c, caller, &req); err != nil {
			return // answered
		}
	}
	f, err := rt.Follow(ctx, caller.UserID, requestID, after)
	if err != nil {
		h.Internal(c, "following the run failed", err)
		return
	}
	defer f.Close()
	h.stream(c, f, h.mapper(&req), false)
}

func (h *handler) mapper(req *ChatRequest) *Mapper {
	names := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		names[i] = strings.TrimSpace(t.Name)
	}
	return NewMapper(req.ID, names)
}

// liveRun is the chat's running or paused run.
func (h *handler) liveRun(ctx context.Context, userID, chat string) (run struct{ RequestID, Status string }, found bool, err error) {
	sess, err := h.Runtime.Session(ctx, userID, chat)
	if errors.Is(err, agent.ErrNotFound) {
		return run, false, nil
	}
	if err != nil {
		return run, false, err
	}
	live, err := h.Runtime.LiveRun(ctx, sess.ID)
	if errors.Is(err, agent.ErrNotFound) {
		return run, false, nil
	}
	if err != nil {
		return run, false, err
	}
	run.RequestID, run.Status = live.RequestID, live.Status
	return run, true, nil
}

var errAnswered = errors.New("answered")

// start begins a new turn from the chat's last message, which must be the user's.
func (h *handler) start(c *gin.Context, caller wire.Caller, req *ChatRequest) (string, error) {
	n := len(req.Messages)
	last := req.Messages[n-1]
	if last.Role != "user" {
		wire.Fail(c, http.StatusBadRequest, "messages[%d].role: the last message must be the user's new message (nothing in chat %q waits for an answer)", n-1, req.ID)
		return "", errAnswered
	}
	text, err := last.text()
	if err == nil && dialect.Blank(text) {
		err = errors.New("parts: no text")
	}
	if err != nil {
		wire.Fail(c, http.StatusBadRequest, "messages[%d].%v", n-1, err)
		return "", errAnswered
	}
	sr := agent.StartRequest{UserID: caller.UserID, PrincipalID: caller.PrincipalID, AgentID: caller.AgentID, SessionKey: req.ID, Input: text,
		TriggerSource: dispatcher.SourceHuman, Model: strings.TrimSpace(req.Model), Temperature: req.Temperature}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		sr.ExternalTools = append(sr.ExternalTools, model.ToolSpec{Name: strings.TrimSpace(t.Name), Description: t.Description, Parameters: schema})
	}
	info, err := h.Runtime.StartRun(c.Request.Context(), sr)
	if errors.Is(err, agent.ErrSessionBusy) {
		wire.Fail(c, http.StatusConflict, "id: chat %q has a run in progress", req.ID)
		return "", err
	}
	if err != nil {
		h.Internal(c, "starting the run failed", err)
		return "", err
	}
	return info.RequestID, nil
}

// resume hands the paused run what the last message brings — approval responses, outputs of
// client-side tools, or new words — and returns the seq of its pause, after which this
// response reads.
func (h *handler) resume(c *gin.Context, caller wire.Caller, req *ChatRequest, requestID string) (int64, error) {
	ctx := c.Request.Context()
	rt := h.Runtime
	pause, err := rt.Pause(ctx, caller.UserID, requestID)
	if err != nil {
		h.Refused(c, "id", req.ID, err)
		return 0, err
	}
	asks := map[string]bool{}
	external := map[string]agent.PendingCall{}
	for _, p := range pause.Suspend.PendingCalls {
		switch {
		case p.External:
			external[p.CallID] = p
		case p.State == "asking":
			asks[p.AskID] = true
		}
	}
	last := req.Messages[len(req.Messages)-1]
	var answers []agent.Answer
	var results []agent.ToolOutput
	if last.Role == "assistant" {
		for _, p := range last.Parts {
			if !p.isTool() {
				continue
			}
			if a := p.Approval; p.State == "approval-responded" && a != nil && asks[a.ID] && a.Approved != nil {
				answers = append(answers, agent.Answer{AskID: a.ID, Approved: *a.Approved, Reason: a.Reason})
			}
			if x, ok := external[p.ToolCallID]; ok {
				switch p.State {
				case "output-available":
					results = append(results, agent.ToolOutput{CallID: x.CallID, Name: x.Name, Output: outputText(p.Output), State: agent.ToolSuccess})
				case "output-error":
					results = append(results, agent.ToolOutput{CallID: x.CallID, Name: x.Name, Output: p.ErrorText, State: agent.ToolError})
				}
			}
		}
	}
	switch {
	case len(asks) > 0 && len(answers) == 0:
		wire.Fail(c, http.StatusConflict, "messages: chat %q waits for responses to its tool approval requests (addToolApprovalResponse)", req.ID)
		return 0, errAnswered
	case len(external) > 0 && len(results) == 0 && len(answers) == 0:
		wire.Fail(c, http.StatusConflict, "messages: chat %q waits for the outputs of its client-side tool calls (addToolOutput)", req.ID)
		return 0, errAnswered
	}
	if len(answers) > 0 || len(results) > 0 {
		// The response streams the run on from its pause: the request settles all it waits for.
		if err := rt.Reply(ctx, caller.UserID, requestID, agent.Reply{Answers: answers, Results: results, Whole: true}); err != nil {
			h.Refused(c, "messages", req.ID, err)
			return 0, err
		}
	}
	if len(answers) == 0 && len(results) == 0 {
		// A pause that waits for nothing (a shutdown, a manual suspend, the budget) goes on;
		// new words of the user's reach the model at the run's next step.
		if err := rt.Resume(ctx, caller.UserID, requestID); err != nil {
			h.Refused(c, "id", req.ID, err)
			return 0, err
		}
		if last.Role == "user" {
			if text, err := last.text(); err == nil && !dialect.Blank(text) {
				if _, err := rt.AppendInput(ctx, caller.UserID, requestID, text); err != nil {
					h.Log.WarnContext(ctx, "ai-sdk: input sent with a resume was not queued", "requestId", requestID, "err", err)
				}
			}
		}
	}
	return pause.Seq, nil
}

// resumeStream is GET /ai-sdk/chat/{id}/stream, the AI SDK's resumeStream. The SDK takes a
// resumed stream as a replay (DefaultChatTransport's resumeStreamIsReplay): at its first start
// it drops the message it holds and builds it from the stream. So the stream is always the
// whole assistant message of the chat's run — every response of the run, from the run's start,
// as each was streamed — then live to the finish of the latest one: a run a restart or a crash
// paused goes on first; one that waits for the client's answers, its user's suspend or the token
// budget is replayed up to that pause; one that ended within recentEnd is replayed to its end. 204 when nothing
// is left to show (no run, another user's chat, a run that ended before that).
func (h *handler) resumeStream(c *gin.Context) {
	caller, err := h.Keys.Identify(c.Request, "")
	if err != nil {
		wire.Fail(c, wire.Status(err), "%v", err)
		return
	}
	if !wire.OnlyQuery(c) {
		return
	}
	chat := c.Param("id")
	ctx := c.Request.Context()
	rt := h.Runtime
	run, found, err := h.latestRun(ctx, caller.UserID, chat)
	if err != nil {
		h.Internal(c, "looking up the chat's run failed", err)
		return
	}
	if !found {
		c.Status(http.StatusNoContent)
		return
	}
	if pause, err := rt.Pause(ctx, caller.UserID, run.RequestID); err == nil && pause.Suspend.Reason == agent.SuspendShutdown &&
		!waits(pause.Suspend.PendingCalls) {
		// A run a shutdown or a crash paused goes on: its user decided nothing. One its user
		// suspended, or the token budget stopped, waits for the user's next message: the SDK
		// resumes the stream on every page load, and each would have undone the suspend, or
		// given the run a fresh budget. A concurrent resume may win the race (ErrNotWaiting):
		// this stream then follows what that one resumed.
		if err := rt.Resume(ctx, caller.UserID, run.RequestID); err != nil && !errors.Is(err, agent.ErrNotWaiting) {
			h.Internal(c, "resuming the run failed", err)
			return
		}
	}
	f, err := rt.Follow(ctx, caller.UserID, run.RequestID, 0)
	if err != nil {
		h.Internal(c, "following the run failed", err)
		return
	}
	defer f.Close()
	clientTools := make([]string, len(run.Request.ExternalTools))
	for i, t := range run.Request.ExternalTools {
		clientTools[i] = t.Name
	}
	h.stream(c, f, Replay(chat, clientTools), true)
}

// recentEnd is how long after its end a run's message is still replayed by GET …/stream. The
// client cannot say what it holds, and a drop just before the end leaves it without the tail
// of the answer, with no other route to fetch it; a replay rebuilds the message under the same
// id, so one the client holds whole is replaced by its equal. The AI SDK's own chatbot template
// restores the last assistant message for 15 s after its stream concluded; so does hookd.
var recentEnd = 15 * time.Second

// latestRun is the run GET …/stream shows: the chat's latest run when it is live (running or
// paused) or ended less than recentEnd ago.
func (h *handler) latestRun(ctx context.Context, userID, chat string) (agent.RunView, bool, error) {
	sess, err := h.Runtime.Session(ctx, userID, chat)
	if errors.Is(err, agent.ErrNotFound) {
		return agent.RunView{}, false, nil
	}
	if err != nil {
		return agent.RunView{}, false, err
	}
	runs, err := h.Runtime.SessionRuns(ctx, sess.ID, 1)
	if err != nil || len(runs) == 0 {
		return agent.RunView{}, false, err
	}
	r := runs[0]
	return r, r.Live() || time.Since(r.UpdatedAt) < recentEnd, nil
}

// waits reports whether a pause's calls wait for the client (an approval, a client-side tool).
func waits(calls []agent.PendingCall) bool {
	for _, p := range calls {
		if p.External || p.State == "asking" {
			return true
		}
	}
	return false
}

// stream writes the run's parts until the response's finish or the client goes away (the run
// goes on; GET …/stream picks it up). whole: the follower reads from the run's start and the
// stream is the run's whole message — each response in turn (a pause's finish, then the next
// response's start under the same message id, as the client saw them live) — ending at a
// pause nothing follows yet, or at the run's end.
func (h *handler) stream(c *gin.Context, f *agent.Follower, m *Mapper, whole bool) {
	ctx := c.Request.Context()
	sse := wire.StartSSE(c.Writer, http.Header{Header: {"v1"}})
	tick := time.NewTicker(h.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-f.Ready():
			evs, err := f.Next(ctx)
			switch {
			case m.Done() && (err != nil || len(evs) == 0): // a pause, caught up: nothing follows it yet
				_ = done(sse)
				return
			case err != nil:
				h.brokeOff(ctx, sse, m, err)
				return
			}
			for _, ev := range evs {
				if whole && m.Done() && ev.Source == "" {
					m = m.Next() // a later response of the run: its resume, or the end of its pause
				}
				if writeAll(sse, m.Map(ev)) != nil {
					return
				}
				if m.Done() && (!whole || ev.Kind == agent.KindRunEnded) {
					_ = done(sse)
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

// brokeOff ends a response whose run's events stopped before its end (a failed read).
func (h *handler) brokeOff(ctx context.Context, sse *wire.SSE, m *Mapper, err error) {
	if !h.BrokeOff(ctx, err) {
		return
	}
	_ = writeAll(sse, []Part{{Type: "error", ErrorText: agent.CodeInternal + ": the event stream of the run broke off; the run may still be going on"},
		{Type: "finish", FinishReason: FinishError}})
	_ = done(sse)
}

func writeAll(sse *wire.SSE, parts []Part) error {
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if err := sse.Event("", "", b); err != nil {
			return err
		}
	}
	return nil
}

// done is the stream's last frame.
func done(sse *wire.SSE) error { return sse.Event("", "", []byte("[DONE]")) }
