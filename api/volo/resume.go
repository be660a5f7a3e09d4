package volo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/hookdtype"
)

// Decision is one answer of a structured response (resume's `response`, or the body of
// interaction-response). InteractionID or ToolCallID says which pending interaction it answers;
// without either it answers all of them.
type Decision struct {
	InteractionID string           `json:"interactionId"`
	ToolCallID    string           `json:"toolCallId"`
	Approved      *bool            `json:"approved"`
	Reason        string           `json:"reason"`
	Response      string           `json:"response"` // text, read as a plain-text response is
	Input         json.RawMessage  `json:"input"`    // edited arguments to run the call with
	Arguments     json.RawMessage  `json:"arguments"`
	Rules         []agent.RuleSpec `json:"rules"`
	RuleScope     string           `json:"ruleScope"`
	Output        json.RawMessage  `json:"output"` // a client-side tool's result: text, or [{"type":"text","text":...}]
	State         string           `json:"state"`
}

// response is a parsed `response`: plain text, or decisions.
type response struct {
	text      string
	decisions []Decision
}

func (r response) empty() bool { return r.text == "" && len(r.decisions) == 0 }

// parseResponse reads a response: text, true/false, a Decision, or a list of them.
func parseResponse(raw json.RawMessage) (response, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return response{}, nil
	}
	var r response
	var err error
	switch raw[0] {
	case '"':
		err = json.Unmarshal(raw, &r.text)
		r.text = strings.TrimSpace(r.text)
	case 't', 'f':
		var b bool
		err = json.Unmarshal(raw, &b)
		r.decisions = []Decision{{Approved: &b}}
	case '{':
		var d Decision
		if err := hookdtype.DecodeStrict(raw, &d, "response"); err != nil {
			return response{}, badRequest("%v", err) // names the field: response.approvd
		}
		r.decisions = []Decision{d}
	case '[':
		if err := hookdtype.DecodeStrict(raw, &r.decisions, "response"); err != nil {
			return response{}, badRequest("%v", err)
		}
	default:
		err = errors.New("want text, true or false, an object or an array of objects")
	}
	if err != nil {
		return response{}, badRequest("response: %v", err)
	}
	return r, nil
}

// approvals are the texts that approve a tool call (after lower-casing and trimming punctuation);
// any other text denies it, and is given to the model as the reason.
var approvals = map[string]bool{
	"approve": true, "approved": true, "yes": true, "y": true, "ok": true, "okay": true, "allow": true, "allowed": true,
	"accept": true, "accepted": true, "confirm": true, "confirmed": true, "continue": true, "proceed": true, "go": true,
	"go ahead": true, "sure": true, "true": true, "1": true, "resume": true,
	"同意": true, "批准": true, "允许": true, "确认": true, "确定": true, "是": true, "是的": true, "好": true, "好的": true,
	"可以": true, "继续": true, "执行": true, "通过": true, "恢复": true,
}

// denials deny without a reason of their own (the runtime says 用户拒绝).
var denials = map[string]bool{
	"deny": true, "denied": true, "no": true, "n": true, "reject": true, "rejected": true, "refuse": true, "cancel": true,
	"false": true, "0": true, "拒绝": true, "不": true, "否": true, "取消": true, "不同意": true, "不要": true, "不行": true,
}

func normalizeWord(s string) string {
	return strings.Trim(strings.ToLower(strings.TrimSpace(s)), " \t\r\n.!。！,，~")
}

// IsApproval reports whether a plain-text response approves.
func IsApproval(s string) bool { return approvals[normalizeWord(s)] }

// verdict is what a decision (or, failing that, the plain text) says about a tool call.
func (d Decision) verdict(text string) (approved bool, reason string, ok bool) {
	if d.Approved != nil {
		return *d.Approved, d.Reason, true
	}
	t := d.Response
	if t == "" {
		t = text
	}
	switch w := normalizeWord(t); {
	case w == "":
		return false, "", false
	case approvals[w]:
		return true, d.Reason, true
	case denials[w]:
		return false, d.Reason, true
	}
	if d.Reason != "" {
		return false, d.Reason, true
	}
	return false, strings.TrimSpace(t), true
}

// outputText is a client-side tool's output as text.
func outputText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var b strings.Builder
		for _, bl := range blocks {
			b.WriteString(bl.Text)
		}
		return b.String()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

