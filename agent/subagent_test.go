package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const spawnScript = `{"scripts":[
 {"match":"delegate","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"researcher","task":"research the topic","expose_to_user":true,"label":"研究助手"}}]},
   {"text":"the researcher says it is done"}]},
 {"match":"research the topic","steps":[{"thinking":"looking","text":"found three sources"}]},
 {"match":"hinted","steps":[{"toolCalls":[{"name":"workspace_list_files"}],"delayMs":400},{"text":"second"}]},
 {"match":"async","steps":[{"toolCalls":[{"name":"slow_job","arguments":{"job":"render"}}]},{"text":"coped with the timeout"}]}
]}`

func TestSubagentEventsReachTheParent(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), spawnScript, Config{})
	info, evs := e.run(StartRequest{UserID: "u", SessionKey: "main", Input: "delegate"})
	exp := find(evs, KindSubagentExposed)
	if exp == nil || exp.Subagent.AgentID != "researcher" || exp.Subagent.Label != "研究助手" || !strings.HasPrefix(exp.Subagent.SessionID, "main.researcher-") {
		t.Fatalf("exposed: %s", kinds(evs))
	}
	var forwarded []Event
	for _, ev := range evs {
		if ev.Source == "main/researcher" {
			forwarded = append(forwarded, ev)
		}
	}
	if len(forwarded) == 0 || forwarded[0].Kind != KindRunStarted || forwarded[len(forwarded)-1].Kind != KindRunEnded {
		t.Fatalf("forwarded: %s", kinds(forwarded))
	}
	if r := find(forwarded, KindResult); r == nil || r.Result.Text != "found three sources" {
		t.Fatalf("child result not forwarded")
	}
	te := find(evs, KindToolResultEnded).Tool
	if te.State != ToolSuccess || te.Output != "found three sources" {
		t.Fatalf("spawn result %+v", te)
	}
	if r := evs[len(evs)-2]; r.Kind != KindResult || r.Source != "" || r.Result.Text != "the researcher says it is done" {
		t.Fatalf("parent did not finish: %+v", r)
	}
	// The exposed child is a session of the same user, addressable afterwards.
	child, err := e.rt.Session(context.Background(), "u", exp.Subagent.SessionID)
	if err != nil || child.ParentID == nil || *child.ParentID != info.SessionID {
		t.Fatalf("child session: %+v %v", child, err)
	}
	var progress []string
	for _, ev := range evs {
		if ev.Kind == KindCustom && ev.Custom.Name == "task_progress" && ev.Source == "" {
			var v struct{ Status string }
			json.Unmarshal(ev.Custom.Value, &v)
			progress = append(progress, v.Status)
		}
	}
	if strings.Join(progress, ",") != "RUNNING,COMPLETED" {
		t.Fatalf("progress %v", progress)
	}
}

