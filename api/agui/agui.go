// Package agui is the AG-UI dialect: POST /ag-ui/run takes AG-UI 1.0's RunAgentInput and answers
// with its event stream over SSE, so CopilotKit and every frontend on @ag-ui/client's HttpAgent
// talk to hookd's agent unchanged. The thread is hookd's session; a permission ask ends the
// AG-UI run with an interrupt the next run resumes; a client-side tool ends it with the call
// pending, its result coming back as a tool message. docs/chat-ag-ui.md has the whole mapping.
package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Deps is what the AG-UI dialect needs.
type Deps = dialect.Deps

// Register adds POST /ag-ui/run to r.
func Register(r gin.IRouter, d Deps) {
	h := &handler{dialect.New(d, "ag-ui", "thread")}
	r.POST("/ag-ui/run", wire.NoQuery, h.run)
}

type handler struct{ dialect.Handler }

func (h *handler) run(c *gin.Context) {
	caller, err := h.Keys.Identify(c.Request, "")
	if err != nil {
		wire.Fail(c, wire.Status(err), "%v", err)
		return
	}
	var raw json.RawMessage
	if !wire.BindStrict(c, &raw) {
		return
	}
	var in RunAgentInput
	if err := hookdtype.DecodeStrict(raw, &in, ""); err != nil {
		wire.Fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	state, props, err := in.validate()
	if err != nil {
		wire.Fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	ctx := c.Request.Context()
	rt := h.Runtime
	var requestID string
	var after int64
	sess, err := rt.Session(ctx, caller.UserID, in.ThreadID)
	switch {
	case errors.Is(err, agent.ErrNotFound):
	case err != nil:
		h.Internal(c, "looking up the thread failed", err)
		return
	default:
		live, err := rt.LiveRun(ctx, sess.ID)
		switch {
		case errors.Is(err, agent.ErrNotFound):
		case err != nil:
			h.Internal(c, "looking up the thread's run failed", err)
			return
		case live.Status == dialect.StatusRunning && !h.Pausing(ctx, caller.UserID, live.RequestID):
			wire.Fail(c, http.StatusConflict, "threadId: thread %q has a run in progress; send the next run after its RUN_FINISHED", in.ThreadID)
			return
		default: // paused
			requestID = live.RequestID
			if after, err = h.resume(c, caller, &in, live.RequestID, live.Request.Input); err != nil {
				return // answered
			}
		}
	}
	if requestID == "" {
		if len(in.Resume) > 0 {
			wire.Fail(c, http.StatusConflict, "resume: nothing in thread %q waits for an answer (no paused run)", in.ThreadID)
			return
		}
		if requestID, err = h.start(c, caller, &in, props); err != nil {
			return // answered
		}
	}
	f, err := rt.Follow(ctx, caller.UserID, requestID, after)
	if err != nil {
		h.Internal(c, "following the run failed", err)
		return
	}
	defer f.Close()
	clientTools := make([]string, len(in.Tools))
	for i, t := range in.Tools {
		clientTools[i] = strings.TrimSpace(t.Name)
	}
	h.stream(c, f, NewMapper(in.ThreadID, in.RunID, state, clientTools))
}

// start begins a new turn from the thread's last message, which must be the user's.
func (h *handler) start(c *gin.Context, caller wire.Caller, in *RunAgentInput, props Props) (string, error) {
	n := len(in.Messages)
	if n == 0 || in.Messages[n-1].Role != "user" {
		wire.Fail(c, http.StatusBadRequest, "messages: the last message must be the user's new message")
		return "", errBadInput
	}
	text, err := in.Messages[n-1].text()
	if err == nil && dialect.Blank(text) {
		err = errors.New("content: is empty")
	}
	if err != nil {
		wire.Fail(c, http.StatusBadRequest, "messages[%d].%v", n-1, err)
		return "", errBadInput
	}
	sr := agent.StartRequest{UserID: caller.UserID, PrincipalID: caller.PrincipalID, AgentID: caller.AgentID, SessionKey: in.ThreadID,
		Input: withContext(text, in.Context), TriggerSource: dispatcher.SourceHuman, Model: strings.TrimSpace(props.Model),
		Temperature: props.Temperature}
	for _, t := range in.Tools {
		params := t.Parameters
		if isNull(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		sr.ExternalTools = append(sr.ExternalTools, model.ToolSpec{Name: strings.TrimSpace(t.Name), Description: t.Description, Parameters: params})
	}
	info, err := h.Runtime.StartRun(c.Request.Context(), sr)
	if errors.Is(err, agent.ErrSessionBusy) {
		wire.Fail(c, http.StatusConflict, "threadId: thread %q has a run in progress; send the next run after its RUN_FINISHED", in.ThreadID)
		return "", err
	}
	if err != nil {
		h.Internal(c, "starting the run failed", err)
		return "", err
	}
	return info.RequestID, nil
}

var errBadInput = errors.New("bad input")

// resume hands the paused run what this input brings — answers to its interrupts, results of
// its client-side tools — and returns the seq of its pause, after which this response reads.
func (h *handler) resume(c *gin.Context, caller wire.Caller, in *RunAgentInput, requestID, runInput string) (int64, error) {
	ctx := c.Request.Context()
	rt := h.Runtime
	pause, err := rt.Pause(ctx, caller.UserID, requestID)
	if err != nil {
		h.Refused(c, "threadId", in.ThreadID, err)
		return 0, err
	}
	asks := map[string]agent.PendingCall{}
	external := map[string]agent.PendingCall{}
	for _, p := range pause.Suspend.PendingCalls {
		switch {
		case p.External:
			external[p.CallID] = p
		case p.State == "asking":
			asks[p.AskID] = p
		}
	}
	suspendedID := SuspendedInterruptID(pause.RunID, pause.Seq)
	var answers []agent.Answer
	for i, r := range in.Resume {
		f := fmt.Sprintf("resume[%d]", i)
		if r.InterruptID == suspendedID {
			continue // a go-ahead: see below
		}
		p, ok := asks[r.InterruptID]
		if !ok {
			wire.Fail(c, http.StatusConflict, "%s.interruptId: %q is not an open interrupt of thread %q", f, r.InterruptID, in.ThreadID)
			return 0, errBadInput
		}
		a := agent.Answer{AskID: p.AskID, Reason: "cancelled by the user"}
		if r.Status == "resolved" {
			var ap Approval
			if err := hookdtype.DecodeStrict(r.Payload, &ap, f+".payload"); err != nil {
				wire.Fail(c, http.StatusBadRequest, "%v (the payload is {\"approved\": true|false, \"reason\"?, \"arguments\"?})", err)
				return 0, errBadInput
			}
			if ap.Approved == nil {
				wire.Fail(c, http.StatusBadRequest, "%s.payload.approved: is required (true or false)", f)
				return 0, errBadInput
			}
			if !isNull(ap.Arguments) && !dialect.IsObject(ap.Arguments) {
				wire.Fail(c, http.StatusBadRequest, "%s.payload.arguments: must be an object (the edited arguments)", f)
				return 0, errBadInput
			}
			a.Approved, a.Reason = *ap.Approved, ap.Reason
			if !isNull(ap.Arguments) {
				a.Input = ap.Arguments
			}
		}
		answers = append(answers, a)
	}
	var results []agent.ToolOutput
	for _, m := range in.Messages {
		p, ok := external[m.ToolCallID]
		if m.Role != "tool" || !ok {
			continue
		}
		text, err := m.text()
		if err != nil {
			wire.Fail(c, http.StatusBadRequest, "messages: tool message %q: %v", m.ID, err)
			return 0, errBadInput
		}
		out := agent.ToolOutput{CallID: p.CallID, Name: p.Name, Output: text, State: agent.ToolSuccess}
		if m.Error != "" {
			out.State, out.Output = agent.ToolError, m.Error
		}
		results = append(results, out)
		delete(external, m.ToolCallID)
	}
	switch {
	case len(asks) > 0 && len(answers) == 0:
		wire.Fail(c, http.StatusConflict, "resume: thread %q waits for answers to its interrupts (tool_approval)", in.ThreadID)
		return 0, errBadInput
	case len(pause.Suspend.PendingCalls) > 0 && len(asks) == 0 && len(results) == 0:
		wire.Fail(c, http.StatusConflict, "messages: thread %q waits for the results of its client-side tool calls (tool messages)", in.ThreadID)
		return 0, errBadInput
	}
	// The response streams the run on from its pause: the input settles every interrupt and
	// client-side call the run waits for (a response for some of them would stream nothing
	// until another input settled the rest).
	reply := agent.Reply{Answers: answers, Results: results, Whole: true}
	// A user message at the end of the input other than the one the paused run started with is
	// the user's next word (the client resends the whole history, that message included): it
	// is queued for the run, whose user_message hooks are asked when it takes it, not dropped.
	if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == "user" {
		text, err := in.Messages[n-1].text()
		if err == nil && dialect.Blank(text) {
			err = errors.New("content: is empty")
		}
		if err != nil {
			wire.Fail(c, http.StatusBadRequest, "messages[%d].%v", n-1, err)
			return 0, errBadInput
		}
		if !strings.HasSuffix(runInput, text) {
			reply.Input = withContext(text, in.Context)
		}
	}
	if len(answers) > 0 || len(results) > 0 || reply.Input != "" {
		if err := rt.Reply(ctx, caller.UserID, requestID, reply); err != nil {
			field := "messages"
			if re, ok := errors.AsType[*agent.ReplyError](err); ok && re.Part == "answers" {
				field = "resume"
			}
			h.Refused(c, field, in.ThreadID, err)
			return 0, err
		}
	}
	if len(answers) == 0 && len(results) == 0 {
		// A pause that waits for nothing: a shutdown, a manual suspend, the token budget. The
		// thread's next run lets it go on, with or without the interrupt's resume entry (a
		// client whose stream broke off at a crash never saw it).
		if err := rt.Resume(ctx, caller.UserID, requestID); err != nil {
			h.Refused(c, "threadId", in.ThreadID, err)
			return 0, err
		}
	}
	return pause.Seq, nil
}

// stream writes the run's AG-UI events until the response's run finishes or the client goes
// away (the agent's run goes on then; the thread's next run picks it up).
func (h *handler) stream(c *gin.Context, f *agent.Follower, m *Mapper) {
	ctx := c.Request.Context()
	sse := wire.StartSSE(c.Writer, nil)
	tick := time.NewTicker(h.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-f.Ready():
			evs, err := f.Next(ctx)
			if err != nil {
				h.brokeOff(ctx, sse, m, err)
				return
			}
			for _, ev := range evs {
				for _, e := range m.Map(ev) {
					if write(sse, e) != nil {
						return
					}
				}
				if m.Done() {
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

// brokeOff ends a response whose run's events stopped before its end (a failed read), with a
// RUN_ERROR, so the client knows the run may still be going on.
func (h *handler) brokeOff(ctx context.Context, sse *wire.SSE, m *Mapper, err error) {
	if !h.BrokeOff(ctx, err) {
		return
	}
	if !m.started {
		_ = write(sse, Event{Type: RunStarted, ThreadID: m.threadID, RunID: m.runID, Timestamp: time.Now().UnixMilli()})
	}
	_ = write(sse, Event{Type: RunError, Timestamp: time.Now().UnixMilli(), Code: agent.CodeInternal,
		Message: "the event stream of the run broke off; the run may still be going on"})
}

func write(sse *wire.SSE, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return sse.Event("", "", b)
}