func checkRules(rules []agent.RuleSpec, scope string) *apiError {
	for i, r := range rules {
		switch r.Behavior {
		case agent.BehaviorAllow, agent.BehaviorAsk, agent.BehaviorDeny:
		default:
			return badRequest("rules[%d].behavior: %q is not one of allow, ask, deny", i, r.Behavior)
		}
		if err := agent.CheckRuleMatch(r.ToolName, r.RuleContent); err != nil {
			re, _ := errors.AsType[*agent.RuleError](err)
			return badRequest("rules[%d].%s: %v", i, re.Field, re.Err)
		}
	}
	switch scope {
	case "", "session", "user":
	case "global":
		// A global rule decides every user's calls: it is the operator's, set with the admin
		// API (/api/rules), never one user's answer to an ask.
		return &apiError{status: http.StatusForbidden, key: errForbidden,
			detail: "ruleScope: global rules apply to every user and are set through the admin API (/api/rules), not by a chat user"}
	default:
		return badRequest("ruleScope: %q is not one of session, user", scope)
	}
	return nil
}

// controlError maps an error of the runtime's control API.
func controlError(err error, notFound *apiError) *apiError {
	switch {
	case errors.Is(err, agent.ErrNotFound):
		return notFound
	case errors.Is(err, agent.ErrAlreadyAnswered):
		return &apiError{status: http.StatusConflict, key: errAlreadyAnswered, detail: "the interaction was already answered otherwise (or timed out): " + err.Error()}
	case errors.Is(err, agent.ErrArgumentsChanged):
		return &apiError{status: http.StatusConflict, key: errArgumentsChanged, detail: err.Error()}
	case errors.Is(err, agent.ErrNotWaiting), errors.Is(err, agent.ErrNotLive):
		return &apiError{status: http.StatusConflict, key: errNotWaiting, detail: err.Error()}
	}
	return internal(err)
}

var (
	turnNotFound        = &apiError{status: http.StatusNotFound, key: errTurnNotFound, detail: "no such turn"}
	interactionNotFound = &apiError{status: http.StatusNotFound, key: errInteractionNotFound, detail: "no such interaction"}
	toolCallNotFound    = &apiError{status: http.StatusNotFound, key: errToolCallNotFound, detail: "the turn waits for no such tool call"}
)

// ---- run inspection ----

// traceOf is the trace of a run's frames: its session key and parent turn come with its
// run.started event.
func traceOf(run agent.RunView, evs []agent.Event) TraceInfo {
	tr := TraceInfo{TurnID: run.ReplyID}
	for _, ev := range evs {
		if ev.Kind == agent.KindRunStarted && ev.Run != nil && ev.Source == "" {
			tr.SessionID, tr.ParentTurnID = ev.Run.SessionKey, ev.Run.ParentTurnID
			return tr
		}
	}
	tr.SessionID, tr.ParentTurnID = run.Request.SessionKey, run.Request.ParentTurnID
	return tr
}

// ---- resume ----

// ResumeRequest is the body of POST resume?turnId=.
type ResumeRequest struct {
	TurnID   string          `json:"turnId"`
	UserID   string          `json:"userId"`
	Response json.RawMessage `json:"response"`
	// AfterSeq (a hookd extension, also the query parameter afterSeq) is where a reconnecting
	// client's stream starts: a number N, or the text "N" or "N.k" (see Cursor).
	AfterSeq json.RawMessage `json:"afterSeq"`
}

// Cursor is what a reconnecting client already has of a turn: every frame whose seq is below
// Seq, and of the frames of seq Seq (the frames of one event share its seq: an ask's
// INTERACTIONs, TOOL_END + WEB_FETCH, ERROR + COMPLETE, ...) all of them when Frames is 0, else
// the first Frames. Written "N" or "N.k".
type Cursor struct {
	Seq    int64
	Frames int
}

// ParseCursor reads afterSeq: "N" (every frame up to seq N) or "N.k" (the frames before seq N
// and the first k of seq N), N ≥ 0, k ≥ 1.
func ParseCursor(s string) (Cursor, error) {
	n, k, dotted := strings.Cut(s, ".")
	seq, err := strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 {
		return Cursor{}, fmt.Errorf("afterSeq: %q is not a frame's seq (N, or N.k for the first k frames of seq N)", s)
	}
	c := Cursor{Seq: seq}
	if dotted {
		if c.Frames, err = strconv.Atoi(k); err != nil || c.Frames < 1 {
			return Cursor{}, fmt.Errorf("afterSeq: %q: k in N.k counts the frames of seq N received, from 1", s)
		}
	}
	return c, nil
}

