package model

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// collect returns an emit func and the chunks it saw.
func collect() (func(Chunk), *[]Chunk) {
	var chunks []Chunk
	return func(c Chunk) { chunks = append(chunks, c) }, &chunks
}

func mustScripted(t *testing.T, js string) *Scripted {
	t.Helper()
	var sf ScriptFile
	if err := json.Unmarshal([]byte(js), &sf); err != nil {
		t.Fatalf("script JSON: %v", err)
	}
	s, err := NewScripted(sf)
	if err != nil {
		t.Fatalf("NewScripted: %v", err)
	}
	return s
}

func run(t *testing.T, m Model, req Request) (Response, []Chunk) {
	t.Helper()
	emit, chunks := collect()
	resp, err := m.Stream(context.Background(), req, emit)
	if err != nil {
		t.Fatalf("Stream(%q, step %d): %v", req.RunInput, req.Step, err)
	}
	return resp, *chunks
}

func asModelError(t *testing.T, err error) *Error {
	t.Helper()
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *model.Error", err, err)
	}
	return me
}

func TestScriptedMatchOrderAndSyntax(t *testing.T) {
	s := mustScripted(t, `{"scripts": [
		{"match": "/pay|转账/", "steps": [{"text": "A"}]},
		{"match": "hello|hi", "steps": [{"text": "B"}]},
		{"match": "exact input", "steps": [{"text": "C"}]},
		{"match": "/pay/", "steps": [{"text": "never: an earlier script matches first"}]},
		{"match": "transfer*", "steps": [{"text": "E"}]},
		{"match": "*", "steps": [{"text": "D"}]}
	]}`)
	for _, tc := range []struct{ input, want string }{
		{"please pay now", "A"},  // regex, unanchored
		{"给张三转账 100 元", "A"},     // regex with Chinese
		{"hi", "B"},              // pipe
		{"hello", "B"},           // pipe
		{"hi there", "D"},        // pipe names are exact
		{"exact input", "C"},     // exact
		{"  exact input\n", "C"}, // input is trimmed
		{"exact", "D"},           // exact means exact
		{"transfer*", "E"},       // not a glob: the literal name
		{"transferFunds", "D"},   // ... so this falls through
		{"anything else", "D"},   // *
		{"", "D"},                // * matches empty input too
		{"PAY", "D"},             // regex is case-sensitive unless (?i)
	} {
		resp, _ := run(t, s, Request{RunInput: tc.input})
		if resp.Text != tc.want {
			t.Errorf("input %q: text %q, want %q", tc.input, resp.Text, tc.want)
		}
	}
}

func TestScriptedStepsAndPastTheEnd(t *testing.T) {
	s := mustScripted(t, `{"scripts": [
		{"match": "go", "steps": [
			{"text": "zero", "usage": {"inputTokens": 10, "outputTokens": 2}},
			{"toolCalls": [{"name": "workspace_list_files", "arguments": {"path": "."}}]},
			{"text": "two", "usage": {"inputTokens": 30, "outputTokens": 4, "cachedTokens": 8, "reasoningTokens": 1}}
		]}
	]}`)
	resp, _ := run(t, s, Request{RunInput: "go", Step: 0})
	if resp.Text != "zero" || resp.FinishReason != FinishStop || resp.Model != "scripted" {
		t.Fatalf("step 0: %+v", resp)
	}
	if resp.Usage.InputTokens != 10 || resp.Usage.OutputTokens != 2 {
		t.Errorf("step 0 usage: %+v", resp.Usage)
	}
	resp, _ = run(t, s, Request{RunInput: "go", Step: 1})
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "workspace_list_files" || resp.FinishReason != FinishToolCalls {
		t.Fatalf("step 1: %+v", resp)
	}
	// Stateless: step 2 straight away (a resumed run), and again.
	for range 2 {
		resp, _ = run(t, s, Request{RunInput: "go", Step: 2})
		want := Usage{InputTokens: 30, OutputTokens: 4, CachedTokens: 8, ReasoningTokens: 1}
		got := resp.Usage
		got.Duration = 0
		if resp.Text != "two" || got != want {
			t.Fatalf("step 2: %+v", resp)
		}
	}
	// Past the last step, and with no matching script: an empty stop, nothing streamed.
	for _, req := range []Request{{RunInput: "go", Step: 3}, {RunInput: "go", Step: 99}, {RunInput: "nothing matches", Step: 0}} {
		resp, chunks := run(t, s, req)
		if resp.Text != "" || resp.Thinking != "" || len(resp.ToolCalls) != 0 || resp.FinishReason != FinishStop || resp.Model != "scripted" {
			t.Errorf("%+v: want an empty stop, got %+v", req, resp)
		}
		if len(chunks) != 0 {
			t.Errorf("%+v: streamed %d chunks", req, len(chunks))
		}
	}
}

