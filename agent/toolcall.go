package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// The tool-call state machine: a step's calls go new → decided (hooks, then permission rules)
// → waiting (a person, the client) → ready → done, and the run pauses while any waits.

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
	// HookAsk is the reason a pre_tool_use hook answered ask: a person decides, whatever the
	// permission rules would allow. DecisionID is the chain's that let the call on (empty when
	// no hook ran): a person's answer to an ask of the call, the chain's or a permission rule's,
	// joins its rows on the decision log.
	HookAsk    string `json:"hookAsk,omitempty"`
	DecisionID string `json:"decisionId,omitempty"`
}

// settle takes the current step's calls to results. It returns false when the run paused or
// ended on the way (the goroutine must return).
func (r *run) settle() bool {
	for i := range r.state.Pending {
		if r.state.Pending[i].Stage == stageNew {
			r.decide(&r.state.Pending[i])
		}
	}
	if asks, externals := r.waitingFor(); len(asks) > 0 || len(externals) > 0 {
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
// It ends the call (tool.call.ended) once its final arguments are known: after the repair and
// the pre_tool_use hooks, which may modify them; the dialects show those as the arguments the
// tool runs with.
func (r *run) decide(p *pendingCall) {
	args, err := tools.RepairArguments(p.Raw)
	if err != nil {
		p.Args, p.Stage, p.Reason = p.Raw, stageError, err.Error()
		r.callEnded(p)
		return
	}
	p.Args = string(args)
	external := r.isExternal(p.Name)
	spec, known := r.ruleSpec(p.Name)
	if !known && !external {
		p.Stage, p.Reason = stageError, fmt.Sprintf("unknown tool %q", p.Name)
		r.callEnded(p)
		return
	}
	if !r.preToolUse(p, true) {
		return
	}
	if external {
		p.External, p.Stage, p.AskID = true, stageExternal, "ext_"+newEventID()[:20]
		return
	}
	behavior, _, _ := r.permission(spec, json.RawMessage(p.Args))
	if p.HookAsk != "" && behavior != BehaviorDeny {
		behavior = BehaviorAsk // a hook's ask outranks a rule's allow, not its deny
	}
	switch behavior {
	case BehaviorDeny:
		p.Stage, p.Reason = stageDenied, "denied by a permission rule"
	case BehaviorAsk:
		p.Stage, p.AskID = stageAsking, "ask_"+newEventID()[:20]
	default:
		p.Stage = stageReady
	}
}

// preToolUse runs the pre_tool_use hooks on p; false means p will not run. With end set, it
// ends the call (callEnded) as soon as the hooks' verdict fixed its arguments, before what the
// hooks sent with the verdict is shown: a tool event about the call follows the call's end.
func (r *run) preToolUse(p *pendingCall, end bool) bool {
	ev := r.hookEvent(dispatcher.PreToolUse, &dispatcher.PreToolUseContext{
		ToolName: p.Name, ToolCallID: p.ID, Arguments: dispatcher.Value(p.Args)})
	if r.isExternal(p.Name) {
		// The client runs the call the moment it is handed over: no point is left at which a
		// person could be asked.
		ev.Enforce = dispatcher.RefuseAsk("a client-executed tool cannot wait for a person")
	}
	dec, err := r.rt.hooks.Intercept(r.ctx, ev)
	if err == nil && dec.ModifiedValue != nil && (dec.Decision == dispatcher.Modify || dec.Decision == dispatcher.Ask) {
		p.Args = *dec.ModifiedValue // an ask's person is asked about the call as modified
	}
	if end {
		r.callEnded(p)
	}
	if err != nil {
		p.Stage, p.Reason = stageError, "pre_tool_use hook: "+err.Error()
		return false
	}
	r.showExtras(dec.Extras, p)
	p.DecisionID = dec.DecisionID
	switch dec.Decision {
	case dispatcher.Deny:
		p.Stage, p.Reason = stageDenied, dec.Reason
		if p.Reason == "" {
			p.Reason = "the tool call was refused by policy"
		}
		return false
	case dispatcher.Ask:
		p.HookAsk = dec.Reason
		if p.HookAsk == "" {
			p.HookAsk = "a pre_tool_use hook asks a person to approve this call"
		}
	}
	return true
}

// callEnded announces that p's arguments are final: the model streamed the call, and the repair
// and the hooks are done with its arguments.
func (r *run) callEnded(p *pendingCall) {
	r.emit(Event{Kind: KindToolCallEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args}})
}

// ruleSpec is what the permission rules see of the tool named name: its spec, or agent_spawn's
// where the run may spawn; false for a tool the run does not have.
func (r *run) ruleSpec(name string) (tools.Spec, bool) {
	if name == spawnTool && r.canSpawn() {
		return spawnRuleSpec, true
	}
	tool, known := r.rt.tools.Get(name)
	if !known {
		return tools.Spec{}, false
	}
	return tool.Spec(), true
}

func (r *run) isExternal(name string) bool {
	for _, t := range r.spec.ExternalTools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func (r *run) askCall(p pendingCall) AskCall {
	var desc, pattern string
	if p.HookAsk != "" {
		desc = p.HookAsk
	} else {
		spec, _ := r.ruleSpec(p.Name)
		_, desc, pattern = r.permission(spec, json.RawMessage(p.Args))
	}
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

// waitingFor lists what the current step's calls wait for before any of them runs: a person's
// answers and the results of client-side tools (an asynchronous tool's wait is waitAsync's).
func (r *run) waitingFor() (asks []AskCall, externals []PendingCall) {
	for _, p := range r.state.Pending {
		switch {
		case p.Stage == stageAsking:
			asks = append(asks, r.askCall(p))
		case p.Stage == stageExternal && p.Async == nil:
			externals = append(externals, PendingCall{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: "pending", AskID: p.AskID, External: true})
		}
	}
	return asks, externals
}

// askRows are the stored asks of what wait waits for.
func (r *run) askRows(asks []AskCall, externals []PendingCall) []storage.Ask {
	var rows []storage.Ask
	for _, a := range asks {
		rows = append(rows, storage.Ask{AskID: a.AskID, Kind: storage.AskConfirm, RunID: r.rec.ID, UserID: r.spec.UserID,
			CallID: a.CallID, ToolName: a.Name, Arguments: a.Arguments, ArgsHash: argsHash(a.Arguments), Reason: a.RuleDescription,
			ExpiresAt: a.ExpiresAt})
	}
	for _, e := range externals {
		rows = append(rows, storage.Ask{AskID: e.AskID, Kind: storage.AskExternal, RunID: r.rec.ID, UserID: r.spec.UserID,
			CallID: e.CallID, ToolName: e.Name, Arguments: e.Arguments, ArgsHash: argsHash(e.Arguments), ExpiresAt: time.Now().Add(r.rt.cfg.AskTimeout)})
	}
	return rows
}

// asyncRow is the stored ask of an asynchronous tool's result: it expires with the tool's own
// timeout.
func (r *run) asyncRow(p pendingCall) storage.Ask {
	timeout := time.Duration(p.Async.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = r.rt.cfg.AskTimeout
	}
	return storage.Ask{AskID: p.AskID, Kind: storage.AskExternal, RunID: r.rec.ID, UserID: r.spec.UserID, CallID: p.ID,
		ToolName: p.Name, Arguments: p.Args, ArgsHash: argsHash(p.Args), ExpiresAt: time.Now().Add(timeout)}
}

// wait records what the run waits for, announces it and suspends.
func (r *run) wait(asks []AskCall, externals []PendingCall) {
	// The pending calls are saved before anything is announced: a crash after the client saw
	// the ask leaves a run that can be answered and resumed. A crash before the asks are stored
	// or announced leaves a running run whose state waits for them: recovery stores and
	// announces what is missing (rewait).
	r.checkpoint()
	if err := r.rt.db.AddAsks(context.WithoutCancel(r.ctx), r.askRows(asks, externals)); err != nil {
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
	r.checkpoint()
	if err := r.rt.db.AddAsks(context.WithoutCancel(r.ctx), []storage.Ask{r.asyncRow(*p)}); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	r.suspendWith(SuspendAsyncTool, "waiting for an asynchronous tool", p.Async)
	r.rt.tryResume(context.WithoutCancel(r.ctx), r.rec.ID)
}

// rewait finishes, for a run a crash left running, the wait or waitAsync it was in: its
// checkpoint says what the step's calls wait for, but their asks may not have been stored nor
// announced, nor the pause recorded. The missing asks are stored (with a new expiry), and the
// asks and client-side calls the run's log does not announce yet are announced by the events it
// returns, so the client is shown every ask the run waits for: a run that waited for an ask
// nobody could see or answer would be stuck, and a resume offered in its place would answer an
// ask the person never saw. It returns the pause to record after those events, nil when the run
// was not waiting.
func (r *run) rewait(ctx context.Context) ([]Event, *SuspendInfo, error) {
	asks, externals := r.waitingFor()
	rows := r.askRows(asks, externals)
	pause := &SuspendInfo{Reason: SuspendExternalExecution}
	if len(asks) > 0 {
		pause.Reason = SuspendPermissionAsk
	}
	for _, p := range r.state.Pending {
		if p.Stage == stageExternal && p.Async != nil {
			rows = append(rows, r.asyncRow(p))
			pause = &SuspendInfo{Reason: SuspendAsyncTool, Message: "waiting for an asynchronous tool", Async: p.Async}
		}
	}
	if len(rows) == 0 {
		return nil, nil, nil
	}
	var missing []storage.Ask
	for _, row := range rows {
		stored, err := r.rt.db.GetAsk(ctx, row.AskID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			missing = append(missing, row)
		case err != nil:
			return nil, nil, err
		default:
			for i := range asks {
				if asks[i].AskID == row.AskID {
					asks[i].ExpiresAt = stored.ExpiresAt // announced as it was stored
				}
			}
		}
	}
	if err := r.rt.db.AddAsks(ctx, missing); err != nil {
		return nil, nil, err
	}
	// wait emits nothing between its checkpoint and the announcements, so any of them stored
	// are the run's last two events.
	stored, err := r.rt.elog.readStored(ctx, r.rec.ID, max(r.seq-2, 0), 2)
	if err != nil {
		return nil, nil, err
	}
	announced := map[string]bool{}
	for _, ev := range stored {
		if ev.Kind == KindAsk && ev.Ask != nil {
			for _, c := range ev.Ask.Calls {
				announced[c.AskID] = true
			}
		}
		if ev.Kind == KindExternalCalls {
			for _, c := range ev.Calls {
				announced[c.AskID] = true
			}
		}
	}
	asks = slices.DeleteFunc(asks, func(a AskCall) bool { return announced[a.AskID] })
	externals = slices.DeleteFunc(externals, func(c PendingCall) bool { return announced[c.AskID] })
	var evs []Event
	if len(asks) > 0 {
		evs = append(evs, r.stamp(Event{Kind: KindAsk, Ask: &AskInfo{Calls: asks}}))
	}
	if len(externals) > 0 {
		evs = append(evs, r.stamp(Event{Kind: KindExternalCalls, Calls: externals}))
	}
	return evs, pause, nil
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
		args := p.Args
		if p.Stage == stageNew {
			args = p.Raw // not repaired nor decided yet
		}
		out = append(out, PendingCall{CallID: p.ID, Name: p.Name, Arguments: args, State: st, AskID: p.AskID, External: p.External})
	}
	return out
}
