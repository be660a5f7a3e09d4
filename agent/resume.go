package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

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
	spec, st, err := decodeRun(rec)
	if err != nil {
		rt.log.ErrorContext(ctx, "a run cannot go on", "requestId", rec.RequestID, "err", err)
		return
	}
	if !st.waiting() {
		return // paused for another reason: only Resume continues it
	}
	_ = rt.resumeRun(ctx, rec, spec, st)
}

// waiting reports whether the run paused for answers or results (not for a Resume).
func (st runState) waiting() bool {
	for _, p := range st.Pending {
		if p.Stage == stageAsking || p.Stage == stageExternal {
			return true
		}
	}
	return false
}

// ErrBadState is returned for a run whose saved spec or state cannot be read; the error names
// the run.
var ErrBadState = errors.New("the run's saved state cannot be read")

// decodeRun reads what a stored run was asked to do and where it stands.
func decodeRun(rec storage.Run) (runSpec, runState, error) {
	var spec runSpec
	var st runState
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return spec, st, fmt.Errorf("%w: run %s: spec: %v", ErrBadState, rec.RequestID, err)
	}
	if len(rec.State) > 0 {
		if err := json.Unmarshal(rec.State, &st); err != nil {
			return spec, st, fmt.Errorf("%w: run %s: state: %v", ErrBadState, rec.RequestID, err)
		}
	}
	return spec, st, nil
}

// resumeRun claims a suspended run — its status and its resumed event in one transition — and
// continues it on a new goroutine. ErrNotWaiting when another caller claimed it first.
func (rt *Runtime) resumeRun(ctx context.Context, rec storage.Run, spec runSpec, st runState) error {
	last, err := rt.db.LastRunSeq(ctx, rec.ID)
	if err != nil {
		return err
	}
	rec.Status, rec.Owner = storage.RunRunning, rt.cfg.Owner
	st.BudgetBase = st.spent()
	r := rt.newRun(rec, spec, st)
	r.seq = last
	resumed := r.stamp(Event{Kind: KindResumed})
	r.rec.State = mustJSON(r.state)
	if err := rt.transition(ctx, &r.rec, storage.Transition{From: storage.RunSuspended}, []Event{resumed}); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return ErrNotWaiting // someone else resumed it first
		}
		return err
	}
	// A suspend asked before the pause is spent (a stop is not: it still applies).
	_ = rt.db.ClearRunControl(ctx, rec.ID, storage.RunControlSuspend)
	rt.launch(r, func(r *run) { r.resume() })
	return nil
}

// resume applies what the run waited for and goes on with the loop (resumeRun announced it).
func (r *run) resume() {
	if r.state.Input == "" {
		// Recovered before its input was admitted (the daemon stopped while a user_message hook
		// decided, or before the run's first checkpoint): the run starts over from those hooks.
		r.execute()
		return
	}
	if err := r.loadBase(); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	var answers []AskAnswer
	var results []ToolOutput
	var finished []*pendingCall // external calls whose results arrived
	data := map[string][]DataContent{}
	handedAt := map[string]time.Time{} // when each external call was handed out: its duration runs from there
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
		var out ToolOutput
		if err := decodeAnswer(ask, r.rec.RequestID, &a, &out); err != nil {
			r.fail(CodeInternal, err.Error(), false, false)
			return
		}
		if p.Stage == stageExternal {
			if ask.Status == storage.AskExpired {
				out = ToolOutput{CallID: p.ID, Name: p.Name, State: ToolError, Output: "等待超时"}
				if p.Async != nil {
					out.Output = fmt.Sprintf("asynchronous task %s timed out after %d ms", p.Async.TaskID, p.Async.TimeoutMs)
				}
			}
			results = append(results, out)
			data[p.ID], handedAt[p.ID] = out.Data, ask.CreatedAt
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
			edited := len(a.Input) > 0 && string(a.Input) != "null" && argsHash(string(a.Input)) != argsHash(p.Args)
			if edited {
				ans.Input = string(a.Input)
				p.Args = string(a.Input)
			}
			answer := dispatcher.PersonAnswer{Approved: true, Reason: ans.Reason, AnsweredBy: a.AnsweredBy}
			asked, approved := p.DecisionID, p.Args
			if edited {
				r.reconsider(p) // may ask again, under a chain of its own
				if p.Stage == stageDenied || p.Stage == stageError {
					// What took effect: the edited call was refused after the approval.
					answer.Approved, answer.Reason = false, "approved with edited arguments, then refused: "+p.Reason
				}
			}
			r.recordAnswer(p, asked, approved, answer)
			if !edited {
				p.DecisionID = ""
			}
		case storage.AskExpired:
			ans.Reason = "等待超时"
			p.Stage, p.Reason = stageDenied, ans.Reason
			r.recordAnswer(p, p.DecisionID, p.Args, dispatcher.PersonAnswer{Expired: true, Reason: ans.Reason})
			p.DecisionID = ""
		default:
			if ans.Reason == "" {
				ans.Reason = "用户拒绝"
			}
			p.Stage, p.Reason = stageDenied, ans.Reason
			r.recordAnswer(p, p.DecisionID, p.Args, dispatcher.PersonAnswer{Reason: ans.Reason, AnsweredBy: a.AnsweredBy})
			p.DecisionID = ""
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
	v := mustJSON(map[string]string{"status": "running"})
	r.emit(Event{Kind: KindCustom, Custom: &CustomInfo{Name: "state_updated", Value: v}})
	for _, p := range finished {
		if p.Async == nil { // an async call's result started before the pause
			r.emit(Event{Kind: KindToolResultStarted, Tool: &ToolInfo{CallID: p.ID, Name: p.Name}})
		}
		if p.Result.Text != "" || len(data[p.ID]) == 0 {
			r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: p.Result.Text}})
		}
		for _, d := range data[p.ID] {
			r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Data: &d}})
		}
		r.emit(Event{Kind: KindToolResultEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args, State: p.State, Output: p.Result.Text}})
		// The call ran elsewhere (the client, or an asynchronous job) and this is its result: the
		// post_tool_use hooks see it as they see a tool run here.
		errMsg := ""
		if p.State != ToolSuccess {
			errMsg = p.Result.Text
		}
		r.toolUsed(p, p.State, p.Result.Text, errMsg, time.Since(handedAt[p.ID]))
	}
	r.loop()
}