func TestScriptedChunkingByRunes(t *testing.T) {
	s := mustScripted(t, `{"scripts": [
		{"match": "/中文/", "steps": [{
			"thinking": "先想一想这个问题的答案",
			"text": "你好世界，这是一个测试",
			"toolCalls": [
				{"name": "workspace_write_file", "arguments": {"path": "笔记.md", "content": "内容"}},
				{"name": "workspace_read_file", "arguments": {"path": "a"}}
			],
			"chunkSize": 4
		}]},
		{"match": "default", "steps": [{"text": "abcdefghijklmnopqrstu"}]}
	]}`)
	resp, chunks := run(t, s, Request{RunInput: "中文测试"})

	var thinking, text []string
	args := map[int]string{}
	var starts []Chunk
	var kinds []ChunkKind
	for _, c := range chunks {
		if len(kinds) == 0 || kinds[len(kinds)-1] != c.Kind {
			kinds = append(kinds, c.Kind)
		}
		switch c.Kind {
		case ChunkThinking:
			thinking = append(thinking, c.Text)
		case ChunkText:
			text = append(text, c.Text)
		case ChunkToolCallStart:
			starts = append(starts, c)
		case ChunkToolCallDelta:
			if !utf8.ValidString(c.ArgsDelta) || utf8.RuneCountInString(c.ArgsDelta) > 4 {
				t.Errorf("args delta %q: not at most 4 whole runes", c.ArgsDelta)
			}
			args[c.Index] += c.ArgsDelta
		}
	}
	if want := []string{"你好世界", "，这是一", "个测试"}; strings.Join(text, "/") != strings.Join(want, "/") {
		t.Errorf("text chunks %q, want %q", text, want)
	}
	if want := []string{"先想一想", "这个问题", "的答案"}; strings.Join(thinking, "/") != strings.Join(want, "/") {
		t.Errorf("thinking chunks %q, want %q", thinking, want)
	}
	wantKinds := []ChunkKind{ChunkThinking, ChunkText, ChunkToolCallStart, ChunkToolCallDelta, ChunkToolCallStart, ChunkToolCallDelta}
	if len(kinds) != len(wantKinds) {
		t.Fatalf("chunk kind runs %v, want %v", kinds, wantKinds)
	}
	for i := range kinds {
		if kinds[i] != wantKinds[i] {
			t.Fatalf("chunk kind runs %v, want %v", kinds, wantKinds)
		}
	}
	if len(starts) != 2 || starts[0].Index != 0 || starts[1].Index != 1 || starts[0].ToolName != "workspace_write_file" {
		t.Fatalf("starts: %+v", starts)
	}
	if resp.Text != "你好世界，这是一个测试" || resp.Thinking != "先想一想这个问题的答案" {
		t.Errorf("response text/thinking: %q / %q", resp.Text, resp.Thinking)
	}
	if got, want := resp.ToolCalls[0].Arguments, `{"path":"笔记.md","content":"内容"}`; got != want || args[0] != want {
		t.Errorf("arguments %q (streamed %q), want %q", got, args[0], want)
	}
	for i, c := range resp.ToolCalls {
		if starts[i].ToolCallID != c.ID {
			t.Errorf("call %d: start id %q, response id %q", i, starts[i].ToolCallID, c.ID)
		}
	}

	// No chunkSize: DefaultChunkSize runes.
	_, chunks = run(t, s, Request{RunInput: "default"})
	var got []string
	for _, c := range chunks {
		got = append(got, c.Text)
	}
	if want := "abcdefgh/ijklmnop/qrstu"; strings.Join(got, "/") != want {
		t.Errorf("default chunks %q, want %s", got, want)
	}
}

