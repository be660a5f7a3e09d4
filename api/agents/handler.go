package agents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/tracing"
)

// Dispatcher is the part of the dispatcher the adapters call.
type Dispatcher interface {
	Intercept(ctx context.Context, ev dispatcher.Event) (dispatcher.Decision, error)
	Observe(ctx context.Context, ev dispatcher.Event) ([]string, error)
	RecordRefusal(ctx context.Context, ev dispatcher.Event, kind, reason string, cause error) (string, error)
}

// Deps is what the adapter routes call into.
type Deps struct {
	Dispatcher Dispatcher
	Keys       *wire.Keys
	Log        *slog.Logger
	Metrics    *prometheus.Registry // nil: no metrics
}

// AgentIDHeader selects agent-specific hooks for a caller whose key names no agent (a key's own
// agentId wins, and a header that differs from it is refused).
const AgentIDHeader = "X-Hookd-Agent-Id"

// ToolEventsHeader, sent as "installed" with a Cursor preToolUse or postToolUse, says that
// Cursor's tool-specific hooks (beforeShellExecution, beforeMCPExecution, beforeReadFile and their
// after events) are installed too and decide or record those calls, so this event leaves them to
// them (docs/agents.md, "One action, one decision"). Without it every call is decided here: a
// hooks.json that has only preToolUse must not let a shell command through undecided.
const ToolEventsHeader = "X-Hookd-Cursor-Tool-Events"

// DecisionIDHeader carries the decision log id of an interceptive answer.
const DecisionIDHeader = "X-Hookd-Decision-Id"

// HookRoute is the route of every harness's hooks.
const HookRoute = "/v1/agents/:kind/hooks"

// Register mounts POST /v1/agents/{kind}/hooks.
func Register(r gin.IRouter, d Deps) { r.POST(HookRoute, newHandler(d).hook) }

// newHandler builds the hook route's handler and registers its metrics in d.Metrics.
func newHandler(d Deps) *handler {
	h := &handler{Deps: d,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_agent_hook_events_total",
			Help: "Coding agents' hook events received, by harness and the hookd point they map to (\"none\": answered with nothing to say)."},
			[]string{"kind", "point"}),
		unmapped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_agent_hook_unmapped_total",
			Help: "Coding agents' hook events hookd has no point for, answered with nothing to say, by harness and event."},
			[]string{"kind", "event"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookd_agent_hook_extras_dropped_total",
			Help: "Extras of hook answers that the coding agent's answer has no place for, by harness and extra: events (custom events: always), hint and notice (a tool event's userMessage) where the harness cannot carry them beside that verdict."},
			[]string{"kind", "extra"}),
	}
	if d.Metrics != nil {
		d.Metrics.MustRegister(h.events, h.unmapped, h.dropped)
	}
	return h
}

type handler struct {
	Deps
	events, unmapped, dropped *prometheus.CounterVec
	// warned are the undocumented events already logged (warnUnknown), "kind event", at most
	// maxUnknownWarnings of them: their names are the callers'.
	warned  sync.Map
	warnedN atomic.Int64
}

