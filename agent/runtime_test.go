package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

type env struct {
	t    testing.TB
	db   *storage.DB
	reg  *dispatcher.Registry
	disp *dispatcher.Dispatcher
	rt   *Runtime
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv builds a runtime on a real database with the real dispatcher and the scripted model.
func newEnv(t testing.TB, db *storage.DB, script string, cfg Config) *env {
	t.Helper()
	ctx := context.Background()
	var sf model.ScriptFile
	if err := json.Unmarshal([]byte(script), &sf); err != nil {
		t.Fatal(err)
	}
	m, err := model.NewScripted(sf)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dispatcher.NewRegistry(ctx, db, quiet())
	if err != nil {
		t.Fatal(err)
	}
	disp := dispatcher.New(db, reg, quiet(), dispatcher.Settings{Version: "test"})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	treg := tools.NewRegistry(tools.NewWriteFile(), tools.NewReadFile(), tools.NewListFiles())
	if cfg.ModelBackoff == 0 {
		cfg.ModelBackoff = time.Millisecond
	}
	if cfg.DefaultBehavior == "" {
		cfg.DefaultBehavior = BehaviorAllow // the loop tests are not about permissions
	}
	rt := New(db, disp, m, treg, tools.NewWorkspaces(t.TempDir()), quiet(), cfg)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(c)
		disp.Stop(c)
	})
	return &env{t: t, db: db, reg: reg, disp: disp, rt: rt}
}

func (e *env) hook(spec string) {
	e.t.Helper()
	var h dispatcher.Hook
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.reg.Create(context.Background(), h); err != nil {
		e.t.Fatal(err)
	}
}

// run starts a run and collects its events until the channel closes.
func (e *env) run(req StartRequest) (RunInfo, []Event) {
	e.t.Helper()
	if req.UserID == "" {
		req.UserID = "u1"
	}
	if req.SessionKey == "" {
		req.SessionKey = "s-" + newEventID()[:8]
	}
	info, err := e.rt.StartRun(context.Background(), req)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return info, e.collect(info.RequestID, 0)
}

func (e *env) collect(requestID string, after int64) []Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := e.rt.Subscribe(ctx, requestID, after)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []Event
	for ev := range ch {
		out = append(out, ev)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("run %s did not end; got %s", requestID, kinds(out))
	}
	return out
}

func kinds(evs []Event) string {
	var b []string
	for _, e := range evs {
		k := string(e.Kind)
		if e.Block != nil {
			k += ":" + e.Block.Type
		}
		if e.Kind == KindToolResultEnded {
			k += ":" + e.Tool.State
		}
		b = append(b, k)
	}
	return strings.Join(b, " ")
}

func find(evs []Event, k Kind) *Event {
	for i := range evs {
		if evs[i].Kind == k {
			return &evs[i]
		}
	}
	return nil
}

func checkSeqs(t *testing.T, evs []Event, from int64) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != from+int64(i)+1 || len(e.ID) != 32 {
			t.Fatalf("event %d: seq %d id %q (want seq %d)", i, e.Seq, e.ID, from+int64(i)+1)
		}
	}
}