func TestScriptedToolCallIDsAndArguments(t *testing.T) {
	s := mustScripted(t, `{"scripts": [{"match": "*", "steps": [
		{"toolCalls": [
			{"name": "workspace_read_file", "arguments": "{\"path\": \"a\""},
			{"name": "workspace_list_files"},
			{"name": "http_request", "arguments": {"url": "https://example.com", "method": "GET"}},
			{"name": "shell_execute", "arguments": null}
		]},
		{"toolCalls": [{"name": "shell_execute", "arguments": {"command": "ls"}}]}
	]}]}`)
	req := Request{RunInput: "x", Messages: []Message{{Role: RoleUser, Text: "x"}}}
	resp, chunks := run(t, s, req)
	wantArgs := []string{`{"path": "a"`, `{}`, `{"url":"https://example.com","method":"GET"}`, `{}`}
	if len(resp.ToolCalls) != len(wantArgs) {
		t.Fatalf("calls: %+v", resp.ToolCalls)
	}
	streamed := map[int]string{}
	for _, c := range chunks {
		if c.Kind == ChunkToolCallDelta {
			streamed[c.Index] += c.ArgsDelta
		}
	}
	ids := map[string]bool{}
	for i, c := range resp.ToolCalls {
		if c.Arguments != wantArgs[i] || streamed[i] != wantArgs[i] {
			t.Errorf("call %d arguments %q (streamed %q), want %q", i, c.Arguments, streamed[i], wantArgs[i])
		}
		if !strings.HasPrefix(c.ID, "call_0_"+string(rune('0'+i))+"_") {
			t.Errorf("call %d id %q: want prefix call_0_%d_", i, c.ID, i)
		}
		ids[c.ID] = true
	}
	if len(ids) != len(resp.ToolCalls) {
		t.Errorf("ids not distinct: %v", ids)
	}
	if json.Valid([]byte(resp.ToolCalls[0].Arguments)) {
		t.Error("the invalid arguments were made valid")
	}

	// Deterministic: the same request gives the same ids ...
	again, _ := run(t, s, req)
	if again.ToolCalls[0].ID != resp.ToolCalls[0].ID {
		t.Errorf("ids differ between identical requests: %q, %q", again.ToolCalls[0].ID, resp.ToolCalls[0].ID)
	}
	// ... another step or a later run of the session (a longer conversation) other ids.
	step1, _ := run(t, s, Request{RunInput: "x", Step: 1, Messages: req.Messages})
	if !strings.HasPrefix(step1.ToolCalls[0].ID, "call_1_0_") {
		t.Errorf("step 1 id %q", step1.ToolCalls[0].ID)
	}
	later := req
	later.Messages = append([]Message{{Role: RoleUser, Text: "x"}, {Role: RoleAssistant, Text: "y"}}, req.Messages...)
	laterResp, _ := run(t, s, later)
	if laterResp.ToolCalls[0].ID == resp.ToolCalls[0].ID {
		t.Errorf("a later run of the session reuses id %q", laterResp.ToolCalls[0].ID)
	}
}

