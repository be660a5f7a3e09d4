package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// recording hands each request to the real model and keeps a copy.
type recording struct {
	model.Model
	mu   sync.Mutex
	reqs []model.Request
}

func (m *recording) Stream(ctx context.Context, req model.Request, emit func(model.Chunk)) (model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.Model.Stream(ctx, req, emit)
}

func (m *recording) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// compactScript writes a large file, lists the workspace, then (the third model call is the
// summarising one) summarises and answers.
var compactScript = `{"scripts":[
 {"match":"/compact me/","steps":[
  {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"big.txt","content":"` + strings.Repeat("季度数据", 400) + `"}}]},
  {"toolCalls":[{"name":"workspace_list_files"}]},
  {"text":"用户要求写入 big.txt（季度数据），已写入并列出工作区。"},
  {"text":"完成"}]},
 {"match":"/and then/","steps":[{"text":"接着做"}]}
]}`

// A run whose history crosses agent.contextTokens is compacted: the status is streamed before the
// summarising call, the persisted state holds the summary in place of the older turns, the
// model's next request (and the next run's) holds the summary and not the old turns.
func TestContextCompaction(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, compactScript, Config{})
		rec := &recording{Model: e.rt.model}
		e.rt.model = rec // before any run: nothing reads it yet
		tools := (&run{rt: e.rt}).toolSpecs()
		// The first request fits; the second (the big write) is mostly its newest step, which
		// compaction keeps anyway; the third is compacted.
		e.rt.cfg.ContextTokens = estimateTokens(nil, tools) + 200
		info, evs := e.run(StartRequest{Input: "compact me", SessionKey: "s-compact"})
		checkSeqs(t, evs, 0)
		if end := find(evs, KindRunEnded).End; end.Outcome != OutcomeCompleted {
			t.Fatalf("end %+v: %s", end, kinds(evs))
		}
		if r := find(evs, KindResult).Result; r.Text != "完成" {
			t.Fatalf("answer %q", r.Text)
		}
		var statuses []string
		for i, ev := range evs {
			if ev.Kind != KindStatus {
				continue
			}
			statuses = append(statuses, ev.Status.Code)
			if ev.Status.Level != "INFO" || ev.Status.Message != "正在对历史上下文做语义压缩" || i+1 == len(evs) || evs[i+1].Kind != KindModelStarted {
				t.Fatalf("status %+v, then %s", ev.Status, kinds(evs[i+1:]))
			}
		}
		if strings.Join(statuses, " ") != StatusCompacting {
			t.Fatalf("statuses %v", statuses)
		}
		// No text of the summary reached the stream.
		for _, ev := range evs {
			if ev.Block != nil && strings.Contains(ev.Block.Delta, "用户要求") {
				t.Fatalf("the summary was streamed: %+v", ev.Block)
			}
		}

		reqs := rec.requests()
		if len(reqs) != 4 {
			t.Fatalf("%d model calls", len(reqs))
		}
		sum := reqs[2]
		if sum.Tools != nil || sum.Step != 2 || sum.Messages[len(sum.Messages)-1].Text != compactPrompt ||
			!strings.Contains(sum.Messages[1].ToolCalls[0].Arguments, "季度数据季度数据") {
			t.Fatalf("summarising request %+v", sum)
		}
		next := reqs[3].Messages
		if next[0].Role != model.RoleUser || next[0].Text != summaryPrefix+"用户要求写入 big.txt（季度数据），已写入并列出工作区。" {
			t.Fatalf("the next request starts with %+v", next[0])
		}
		for _, m := range next {
			if m.Text == "compact me" || len(m.ToolCalls) > 0 && m.ToolCalls[0].Name == "workspace_write_file" {
				t.Fatalf("the next request still holds an old turn: %+v", m)
			}
		}
		if len(next) != 3 || next[1].ToolCalls[0].Name != "workspace_list_files" || next[2].Role != model.RoleTool {
			t.Fatalf("the next request %+v", next)
		}
		if est := estimateTokens(next, tools); est > e.rt.cfg.ContextTokens {
			t.Fatalf("compacted request still %d tokens", est)
		}

		// The persisted run state holds the summary in place of the old turns.
		stored, err := db.GetRun(context.Background(), info.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		var st runState
		if err := json.Unmarshal(stored.State, &st); err != nil {
			t.Fatal(err)
		}
		if !st.Compacted || st.Compactions != 1 || st.Transcript[0].Text != next[0].Text || strings.Contains(string(stored.State), "季度数据季度数据") {
			t.Fatalf("stored state compacted=%v compactions=%d transcript[0]=%+v", st.Compacted, st.Compactions, st.Transcript[0])
		}

		// The session's history still lists every tool call of the answer.
		hist, err := e.rt.History(context.Background(), info.SessionID, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range hist {
			for _, c := range m.ToolCalls {
				names = append(names, c.Name)
			}
		}
		if strings.Join(names, " ") != "workspace_write_file workspace_list_files" {
			t.Fatalf("history tool calls %v", names)
		}

		// The session's next run starts its history at the summary.
		e.run(StartRequest{Input: "and then", SessionKey: "s-compact"})
		later := rec.requests()[4].Messages
		if later[0].Text != next[0].Text || later[len(later)-1].Text != "and then" {
			t.Fatalf("the next run's request %+v", later)
		}
	})
}

// Without a budget nothing is compacted; a request that is mostly its newest step is not either.
func TestCompactionSplit(t *testing.T) {
	big := strings.Repeat("x", 4000)
	user := model.Message{Role: model.RoleUser, Text: "hi"}
	write := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "w", Arguments: big}}}
	res := model.Message{Role: model.RoleTool, ToolCallID: "c1", Text: "ok"}
	list := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c2", Name: "l"}}}
	for _, c := range []struct {
		name      string
		msgs      []model.Message
		compacted bool
		want      int
	}{
		{"only the user", []model.Message{user}, false, 0},
		{"newest step is the bulk", []model.Message{user, write, res}, false, 0},
		{"older steps are the bulk", []model.Message{user, write, res, list, res}, false, 3},
		{"a summary alone", []model.Message{{Role: model.RoleUser, Text: summaryPrefix + big}, list, res}, true, 0},
		{"no assistant: keep the last", []model.Message{{Role: model.RoleUser, Text: big}, user}, false, 1},
	} {
		if got := compactionSplit(c.msgs, c.compacted); got != c.want {
			t.Errorf("%s: split %d, want %d", c.name, got, c.want)
		}
	}
}