const loopScript = `{"scripts":[
 {"match":"plain","steps":[{"text":"你好，我在。","usage":{"inputTokens":10,"outputTokens":5}}]},
 {"match":"/tasks/","steps":[
   {"thinking":"先写文件","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":520,"outputTokens":80,"reasoningTokens":12}},
   {"text":"已完成，任务清单已保存至 /workspace/tasks.md","usage":{"inputTokens":1600,"outputTokens":330,"cachedTokens":512}}]},
 {"match":"multi","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}]},
   {"toolCalls":[{"name":"workspace_list_files","arguments":{}}]},
   {"text":"two files"}]},
 {"match":"toolerror","steps":[
   {"toolCalls":[{"name":"workspace_read_file","arguments":{"path":"missing.txt"}},{"name":"no_such_tool","arguments":{}},{"name":"workspace_write_file","arguments":"{\"path\": \"x.txt\", \"content\": \"x\""},{"name":"workspace_read_file","arguments":"not json at all"}]},
   {"text":"coped"}]},
 {"match":"loop","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]},
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]}]},
 {"match":"ratelimit","steps":[{"error":"rate_limited","text":"after a wait"}]},
 {"match":"network","steps":[{"error":"network","text":"reconnected"}]},
 {"match":"empty","steps":[{"error":"empty","text":"not empty now"}]},
 {"match":"fatal","steps":[{"error":"fatal","text":"never"}]},
 {"match":"slow","steps":[{"text":"this answer streams slowly","chunkSize":2,"delayMs":3000}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

func TestLoop(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, loopScript, Config{MaxIters: 3})
		cases := []struct {
			input   string
			kinds   string // the sequence of kinds, blocks and tool states, or "" to skip
			outcome string
			check   func(t *testing.T, evs []Event)
		}{
			{input: "plain", outcome: OutcomeCompleted,
				kinds: "run.started model.started block.started:text block.delta:text block.ended:text model.ended result run.ended",
				check: func(t *testing.T, evs []Event) {
					r := find(evs, KindResult).Result
					if r.Text != "你好，我在。" || r.GenerateReason != ReasonModelStop || r.Usage.Total() != 15 {
						t.Fatalf("result %+v", r)
					}
				}},
			{input: "write my tasks", outcome: OutcomeCompleted, check: func(t *testing.T, evs []Event) {
				want := []Kind{KindRunStarted, KindModelStarted, KindBlockStarted, KindBlockDelta, KindBlockEnded,
					KindToolCallStarted, KindToolCallDelta, KindModelEnded, KindToolCallEnded, KindToolResultStarted,
					KindToolResultDelta, KindAttachment, KindToolResultEnded, KindModelStarted}
				j := 0
				for _, ev := range evs {
					if j < len(want) && ev.Kind == want[j] {
						j++
					}
				}
				if j != len(want) {
					t.Fatalf("order: %s", kinds(evs))
				}
				end := find(evs, KindToolResultEnded).Tool
				if end.State != ToolSuccess || end.Name != "workspace_write_file" || !strings.Contains(end.Arguments, "tasks.md") {
					t.Fatalf("tool end %+v", end)
				}
				a := find(evs, KindAttachment).Attachment
				if a.FileName != "tasks.md" || a.Extension != "md" || a.ChangeType != "CREATED" || a.Source != "AGENT_GENERATED" || a.VirtualPath != "/workspace/tasks.md" {
					t.Fatalf("attachment %+v", a)
				}
				ends := 0
				for _, ev := range evs {
					if ev.Kind == KindModelEnded {
						ends++
						if ends == 2 && (ev.Usage.CachedTokens != 512 || ev.TotalTokens != 520+80+1600+330) {
							t.Fatalf("second model end %+v total %d", ev.Usage, ev.TotalTokens)
						}
					}
				}
				if r := find(evs, KindResult).Result; !strings.Contains(r.Text, "tasks.md") {
					t.Fatalf("result %+v", r)
				}
			}},
			{input: "multi", outcome: OutcomeCompleted, check: func(t *testing.T, evs []Event) {
				n := 0
				for _, ev := range evs {
					if ev.Kind == KindToolResultEnded && ev.Tool.State == ToolSuccess {
						n++
					}
				}
				if n != 3 || find(evs, KindResult).Result.Text != "two files" {
					t.Fatalf("multi: %s", kinds(evs))
				}
			}},
			{input: "toolerror", outcome: OutcomeCompleted, check: func(t *testing.T, evs []Event) {
				var states []string
				for _, ev := range evs {
					if ev.Kind == KindToolResultEnded {
						states = append(states, ev.Tool.State+":"+ev.Tool.Name)
					}
				}
				// missing file: error; unknown tool: error; repairable args: success; hopeless args: error.
				want := "error:workspace_read_file error:no_such_tool success:workspace_write_file error:workspace_read_file"
				if strings.Join(states, " ") != want {
					t.Fatalf("states %v", states)
				}
				if find(evs, KindResult).Result.Text != "coped" {
					t.Fatal("run did not go on after tool errors")
				}
			}},
			{input: "loop", outcome: OutcomeCompleted, check: func(t *testing.T, evs []Event) {
				mi := find(evs, KindMaxIters)
				if mi == nil || mi.MaxIters.MaxIters != 3 || mi.MaxIters.CurrentIter != 3 {
					t.Fatalf("max iters: %s", kinds(evs))
				}
				if r := find(evs, KindResult).Result; r.GenerateReason != ReasonMaxIterations {
					t.Fatalf("reason %s", r.GenerateReason)
				}
			}},
			{input: "ratelimit", outcome: OutcomeCompleted, check: statusThenText(StatusRateLimited, "after a wait")},
			{input: "network", outcome: OutcomeCompleted, check: statusThenText(StatusNetworkRetrying, "reconnected")},
			{input: "empty", outcome: OutcomeCompleted, check: statusThenText(StatusEmptyRetrying, "not empty now")},
			{input: "fatal", outcome: OutcomeFailed, check: func(t *testing.T, evs []Event) {
				end := find(evs, KindRunEnded).End
				if end.ErrorCode != CodeLLMError || end.Recoverable || find(evs, KindStatus) != nil {
					t.Fatalf("fatal end %+v", end)
				}
			}},
		}
		for _, c := range cases {
			t.Run(c.input, func(t *testing.T) {
				_, evs := e.run(StartRequest{Input: c.input})
				checkSeqs(t, evs, 0)
				if c.kinds != "" && kinds(evs) != c.kinds {
					t.Fatalf("kinds:\n got %s\nwant %s", kinds(evs), c.kinds)
				}
				end := evs[len(evs)-1]
				if end.Kind != KindRunEnded || end.End.Outcome != c.outcome {
					t.Fatalf("last event %+v", end)
				}
				if c.check != nil {
					c.check(t, evs)
				}
			})
		}
	})
}

func statusThenText(code, text string) func(t *testing.T, evs []Event) {
	return func(t *testing.T, evs []Event) {
		st := find(evs, KindStatus)
		if st == nil || st.Status.Code != code || st.Status.Level != "WARN" || st.Status.Attributes["attempt"] == nil {
			t.Fatalf("status: %s", kinds(evs))
		}
		if r := find(evs, KindResult).Result; r.Text != text {
			t.Fatalf("result after retry %q", r.Text)
		}
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), loopScript, Config{})
	info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: "s", Input: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	// A second run on the same session is refused while this one is live.
	if _, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: "s", Input: "plain"}); err != ErrSessionBusy {
		t.Fatalf("second run: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, _ := e.rt.Subscribe(ctx, info.RequestID, 0)
	var evs []Event
	for ev := range ch {
		evs = append(evs, ev)
		if ev.Kind == KindModelStarted {
			if !e.rt.Cancel(info.RequestID) {
				t.Fatal("cancel found no run")
			}
		}
	}
	end := evs[len(evs)-1]
	if end.Kind != KindRunEnded || end.End.Outcome != OutcomeInterrupted {
		t.Fatalf("after cancel: %s", kinds(evs))
	}
	if r := find(evs, KindResult); r == nil || r.Result.GenerateReason != ReasonInterrupted {
		t.Fatalf("no interrupted result: %s", kinds(evs))
	}
	// The session is free again.
	if _, evs := e.run(StartRequest{UserID: "u", SessionKey: "s", Input: "plain"}); evs[len(evs)-1].End.Outcome != OutcomeCompleted {
		t.Fatal("next run on the session failed")
	}
}

// Sessions accumulate context per (user, key) and never mix between users.
func TestSessionsAccumulateAndIsolate(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), loopScript, Config{})
	first, _ := e.run(StartRequest{UserID: "alice", SessionKey: "k", Input: "plain"})
	second, _ := e.run(StartRequest{UserID: "alice", SessionKey: "k", Input: "write my tasks"})
	other, _ := e.run(StartRequest{UserID: "bob", SessionKey: "k", Input: "plain"})
	if first.SessionID != second.SessionID || first.NewSession != true || second.NewSession != false {
		t.Fatalf("alice's session: %+v %+v", first, second)
	}
	if other.SessionID == first.SessionID || !other.NewSession {
		t.Fatalf("bob shares alice's session: %+v", other)
	}
	h, err := e.rt.History(context.Background(), first.SessionID, time.Time{})
	if err != nil || len(h) != 4 {
		t.Fatalf("history: %v %d", err, len(h))
	}
	if h[0].Text != "plain" || h[1].Text != "你好，我在。" || h[3].Text != "已完成，任务清单已保存至 /workspace/tasks.md" || len(h[3].ToolCalls) != 1 {
		t.Fatalf("history: %+v", h)
	}
	if _, err := e.rt.Run(context.Background(), "bob", first.RequestID); err != ErrNotFound {
		t.Fatalf("bob reads alice's run: %v", err)
	}
	hist, _ := e.rt.history(context.Background(), second.SessionID, -1)
	if len(hist) != 6 { // user, answer; user, call, tool result, answer
		t.Fatalf("model history %d: %+v", len(hist), hist)
	}
}

// receiver is a real webhook receiver verifying every signature.
type receiver struct {
	mu     sync.Mutex
	got    map[dispatcher.HookType][]json.RawMessage
	answer func(env dispatcher.Envelope) string
	srv    *httptest.Server
	bad    int
}

func newReceiver(t *testing.T, secret string, answer func(dispatcher.Envelope) string) *receiver {
	r := &receiver{got: map[dispatcher.HookType][]json.RawMessage{}, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := signing.VerifyRequest(req, secret, 0, 1<<20)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.bad++
			w.WriteHeader(401)
			return
		}
		var env dispatcher.Envelope
		json.Unmarshal(body, &env)
		r.got[env.HookType] = append(r.got[env.HookType], env.Context)
		if r.answer != nil {
			io.WriteString(w, r.answer(env))
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) wait(t *testing.T, typ dispatcher.HookType, n int) []json.RawMessage {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		got := append([]json.RawMessage(nil), r.got[typ]...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("receiver got fewer than %d %s events", n, typ)
	return nil
}

func TestHookPoints(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, loopScript, Config{})
		const secret = "hook-secret"
		policy := newReceiver(t, secret, func(env dispatcher.Envelope) string {
			switch env.HookType {
			case dispatcher.UserMessage:
				var c dispatcher.UserMessageContext
				json.Unmarshal(env.Context, &c)
				switch c.UserInput {
				case "forbidden":
					return `{"decision":"deny","reason":"不允许的输入"}`
				case "rewrite me":
					return `{"decision":"modify","modifiedValue":"plain"}`
				}
			case dispatcher.PreToolUse:
				var c dispatcher.PreToolUseContext
				json.Unmarshal(env.Context, &c)
				if strings.Contains(string(c.Arguments), "tasks.md") {
					return `{"decision":"deny","reason":"写文件需要审批"}`
				}
			}
			return `{"decision":"allow"}`
		})
		audit := newReceiver(t, secret, nil)
		for _, typ := range []string{"user_message", "pre_tool_use"} {
			e.hook(`{"hookName":"policy","hookType":"` + typ + `","dispatchConfig":{"url":"` + policy.srv.URL + `","signingSecret":"` + secret + `"}}`)
		}
		for _, typ := range []string{"session_start", "post_llm_call", "post_tool_use", "agent_completion"} {
			e.hook(`{"hookName":"audit","hookType":"` + typ + `","dispatchConfig":{"url":"` + audit.srv.URL + `","signingSecret":"` + secret + `"}}`)
		}

		// A deny on user_message ends the run before any model call.
		_, evs := e.run(StartRequest{Input: "forbidden"})
		if find(evs, KindModelStarted) != nil {
			t.Fatalf("model called after a deny: %s", kinds(evs))
		}
		end := find(evs, KindRunEnded).End
		if end.Outcome != OutcomeFailed || end.ErrorCode != CodeHookDenied || end.ErrorMessage != "不允许的输入" {
			t.Fatalf("deny end: %+v", end)
		}
		// A modify changes the script taken and what the history keeps.
		info, evs := e.run(StartRequest{Input: "rewrite me"})
		if r := find(evs, KindResult).Result; r.Text != "你好，我在。" {
			t.Fatalf("modified input took script %q", r.Text)
		}
		h, _ := e.rt.History(context.Background(), info.SessionID, time.Time{})
		if h[0].Text != "plain" {
			t.Fatalf("history keeps %q", h[0].Text)
		}
		// A deny on pre_tool_use yields a denied result the model sees.
		info, evs = e.run(StartRequest{Input: "write my tasks", PrincipalID: ptr(int64(1001)), AgentID: ptr(int64(5001))})
		te := find(evs, KindToolResultEnded).Tool
		if te.State != ToolDenied || te.Error != "写文件需要审批" {
			t.Fatalf("tool end %+v", te)
		}
		hist, _ := e.rt.history(context.Background(), info.SessionID, -1)
		if tool := hist[len(hist)-2]; tool.Role != model.RoleTool || tool.Text != "写文件需要审批" {
			t.Fatalf("the model saw %+v", tool)
		}

		// Observational hooks arrived signed, with the document's fields.
		audit.wait(t, dispatcher.AgentCompletion, 3)
		var ac dispatcher.AgentCompletionContext
		for _, raw := range audit.wait(t, dispatcher.AgentCompletion, 3) {
			json.Unmarshal(raw, &ac)
			if ac.RequestID == info.RequestID {
				break
			}
		}
		if !ac.Succeeded || ac.StepCount != 2 || ac.TotalTokens != 2530 || ac.TriggerSourceType != "human_message" ||
			*ac.AssistantMessageID != info.AssistantMessageID || *ac.UserMessageID != info.UserMessageID || ac.AgentName != "assistant" {
			t.Fatalf("agent_completion %+v", ac)
		}
		var llm dispatcher.PostLLMCallContext
		json.Unmarshal(audit.wait(t, dispatcher.PostLLMCall, 3)[0], &llm)
		if llm.Model != "scripted" || llm.Step != 1 || llm.TotalTokens != llm.PromptTokens+llm.CompletionTokens {
			t.Fatalf("post_llm_call %+v", llm)
		}
		var pt dispatcher.PostToolUseContext
		json.Unmarshal(audit.wait(t, dispatcher.PostToolUse, 1)[0], &pt)
		if pt.Succeeded || pt.ErrorMessage == nil || *pt.ErrorMessage != "写文件需要审批" || pt.ToolName != "workspace_write_file" {
			t.Fatalf("post_tool_use %+v", pt)
		}
		var ss dispatcher.SessionStartContext
		json.Unmarshal(audit.wait(t, dispatcher.SessionStart, 2)[0], &ss)
		if !ss.NewSession {
			t.Fatalf("session_start %+v", ss)
		}
		var fails []json.RawMessage
		for _, raw := range audit.wait(t, dispatcher.AgentCompletion, 3) {
			json.Unmarshal(raw, &ac)
			if !ac.Succeeded {
				fails = append(fails, raw)
			}
		}
		if len(fails) != 1 || !strings.Contains(string(fails[0]), `"errorCode":"HOOK_DENIED"`) {
			t.Fatalf("failed completion: %s", fails)
		}
		if policy.bad+audit.bad != 0 {
			t.Fatal("a request failed signature verification")
		}
	})
}

func ptr[T any](v T) *T { return &v }

// Subscribers can join at any point: mid-run from a sequence number, after the end, and after a
// restart of the whole runtime on the same database.
func TestSubscribe(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, `{"scripts":[{"match":"*","steps":[{"text":"`+strings.Repeat("流式输出", 200)+`","chunkSize":1}]}]}`, Config{})
		info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: "s", Input: "go"})
		if err != nil {
			t.Fatal(err)
		}
		// Join mid-run from seq 300.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ch, _ := e.rt.Subscribe(ctx, info.RequestID, 300)
		var mid []Event
		for ev := range ch {
			mid = append(mid, ev)
		}
		checkSeqs(t, mid, 300)
		all := e.collect(info.RequestID, 0)
		checkSeqs(t, all, 0)
		if len(all) != 300+len(mid) || all[len(all)-1].Kind != KindRunEnded {
			t.Fatalf("full %d, mid %d", len(all), len(mid))
		}
		for i, ev := range mid {
			if ev.ID != all[300+i].ID {
				t.Fatal("mid-run join saw different events")
			}
		}
		after := e.collect(info.RequestID, int64(len(all)-5))
		if len(after) != 5 {
			t.Fatalf("join near the end: %d", len(after))
		}

		// A new runtime on the same database replays the finished run identically.
		rt2 := New(db, e.disp, e.rt.model, e.rt.tools, e.rt.ws, quiet(), Config{})
		if err := rt2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer rt2.Shutdown(context.Background())
		ch2, _ := rt2.Subscribe(ctx, info.RequestID, 0)
		i := 0
		for ev := range ch2 {
			a, _ := json.Marshal(ev)
			b, _ := json.Marshal(all[i])
			if string(a) != string(b) {
				t.Fatalf("replay differs at %d:\n%s\n%s", i, a, b)
			}
			i++
		}
		if i != len(all) {
			t.Fatalf("replayed %d of %d", i, len(all))
		}
	})
}