// after is the seq to follow the run from; the first c.Frames frames of seq c.Seq are then
// skipped.
func (c Cursor) after() int64 {
	if c.Frames > 0 {
		return c.Seq - 1
	}
	return c.Seq
}

// has reports whether the client has every frame of the event seq.
func (c Cursor) has(seq int64) bool { return seq < c.Seq || (seq == c.Seq && c.Frames == 0) }

// resumeCursor reads afterSeq from the query or the body (a number or its text); nil when
// neither gives one.
func resumeCursor(c *gin.Context, body json.RawMessage) (*Cursor, *apiError) {
	q, inQuery := c.GetQuery("afterSeq")
	b := strings.TrimSpace(string(body))
	if b == "null" {
		b = ""
	}
	if strings.HasPrefix(b, `"`) {
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, badRequest("afterSeq: %v", err)
		}
	} else if strings.ContainsAny(b, ".eE") {
		return nil, badRequest("afterSeq: %s: a number is a seq (an integer); N.k is given as text", b)
	}
	switch {
	case inQuery && b != "" && q != b:
		return nil, badRequest("afterSeq: the body's %q differs from the query's %q", b, q)
	case inQuery:
		b = q
	case b == "":
		return nil, nil
	}
	cur, err := ParseCursor(b)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return &cur, nil
}

func (h *handler) resume(c *gin.Context) {
	var req ResumeRequest
	perr := readJSON(c.Request, &req, false)
	if perr != nil {
		req = ResumeRequest{}
	}
	tr := TraceInfo{TurnID: syntheticTurn()}
	caller, err := h.d.Keys.Identify(c.Request, req.UserID)
	if err != nil {
		h.earlyError(c, tr, authError(err))
		return
	}
	if perr != nil {
		h.earlyError(c, tr, perr)
		return
	}
	turnID := strings.TrimSpace(c.Query("turnId"))
	switch {
	case turnID == "":
		turnID = strings.TrimSpace(req.TurnID)
	case req.TurnID != "" && req.TurnID != turnID:
		h.earlyError(c, tr, badRequest("turnId: the body's %q differs from the query's %q", req.TurnID, turnID))
		return
	}
	if turnID == "" {
		h.earlyError(c, tr, badRequest("turnId: is required (query or body)"))
		return
	}
	resp, e := parseResponse(req.Response)
	if e != nil {
		h.earlyError(c, tr, e)
		return
	}
	cursor, e := resumeCursor(c, req.AfterSeq)
	if e != nil {
		h.earlyError(c, tr, e)
		return
	}
	ctx := c.Request.Context()
	run, evs, e := h.turnNow(ctx, caller.UserID, turnID)
	if e != nil {
		h.earlyError(c, tr, e)
		return
	}
	tr = traceOf(run, evs)
	if n := len(evs); cursor != nil && n > 0 && cursor.Seq > evs[n-1].Seq {
		// A client has no frame the turn has not stored yet (a stream sends only durable events),
		// so this seq is of another turn: following it would skip frames the client lacks.
		h.earlyError(c, tr, badRequest("afterSeq: %d is beyond the last frame of turn %s (seq %d)", cursor.Seq, turnID, evs[n-1].Seq))
		return
	}
	part, e := h.resumePoint(ctx, caller, run, evs, resp, cursor)
	if e != nil {
		h.earlyError(c, tr, e)
		return
	}
	// The mode is set on TURN_STARTED, which a replay from the turn's start sends again.
	spec := streamSpec{userID: caller.UserID, requestID: run.RequestID, after: part.from, endFrom: part.endFrom, trace: tr,
		mode: ModeMax, noTools: run.Request.NoTools}
	if run.Request.NoTools {
		spec.mode = ModeFast
	}
	if cursor != nil {
		spec.after, spec.skipSeq, spec.skip = cursor.after(), cursor.Seq, cursor.Frames
	}
	h.stream(c, spec)
}

