package agent

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Stages of a pending tool call. A step's calls are first all decided (hooks, then permission
// rules), then the run waits if any needs a person or the client, then they run in order.
const (
	stageNew      = "new"      // as the model produced it
	stageReady    = "ready"    // cleared to run with Args
	stageAsking   = "asking"   // waits for a person (AskID)
	stageExternal = "external" // waits for the client's result (AskID)
	stageDenied   = "denied"   // will not run: Reason
	stageError    = "error"    // cannot run: Reason
	stageDone     = "done"     // has its Result
)

// pendingCall is a tool call of the current step on its way to a result. It is part of the
// persisted run state, so a pause or a restart loses none of it.
type pendingCall struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Raw      string         `json:"raw"`            // the arguments as the model produced them
	Args     string         `json:"args,omitempty"` // repaired, possibly modified by hooks or a person
	Stage    string         `json:"stage"`
	AskID    string         `json:"askId,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	External bool           `json:"external,omitempty"`
	State    string         `json:"state,omitempty"` // the result state once done
	Result   *model.Message `json:"result,omitempty"`
	Async    *AsyncInfo     `json:"async,omitempty"` // work a tool started elsewhere
}

// Permission behaviours.
const (
	BehaviorAllow = "allow"
	BehaviorAsk   = "ask"
	BehaviorDeny  = "deny"
)

// settle takes the current step's calls to results. It returns false when the run paused or
// ended on the way (the goroutine must return).
func (r *run) settle() bool {
	for i := range r.state.Pending {
		if r.state.Pending[i].Stage == stageNew {
			r.decide(&r.state.Pending[i])
		}
	}
	var asks []AskCall
	var externals []PendingCall
	for _, p := range r.state.Pending {
		switch p.Stage {
		case stageAsking:
			asks = append(asks, r.askCall(p))
		case stageExternal:
			externals = append(externals, PendingCall{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: "pending", AskID: p.AskID, External: true})
		}
	}
	if len(asks) > 0 || len(externals) > 0 {
		r.wait(asks, externals)
		return false
	}
	for i := range r.state.Pending {
		p := &r.state.Pending[i]
		if p.Stage == stageDone {
			continue
		}
		r.runCall(p)
		if p.Stage == stageExternal && p.Async != nil {
			r.waitAsync(p)
			return false
		}
		if r.leaving() {
			r.stopped() // the interrupted call stays pending and runs again on resume
			return false
		}
	}
	denied := 0
	var calls []PendingCall
	for _, p := range r.state.Pending {
		r.state.Transcript = append(r.state.Transcript, *p.Result)
		if p.State == ToolDenied {
			denied++
		}
		calls = append(calls, PendingCall{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: p.State})
	}
	r.state.Pending = nil
	if denied == len(calls) {
		r.emit(Event{Kind: KindAllDenied, Calls: calls})
	}
	if r.ctx.Err() != nil {
		r.stopped()
		return false
	}
	r.checkpoint()
	return true
}

// decide repairs a call's arguments and asks the hooks, then the permission rules, what to do.
func (r *run) decide(p *pendingCall) {
	args, err := tools.RepairArguments(p.Raw)
	if err != nil {
		r.emit(Event{Kind: KindToolCallEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Raw}})
		p.Args, p.Stage, p.Reason = p.Raw, stageError, err.Error()
		return
	}
	p.Args = string(args)
	r.emit(Event{Kind: KindToolCallEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args}})
	external := r.isExternal(p.Name)
	tool, known := r.rt.tools.Get(p.Name)
	if p.Name == spawnTool && r.canSpawn() {
		if r.preToolUse(p) {
			p.Stage = stageReady // the subagent's own calls face the rules
		}
		return
	}
	if !known && !external {
		p.Stage, p.Reason = stageError, fmt.Sprintf("unknown tool %q", p.Name)
		return
	}
	if !r.preToolUse(p) {
		return
	}
	if external {
		p.External, p.Stage, p.AskID = true, stageExternal, "ext_"+newEventID()[:20]
		return
	}
	behavior, _, _ := r.permission(tool.Spec(), json.RawMessage(p.Args))
	switch behavior {
	case BehaviorDeny:
		p.Stage, p.Reason = stageDenied, "denied by a permission rule"
	case BehaviorAsk:
		p.Stage, p.AskID = stageAsking, "ask_"+newEventID()[:20]
	default:
		p.Stage = stageReady
	}
}

// preToolUse runs the pre_tool_use hooks on p; false means p will not run.
func (r *run) preToolUse(p *pendingCall) bool {
	dec, err := r.rt.hooks.Intercept(r.ctx, r.hookEvent(dispatcher.PreToolUse, &dispatcher.PreToolUseContext{
		ToolName: p.Name, ToolCallID: p.ID, Arguments: dispatcher.Value(p.Args)}))
	if err != nil {
		p.Stage, p.Reason = stageError, "pre_tool_use hook: "+err.Error()
		return false
	}
	switch dec.Decision {
	case dispatcher.Deny:
		p.Stage, p.Reason = stageDenied, dec.Reason
		if p.Reason == "" {
			p.Reason = "the tool call was refused by policy"
		}
		return false
	case dispatcher.Modify:
		p.Args = *dec.ModifiedValue
	}
	return true
}

func (r *run) isExternal(name string) bool {
	for _, t := range r.spec.ExternalTools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// permission decides by the rules of the session, the user and everyone: deny beats ask beats
// allow; with no rule, read-only tools are allowed and the rest follow the configured default.
func (r *run) permission(spec tools.Spec, args json.RawMessage) (behavior, description, pattern string) {
	rules, err := r.rt.db.RulesFor(r.ctx, r.spec.SessionID, r.spec.UserID, time.Now())
	if err != nil {
		r.rt.log.Error("reading permission rules failed; asking", "err", err)
		return BehaviorAsk, "permission rules unavailable", ""
	}
	subject := tools.Subject(spec, args)
	rank := map[string]int{BehaviorAllow: 1, BehaviorAsk: 2, BehaviorDeny: 3}
	for _, rule := range rules {
		tm, err1 := hookdtype.ParseNameMatch(rule.ToolName)
		cm, err2 := hookdtype.ParseNameMatch(rule.RuleContent)
		if err1 != nil || err2 != nil || !tm.Match(spec.Name) || !cm.Match(subject) {
			continue
		}
		if rank[rule.Behavior] > rank[behavior] {
			behavior = rule.Behavior
			description = fmt.Sprintf("rule %d (%s, %s scope): %s %s → %s", rule.ID, rule.Source, rule.Scope, rule.ToolName, rule.RuleContent, rule.Behavior)
			pattern = rule.RuleContent
		}
	}
	if behavior != "" {
		return behavior, description, pattern
	}
	if spec.ReadOnly {
		return BehaviorAllow, "read-only tools are allowed by default", "*"
	}
	d := r.rt.cfg.DefaultBehavior
	return d, "tools that write or execute need confirmation by default", "*"
}

func (r *run) askCall(p pendingCall) AskCall {
	tool, _ := r.rt.tools.Get(p.Name)
	_, desc, pattern := r.permission(tool.Spec(), json.RawMessage(p.Args))
	return AskCall{AskID: p.AskID, CallID: p.ID, Name: p.Name, Arguments: p.Args, RuleDescription: desc,
		RulePattern: pattern, PrincipalID: r.spec.PrincipalID, ExpiresAt: time.Now().Add(r.rt.cfg.AskTimeout).UTC()}
}

func argsHash(args string) string {
	var v any
	if json.Unmarshal([]byte(args), &v) == nil {
		if b, err := json.Marshal(v); err == nil { // canonical: keys sorted, no spaces
			args = string(b)
		}
	}
	h := sha256.Sum256([]byte(args))
	return hex.EncodeToString(h[:])
}

// wait records what the run waits for, announces it and suspends.
func (r *run) wait(asks []AskCall, externals []PendingCall) {
	var rows []storage.Ask
	for _, a := range asks {
		rows = append(rows, storage.Ask{AskID: a.AskID, Kind: storage.AskConfirm, RunID: r.rec.ID, UserID: r.spec.UserID,
			CallID: a.CallID, ToolName: a.Name, ArgsHash: argsHash(a.Arguments), ExpiresAt: a.ExpiresAt})
	}
	for _, e := range externals {
		rows = append(rows, storage.Ask{AskID: e.AskID, Kind: storage.AskExternal, RunID: r.rec.ID, UserID: r.spec.UserID,
			CallID: e.CallID, ToolName: e.Name, ArgsHash: argsHash(e.Arguments), ExpiresAt: time.Now().Add(r.rt.cfg.AskTimeout)})
	}
	// The pending calls are saved before anything is announced: a crash after the client saw
	// the ask leaves a run that can be answered and resumed.
	r.checkpoint()
	if err := r.rt.db.AddAsks(context.WithoutCancel(r.ctx), rows); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	reason := SuspendExternalExecution
	if len(asks) > 0 {
		r.emit(Event{Kind: KindAsk, Ask: &AskInfo{Calls: asks}})
		reason = SuspendPermissionAsk
	}
	if len(externals) > 0 {
		r.emit(Event{Kind: KindExternalCalls, Calls: externals})
	}
	r.suspend(reason, "")
	// Answers may have arrived before the pause was recorded: go on at once if so.
	r.rt.tryResume(context.WithoutCancel(r.ctx), r.rec.ID)
}

// waitAsync pauses the run until an asynchronous tool's result is posted or its time runs out.
func (r *run) waitAsync(p *pendingCall) {
	timeout := time.Duration(p.Async.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = r.rt.cfg.AskTimeout
	}
	row := storage.Ask{AskID: p.AskID, Kind: storage.AskExternal, RunID: r.rec.ID, UserID: r.spec.UserID, CallID: p.ID,
		ToolName: p.Name, ArgsHash: argsHash(p.Args), ExpiresAt: time.Now().Add(timeout)}
	r.checkpoint()
	if err := r.rt.db.AddAsks(context.WithoutCancel(r.ctx), []storage.Ask{row}); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	r.suspendWith(SuspendAsyncTool, "waiting for an asynchronous tool", p.Async)
	r.rt.tryResume(context.WithoutCancel(r.ctx), r.rec.ID)
}

func (r *run) pendingCalls() []PendingCall {
	out := []PendingCall{}
	for _, p := range r.state.Pending {
		if p.Stage == stageDone {
			continue
		}
		st := "pending"
		if p.Stage == stageAsking {
			st = "asking"
		}
		out = append(out, PendingCall{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: st, AskID: p.AskID, External: p.External})
	}
	return out
}

// runCall produces p's result: it runs the tool, or reports why it did not.
func (r *run) runCall(p *pendingCall) {
	start := time.Now()
	r.emit(Event{Kind: KindToolResultStarted, Tool: &ToolInfo{CallID: p.ID, Name: p.Name}})
	done := func(state, output, errMsg string) {
		p.Stage, p.State = stageDone, state
		r.emit(Event{Kind: KindToolResultEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args,
			State: state, Output: output, Error: errMsg, DurationMs: time.Since(start).Milliseconds()}})
		r.observe(dispatcher.PostToolUse, &dispatcher.PostToolUseContext{ToolName: p.Name, ToolCallID: p.ID,
			Arguments: dispatcher.Value(p.Args), Output: dispatcher.Value(output), Succeeded: state == ToolSuccess,
			ErrorMessage: optional(errMsg), DurationMs: time.Since(start).Milliseconds()})
		text := output
		if state != ToolSuccess && errMsg != "" {
			text = errMsg
		}
		p.Result = &model.Message{Role: model.RoleTool, ToolCallID: p.ID, Name: p.Name, Text: text}
	}
	switch p.Stage {
	case stageDenied:
		done(ToolDenied, "", p.Reason)
		return
	case stageError:
		done(ToolError, "", p.Reason)
		return
	case stageDone: // an external result arrived
		return
	}
	if r.ctx.Err() != nil {
		if !r.leaving() {
			done(ToolInterrupted, "", "interrupted before it ran")
		}
		return
	}
	if p.Name == spawnTool {
		done(r.spawn(p))
		return
	}
	tool, _ := r.rt.tools.Get(p.Name)
	dir, err := r.rt.ws.Dir(r.spec.SessionID)
	if err != nil {
		done(ToolError, "", err.Error())
		return
	}
	streamed := false
	env := tools.Env{SessionID: r.spec.SessionID, Workspace: dir, Progress: func(text string) {
		streamed = true
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: text}})
	}}
	res, err := tool.Run(r.ctx, env, json.RawMessage(p.Args))
	if r.leaving() {
		return // not finished: it stays ready and runs again after the restart
	}
	if err != nil {
		r.rt.log.Warn("tool failed", "tool", p.Name, "requestId", r.rec.RequestID, "err", err)
		res = tools.Result{Text: err.Error(), IsError: true}
	}
	if a := res.Async; a != nil && err == nil {
		// The work goes on elsewhere: the run waits for its result like for a client-side tool.
		p.Stage, p.AskID = stageExternal, "async_"+newEventID()[:20]
		p.Async = &AsyncInfo{TaskID: a.TaskID, CallID: p.ID, Name: p.Name, Arguments: p.Args,
			SubmittedAtMs: time.Now().UnixMilli(), TimeoutMs: a.Timeout.Milliseconds(), Strategy: a.Strategy}
		return
	}
	if !streamed && res.Text != "" {
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: res.Text}})
	}
	for _, d := range res.Data {
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name,
			Data: &DataContent{ID: newEventID(), Name: d.Name, MediaType: d.MediaType, Base64: base64.StdEncoding.EncodeToString(d.Bytes)}}})
	}
	for _, f := range res.Files {
		r.attach(f)
	}
	switch {
	case r.ctx.Err() != nil:
		done(ToolInterrupted, res.Text, "interrupted")
	case res.IsError:
		done(ToolError, res.Text, firstLine(res.Text))
	default:
		done(ToolSuccess, res.Text, "")
	}
}

// overBudget reports whether the run used its token budget since it last (re)started counting.
func (r *run) overBudget() bool {
	b := r.rt.cfg.TokenBudget
	return b > 0 && r.state.Usage.Total()-r.state.BudgetBase >= b
}

// requestStop pauses a run that spent its budget; a resume gives it a fresh budget.
func (r *run) requestStop() {
	r.emit(Event{Kind: KindStopRequested, Stop: &StopInfo{
		Reason:         fmt.Sprintf("单轮 token 消耗超过预算上限 %d，已暂停", r.rt.cfg.TokenBudget),
		GenerateReason: ReasonMiddleware}})
	r.suspend(SuspendRequestStop, "token budget spent")
}

// consumeInputs turns supplementary input appended since the last step into user messages; the
// answer from here on goes to a new assistant message.
func (r *run) consumeInputs() {
	if r.state.Step == 0 {
		return // the first model call sees the input anyway
	}
	ctx := context.WithoutCancel(r.ctx)
	inputs, err := r.rt.db.TakeRunInputs(ctx, r.rec.ID)
	if err != nil {
		r.rt.log.Error("reading supplementary input failed", "requestId", r.rec.RequestID, "err", err)
		return
	}
	for _, in := range inputs {
		// The answer so far stays with the current assistant message.
		so := assistantBody{Text: r.state.Text, Thinking: r.state.Thinking}
		b, _ := json.Marshal(so)
		_ = r.rt.db.UpdateMessage(ctx, r.assistantID(), b)
		user := &storage.Message{SessionID: r.spec.SessionID, RunID: &r.rec.ID, Role: model.RoleUser}
		user.Body, _ = json.Marshal(userBody{Text: in.Content, Supplementary: true})
		asst := &storage.Message{SessionID: r.spec.SessionID, RunID: &r.rec.ID, Role: model.RoleAssistant, Body: []byte(`{}`)}
		if err := r.rt.db.AddMessages(ctx, []*storage.Message{user, asst}); err != nil {
			r.rt.log.Error("recording supplementary input failed", "requestId", r.rec.RequestID, "err", err)
			return
		}
		r.state.AssistantMessageID = asst.ID
		r.state.Transcript = append(r.state.Transcript, model.Message{Role: model.RoleUser, Text: in.Content})
		r.emit(Event{Kind: KindInputConsumed, Input: &InputInfo{InputID: in.InputID, Content: in.Content,
			UserMessageID: user.ID, AssistantMessageID: asst.ID}})
	}
}

// ---- control: what clients ask of runs ----

// Errors of the control API.
var (
	ErrNotWaiting       = errors.New("the run is not waiting for that")
	ErrArgumentsChanged = errors.New("the approval is for other arguments than the call asked about")
	ErrAlreadyAnswered  = storage.ErrAlreadyAnswered
	ErrNotLive          = errors.New("the run is not running")
)

// Answer is a person's decision on one ask. AskID names it (or CallID, within the run).
// Arguments, when set, are what the person saw: they must be the arguments asked about. Input,
// when set, are edited arguments to run with instead. Rules are stored for later calls.
type Answer struct {
	AskID     string
	CallID    string
	Approved  bool
	Reason    string
	Arguments json.RawMessage `json:",omitempty"`
	Input     json.RawMessage `json:",omitempty"`
	Rules     []RuleSpec
	// RuleScope is session (default), user or global.
	RuleScope string
	// AnsweredBy is who answered when it is not the run's user (a reviewer), for the record.
	AnsweredBy string `json:",omitempty"`
}

// RunOfAsk returns the request id of the run an ask belongs to, if the ask is userID's.
func (rt *Runtime) RunOfAsk(ctx context.Context, userID, askID string) (string, error) {
	a, err := rt.db.GetAsk(ctx, askID)
	if err != nil {
		return "", err
	}
	if a.UserID != userID {
		return "", ErrNotFound
	}
	return rt.requestIDOf(ctx, a.RunID)
}

func (rt *Runtime) requestIDOf(ctx context.Context, runID int64) (string, error) {
	var id string
	runs, err := rt.db.RunsByID(ctx, runID)
	if err != nil {
		return "", err
	}
	id = runs.RequestID
	return id, nil
}

// Answer records decisions on a run's asks; once nothing is pending the run goes on (here, on
// its own goroutine). Each ask is answered once; a decision bound to other arguments, for an ask
// of another user, or for an ask already answered is refused.
func (rt *Runtime) Answer(ctx context.Context, userID, requestID string, answers []Answer) error {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return err
	}
	pending, err := rt.db.RunAsks(ctx, rec.ID, "")
	if err != nil {
		return err
	}
	for _, a := range answers {
		var ask *storage.Ask
		for i := range pending {
			if (a.AskID != "" && pending[i].AskID == a.AskID) || (a.AskID == "" && a.CallID != "" && pending[i].CallID == a.CallID) {
				ask = &pending[i]
			}
		}
		if ask == nil || ask.Kind != storage.AskConfirm {
			return fmt.Errorf("%w: no ask %s%s in run %s", ErrNotWaiting, a.AskID, a.CallID, requestID)
		}
		if len(a.Arguments) > 0 && string(a.Arguments) != "null" && argsHash(string(a.Arguments)) != ask.ArgsHash {
			return ErrArgumentsChanged
		}
		status := storage.AskDenied
		if a.Approved {
			status = storage.AskApproved
		}
		body, _ := json.Marshal(a)
		if err := rt.db.AnswerAsk(ctx, ask.AskID, status, body); err != nil {
			return err
		}
		if a.Approved && len(a.Rules) > 0 {
			if err := rt.remember(ctx, rec, a); err != nil {
				return err
			}
		}
	}
	rt.tryResume(context.WithoutCancel(ctx), rec.ID)
	return nil
}

func (rt *Runtime) remember(ctx context.Context, rec storage.Run, a Answer) error {
	scope, key := a.RuleScope, fmt.Sprint(rec.SessionID)
	switch scope {
	case "user":
		key = rec.UserID
	case "global":
		key = ""
	default:
		scope = "session"
	}
	var rules []*storage.PermissionRule
	for _, r := range a.Rules {
		if r.Behavior != BehaviorAllow && r.Behavior != BehaviorAsk && r.Behavior != BehaviorDeny {
			return fmt.Errorf("rule behavior %q: want allow, ask or deny", r.Behavior)
		}
		if _, err := hookdtype.ParseNameMatch(r.RuleContent); err != nil {
			return fmt.Errorf("rule_content: %v", err)
		}
		src := r.Source
		if src == "" {
			src = "userSettings"
		}
		rules = append(rules, &storage.PermissionRule{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior,
			Source: src, Scope: scope, ScopeKey: key})
	}
	return rt.db.AddRules(ctx, rules)
}

// SubmitToolResults delivers the results of client-side tools the run waits for.
func (rt *Runtime) SubmitToolResults(ctx context.Context, userID, requestID string, results []ToolOutput) error {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return err
	}
	asks, err := rt.db.RunAsks(ctx, rec.ID, storage.AskPending)
	if err != nil {
		return err
	}
	for _, res := range results {
		var ask *storage.Ask
		for i := range asks {
			if asks[i].CallID == res.CallID && asks[i].Kind == storage.AskExternal {
				ask = &asks[i]
			}
		}
		if ask == nil {
			return fmt.Errorf("%w: no client-side call %s in run %s", ErrNotWaiting, res.CallID, requestID)
		}
		if res.State == "" {
			res.State = ToolSuccess
		}
		res.Name = ask.ToolName
		body, _ := json.Marshal(res)
		if err := rt.db.AnswerAsk(ctx, ask.AskID, storage.AskApproved, body); err != nil {
			return err
		}
	}
	rt.tryResume(context.WithoutCancel(ctx), rec.ID)
	return nil
}

// tryResume starts a suspended run again when nothing it waits for is pending. Only one caller
// wins the suspended → running transition, in this process or any other.
func (rt *Runtime) tryResume(ctx context.Context, runID int64) {
	pending, err := rt.db.RunAsks(ctx, runID, storage.AskPending)
	if err != nil || len(pending) > 0 {
		return
	}
	rec, err := rt.db.RunsByID(ctx, runID)
	if err != nil || rec.Status != storage.RunSuspended {
		return
	}
	var st runState
	_ = json.Unmarshal(rec.State, &st)
	waiting := false
	for _, p := range st.Pending {
		waiting = waiting || p.Stage == stageAsking || p.Stage == stageExternal
	}
	if !waiting {
		return // paused for another reason: only Resume continues it
	}
	_ = rt.resumeRun(ctx, rec, st)
}

// resumeRun claims a suspended run and continues it on a new goroutine.
func (rt *Runtime) resumeRun(ctx context.Context, rec storage.Run, st runState) error {
	rec.Status, rec.Owner = storage.RunRunning, rt.cfg.Owner
	if err := rt.db.UpdateRun(ctx, &rec, storage.RunSuspended); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return ErrNotWaiting // someone else resumed it first
		}
		return err
	}
	// A suspend asked before the pause is spent (a stop is not: it still applies).
	_ = rt.db.ClearRunControl(ctx, rec.ID, storage.RunControlSuspend)
	var spec runSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return err
	}
	last, err := rt.db.LastRunSeq(ctx, rec.ID)
	if err != nil {
		return err
	}
	st.BudgetBase = st.Usage.Total()
	r := rt.newRun(rec, spec, st)
	r.seq = last
	rt.launch(r, func(r *run) { r.resume() })
	return nil
}

// resume applies what the run waited for and goes on with the loop.
func (r *run) resume() {
	r.emit(Event{Kind: KindResumed})
	if err := r.loadBase(); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	var answers []AskAnswer
	var results []ToolOutput
	var finished []*pendingCall // external calls whose results arrived
	for i := range r.state.Pending {
		p := &r.state.Pending[i]
		if p.Stage != stageAsking && p.Stage != stageExternal {
			continue
		}
		ask, err := r.rt.db.GetAsk(r.ctx, p.AskID)
		if err != nil {
			p.Stage, p.Reason = stageError, "the ask was lost: "+err.Error()
			continue
		}
		var a Answer
		_ = json.Unmarshal(ask.Answer, &a)
		if p.Stage == stageExternal {
			var out ToolOutput
			_ = json.Unmarshal(ask.Answer, &out)
			if ask.Status == storage.AskExpired {
				out = ToolOutput{CallID: p.ID, Name: p.Name, State: ToolError, Output: "等待超时"}
				if p.Async != nil {
					out.Output = fmt.Sprintf("asynchronous task %s timed out after %d ms", p.Async.TaskID, p.Async.TimeoutMs)
				}
			}
			results = append(results, out)
			p.Stage, p.State = stageDone, out.State
			p.Result = &model.Message{Role: model.RoleTool, ToolCallID: p.ID, Name: p.Name, Text: out.Output}
			finished = append(finished, p)
			continue
		}
		ans := AskAnswer{AskID: p.AskID, CallID: p.ID, Name: p.Name, Arguments: p.Args, Approved: ask.Status == storage.AskApproved,
			Reason: a.Reason, Rules: a.Rules}
		switch ask.Status {
		case storage.AskApproved:
			if ans.Reason == "" {
				ans.Reason = "用户已批准"
			}
			p.Stage = stageReady
			if len(a.Input) > 0 && string(a.Input) != "null" && argsHash(string(a.Input)) != argsHash(p.Args) {
				ans.Input = string(a.Input)
				p.Args = string(a.Input)
				r.preToolUse(p) // edited arguments face the hooks again
			}
		case storage.AskExpired:
			ans.Reason = "等待超时"
			p.Stage, p.Reason = stageDenied, ans.Reason
		default:
			if ans.Reason == "" {
				ans.Reason = "用户拒绝"
			}
			p.Stage, p.Reason = stageDenied, ans.Reason
		}
		answers = append(answers, ans)
	}
	// What the run waited for comes first, then the state change and the results' details.
	if len(answers) > 0 {
		r.emit(Event{Kind: KindAskResolved, Answers: answers})
	}
	if len(results) > 0 {
		r.emit(Event{Kind: KindExternalResults, Results: results})
	}
	v, _ := json.Marshal(map[string]string{"status": "running"})
	r.emit(Event{Kind: KindCustom, Custom: &CustomInfo{Name: "state_updated", Value: v}})
	for _, p := range finished {
		if p.Async == nil { // an async call's result started before the pause
			r.emit(Event{Kind: KindToolResultStarted, Tool: &ToolInfo{CallID: p.ID, Name: p.Name}})
		}
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: p.Result.Text}})
		r.emit(Event{Kind: KindToolResultEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: p.State, Output: p.Result.Text}})
	}
	r.loop()
}

// Pause returns the event a suspended run paused with (its last event), so a client resuming it
// can read on from there.
func (rt *Runtime) Pause(ctx context.Context, userID, requestID string) (Event, error) {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return Event{}, err
	}
	rec = rt.settled(ctx, rec)
	if rec.Status != storage.RunSuspended {
		return Event{}, ErrNotWaiting
	}
	last, err := rt.db.LastRunSeq(ctx, rec.ID)
	if err != nil {
		return Event{}, err
	}
	evs, err := rt.elog.readStored(ctx, rec.ID, last-1, 1)
	if err != nil || len(evs) == 0 || evs[0].Kind != KindSuspended {
		return Event{}, ErrNotWaiting
	}
	return evs[0], nil
}

// settled returns the run once a pause it announced is recorded: a client may act on the
// suspended event in the few milliseconds before the run's status says so.
func (rt *Runtime) settled(ctx context.Context, rec storage.Run) storage.Run {
	for deadline := time.Now().Add(3 * time.Second); rec.Status == storage.RunRunning && time.Now().Before(deadline); {
		last, err := rt.db.LastRunSeq(ctx, rec.ID)
		if err != nil {
			return rec
		}
		evs, err := rt.elog.readStored(ctx, rec.ID, last-1, 1)
		if err != nil || len(evs) == 0 || evs[0].Kind != KindSuspended {
			return rec
		}
		time.Sleep(5 * time.Millisecond)
		if cur, err := rt.db.RunsByID(ctx, rec.ID); err == nil {
			rec = cur
		}
	}
	return rec
}

// Resume continues a run paused by the user, the token budget or a shutdown.
func (rt *Runtime) Resume(ctx context.Context, userID, requestID string) error {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return err
	}
	rec = rt.settled(ctx, rec)
	if rec.Status != storage.RunSuspended {
		return ErrNotWaiting
	}
	var st runState
	_ = json.Unmarshal(rec.State, &st)
	for _, p := range st.Pending {
		if p.Stage == stageAsking || p.Stage == stageExternal {
			return fmt.Errorf("%w: it waits for answers", ErrNotWaiting)
		}
	}
	return rt.resumeRun(ctx, rec, st)
}

// Suspend asks a running run to pause at its next step boundary, whichever replica executes it.
func (rt *Runtime) Suspend(ctx context.Context, userID, requestID string) error {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return err
	}
	if r := rt.liveRun(requestID); r != nil {
		r.pauseRequested.Store(true)
		return nil
	}
	// Executing on another replica: its owner acts on the request (notify.go).
	ok, err := rt.requestControl(ctx, rec, storage.RunControlSuspend)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotLive
	}
	return nil
}

// Stop ends a run: a running one ends its current step and ends INTERRUPTED (whichever replica
// executes it); a suspended one ends INTERRUPTED at once, its pending asks void.
func (rt *Runtime) Stop(ctx context.Context, userID, requestID string) error {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return err
	}
	rec = rt.settled(ctx, rec)
	if rt.Cancel(requestID) {
		return nil
	}
	// The run may change state between the reads and the writes below; look again a few times.
	for range 3 {
		switch rec.Status {
		case storage.RunSuspended:
			if err := rt.stopSuspended(ctx, rec); !errors.Is(err, ErrNotLive) {
				return err
			}
		case storage.RunRunning:
			// Executing on another replica: its owner acts on the request (notify.go).
			if ok, err := rt.requestControl(ctx, rec, storage.RunControlStop); err != nil || ok {
				return err
			}
		default:
			return ErrNotLive
		}
		if rec, err = rt.db.RunsByID(ctx, rec.ID); err != nil {
			return err
		}
	}
	return ErrNotLive
}

// stopSuspended ends a suspended run INTERRUPTED; ErrNotLive when it is no longer suspended.
func (rt *Runtime) stopSuspended(ctx context.Context, rec storage.Run) error {
	rec.Status, rec.Owner = storage.RunRunning, rt.cfg.Owner
	if err := rt.db.UpdateRun(ctx, &rec, storage.RunSuspended); err != nil {
		return ErrNotLive
	}
	asks, _ := rt.db.RunAsks(ctx, rec.ID, storage.AskPending)
	for _, a := range asks {
		_ = rt.db.AnswerAsk(ctx, a.AskID, storage.AskExpired, nil)
	}
	var spec runSpec
	var st runState
	_ = json.Unmarshal(rec.Spec, &spec)
	_ = json.Unmarshal(rec.State, &st)
	last, _ := rt.db.LastRunSeq(ctx, rec.ID)
	r := rt.newRun(rec, spec, st)
	r.seq = last
	r.end(OutcomeInterrupted, ReasonInterrupted, "", "")
	return nil
}

// AppendInput queues supplementary input for a live (running or suspended) run; it becomes a
// user message at the next step boundary.
func (rt *Runtime) AppendInput(ctx context.Context, userID, requestID, content string) (string, error) {
	rec, err := rt.Run(ctx, userID, requestID)
	if err != nil {
		return "", err
	}
	if isFinal(rec.Status) {
		return "", ErrNotLive
	}
	in := storage.RunInput{RunID: rec.ID, InputID: "input_" + newEventID()[:16], Content: content}
	if err := rt.db.AddRunInput(ctx, &in); err != nil {
		return "", err
	}
	return in.InputID, nil
}

func (rt *Runtime) liveRun(requestID string) *run {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, r := range rt.live {
		if r.rec.RequestID == requestID {
			return r
		}
	}
	return nil
}

// sweep expires asks nobody answered in time, which lets their runs go on (as denied).
func (rt *Runtime) sweep(ctx context.Context) {
	asks, err := rt.db.ExpiredAsks(ctx, time.Now())
	if err != nil {
		return
	}
	runs := map[int64]bool{}
	for _, a := range asks {
		if rt.db.AnswerAsk(ctx, a.AskID, storage.AskExpired, nil) == nil {
			runs[a.RunID] = true
		}
	}
	for id := range runs {
		rt.tryResume(ctx, id)
	}
}
