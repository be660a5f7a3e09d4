package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
)

// Deps is what the Harness dialect needs.
type Deps struct {
	Runtime *agent.Runtime
	Keys    *wire.Keys   // nil: no API keys (the loopback-only development mode)
	Log     *slog.Logger // nil: discard
}

// Register adds POST /harness/chat to r.
func Register(r gin.IRouter, d Deps) {
	h := &handler{rt: d.Runtime, keys: d.Keys, log: d.Log}
	if h.keys == nil {
		h.keys = wire.NewKeys(nil)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	r.POST("/harness/chat", wire.NoQuery, h.chat)
}

// ChatRequest is the AgentChatRequest (§2.2) with the resume fields of CONTRACT §5.
type ChatRequest struct {
	SessionID string     `json:"sessionId"`
	UserID    string     `json:"userId"`
	Input     string     `json:"input"`
	ChatModel *ChatModel `json:"chatModel,omitempty"`
	// ConfirmResults answer a REQUIRE_USER_CONFIRM; ToolResults a REQUIRE_EXTERNAL_EXECUTION.
	ConfirmResults []ConfirmInput    `json:"confirmResults,omitempty"`
	ToolResults    []ToolResultInput `json:"toolResults,omitempty"`
	// ExternalTools are tools the client runs itself (a new turn only).
	ExternalTools []ExternalTool `json:"externalTools,omitempty"`
}

// ChatModel picks the model of a new turn. Stream is accepted and ignored: the response always
// streams.
type ChatModel struct {
	Name        string   `json:"name,omitempty"`
	Stream      *bool    `json:"stream,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

// ConfirmInput is the answer to one tool call that waits for confirmation; Input, when set, is
// the edited arguments object to run with.
type ConfirmInput struct {
	ToolCallID string          `json:"toolCallId"`
	Confirmed  *bool           `json:"confirmed"`
	Input      json.RawMessage `json:"input,omitempty"`
	Rules      []Rule          `json:"rules,omitempty"`
	reason     string          // set by the daemon: why it answered for the user
}

// resendReason is the answer of a user who sent a new message instead of confirming.
const resendReason = "the user sent a new message"

// ToolResultInput is the result of a tool the client ran.
type ToolResultInput struct {
	ID     string         `json:"id"`
	Name   string         `json:"name,omitempty"`
	Output []ContentBlock `json:"output"`
	State  string         `json:"state,omitempty"` // success (default) | error | interrupted | denied | running
}

// ExternalTool declares a tool the client runs itself.
type ExternalTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type handler struct {
	rt   *agent.Runtime
	keys *wire.Keys
	log  *slog.Logger
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// validate checks the request's shape and names the first field that is wrong.
func (r *ChatRequest) validate() string {
	switch {
	case blank(r.SessionID):
		return "sessionId: is required"
	case blank(r.UserID):
		return "userId: is required"
	}
	if m := r.ChatModel; m != nil && m.Temperature != nil {
		if t := *m.Temperature; math.IsNaN(t) || t < 0 || t > 2 {
			return "chatModel.temperature: must be between 0 and 2"
		}
	}
	for i, t := range r.ExternalTools {
		if blank(t.Name) {
			return fmt.Sprintf("externalTools[%d].name: is required", i)
		}
		if len(t.Parameters) > 0 && !isObject(t.Parameters) && !isNull(t.Parameters) {
			return fmt.Sprintf("externalTools[%d].parameters: must be a JSON schema object", i)
		}
	}
	for i, c := range r.ConfirmResults {
		f := fmt.Sprintf("confirmResults[%d]", i)
		switch {
		case blank(c.ToolCallID):
			return f + ".toolCallId: is required"
		case c.Confirmed == nil:
			return f + ".confirmed: is required (true or false)"
		case len(c.Input) > 0 && !isObject(c.Input) && !isNull(c.Input):
			return f + ".input: must be an object (the edited arguments)"
		}
		for j, rule := range c.Rules {
			rf := fmt.Sprintf("%s.rules[%d]", f, j)
			switch {
			case blank(rule.ToolName):
				return rf + ".tool_name: is required"
			case blank(rule.RuleContent):
				return rf + ".rule_content: is required"
			case rule.Behavior != agent.BehaviorAllow && rule.Behavior != agent.BehaviorAsk && rule.Behavior != agent.BehaviorDeny:
				return rf + ".behavior: must be allow, ask or deny"
			}
			if err := agent.CheckRuleMatch(rule.ToolName, rule.RuleContent); err != nil {
				re, _ := errors.AsType[*agent.RuleError](err)
				return fmt.Sprintf("%s.%s: %v", rf, re.Field, re.Err)
			}
		}
	}
	for i, t := range r.ToolResults {
		f := fmt.Sprintf("toolResults[%d]", i)
		switch t.State {
		case "", agent.ToolSuccess, agent.ToolError, agent.ToolInterrupted, agent.ToolDenied, agent.ToolRunning:
		default:
			return f + ".state: must be success, error, interrupted, denied or running"
		}
		if blank(t.ID) {
			return f + ".id: is required"
		}
		for j, b := range t.Output {
			if b.Type == "" {
				return fmt.Sprintf("%s.output[%d].type: is required", f, j)
			}
		}
	}
	return ""
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func (h *handler) chat(c *gin.Context) {
	// Authenticate before reading the body; the body's userId is checked against the key after.
	if _, err := h.keys.Identify(c.Request, ""); err != nil {
		wire.Fail(c, wire.Status(err), "%v", err)
		return
	}
	var req ChatRequest
	if !wire.BindStrict(c, &req) {
		return
	}
	if msg := req.validate(); msg != "" {
		wire.Fail(c, http.StatusBadRequest, "%s", msg)
		return
	}
	caller, err := h.keys.Identify(c.Request, req.UserID)
	if err != nil {
		wire.Fail(c, wire.Status(err), "%v", err)
		return
	}
	ctx := c.Request.Context()
	live, err := h.liveRun(ctx, caller.UserID, req.SessionID)
	if err != nil {
		h.internal(c, "looking up the session failed", err)
		return
	}
	resuming := len(req.ConfirmResults) > 0 || len(req.ToolResults) > 0
	switch {
	case live != nil && live.Status == agent.StatusRunning:
		wire.Fail(c, http.StatusConflict, "sessionId: session %q has a run in progress; send the next request after its AGENT_END", req.SessionID)
	case live != nil:
		h.resume(c, caller, &req, *live)
	case resuming:
		field := "confirmResults"
		if len(req.ConfirmResults) == 0 {
			field = "toolResults"
		}
		wire.Fail(c, http.StatusConflict, "%s: nothing in session %q waits for them (no paused run)", field, req.SessionID)
	case blank(req.Input):
		wire.Fail(c, http.StatusBadRequest, "input: is required")
	default:
		h.start(c, caller, &req)
	}
}

// liveRun is the session's running or paused run, nil when it has none.
func (h *handler) liveRun(ctx context.Context, userID, key string) (*agent.RunView, error) {
	sess, err := h.rt.Session(ctx, userID, key)
	if errors.Is(err, agent.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	run, err := h.rt.LiveRun(ctx, sess.ID)
	if errors.Is(err, agent.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &run, nil
}

func (h *handler) internal(c *gin.Context, what string, err error) {
	h.log.ErrorContext(c.Request.Context(), "harness chat: "+what, "path", c.FullPath(), "err", err)
	wire.Fail(c, http.StatusInternalServerError, "internal error: %s", what)
}

// start begins a new turn and streams it.
func (h *handler) start(c *gin.Context, caller wire.Caller, req *ChatRequest) {
	sr := agent.StartRequest{UserID: caller.UserID, PrincipalID: caller.PrincipalID, AgentID: caller.AgentID, SessionKey: req.SessionID,
		Input: req.Input, TriggerSource: dispatcher.SourceHuman}
	if m := req.ChatModel; m != nil {
		sr.Model, sr.Temperature = strings.TrimSpace(m.Name), m.Temperature
	}
	for _, t := range req.ExternalTools {
		params := t.Parameters
		if len(params) == 0 || isNull(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		sr.ExternalTools = append(sr.ExternalTools, model.ToolSpec{Name: strings.TrimSpace(t.Name), Description: t.Description, Parameters: params})
	}
	ctx := c.Request.Context()
	info, err := h.rt.StartRun(ctx, sr)
	if errors.Is(err, agent.ErrSessionBusy) {
		wire.Fail(c, http.StatusConflict, "sessionId: session %q has a run in progress; send the next request after its AGENT_END", req.SessionID)
		return
	}
	if err != nil {
		h.internal(c, "starting the run failed", err)
		return
	}
	run, err := h.rt.Follow(ctx, caller.UserID, info.RequestID, 0)
	if err != nil {
		h.internal(c, "following the run failed", err)
		return
	}
	defer run.Close()
	s := &stream{h: h, userID: caller.UserID, requestID: info.RequestID, sessionKey: req.SessionID}
	s.run(c, run)
}

// resume applies what the request brings to the session's paused run and streams the run on
// from its pause.
func (h *handler) resume(c *gin.Context, caller wire.Caller, req *ChatRequest, live agent.RunView) {
	ctx := c.Request.Context()
	user, id := caller.UserID, live.RequestID
	// The pause this request resumes: the run's last event while it is suspended (its status and
	// that event are written together). The response starts right after it.
	pause, err := h.rt.Pause(ctx, user, id)
	if err != nil {
		h.refused(c, "sessionId", req.SessionID, err)
		return
	}
	calls := map[string]bool{}
	if len(req.ConfirmResults) == 0 && len(req.ToolResults) == 0 && !blank(req.Input) && pause.Suspend != nil &&
		pause.Suspend.Reason == agent.SuspendPermissionAsk {
		// §7.1: sending again with the same sessionId resumes a paused run. During a confirmation
		// that is the user's answer: the calls still waiting are refused (one answered meanwhile
		// elsewhere, by a reviewer or the platform's reply, keeps its answer), and the new message
		// is the run's next input.
		waiting, err := h.rt.Asks(ctx, user, id, agent.AskPending)
		if err != nil {
			h.refused(c, "sessionId", req.SessionID, err)
			return
		}
		for _, a := range waiting {
			if a.Kind == agent.AskConfirm {
				f := false
				req.ConfirmResults = append(req.ConfirmResults, ConfirmInput{ToolCallID: a.CallID, Confirmed: &f, reason: resendReason})
			}
		}
	}
	answers := make([]agent.Answer, len(req.ConfirmResults))
	for i, cr := range req.ConfirmResults {
		a := agent.Answer{CallID: cr.ToolCallID, Approved: *cr.Confirmed, Reason: cr.reason}
		if len(cr.Input) > 0 && !isNull(cr.Input) {
			a.Input = cr.Input
		}
		for _, r := range cr.Rules {
			a.Rules = append(a.Rules, agent.RuleSpec{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior, Source: r.Source})
		}
		answers[i] = a
		calls[cr.ToolCallID] = true
	}
	results := make([]agent.ToolOutput, len(req.ToolResults))
	for i, tr := range req.ToolResults {
		blocks, err := json.Marshal(tr.Output)
		if err != nil {
			h.internal(c, "encoding a tool result failed", err)
			return
		}
		results[i] = agent.ToolOutput{CallID: tr.ID, Name: tr.Name, Output: PlainText(tr.Output), State: tr.State,
			Data: DataOf(tr.Output), Blocks: blocks}
		calls[tr.ID] = true
	}
	// The response streams the run on from its pause: the request settles all it waits for.
	reply := agent.Reply{Answers: answers, Results: results, Whole: true}
	if !blank(req.Input) {
		// Said while resuming: queued before the run goes on, it reaches the model as a user
		// message at the run's next step.
		reply.Input = req.Input
	}
	if len(calls) > 0 || reply.Input != "" {
		if err := h.rt.Reply(ctx, user, id, reply); err != nil {
			field := "sessionId"
			if re, ok := errors.AsType[*agent.ReplyError](err); ok {
				field = map[string]string{"answers": "confirmResults", "results": "toolResults", "input": "input"}[re.Part]
			}
			h.refused(c, field, req.SessionID, err)
			return
		}
	}
	if len(calls) == 0 {
		if err := h.rt.Resume(ctx, user, id); err != nil {
			h.refused(c, "sessionId", req.SessionID, err)
			return
		}
	}
	run, err := h.rt.Follow(ctx, user, id, pause.Seq-1)
	if err != nil {
		h.internal(c, "following the run failed", err)
		return
	}
	defer run.Close()
	s := &stream{h: h, userID: user, requestID: id, sessionKey: req.SessionID, seeking: true, resumes: pause.Seq}
	s.run(c, run)
}

// refused answers a resume the run would not take.
func (h *handler) refused(c *gin.Context, field, session string, err error) {
	switch {
	case errors.Is(err, agent.ErrUnsettled):
		wire.Fail(c, http.StatusConflict, "%s: the paused run of session %q waits for confirmResults or toolResults for its pending tool calls (%v)", field, session, err)
	case errors.Is(err, agent.ErrNotWaiting), errors.Is(err, agent.ErrAlreadyAnswered), errors.Is(err, agent.ErrArgumentsChanged),
		errors.Is(err, agent.ErrNotLive), errors.Is(err, agent.ErrNotFound):
		wire.Fail(c, http.StatusConflict, "%s: %v", field, err)
	default:
		h.internal(c, "resuming the run failed", err)
	}
}

// stream writes a run's events to one response.
type stream struct {
	h          *handler
	userID     string
	requestID  string
	sessionKey string
	out        sink
	replyID    string

	// seeking skips the events up to the pause this request resumes: the Resumed event right
	// after a Suspended one that mine accepts. Until then skipped holds what followed the last
	// pause, shown should the run end without resuming.
	seeking  bool
	resumes  int64 // the seq of the pause this request resumes
	lastStop *agent.Event
	skipped  []agent.Event
}

func (s *stream) run(c *gin.Context, run *agent.Follower) {
	ctx := c.Request.Context()
	if strings.Contains(c.GetHeader("Accept"), "text/event-stream") {
		sse := wire.StartSSE(c.Writer, http.Header{"X-Request-Id": {s.requestID}})
		sse.DataPrefix = "data:"
		s.out = &sseSink{sse: sse}
	} else {
		c.Writer.Header().Set("X-Request-Id", s.requestID)
		a := &arraySink{w: wire.StartStream(c.Writer, "application/json; charset=utf-8")}
		if a.w.Raw([]byte("[")) != nil {
			return
		}
		s.out = a
	}
	defer s.out.close()
	for {
		select {
		case <-run.Ready():
		case <-ctx.Done():
			return // the client went away; the run goes on
		}
		evs, err := run.Next(ctx)
		if err != nil {
			break // the run's end, or a failed read (logged); either way no run.ended came
		}
		if done := s.feedAll(ctx, evs); done {
			return
		}
	}
	if ctx.Err() != nil {
		return // the client went away; the run goes on
	}
	// The feed ended without the run's end: say so and close the turn cleanly.
	s.h.log.ErrorContext(ctx, "harness chat: the run's events ended early", "requestId", s.requestID)
	var id [16]byte
	_, _ = rand.Read(id[:])
	end := agent.Event{ID: hex.EncodeToString(id[:]), RunID: s.requestID, Kind: agent.KindRunEnded, At: time.Now().UTC(),
		ReplyID: s.replyID, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: agent.CodeInternal,
			ErrorMessage: "the event stream of the run broke off; the run may still be going on", Recoverable: true}}
	_, _ = s.emit(ctx, end)
}

// feedAll handles events in order; done means the response is complete or the client left.
func (s *stream) feedAll(ctx context.Context, evs []agent.Event) (done bool) {
	for _, ev := range evs {
		done, err := s.feed(ctx, ev)
		if err != nil {
			s.h.log.InfoContext(ctx, "harness chat: the client went away; the run goes on", "requestId", s.requestID, "err", err)
			return true
		}
		if done {
			return true
		}
	}
	return false
}

// feed handles one canonical event; done means the response is complete.
func (s *stream) feed(ctx context.Context, ev agent.Event) (bool, error) {
	top := ev.Source == ""
	if s.seeking {
		switch {
		case top && ev.Kind == agent.KindSuspended:
			s.lastStop, s.skipped = &ev, nil
		case top && ev.Kind == agent.KindResumed && s.lastStop != nil && ev.Seq == s.lastStop.Seq+1 && ev.Seq == s.resumes+1:
			s.seeking = false
			return s.emit(ctx, ev) // AGENT_START
		case top && ev.Kind == agent.KindRunEnded:
			// The run ended without this request's resumption (it was stopped meanwhile).
			s.seeking = false
			for _, e := range s.skipped {
				if _, err := s.emit(ctx, e); err != nil {
					return true, err
				}
			}
			return s.emit(ctx, ev)
		default:
			s.skipped = append(s.skipped, ev)
		}
		return false, nil
	}
	return s.emit(ctx, ev)
}

// emit maps and writes one canonical event; done after the run's end or pause.
func (s *stream) emit(ctx context.Context, ev agent.Event) (bool, error) {
	top := ev.Source == ""
	if top && ev.ReplyID != "" {
		s.replyID = ev.ReplyID
	}
	final := top && (ev.Kind == agent.KindRunEnded || ev.Kind == agent.KindSuspended)
	for _, e := range Map(ev, s.sessionKey) {
		if err := s.out.write(e); err != nil {
			return true, err
		}
	}
	return final, nil
}

// sink is one response form.
type sink interface {
	write(Event) error
	close()
}

// sseSink writes `data:<json>` frames, one per event, each followed by a blank line.
type sseSink struct{ sse *wire.SSE }

func (s *sseSink) write(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.sse.Event("", "", b)
}

func (s *sseSink) close() {}

// arraySink writes one JSON array, element by element as the events happen.
type arraySink struct {
	w     *wire.SSE
	wrote bool
}

func (a *arraySink) write(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	sep := ",\n"
	if !a.wrote {
		sep = "\n"
	}
	a.wrote = true
	return a.w.Raw(append([]byte(sep), b...))
}

func (a *arraySink) close() { _ = a.w.Raw([]byte("\n]\n")) }