// turnNow reads a turn's run and its events as of one moment. They are two reads, and a pause
// committed between them (the run's status and its pause event commit together) would be taken
// for a pause already answered: the stream would then wait past it for good. So the run is read
// again after the events until its status is the one they were read with.
func (h *handler) turnNow(ctx context.Context, userID, turnID string) (agent.RunView, []agent.Event, *apiError) {
	run, err := h.rt.RunByReply(ctx, userID, turnID)
	for {
		if err != nil {
			return agent.RunView{}, nil, controlError(err, turnNotFound)
		}
		evs, err := h.rt.Replay(ctx, userID, run.RequestID, 0)
		if err != nil {
			return agent.RunView{}, nil, internal(err)
		}
		again, err := h.rt.RunByReply(ctx, userID, turnID)
		if err == nil && again.Status == run.Status {
			return run, evs, nil
		}
		run = again
	}
}

// span is the part of a turn a resume streams: its events after seq from, up to the first pause
// or end whose seq is endFrom or more (the pauses before it were answered).
type span struct{ from, endFrom int64 }

// resumePoint applies a resume's response to the turn's pause and says what to stream (a
// cursor, when the client sent afterSeq, moves the start but not the end):
//   - the turn is paused now: the response answers the pause (a tool approval: approve-like text
//     approves every pending call, other text denies them with the text as the reason, decisions
//     answer by interactionId/toolCallId; a client-side tool: the text is its output; a manual,
//     budget or shutdown pause: the turn resumes, and text that is not a plain "continue" joins
//     the turn as appended input) and the stream starts after it. With no response, a turn that
//     waits for answers is replayed from its pause before, or from its start, to this pause
//     again: its INTERACTION frames included, so a client that lost them can answer (409
//     responseRequired only when the cursor says the client has them all). A turn paused
//     otherwise just resumes.
//   - the turn is not paused (its pause was answered with interaction-response or tool-approval,
//     or it ended since): the stream starts after its last pause; a response is moot and ignored.
//   - the turn never paused: 409 notPaused, unless a cursor says where to start.
func (h *handler) resumePoint(ctx context.Context, caller wire.Caller, run agent.RunView, evs []agent.Event, resp response, cursor *Cursor) (span, *apiError) {
	var pauses []agent.Event
	for _, ev := range evs {
		if ev.Kind == agent.KindSuspended && ev.Source == "" {
			pauses = append(pauses, ev)
		}
	}
	if len(pauses) == 0 {
		if cursor != nil {
			return span{}, nil // a reconnect to a turn that never paused: nothing to answer
		}
		return span{}, &apiError{status: http.StatusConflict, key: errNotPaused,
			detail: "the turn never paused: there is nothing to resume (send afterSeq to follow it again from a frame)"}
	}
	cur := pauses[len(pauses)-1]
	past := span{from: cur.Seq, endFrom: cur.Seq + 1}
	if run.Status != agent.StatusSuspended {
		return past, nil
	}
	pending, err := h.rt.Asks(ctx, caller.UserID, run.RequestID, agent.AskPending)
	if err != nil {
		return span{}, internal(err)
	}
	reason := ""
	if cur.Suspend != nil {
		reason = cur.Suspend.Reason
	}
	if reason == agent.SuspendPermissionAsk || reason == agent.SuspendExternalExecution || len(pending) > 0 {
		switch {
		case len(pending) == 0: // answered already; the run is on its way
		case resp.empty() && cursor != nil && cursor.has(cur.Seq):
			return span{}, &apiError{status: http.StatusConflict, key: errResponseRequired,
				detail: "the turn waits for an answer to its interaction, and afterSeq says the client has every frame up to it: send a response, or use interaction-response/{interactionId}"}
		case resp.empty(): // a reconnect: the frames up to this pause again
			again := span{endFrom: cur.Seq}
			if len(pauses) > 1 {
				again.from = pauses[len(pauses)-2].Seq
			}
			return again, nil
		default:
			if e := h.answerPending(ctx, caller, run, pending, resp); e != nil {
				return span{}, e
			}
		}
		return past, nil
	}
	if e := h.resumePaused(ctx, caller, run, resp.text); e != nil {
		return span{}, e
	}
	return past, nil
}

