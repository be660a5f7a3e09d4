package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// The agent_spawn tool starts a child run — its own session, its own script match or model
// settings, the same hooks — and waits for its answer. The child's events reach the parent's
// stream with Source "main/<name>". With expose_to_user the child session is announced
// (SUBAGENT_EXPOSED) so the user can address it directly afterwards.
const spawnTool = "agent_spawn"

// maxSpawnDepth keeps subagents from spawning subagents without end.
const maxSpawnDepth = 1

var spawnSpec = model.ToolSpec{Name: spawnTool,
	Description: "Start a subagent for a self-contained task and wait for its answer.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"the subagent's name, e.g. researcher"},` +
		`"task":{"type":"string","description":"what the subagent should do"},` +
		`"expose_to_user":{"type":"boolean","description":"make the subagent a session the user can talk to"},` +
		`"label":{"type":"string","description":"a display name for the exposed session"}},` +
		`"required":["name","task"]}`)}

// spawnRuleSpec is agent_spawn as the permission rules see it: a rule's ruleContent matches the
// subagent's name. With no rule it runs (read-only's default): the subagent's own calls face the
// rules as they come.
var spawnRuleSpec = tools.Spec{Name: spawnTool, ReadOnly: true, Subject: "name"}

type spawnArgs struct {
	Name   string `json:"name"`
	Task   string `json:"task"`
	Expose bool   `json:"expose_to_user"`
	Label  string `json:"label"`
}

func (r *run) canSpawn() bool { return !r.spec.NoTools && r.spec.Depth < maxSpawnDepth }

// spawn runs a subagent for call p and returns its answer as the tool's output.
func (r *run) spawn(p *pendingCall) (state, output, errMsg string) {
	var a spawnArgs
	// As strictly as the tools take theirs: the task hooks judged is the one the subagent runs.
	if err := hookdtype.DecodeStrict([]byte(p.Args), &a, "arguments"); err != nil {
		return ToolError, "", "agent_spawn: invalid arguments: " + err.Error()
	}
	if strings.TrimSpace(a.Name) == "" || strings.TrimSpace(a.Task) == "" {
		return ToolError, "", "agent_spawn needs a name and a task"
	}
	if a.Label == "" {
		a.Label = a.Name
	}
	// The child spends the parent's budget: it gets what is left, and what it spends is counted
	// below as it goes.
	var left int64
	if r.budget() > 0 {
		if left = r.budgetLeft(); left <= 0 {
			return ToolError, "", "agent_spawn: the run's token budget is spent"
		}
	}
	sid := r.spec.SessionID
	child, err := r.rt.StartRun(context.WithoutCancel(r.ctx), StartRequest{UserID: r.spec.UserID, PrincipalID: r.spec.PrincipalID,
		AgentID: r.spec.AgentID, SessionKey: fmt.Sprintf("%s.%s-%s", r.spec.SessionKey, a.Name, newEventID()[:8]),
		Input: a.Task, TriggerSource: dispatcher.SourceInternal, TraceID: r.traceID(), Model: r.spec.Model,
		Temperature: r.spec.Temperature, ParentSessionID: &sid, Depth: r.spec.Depth + 1, TokenBudget: left})
	if err != nil {
		return ToolError, "", "agent_spawn: " + err.Error()
	}
	if a.Expose {
		r.emit(Event{Kind: KindSubagentExposed, Subagent: &SubagentInfo{SubagentID: child.RequestID, AgentID: a.Name,
			SessionID: child.SessionKey, Label: a.Label}})
	}
	r.progress(child.RequestID, a.Name, "RUNNING", 0)
	events, err := r.rt.Subscribe(r.ctx, child.RequestID, 0)
	if err != nil {
		return ToolError, "", "agent_spawn: " + err.Error()
	}
	source := "main/" + a.Name
	var answer string
	var end *EndInfo
	for ev := range events {
		fwd := ev
		fwd.Seq, fwd.ID, fwd.Source = 0, "", source
		r.emit(fwd)
		switch ev.Kind {
		case KindResult:
			answer = ev.Result.Text
		case KindRunEnded:
			end = ev.End
		case KindModelEnded:
			if ev.Usage != nil {
				r.state.SubagentTokens += ev.Usage.Total()
			}
		}
		if ev.Kind == KindSuspended {
			r.progress(child.RequestID, a.Name, "SUSPENDED", 50)
			return ToolSuccess, fmt.Sprintf("subagent %s paused (%s); its session is %s", a.Name, ev.Suspend.Reason, child.SessionKey), ""
		}
	}
	if r.ctx.Err() != nil {
		r.rt.Cancel(child.RequestID)
		return ToolInterrupted, "", "interrupted"
	}
	if end == nil || end.Outcome != OutcomeCompleted {
		r.progress(child.RequestID, a.Name, "FAILED", 100)
		msg := "the subagent did not finish"
		if end != nil && end.ErrorMessage != "" {
			msg = end.ErrorMessage
		}
		return ToolError, "", "subagent " + a.Name + ": " + msg
	}
	r.progress(child.RequestID, a.Name, "COMPLETED", 100)
	return ToolSuccess, answer, ""
}

// progress reports a subagent's state as a task_progress custom event.
func (r *run) progress(taskID, name, status string, pct int) {
	v := mustJSON(map[string]any{"taskId": taskID, "name": name, "status": status, "progress": pct})
	r.emit(Event{Kind: KindCustom, Custom: &CustomInfo{Name: "task_progress", Value: v}})
}