func (h *handler) hook(c *gin.Context) {
	kind := c.Param("kind")
	ad := For(kind)
	if ad == nil {
		wire.Fail(c, http.StatusNotFound, "kind: %q is not a supported coding agent (one of %s)", kind, strings.Join(Kinds, ", "))
		return
	}
	if !wire.OnlyQuery(c) { // a setting put in the URL (agentId=…) would be ignored
		return
	}
	caller, idErr := h.Keys.Identify(c.Request, "")
	if idErr != nil && !errors.Is(idErr, wire.ErrUserMismatch) {
		c.Header("WWW-Authenticate", `Bearer realm="hookd"`)
		wire.Fail(c, wire.Status(idErr), "%v", idErr)
		return
	}
	if o, over := wire.OversizedBody(c); over {
		h.oversized(c, ad, caller, o)
		return
	}
	body, err := wire.ReadBody(c.Request.Body)
	if err != nil {
		wire.Fail(c, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	// A request hookd cannot take (a header it refuses, an input it cannot read) is refused, and
	// at a point hookd decides the refusal is a block: the harness would take an error status
	// for "no objection" and run the call.
	// The agent a header names (a key that names its own may only repeat it) is that of the
	// refusals below too.
	keyAgent := caller.AgentID
	agentID, agentErr := agentOf(c)
	var othersAgent error
	if agentErr == nil && keyAgent == nil && agentID != nil && caller.OthersAgent(*agentID) {
		// Refused, and not on the record as that agent: the claim is not who sent it.
		othersAgent = fmt.Errorf("%s: %d is the agent of another user's API key", AgentIDHeader, *agentID)
		agentID = nil
	}
	if agentErr == nil && keyAgent == nil {
		caller.AgentID = agentID
	}
	in, err := ParseInput(body)
	refuse := func(status int, err error) {
		m, _ := ad.Map(in) // what the input says, as far as it can be read: the record's subject
		if m.Point == "" {
			event := in.Event
			if event == "" {
				event, _ = topLevelString(body, "hook_event_name")
			}
			m = Mapped{Event: event, Point: ad.Point(event)}
		}
		h.refuse(c, ad, caller, m, status, err)
	}
	if err != nil {
		refuse(http.StatusBadRequest, err)
		return
	}
	if idErr != nil {
		// A valid key claiming another user: at a point hookd decides, a block on the record
		// under the key's own principal (an error status would let the call run).
		refuse(http.StatusForbidden, idErr)
		return
	}
	if agentErr != nil {
		refuse(http.StatusBadRequest, agentErr)
		return
	}
	if othersAgent != nil {
		refuse(http.StatusForbidden, othersAgent)
		return
	}
	if keyAgent != nil {
		// The key names its agent; a header may repeat it, never change it.
		if agentID != nil && *agentID != *keyAgent {
			refuse(http.StatusForbidden, fmt.Errorf("%s: %d is not the API key's agent", AgentIDHeader, *agentID))
			return
		}
		agentID = keyAgent
	}
	toolEvents, err := toolEventsOf(c, kind)
	if err != nil {
		refuse(http.StatusBadRequest, err)
		return
	}
	m, err := ad.Map(in)
	if m.Point == "" {
		h.events.WithLabelValues(kind, "none").Inc()
		h.unmapped.WithLabelValues(kind, knownEvent(kind, in.Event)).Inc()
		h.warnUnknown(c.Request.Context(), kind, in.Event)
		h.answer(c, ad, m, Verdict{})
		return
	}
	if err == nil && m.DecidedBy != "" && toolEvents {
		// The harness fires another event for this same action, which hookd decides or records.
		h.events.WithLabelValues(kind, "none").Inc()
		h.answer(c, ad, m, Verdict{})
		return
	}
	if err != nil {
		h.refuse(c, ad, caller, m, http.StatusBadRequest, err)
		return
	}
	h.events.WithLabelValues(kind, string(m.Point)).Inc()
	call := &hookCall{ad: ad, m: m, session: sessionOf(kind, caller, m.Session),
		agent: dispatcher.CodingAgent{AgentKind: kind, ExternalSessionID: m.Session, Cwd: m.Cwd, PermissionMode: m.PermissionMode}}
	ev := dispatcher.Event{HookType: m.Point, TraceID: tracing.TraceID(c.Request.Context()), SessionID: &call.session,
		PrincipalID: caller.PrincipalID, AgentID: agentID, Context: WithAgent(m.Context, &call.agent)}
	if !m.Point.Interceptive() {
		if _, err := h.Dispatcher.Observe(c.Request.Context(), ev); err != nil {
			wire.FailErr(c, err)
			return
		}
		h.answer(c, ad, m, Verdict{})
		return
	}
	ev.Enforce = call.enforce
	dec, err := h.Dispatcher.Intercept(c.Request.Context(), ev)
	if err != nil {
		if gone := (*dispatcher.CallerGoneError)(nil); errors.As(err, &gone) {
			return // nobody to answer; the chain's rows say so
		}
		id := dec.DecisionID // of the chain's rows, when it ended in an error after asking hooks
		dec = dispatcher.Decision{Decision: dispatcher.Deny, Reason: "hookd could not decide this call, so it is blocked"}
		var bad *dispatcher.InvalidModifyError
		if errors.As(err, &bad) {
			// The chain's rows say so already (outcome error).
			dec.Reason, dec.DecisionID = "hookd: "+bad.Error()+", so the call is blocked", id
		} else {
			dec.DecisionID = h.recordRefusal(c, ev, kind, dec.Reason, err)
		}
		h.Log.ErrorContext(c.Request.Context(), "coding agent hook: no decision", "kind", kind, "event", in.Event, "err", err)
	}
	if dec.DecisionID != "" {
		c.Header(DecisionIDHeader, dec.DecisionID)
	}
	v := Verdict{Decision: dec.Decision, Reason: dec.Reason, Modified: dec.ModifiedValue}
	var events int
	v.Hint, v.Notice, events = ExtrasOf(dec.Extras)
	if events > 0 {
		h.dropped.WithLabelValues(kind, "events").Add(float64(events))
	}
	h.countUnplaced(kind, ad, m, v)
	h.answer(c, ad, m, v)
}

// hookCall is what a dispatched event points to and what its Enforce needs, in one allocation.
type hookCall struct {
	ad      Adapter
	m       Mapped
	session int64
	agent   dispatcher.CodingAgent
}

// enforce is the event's Enforce. The log records what the harness is told to do, not what it
// cannot do (an ask it cannot put to a person is a block).
func (call *hookCall) enforce(d dispatcher.Decision) dispatcher.Decision {
	v := call.ad.Enforce(call.m, Verdict{Decision: d.Decision, Reason: d.Reason, Modified: d.ModifiedValue})
	d.Decision, d.Reason, d.ModifiedValue = v.Decision, v.Reason, v.Modified
	if v.blocks() {
		d.Reason = v.reason() // as the harness is told it
	}
	return d
}

// countUnplaced counts a hint or notice the harness's answer has no place for beside v: one that
// leaves the answer as it would be without it. The adapters alone know where each goes, so the
// answer is the only judge.
func (h *handler) countUnplaced(kind string, ad Adapter, m Mapped, v Verdict) {
	if v.Hint == "" && v.Notice == "" {
		return
	}
	body := ad.Answer(m, v)
	if without := v; v.Hint != "" {
		without.Hint = ""
		if bytes.Equal(ad.Answer(m, without), body) {
			h.dropped.WithLabelValues(kind, "hint").Inc()
		}
	}
	if without := v; v.Notice != "" {
		without.Notice = ""
		if bytes.Equal(ad.Answer(m, without), body) {
			h.dropped.WithLabelValues(kind, "notice").Inc()
		}
	}
}

// answer writes the adapter's rendering of v: 200 with the harness's JSON, or 204 with no body
// (Claude Code's "nothing to say": any 2xx with an empty body).
// oversized answers a hook input over the body limit. At a point hookd decides the call is
// blocked, as for any input it cannot read: the harness would take 413 for "no objection" and run
// it. Elsewhere there is nothing to block, and the 413 says the event was not recorded. The event
// is named by the input's top-level hook_event_name, read from the bytes up to the limit.
func (h *handler) oversized(c *gin.Context, ad Adapter, caller wire.Caller, o wire.Oversized) {
	event, _ := topLevelString(o.Prefix, "hook_event_name")
	m := Mapped{Event: event, Point: ad.Point(event)}
	if !m.Point.Interceptive() {
		wire.Fail(c, http.StatusRequestEntityTooLarge, "request body over %d bytes", o.Limit)
		return
	}
	h.Log.WarnContext(c.Request.Context(), "coding agent hook input over the body limit", "kind", c.Param("kind"), "event", event, "limit", o.Limit)
	h.block(c, ad, caller, m, fmt.Sprintf("hookd: the hook input is over %d bytes, more than hookd reads, so the call is blocked", o.Limit),
		fmt.Errorf("hook input over %d bytes", o.Limit))
}

// refuse answers a request hookd cannot take at m's point: a block with the reason where hookd
// decides, else status.
func (h *handler) refuse(c *gin.Context, ad Adapter, caller wire.Caller, m Mapped, status int, err error) {
	if !m.Point.Interceptive() {
		wire.Fail(c, status, "%v", err)
		return
	}
	h.Log.WarnContext(c.Request.Context(), "coding agent hook input refused", "kind", c.Param("kind"), "event", m.Event, "err", err)
	h.block(c, ad, caller, m, "hookd: "+err.Error(), err)
}

// block answers a block hookd decided itself at m's point, which no hook was asked about: it is
// counted as that point's event (the call it stops is one) and recorded in the decision log as
// hookd's, under the caller's principal and, where the input named it, the harness session.
func (h *handler) block(c *gin.Context, ad Adapter, caller wire.Caller, m Mapped, reason string, cause error) {
	kind := c.Param("kind")
	h.events.WithLabelValues(kind, string(m.Point)).Inc()
	ev := dispatcher.Event{HookType: m.Point, TraceID: tracing.TraceID(c.Request.Context()), PrincipalID: caller.PrincipalID,
		AgentID: caller.AgentID, Context: m.Context}
	if m.Session != "" {
		session := sessionOf(kind, caller, m.Session)
		ev.SessionID = &session
	}
	if id := h.recordRefusal(c, ev, kind, reason, cause); id != "" {
		c.Header(DecisionIDHeader, id)
	}
	h.answer(c, ad, m, Verdict{Decision: dispatcher.Deny, Reason: reason})
}

// sessionOf is SessionID for the caller: its principal, or, in development mode, where callers
// have none, the user it names (X-User-Id), so that two users' sessions of one id stay apart.
func sessionOf(kind string, caller wire.Caller, external string) int64 {
	if caller.PrincipalID == nil && caller.UserID != "" {
		return SessionID(kind, nil, "user "+caller.UserID+"\x00"+external)
	}
	return SessionID(kind, caller.PrincipalID, external)
}

// recordRefusal records hookd's own block and returns its decisionId ("" when the row could not
// be written: the block stands all the same, and the error is logged).
func (h *handler) recordRefusal(c *gin.Context, ev dispatcher.Event, kind, reason string, cause error) string {
	id, err := h.Dispatcher.RecordRefusal(c.Request.Context(), ev, kind, reason, cause)
	if err != nil {
		h.Log.ErrorContext(c.Request.Context(), "coding agent hook: hookd's block not recorded", "kind", kind, "err", err)
		return ""
	}
	return id
}

func (h *handler) answer(c *gin.Context, ad Adapter, m Mapped, v Verdict) {
	body := ad.Answer(m, v)
	if body == nil {
		c.Status(http.StatusNoContent)
		return
	}
	wire.Data(c, http.StatusOK, jsonType, body)
}

// jsonType is the Content-Type of the harnesses' answers, shared (net/http only reads it).
var jsonType = []string{"application/json"}

// agentOf reads the optional agent id of the call.
func agentOf(c *gin.Context) (*int64, error) {
	s, err := oneHeader(c, AgentIDHeader)
	if s == "" || err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != s {
		return nil, errors.New(AgentIDHeader + ": must be a positive integer, in plain digits (no sign, no leading zero)")
	}
	return &id, nil
}

// toolEventsOf reads ToolEventsHeader, which only a Cursor call may send.
func toolEventsOf(c *gin.Context, kind string) (bool, error) {
	v, err := oneHeader(c, ToolEventsHeader)
	switch {
	case err != nil:
		return false, err
	case v == "":
		return false, nil
	case kind != Cursor:
		return false, fmt.Errorf("%s: only a Cursor hook may send it, not %s", ToolEventsHeader, kind)
	case v != "installed":
		return false, fmt.Errorf("%s: %q is not \"installed\"", ToolEventsHeader, v)
	}
	return true, nil
}

// oneHeader is the value of a header hookd reads, refused when sent more than once: which was
// meant is not known (the first would win without a word). name is in canonical form
// (TestHeaderNamesCanonical), so the header is looked up as it is, not canonicalized again on
// every call.
func oneHeader(c *gin.Context, name string) (string, error) {
	vs := c.Request.Header[name]
	if len(vs) > 1 {
		return "", fmt.Errorf("%s: sent %d times; send it once", name, len(vs))
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// knownEvents are each harness's documented events that have no hookd point, as its hooks
// reference lists them; any other name is counted as "other", so a caller cannot grow the metric's
// label set, and logged (warnUnknown). A harness's events are its own: Cursor has no Notification.
var knownEvents = map[string]map[string]bool{
	ClaudeCode: set("Setup", "UserPromptExpansion", "PermissionRequest", "PermissionDenied", "PostToolBatch",
		"SubagentStart", "SubagentStop", "TaskCreated", "TaskCompleted", "StopFailure", "TeammateIdle", "PreCompact",
		"PostCompact", "Elicitation", "ElicitationResult", "Notification", "WorktreeCreate", "WorktreeRemove",
		"ConfigChange", "InstructionsLoaded", "CwdChanged", "FileChanged"),
	Codex:     set("PermissionRequest", "PreCompact", "PostCompact"),
	GeminiCLI: set("BeforeModel", "AfterModel", "BeforeToolSelection", "PreCompress", "Notification"),
	Cursor: set("afterFileEdit", "afterAgentResponse", "afterAgentThought", "beforeTabFileRead", "afterTabFileEdit",
		"preCompact", "subagentStart", "subagentStop"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// maxUnknownWarnings bounds how many undocumented event names warnUnknown logs.
const maxUnknownWarnings = 64

// warnUnknown logs, once per harness and name, an event that hookd has no point for and that the
// harness's documentation does not list (a typo in a hooks file, or an event of a harness newer
// than hookd): answered with nothing to say, whatever it is for, so no hook governs it. A
// documented event hookd leaves alone (Claude Code's Notification, say) is only counted.
func (h *handler) warnUnknown(ctx context.Context, kind, event string) {
	if knownEvents[kind][event] || h.warnedN.Load() >= maxUnknownWarnings {
		return
	}
	if len(event) > 100 {
		event = strings.ToValidUTF8(event[:100], "") + "…"
	}
	if _, seen := h.warned.LoadOrStore(kind+" "+event, true); seen || h.warnedN.Add(1) > maxUnknownWarnings {
		return
	}
	h.Log.WarnContext(ctx, "a coding agent's hook event hookd has no point for: answered with nothing to say, so no hook governs it (logged once)",
		"kind", kind, "event", event)
}

func knownEvent(kind, e string) string {
	if knownEvents[kind][e] {
		return e
	}
	return "other"
}