// answerPending answers a paused turn's pending asks from a response.
func (h *handler) answerPending(ctx context.Context, caller wire.Caller, run agent.RunView, pending []agent.AskView, resp response) *apiError {
	match := func(a agent.AskView) (Decision, bool) {
		for _, d := range resp.decisions {
			if (d.InteractionID != "" && d.InteractionID == a.AskID) || (d.ToolCallID != "" && d.ToolCallID == a.CallID) {
				return d, true
			}
		}
		for _, d := range resp.decisions {
			if d.InteractionID == "" && d.ToolCallID == "" {
				return d, true
			}
		}
		return Decision{}, false
	}
	var confirms, externals []agent.AskView
	for _, a := range pending {
		if a.Kind == agent.AskExternal {
			externals = append(externals, a)
		} else {
			confirms = append(confirms, a)
		}
	}
	var answers []agent.Answer
	for _, a := range confirms {
		d, found := match(a)
		if !found && resp.text == "" {
			continue
		}
		approved, reason, ok := d.verdict(resp.text)
		if !ok {
			continue
		}
		if e := checkRules(d.Rules, d.RuleScope); e != nil {
			return e
		}
		answers = append(answers, agent.Answer{AskID: a.AskID, Approved: approved, Reason: reason, Input: d.Input,
			Arguments: d.Arguments, Rules: d.Rules, RuleScope: d.RuleScope})
	}
	var results []agent.ToolOutput
	for _, a := range externals {
		if d, found := match(a); found && len(d.Output) > 0 {
			results = append(results, agent.ToolOutput{CallID: a.CallID, Output: outputText(d.Output), State: d.State})
		} else if resp.text != "" && len(externals) == 1 && len(confirms) == 0 {
			results = append(results, agent.ToolOutput{CallID: a.CallID, Output: resp.text})
		}
	}
	if len(answers)+len(results) == 0 {
		return badRequest("response: answers none of the pending interactions")
	}
	// The stream goes on from the pause: the response settles every interaction the turn waits
	// for (one that left some open streamed nothing until another request answered them).
	err := h.rt.Reply(ctx, caller.UserID, run.RequestID, agent.Reply{Answers: answers, Results: results, Whole: true})
	if errors.Is(err, agent.ErrUnsettled) {
		return &apiError{status: http.StatusConflict, key: errResponseRequired, detail: "response: " + err.Error()}
	}
	if err != nil {
		return controlError(err, interactionNotFound)
	}
	return nil
}

// resumePaused resumes a turn paused by the user, its token budget or a shutdown; text that is
// not a plain "continue" joins the turn as appended input first.
func (h *handler) resumePaused(ctx context.Context, caller wire.Caller, run agent.RunView, text string) *apiError {
	if text != "" && !IsApproval(text) {
		if _, err := h.rt.AppendInput(ctx, caller.UserID, run.RequestID, text); err != nil {
			return controlError(err, turnNotFound)
		}
	}
	err := h.rt.Resume(ctx, caller.UserID, run.RequestID)
	if err != nil && !errors.Is(err, agent.ErrNotWaiting) { // ErrNotWaiting: resumed by someone else just now
		return controlError(err, turnNotFound)
	}
	return nil
}

// ---- interaction-response, tool-approval, tool-result ----

// InteractionRequest is the body of interaction-response/{interactionId} (and of the legacy
// interaction_response, which names the interaction in the body). The fields of Decision may be
// given at the top level or inside response.
type InteractionRequest struct {
	Decision
	TurnID string `json:"turnId"`
	UserID string `json:"userId"`
	// Response is text ("approve", "deny", "选择 B 方案", a client-side tool's output), true or
	// false, or a Decision object.
	ResponseRaw json.RawMessage `json:"response"`
}

func acceptance(key, id string, run agent.RunView) gin.H {
	return gin.H{"accepted": true, key: id, "turnId": run.ReplyID, "timestamp": time.Now().Format(time.RFC3339)}
}