func TestHintsAndCustomEvents(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), spawnScript, Config{})
	info := e.start("u", "s", "hinted")
	e.until(info.RequestID, 0, KindModelStarted)
	if _, err := e.rt.Hint(context.Background(), "u", info.RequestID, "alice", "alice 加入了会话"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Custom(context.Background(), "u", info.RequestID, "team_updated", json.RawMessage(`{"action":"MEMBER_ADDED","member":"bob"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Hint(context.Background(), "eve", info.RequestID, "", "x"); err != ErrNotFound {
		t.Fatalf("another user's hint: %v", err)
	}
	evs := e.until(info.RequestID, 0, KindRunEnded)
	h := find(evs, KindHint)
	if h == nil || h.Block.Text != "alice 加入了会话" || *h.Block.HintSource != "alice" {
		t.Fatalf("hint: %s", kinds(evs))
	}
	var team *Event
	for i := range evs {
		if evs[i].Kind == KindCustom && evs[i].Custom.Name == "team_updated" {
			team = &evs[i]
		}
	}
	if team == nil || !strings.Contains(string(team.Custom.Value), "bob") {
		t.Fatal("custom event missing")
	}
	hist, _ := e.rt.history(context.Background(), info.SessionID, -1)
	found := false
	for _, m := range hist {
		found = found || m.Text == "[hint from alice] alice 加入了会话"
	}
	if !found {
		t.Fatalf("the model never saw the hint: %+v", hist)
	}
	if _, err := e.rt.Hint(context.Background(), "u", info.RequestID, "", "late"); !errors.Is(err, ErrNotLive) {
		t.Fatalf("hint to an ended run: %v", err)
	}
}

// slowJob starts work elsewhere and returns at once; its result never comes.
type slowJob struct{}

func (slowJob) Spec() tools.Spec {
	return tools.Spec{Name: "slow_job", Description: "starts a job", Parameters: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
}

func (slowJob) Run(context.Context, tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Result{Text: "job queued", Async: &tools.Async{TaskID: "job-7", Timeout: 200 * time.Millisecond, Strategy: "NOTIFY"}}, nil
}

func TestAsyncToolTimesOut(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), spawnScript, Config{SweepEvery: 50 * time.Millisecond})
	e.rt.tools.Add(slowJob{})
	info := e.start("u", "s", "async")
	evs := e.until(info.RequestID, 0, KindSuspended)
	s := evs[len(evs)-1].Suspend
	if s.Reason != SuspendAsyncTool || s.Async == nil || s.Async.TaskID != "job-7" || s.Async.TimeoutMs != 200 || s.Async.Strategy != "NOTIFY" {
		t.Fatalf("suspend %+v", s)
	}
	rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	te := find(rest, KindToolResultEnded).Tool
	if te.State != ToolError || !strings.Contains(te.Output, "timed out") {
		t.Fatalf("async result %+v", te)
	}
	if find(rest, KindResult).Result.Text != "coped with the timeout" {
		t.Fatalf("run did not go on: %s", kinds(rest))
	}
}

// A subagent spends the budget of the run that spawned it: it gets what is left of it, and what
// it spent counts at the parent's next step. Two subagents of one step cannot spend twice the
// budget each, nor the parent go on past it.
func TestSubagentsSpendTheParentsBudget(t *testing.T) {
	const script = `{"scripts":[
 {"match":"delegate twice","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"one","task":"task one"}},
                 {"name":"agent_spawn","arguments":{"name":"two","task":"task two"}}],"usage":{"inputTokens":10}},
   {"text":"parent done","usage":{"inputTokens":10}}]},
 {"match":"task one","steps":[{"text":"one done","usage":{"inputTokens":60}}]},
 {"match":"task two","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":60}},
   {"text":"two done","usage":{"inputTokens":60}}]}
]}`
	e := newEnv(t, storagetest.SQLite(t), script, Config{TokenBudget: 100})
	info := e.start("u", "main", "delegate twice")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ch, err := e.rt.Subscribe(ctx, info.RequestID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for ev := range ch {
		evs = append(evs, ev)
		if ev.Source == "" && (ev.Kind == KindSuspended || ev.Kind == KindRunEnded) {
			cancel()
		}
	}
	var parentStop, twoStop bool
	for _, ev := range evs {
		switch {
		case ev.Kind == KindResult && ev.Source == "":
			t.Errorf("the parent went on past its budget: %q", ev.Result.Text)
		case ev.Kind == KindResult && ev.Source == "main/two":
			t.Errorf("subagent two went on past the parent's budget: %q", ev.Result.Text)
		case ev.Kind == KindStopRequested && ev.Source == "":
			parentStop = true
		case ev.Kind == KindStopRequested && ev.Source == "main/two":
			twoStop = true
		}
	}
	if !parentStop || !twoStop || evs[len(evs)-1].Kind != KindSuspended || evs[len(evs)-1].Suspend.Reason != SuspendRequestStop {
		t.Fatalf("stops (parent %v, two %v): %s", parentStop, twoStop, kinds(evs))
	}
}

// A permission rule naming agent_spawn applies to it as to any tool: a deny starts no subagent,
// and its subject is the subagent's name. With no rule it runs (its own calls face the rules).
func TestPermissionRulesApplyToAgentSpawn(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), spawnScript, Config{DefaultBehavior: BehaviorAsk})
	if err := e.db.AddRules(context.Background(), []*storage.PermissionRule{{ToolName: "agent_spawn", RuleContent: "researcher",
		Behavior: BehaviorDeny, Source: "admin", Scope: "user", ScopeKey: "denied"}}); err != nil {
		t.Fatal(err)
	}
	_, evs := e.run(StartRequest{UserID: "denied", SessionKey: "main", Input: "delegate"})
	if te := find(evs, KindToolResultEnded).Tool; te.State != ToolDenied {
		t.Fatalf("agent_spawn under a deny rule: %+v", te)
	}
	for _, ev := range evs {
		if ev.Source != "" {
			t.Fatalf("a subagent ran under a deny rule: %s", kinds(evs))
		}
	}
	_, evs = e.run(StartRequest{UserID: "allowed", SessionKey: "main", Input: "delegate"})
	if te := find(evs, KindToolResultEnded).Tool; te.State != ToolSuccess || te.Output != "found three sources" {
		t.Fatalf("agent_spawn with no rule: %+v", te)
	}
}