// recordAnswer puts the answer to p's ask on the decision log, whoever asked (a pre_tool_use
// hook, a permission rule), with the arguments the answer is about: beside the rows of the chain
// that let the call on to the ask (decisionID), or under an id of its own when no hook ran. A
// person's refusal of a call the hooks allowed is a decision too. An approval that cannot be
// recorded does not run (a sync decision log's rule: nothing is acted on that is not on the
// record).
func (r *run) recordAnswer(p *pendingCall, decisionID, args string, a dispatcher.PersonAnswer) {
	if decisionID == "" {
		decisionID = storage.NewTSIDString()
	}
	a.DecisionID = decisionID
	ev := r.hookEvent(dispatcher.PreToolUse, &dispatcher.PreToolUseContext{ToolName: p.Name, ToolCallID: p.ID,
		Arguments: dispatcher.Value(args)})
	if err := r.rt.hooks.RecordAnswer(context.WithoutCancel(r.ctx), ev, a); err != nil {
		r.rt.log.ErrorContext(r.ctx, "the answer to an ask was not recorded", "requestId", r.rec.RequestID, "askId", p.AskID, "err", err)
		if a.Approved {
			p.Stage, p.Reason = stageError, "the approval could not be put on the decision log: "+err.Error()
		}
	}
}

// reconsider puts the arguments a person edited in approving p before what decided p the first
// time: the pre_tool_use hooks (the call ended before the pause: no second tool.call.ended) and
// the permission rules' deny. The person approved these arguments and no others, so when a hook
// asks, or its modify changes them, p goes back to a person with the arguments it would run
// with; approved as they are, they run.
func (r *run) reconsider(p *pendingCall) {
	approved := p.Args
	p.HookAsk, p.DecisionID = "", ""
	if !r.preToolUse(p, false) {
		return // denied, or the hooks failed: p.Stage says which
	}
	if spec, known := r.ruleSpec(p.Name); known {
		if behavior, _, _ := r.permission(spec, json.RawMessage(p.Args)); behavior == BehaviorDeny {
			p.Stage, p.Reason = stageDenied, "denied by a permission rule"
			return
		}
	}
	if p.HookAsk != "" || argsHash(p.Args) != argsHash(approved) {
		p.Stage, p.AskID = stageAsking, "ask_"+newEventID()[:20]
	}
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

// decodeAnswer reads an ask's recorded answer (none for an expired one): a person's decision or
// a client-side tool's result.
func decodeAnswer(ask storage.Ask, requestID string, a *Answer, out *ToolOutput) error {
	if len(ask.Answer) == 0 {
		return nil
	}
	target := any(a)
	if ask.Kind == storage.AskExternal {
		target = out
	}
	if err := json.Unmarshal(ask.Answer, target); err != nil {
		return fmt.Errorf("%w: the answer to ask %s of run %s: %v", ErrBadState, ask.AskID, requestID, err)
	}
	return nil
}