func (h *handler) interactionResponse(c *gin.Context) {
	var req InteractionRequest
	caller, ok := h.begin(c, &req, false, func() string { return req.UserID })
	if !ok {
		return
	}
	id := c.Param("interactionId")
	switch {
	case id == "":
		id = strings.TrimSpace(req.InteractionID)
	case req.InteractionID != "" && req.InteractionID != id:
		h.fail(c, badRequest("interactionId: the body's %q differs from the path's %q", req.InteractionID, id))
		return
	}
	if id == "" {
		h.fail(c, badRequest("interactionId: is required"))
		return
	}
	resp, e := parseResponse(req.ResponseRaw)
	if e != nil {
		h.fail(c, e)
		return
	}
	// One decision answers this interaction: one that names another (by interactionId here, by
	// toolCallId once the ask is read) must not be applied to it.
	if len(resp.decisions) > 1 {
		h.fail(c, badRequest("response: one decision answers one interaction; send each to its own interaction-response, or all at once to resume"))
		return
	}
	d := req.Decision
	var toolCallIDs []string // those the body names
	if d.ToolCallID != "" {
		toolCallIDs = append(toolCallIDs, d.ToolCallID)
	}
	if len(resp.decisions) == 1 { // fields inside response fill what the top level leaves out
		in := resp.decisions[0]
		if in.InteractionID != "" && in.InteractionID != id {
			h.fail(c, badRequest("response.interactionId: %q is not this interaction (%q)", in.InteractionID, id))
			return
		}
		if in.ToolCallID != "" {
			toolCallIDs = append(toolCallIDs, in.ToolCallID)
		}
		if d.Approved == nil {
			d.Approved = in.Approved
		}
		d.Reason = firstNonEmpty(d.Reason, in.Reason)
		d.Response = firstNonEmpty(d.Response, in.Response)
		if len(d.Input) == 0 {
			d.Input = in.Input
		}
		if len(d.Arguments) == 0 {
			d.Arguments = in.Arguments
		}
		if len(d.Output) == 0 {
			d.Output = in.Output
		}
		if len(d.Rules) == 0 {
			d.Rules, d.RuleScope = in.Rules, firstNonEmpty(d.RuleScope, in.RuleScope)
		}
		d.State = firstNonEmpty(d.State, in.State)
	}
	if e := checkRules(d.Rules, d.RuleScope); e != nil {
		h.fail(c, e)
		return
	}
	ctx := c.Request.Context()
	if ask, err := h.rt.Ask(ctx, id); err == nil && ask.UserID == caller.UserID {
		for _, tc := range toolCallIDs {
			if tc != ask.CallID {
				h.fail(c, badRequest("toolCallId: %q is not the tool call of this interaction (%q)", tc, ask.CallID))
				return
			}
		}
		requestID := ask.RequestID
		run, err := h.rt.Run(ctx, caller.UserID, requestID)
		if err != nil {
			h.fail(c, controlError(err, interactionNotFound))
			return
		}
		if ask.Kind == agent.AskExternal {
			out := resp.text
			if len(d.Output) > 0 {
				out = outputText(d.Output)
			} else if out == "" && d.Response != "" {
				out = d.Response
			}
			if out == "" && len(d.Output) == 0 {
				h.fail(c, badRequest("output: the client-side tool's result is required (output, or a text response)"))
				return
			}
			err = h.rt.SubmitToolResults(ctx, caller.UserID, requestID, []agent.ToolOutput{{CallID: ask.CallID, Output: out, State: d.State}})
		} else {
			approved, reason, ok := d.verdict(resp.text)
			if !ok {
				h.fail(c, badRequest("approved: is required (true or false), or a response such as \"approve\" or \"deny\""))
				return
			}
			err = h.rt.Answer(ctx, caller.UserID, requestID, []agent.Answer{{AskID: id, Approved: approved,
				Reason: reason, Input: d.Input, Arguments: d.Arguments, Rules: d.Rules, RuleScope: d.RuleScope}})
		}
		if err != nil {
			h.fail(c, controlError(err, interactionNotFound))
			return
		}
		reply(c, http.StatusOK, msgSuccess, acceptance("interactionId", id, run))
		return
	}
	// A RESUME interaction: its id is the turn's.
	run, err := h.rt.RunByReply(ctx, caller.UserID, id)
	if err != nil {
		h.fail(c, controlError(err, interactionNotFound))
		return
	}
	if len(toolCallIDs) > 0 {
		h.fail(c, badRequest("toolCallId: %q names a tool call; this interaction is the turn's resume", toolCallIDs[0]))
		return
	}
	if run.Status != agent.StatusSuspended {
		h.fail(c, &apiError{status: http.StatusConflict, key: errNotWaiting, detail: "the turn is not paused"})
		return
	}
	if pending, err := h.rt.Asks(ctx, caller.UserID, run.RequestID, agent.AskPending); err != nil {
		h.fail(c, internal(err))
		return
	} else if len(pending) > 0 {
		h.fail(c, &apiError{status: http.StatusConflict, key: errNotWaiting,
			detail: "the turn waits for its tool interactions: answer each by its interactionId"})
		return
	}
	if e := h.resumePaused(ctx, caller, run, firstNonEmpty(resp.text, d.Response)); e != nil {
		h.fail(c, e)
		return
	}
	reply(c, http.StatusOK, msgSuccess, acceptance("interactionId", id, run))
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ApprovalRequest is the body of tool-approval/{toolCallId}.
type ApprovalRequest struct {
	Approved  *bool            `json:"approved"`
	Reason    string           `json:"reason"`
	TurnID    string           `json:"turnId"`
	UserID    string           `json:"userId"`
	Input     json.RawMessage  `json:"input"`
	Arguments json.RawMessage  `json:"arguments"`
	Rules     []agent.RuleSpec `json:"rules"`
	RuleScope string           `json:"ruleScope"`
}

// toolRun finds the caller's run of the turn a tool call belongs to (turnId in the body or the
// query).
func (h *handler) toolRun(c *gin.Context, caller wire.Caller, bodyTurn string) (agent.RunView, *apiError) {
	turnID := strings.TrimSpace(bodyTurn)
	if turnID == "" {
		turnID = strings.TrimSpace(c.Query("turnId"))
	}
	if turnID == "" {
		return agent.RunView{}, badRequest("turnId: is required (the turn of the tool call, from the INTERACTION frame's traceInfo)")
	}
	run, err := h.rt.RunByReply(c.Request.Context(), caller.UserID, turnID)
	if err != nil {
		return agent.RunView{}, controlError(err, turnNotFound)
	}
	return run, nil
}

func (h *handler) toolApproval(c *gin.Context) {
	var req ApprovalRequest
	caller, ok := h.begin(c, &req, true, func() string { return req.UserID })
	if !ok {
		return
	}
	callID := c.Param("toolCallId")
	if req.Approved == nil {
		h.fail(c, badRequest("approved: is required (true or false)"))
		return
	}
	if e := checkRules(req.Rules, req.RuleScope); e != nil {
		h.fail(c, e)
		return
	}
	run, e := h.toolRun(c, caller, req.TurnID)
	if e != nil {
		h.fail(c, e)
		return
	}
	ctx := c.Request.Context()
	err := h.rt.Answer(ctx, caller.UserID, run.RequestID, []agent.Answer{{CallID: callID, Approved: *req.Approved,
		Reason: req.Reason, Input: req.Input, Arguments: req.Arguments, Rules: req.Rules, RuleScope: req.RuleScope}})
	if errors.Is(err, agent.ErrNotWaiting) {
		h.fail(c, toolCallNotFound)
		return
	} else if err != nil {
		h.fail(c, controlError(err, turnNotFound))
		return
	}
	reply(c, http.StatusOK, msgSuccess, gin.H{"accepted": true, "toolCallId": callID, "timestamp": time.Now().Format(time.RFC3339)})
}

// ToolResultRequest is the body of tool-result/{toolCallId}: the result of a client-side tool.
type ToolResultRequest struct {
	TurnID  string          `json:"turnId"`
	UserID  string          `json:"userId"`
	Output  json.RawMessage `json:"output"` // text, or [{"type":"text","text":...}]
	State   string          `json:"state"`  // success (default) | error
	IsError bool            `json:"isError"`
}

func (h *handler) toolResult(c *gin.Context) {
	var req ToolResultRequest
	caller, ok := h.begin(c, &req, true, func() string { return req.UserID })
	if !ok {
		return
	}
	callID := c.Param("toolCallId")
	if len(bytes.TrimSpace(req.Output)) == 0 {
		h.fail(c, badRequest("output: is required"))
		return
	}
	state := req.State
	if state == "" && req.IsError {
		state = agent.ToolError
	}
	run, e := h.toolRun(c, caller, req.TurnID)
	if e != nil {
		h.fail(c, e)
		return
	}
	ctx := c.Request.Context()
	err := h.rt.SubmitToolResults(ctx, caller.UserID, run.RequestID, []agent.ToolOutput{{CallID: callID, Output: outputText(req.Output), State: state}})
	if errors.Is(err, agent.ErrNotWaiting) {
		h.fail(c, toolCallNotFound)
		return
	} else if err != nil {
		h.fail(c, controlError(err, turnNotFound))
		return
	}
	reply(c, http.StatusOK, msgSuccess, gin.H{"accepted": true, "toolCallId": callID, "timestamp": time.Now().Format(time.RFC3339)})
}