func TestScriptedDelay(t *testing.T) {
	s := mustScripted(t, `{"scripts": [
		{"match": "short", "steps": [{"text": "ok", "delayMs": 60}]},
		{"match": "long", "steps": [{"text": "never", "delayMs": 10000}]}
	]}`)
	start := time.Now()
	resp, _ := run(t, s, Request{RunInput: "short"})
	if elapsed := time.Since(start); elapsed < 60*time.Millisecond {
		t.Errorf("answered after %v, before the 60ms delay", elapsed)
	}
	if resp.Usage.Duration < 60*time.Millisecond {
		t.Errorf("usage duration %v does not include the delay", resp.Usage.Duration)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	emit, chunks := collect()
	start = time.Now()
	_, err := s.Stream(ctx, Request{RunInput: "long"}, emit)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("cancellation took %v", elapsed)
	}
	me := asModelError(t, err)
	if !errors.Is(err, context.Canceled) || me.Retryable() {
		t.Errorf("cancelled: %v (kind %s), want a non-retryable error wrapping context.Canceled", err, me.Kind)
	}
	if len(*chunks) != 0 {
		t.Errorf("streamed %d chunks before failing", len(*chunks))
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = s.Stream(ctx, Request{RunInput: "long"}, nil)
	me = asModelError(t, err)
	if !errors.Is(err, context.DeadlineExceeded) || me.Kind != ErrNetwork {
		t.Errorf("deadline: %v (kind %s), want ErrNetwork wrapping DeadlineExceeded", err, me.Kind)
	}
}

func TestScriptedErrorsOnFirstAttemptOnly(t *testing.T) {
	for _, kind := range []ErrorKind{ErrRateLimited, ErrNetwork, ErrEmpty, ErrFatal} {
		t.Run(string(kind), func(t *testing.T) {
			s := mustScripted(t, `{"scripts": [{"match": "*", "steps": [
				{"text": "first"},
				{"error": "`+string(kind)+`", "retryAfterMs": 1500, "text": "after the retry", "usage": {"inputTokens": 7}}
			]}]}`)
			// Step 0 has no error.
			if resp, _ := run(t, s, Request{RunInput: "x"}); resp.Text != "first" {
				t.Fatalf("step 0: %+v", resp)
			}
			emit, chunks := collect()
			_, err := s.Stream(context.Background(), Request{RunInput: "x", Step: 1}, emit)
			me := asModelError(t, err)
			if me.Kind != kind {
				t.Fatalf("kind %s, want %s", me.Kind, kind)
			}
			if me.Retryable() != (kind != ErrFatal) {
				t.Errorf("Retryable() = %v", me.Retryable())
			}
			if kind == ErrRateLimited && me.RetryAfter != 1500*time.Millisecond {
				t.Errorf("RetryAfter %v", me.RetryAfter)
			}
			if len(*chunks) != 0 {
				t.Errorf("a failed call streamed %d chunks", len(*chunks))
			}
			// A new run with the same input fails again: the error depends on the attempt only.
			if _, err := s.Stream(context.Background(), Request{RunInput: "x", Step: 1}, nil); err == nil {
				t.Error("attempt 0 of a second run did not fail")
			}
			for attempt := 1; attempt <= 2; attempt++ {
				resp, _ := run(t, s, Request{RunInput: "x", Step: 1, Attempt: attempt})
				if resp.Text != "after the retry" || resp.Usage.InputTokens != 7 {
					t.Errorf("attempt %d: %+v", attempt, resp)
				}
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	s, err := LoadScript(filepath.Join("..", "..", "testdata", "model", "script-basic.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, chunks := run(t, s, Request{RunInput: "帮我整理任务"})
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"path":"tasks.md","content":"- [ ] a"}` ||
		resp.Thinking != "先读取任务源文件，再生成 markdown" || resp.Usage.ReasoningTokens != 12 {
		t.Errorf("tasks step 0: %+v", resp)
	}
	if len(chunks) == 0 {
		t.Error("nothing streamed")
	}
	resp, _ = run(t, s, Request{RunInput: "帮我整理任务", Step: 1})
	if resp.Text != "已完成，任务清单已保存至 /workspace/tasks.md" || resp.Usage.CachedTokens != 512 {
		t.Errorf("tasks step 1: %+v", resp)
	}
	resp, _ = run(t, s, Request{RunInput: "repair"})
	if resp.ToolCalls[0].Arguments != `{"path": "a"` {
		t.Errorf("invalid arguments: %q", resp.ToolCalls[0].Arguments)
	}
	if _, err := s.Stream(context.Background(), Request{RunInput: "repair", Step: 1}, nil); err == nil {
		t.Error("error step did not fail on attempt 0")
	}
	if resp, _ = run(t, s, Request{RunInput: "hello"}); resp.Text != "你好！" {
		t.Errorf("fallback: %+v", resp)
	}
}

func TestLoadScriptErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"not json", `{"scripts": [`, "invalid JSON"},
		{"trailing data", `{"scripts": [{"match": "*"}]} {}`, "data after the top-level value"},
		{"no scripts key", `{"script": []}`, `unknown field "script"`},
		{"empty", `{}`, `no "scripts" list`},
		{"zero scripts", `{"scripts": []}`, "no scripts"},
		{"bad regex", `{"scripts": [{"match": "a"}, {"match": "b"}, {"match": "/([a-z/"}]}`, "script 2: match: invalid regular expression"},
		{"unknown script field", `{"scripts": [{"match": "a", "step": []}]}`, `script 0: invalid JSON: json: unknown field "step"`},
		{"unknown step field", `{"scripts": [{"match": "*"}, {"match": "b", "steps": [{"text": "a"}, {"delay": 5}]}]}`, `script 1: step 1: invalid JSON: json: unknown field "delay"`},
		{"bad error kind", `{"scripts": [{"match": "*", "steps": [{"error": "timeout"}]}]}`, `script 0: step 0: error: "timeout" is not one of`},
		{"empty tool name", `{"scripts": [{"match": "*", "steps": [{"toolCalls": [{"arguments": {}}]}]}]}`, "script 0: step 0: toolCalls 0: name is empty"},
		{"negative delay", `{"scripts": [{"match": "*", "steps": [{"delayMs": -1}]}]}`, "script 0: step 0: delayMs: -1 is negative"},
		{"negative chunk", `{"scripts": [{"match": "*", "steps": [{"chunkSize": -2}]}]}`, "chunkSize: -2 is negative"},
		{"wrong type", `{"scripts": [{"match": "*", "steps": [{"text": 5}]}]}`, "script 0: step 0: invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadScript(path)
			if err == nil {
				t.Fatalf("loaded %s", tc.body)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want it to contain %q and the path", err, tc.want)
			}
		})
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// NewScripted checks the same way.
	if _, err := NewScripted(ScriptFile{Scripts: []Script{{Match: "*"}, {Match: "/(/"}}}); err == nil ||
		!strings.HasPrefix(err.Error(), "script 1: match: invalid regular expression") {
		t.Errorf("NewScripted: %v", err)
	}
}

var hookdTools = map[string]bool{
	"workspace_write_file": true, "workspace_read_file": true, "workspace_list_files": true,
	"http_request": true, "shell_execute": true, "send_attachment": true,
}

func TestDefaultScript(t *testing.T) {
	s := DefaultScript()
	// Every tool call of every script names a hookd tool and has valid JSON arguments.
	var sf ScriptFile
	if err := json.Unmarshal(DefaultScriptJSON(), &sf); err != nil {
		t.Fatal(err)
	}
	if len(sf.Scripts) < 3 || sf.Scripts[len(sf.Scripts)-1].Match != "*" {
		t.Fatalf("default script: %d scripts, last match %q", len(sf.Scripts), sf.Scripts[len(sf.Scripts)-1].Match)
	}
	used := map[string]bool{}
	for i, sc := range sf.Scripts {
		for j, st := range sc.Steps {
			for _, c := range st.ToolCalls {
				if !hookdTools[c.Name] {
					t.Errorf("script %d step %d: tool %q is not a hookd tool", i, j, c.Name)
				}
				if !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
					t.Errorf("script %d step %d: arguments %s", i, j, c.Arguments)
				}
				used[c.Name] = true
			}
		}
	}
	if len(used) != len(hookdTools) {
		t.Errorf("the demo uses %v; it could show every tool", used)
	}

	// A run of each demo: tool-call steps, then a final answer, then the empty stop.
	for _, tc := range []struct {
		input string
		tools []string
	}{
		{"帮我整理一下任务", []string{"workspace_write_file"}},
		{"Write my TODO list", []string{"workspace_write_file"}},
		{"Transfer 100 to ACME", []string{"http_request"}},
		{"给 ACME 转账 100 元", []string{"http_request"}},
		{"run a shell command", []string{"shell_execute"}},
		{"读取文件", []string{"workspace_list_files", "workspace_read_file"}},
		{"send me a report", []string{"workspace_write_file", "send_attachment"}},
		{"把报告发给我", []string{"workspace_write_file", "send_attachment"}},
		{"hi", nil},
		{"你好", nil},
	} {
		step := 0
		for ; step < len(tc.tools); step++ {
			resp, _ := run(t, s, Request{RunInput: tc.input, Step: step})
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != tc.tools[step] || resp.Thinking == "" {
				t.Errorf("%q step %d: %+v, want a call of %s with thinking", tc.input, step, resp, tc.tools[step])
			}
		}
		resp, _ := run(t, s, Request{RunInput: tc.input, Step: step})
		if resp.Text == "" || len(resp.ToolCalls) != 0 || resp.FinishReason != FinishStop {
			t.Errorf("%q step %d: %+v, want the final answer", tc.input, step, resp)
		}
		resp, _ = run(t, s, Request{RunInput: tc.input, Step: step + 1})
		if resp.Text != "" || len(resp.ToolCalls) != 0 {
			t.Errorf("%q past the end: %+v", tc.input, resp)
		}
	}
	resp, _ := run(t, s, Request{RunInput: "tasks please"})
	var args struct{ Path, Content string }
	if err := json.Unmarshal([]byte(resp.ToolCalls[0].Arguments), &args); err != nil || args.Path != "tasks.md" || args.Content == "" {
		t.Errorf("tasks call arguments %s", resp.ToolCalls[0].Arguments)
	}
}

func TestScriptedConcurrentRuns(t *testing.T) {
	s := DefaultScript()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			input := []string{"tasks", "转账", "hi", "shell"}[i%4]
			for step := range 3 {
				if _, err := s.Stream(context.Background(), Request{RunInput: input, Step: step}, func(Chunk) {}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}
