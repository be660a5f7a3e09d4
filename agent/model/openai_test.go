package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testAPIKey = "sk-test-4f9a1c2e7b"

func readSSE(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "model", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// received is what the fake server got.
type received struct {
	mu     sync.Mutex
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r *received) get() (string, http.Header, map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.path, r.header, r.body
}

func (r *received) record(t *testing.T, req *http.Request) {
	raw, err := io.ReadAll(req.Body)
	var body map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		t.Errorf("server: request body: %v", err)
	}
	r.mu.Lock()
	r.path, r.header, r.body, r.raw = req.URL.Path, req.Header.Clone(), body, raw
	r.mu.Unlock()
}

// streamServer serves body as an event stream in writes of size bytes, flushing each.
func streamServer(t *testing.T, body []byte, size int) (*httptest.Server, *received) {
	t.Helper()
	rec := &received{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(t, r)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		writeFlushed(w, body, size)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

func writeFlushed(w http.ResponseWriter, body []byte, size int) {
	for len(body) > 0 {
		n := min(size, len(body))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		body = body[n:]
	}
}

func newTestOpenAI(url string, mod func(*OpenAIConfig)) *OpenAI {
	cfg := OpenAIConfig{BaseURL: url + "/v1/", APIKey: testAPIKey, Model: "cfg-model"}
	if mod != nil {
		mod(&cfg)
	}
	return NewOpenAI(cfg)
}

func ptr[T any](v T) *T { return &v }

func TestOpenAIStreamText(t *testing.T) {
	for _, size := range []int{1, 7, 64, 1 << 20} {
		t.Run(fmt.Sprintf("writes of %d bytes", size), func(t *testing.T) {
			srv, rec := streamServer(t, readSSE(t, "openai-chat-stream-text.sse"), size)
			m := newTestOpenAI(srv.URL, func(c *OpenAIConfig) { c.DefaultTemperature = ptr(0.2) })
			emit, chunks := collect()
			resp, err := m.Stream(context.Background(), Request{
				Model:       "gpt-4.1-nano",
				Temperature: ptr(0.7),
				Messages: []Message{
					{Role: RoleSystem, Text: "You are terse."},
					{Role: RoleUser, Text: "Say hello"},
				},
			}, emit)
			if err != nil {
				t.Fatal(err)
			}
			const want = "Hello! How can I assist you today?"
			if resp.Text != want || resp.FinishReason != FinishStop || resp.Model != "gpt-4.1-nano-2025-04-14" || len(resp.ToolCalls) != 0 {
				t.Errorf("response %+v", resp)
			}
			var streamed strings.Builder
			for _, c := range *chunks {
				if c.Kind != ChunkText {
					t.Errorf("unexpected chunk %+v", c)
				}
				streamed.WriteString(c.Text)
			}
			if streamed.String() != want || len(*chunks) != 9 {
				t.Errorf("streamed %q in %d chunks, want %q in 9", streamed.String(), len(*chunks), want)
			}
			u := resp.Usage
			if u.InputTokens != 19 || u.OutputTokens != 10 || u.CachedTokens != 0 || u.ReasoningTokens != 0 || u.Duration <= 0 {
				t.Errorf("usage %+v", u)
			}
			path, header, body := rec.get()
			if path != "/v1/chat/completions" {
				t.Errorf("path %q", path)
			}
			if header.Get("Authorization") != "Bearer "+testAPIKey || header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", header)
			}
			if body["model"] != "gpt-4.1-nano" || body["stream"] != true || body["temperature"] != 0.7 {
				t.Errorf("body model/stream/temperature: %v %v %v", body["model"], body["stream"], body["temperature"])
			}
			if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("stream_options %v", body["stream_options"])
			}
			if _, ok := body["tools"]; ok {
				t.Errorf("tools sent with none: %v", body["tools"])
			}
		})
	}
}

func TestOpenAIStreamToolCall(t *testing.T) {
	srv, rec := streamServer(t, readSSE(t, "openai-chat-stream-tool-call.sse"), 5)
	m := newTestOpenAI(srv.URL, func(c *OpenAIConfig) { c.DefaultTemperature = ptr(0.3) })
	emit, chunks := collect()
	params := json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)
	resp, err := m.Stream(context.Background(), Request{
		Messages: []Message{
			{Role: RoleSystem, Text: "sys"},
			{Role: RoleUser, Text: "What is in this picture, and the weather?", Images: []string{"data:image/png;base64,iVBORw0KGgo=", "https://example.com/a.jpg"}},
			{Role: RoleAssistant, Thinking: "not resent", ToolCalls: []ToolCall{{ID: "call_prev", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
			{Role: RoleTool, ToolCallID: "call_prev", Name: "get_weather", Text: "18°C, cloudy"},
			{Role: RoleAssistant, Text: "Paris is 18°C."},
			{Role: RoleUser, Text: "And Tokyo?"},
		},
		Tools: []ToolSpec{
			{Name: "get_weather", Description: "Weather of a city", Parameters: params},
			{Name: "no_params", Description: "takes nothing"},
		},
	}, emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != FinishToolCalls || resp.Text != "" || len(resp.ToolCalls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	call := resp.ToolCalls[0]
	if call.ID != "call_PieqNSej6kM9hgYbcQdbZSaC" || call.Name != "get_weather" || call.Arguments != `{"location": "Tokyo"}` {
		t.Errorf("call %+v", call)
	}
	var deltas []string
	for i, c := range *chunks {
		switch {
		case i == 0:
			if c.Kind != ChunkToolCallStart || c.ToolCallID != call.ID || c.ToolName != "get_weather" || c.Index != 0 {
				t.Errorf("first chunk %+v, want the call's start", c)
			}
		case c.Kind == ChunkToolCallDelta && c.Index == 0 && c.ToolCallID == call.ID:
			deltas = append(deltas, c.ArgsDelta)
		default:
			t.Errorf("unexpected chunk %+v", c)
		}
	}
	if strings.Join(deltas, "|") != `{"lo|catio|n": "T|okyo|"}` {
		t.Errorf("argument deltas %q", deltas)
	}
	if u := resp.Usage; u.InputTokens != 67 || u.OutputTokens != 31 {
		t.Errorf("usage %+v", u)
	}

	_, _, body := rec.get()
	if body["model"] != "cfg-model" || body["temperature"] != 0.3 {
		t.Errorf("model %v temperature %v: want the configured ones", body["model"], body["temperature"])
	}
	var sent struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []oaToolCall    `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools []oaTool `json:"tools"`
	}
	rec.mu.Lock()
	raw := rec.raw
	rec.mu.Unlock()
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Messages) != 6 {
		t.Fatalf("sent %d messages", len(sent.Messages))
	}
	if string(sent.Messages[0].Content) != `"sys"` || sent.Messages[0].Role != "system" {
		t.Errorf("system message %+v", sent.Messages[0])
	}
	if got, want := string(sent.Messages[1].Content),
		`[{"type":"text","text":"What is in this picture, and the weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]`; got != want {
		t.Errorf("user content\n got %s\nwant %s", got, want)
	}
	a := sent.Messages[2]
	if a.Role != "assistant" || string(a.Content) != "null" || len(a.ToolCalls) != 1 ||
		a.ToolCalls[0] != (oaToolCall{ID: "call_prev", Type: "function", Function: oaFunctionCall{Name: "get_weather", Arguments: `{"location":"Paris"}`}}) {
		t.Errorf("assistant message %+v content %s", a, a.Content)
	}
	if strings.Contains(string(raw), "not resent") {
		t.Error("thinking was sent")
	}
	if tm := sent.Messages[3]; tm.Role != "tool" || tm.ToolCallID != "call_prev" || string(tm.Content) != `"18°C, cloudy"` {
		t.Errorf("tool message %+v content %s", tm, tm.Content)
	}
	if string(sent.Messages[4].Content) != `"Paris is 18°C."` || sent.Messages[4].ToolCalls != nil {
		t.Errorf("assistant text message %+v", sent.Messages[4])
	}
	if len(sent.Tools) != 2 || sent.Tools[0].Type != "function" || sent.Tools[0].Function.Name != "get_weather" ||
		sent.Tools[0].Function.Description != "Weather of a city" || string(sent.Tools[0].Function.Parameters) != string(params) {
		t.Errorf("tools %+v", sent.Tools)
	}
	if string(sent.Tools[1].Function.Parameters) != `{"type":"object","properties":{}}` {
		t.Errorf("a tool without parameters: %s", sent.Tools[1].Function.Parameters)
	}
}

func TestOpenAIRequestDefaults(t *testing.T) {
	srv, rec := streamServer(t, readSSE(t, "openai-chat-stream-text.sse"), 100)
	m := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1/chat/completions", Model: "local-model"})
	if _, err := m.Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Text: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	path, header, body := rec.get()
	if path != "/v1/chat/completions" {
		t.Errorf("path %q", path)
	}
	if v, ok := header["Authorization"]; ok {
		t.Errorf("Authorization %q sent with no API key", v)
	}
	if _, ok := body["temperature"]; ok {
		t.Errorf("temperature %v sent with none set", body["temperature"])
	}
	if body["model"] != "local-model" {
		t.Errorf("model %v", body["model"])
	}
}

// A synthetic stream in the shapes of reasoning servers (DeepSeek's reasoning_content,
// OpenRouter's reasoning), with CRLF line ends, comments, multi-line data, two interleaved tool
// calls and cached/reasoning usage.
func TestOpenAIStreamReasoningAndParallelCalls(t *testing.T) {
	events := []string{
		`: keep-alive`,
		`{"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"想一想"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":", then act."}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Checking "}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"workspace_read_file","arguments":"{\"pa"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"shell_execute","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"command\":\"ls\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.md\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":768},"completion_tokens_details":{"reasoning_tokens":150}}}`,
		`[DONE]`,
	}
	var sb strings.Builder
	for _, e := range events {
		if strings.HasPrefix(e, ":") {
			sb.WriteString(e + "\r\n\r\n")
			continue
		}
		// Split one JSON object over two data lines: the reader joins them with "\n", which
		// JSON takes as white space.
		if i := strings.Index(e, `,"choices"`); i > 0 {
			fmt.Fprintf(&sb, "event: chunk\r\ndata: %s\r\ndata:%s\r\n\r\n", e[:i], e[i:])
			continue
		}
		fmt.Fprintf(&sb, "data: %s\r\n\r\n", e)
	}
	srv, _ := streamServer(t, []byte(sb.String()), 3)
	m := newTestOpenAI(srv.URL, nil)
	emit, chunks := collect()
	resp, err := m.Stream(context.Background(), Request{}, emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Thinking != "想一想, then act." || resp.Text != "Checking " || resp.Model != "deepseek-reasoner" || resp.FinishReason != FinishToolCalls {
		t.Errorf("response %+v", resp)
	}
	want := []ToolCall{
		{ID: "call_a", Name: "workspace_read_file", Arguments: `{"path":"a.md"}`},
		{ID: "call_b", Name: "shell_execute", Arguments: `{"command":"ls"}`},
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0] != want[0] || resp.ToolCalls[1] != want[1] {
		t.Errorf("calls %+v", resp.ToolCalls)
	}
	u := resp.Usage
	if u.InputTokens != 1000 || u.OutputTokens != 200 || u.CachedTokens != 768 || u.ReasoningTokens != 150 {
		t.Errorf("usage %+v", u)
	}
	var thinking int
	args := map[int]string{}
	started := map[int]bool{}
	for _, c := range *chunks {
		switch c.Kind {
		case ChunkThinking:
			thinking++
		case ChunkToolCallStart:
			started[c.Index] = true
		case ChunkToolCallDelta:
			if !started[c.Index] {
				t.Errorf("delta before start: %+v", c)
			}
			args[c.Index] += c.ArgsDelta
		}
	}
	if thinking != 2 || args[0] != want[0].Arguments || args[1] != want[1].Arguments {
		t.Errorf("streamed %d thinking chunks, args %v", thinking, args)
	}
}

func TestOpenAIPlainJSONResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"workspace_list_files","arguments":"{}"}},
			{"id":"c2","type":"function","function":{"name":"shell_execute","arguments":"{\"command\":\"pwd\"}"}}]},
			"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`)
	}))
	defer srv.Close()
	emit, chunks := collect()
	resp, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, emit)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hi" || len(resp.ToolCalls) != 2 || resp.ToolCalls[1].ID != "c2" || resp.ToolCalls[1].Arguments != `{"command":"pwd"}` ||
		resp.Usage.InputTokens != 5 || resp.FinishReason != FinishToolCalls {
		t.Errorf("response %+v", resp)
	}
	if len(*chunks) != 5 { // text, start+delta twice
		t.Errorf("chunks %+v", *chunks)
	}
}

func TestOpenAIHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       ErrorKind
		retryAfter time.Duration
		msg        string
	}{
		{"429 seconds", 429, map[string]string{"Retry-After": "7"},
			`{"error":{"message":"Rate limit reached for gpt-4.1-nano","type":"requests","code":"rate_limit_exceeded"}}`,
			ErrRateLimited, 7 * time.Second, "Rate limit reached"},
		{"429 ms", 429, map[string]string{"Retry-After": "7", "Retry-After-Ms": "1250"}, `{}`, ErrRateLimited, 1250 * time.Millisecond, "Too Many Requests"},
		{"429 none", 429, nil, `slow down`, ErrRateLimited, 0, "slow down"},
		{"500", 500, nil, `{"error":{"message":"The server had an error while processing your request."}}`, ErrNetwork, 0, "server had an error"},
		{"502 html", 502, nil, `<html>bad gateway</html>`, ErrNetwork, 0, "bad gateway"},
		{"503 retry", 503, map[string]string{"Retry-After": "2"}, ``, ErrNetwork, 2 * time.Second, "Service Unavailable"},
		{"400", 400, nil, `{"error":{"message":"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.","type":"invalid_request_error"}}`, ErrFatal, 0, "Invalid parameter"},
		{"401", 401, nil, `{"error":{"message":"Incorrect API key provided: ` + testAPIKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`, ErrFatal, 0, "Incorrect API key provided: ***"},
		{"403", 403, nil, `{"error":"forbidden region"}`, ErrFatal, 0, "forbidden region"},
		{"404", 404, nil, `{"message":"model 'nope' not found"}`, ErrFatal, 0, "model 'nope' not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			emit, chunks := collect()
			_, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, emit)
			me := asModelError(t, err)
			if me.Kind != tc.kind || me.StatusCode != tc.status || me.RetryAfter != tc.retryAfter {
				t.Errorf("got kind %s status %d retryAfter %v, want %s %d %v", me.Kind, me.StatusCode, me.RetryAfter, tc.kind, tc.status, tc.retryAfter)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), testAPIKey) {
				t.Errorf("error %q contains the API key", err)
			}
			if len(*chunks) != 0 {
				t.Errorf("chunks %+v", *chunks)
			}
		})
	}
}

func TestParseRetryAfterDate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
	if d := parseRetryAfter(h, now); d != 90*time.Second {
		t.Errorf("date: %v", d)
	}
	h.Set("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat))
	if d := parseRetryAfter(h, now); d != 0 {
		t.Errorf("past date: %v", d)
	}
	h.Set("Retry-After", "soon")
	if d := parseRetryAfter(h, now); d != 0 {
		t.Errorf("garbage: %v", d)
	}
}

func TestOpenAIStreamCut(t *testing.T) {
	full := readSSE(t, "openai-chat-stream-text.sse")
	half := full[:len(full)/2]
	t.Run("clean end before DONE", func(t *testing.T) {
		srv, _ := streamServer(t, half[:strings.LastIndex(string(half), "\n\n")+2], 50)
		emit, chunks := collect()
		_, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, emit)
		if me := asModelError(t, err); me.Kind != ErrNetwork || !strings.Contains(err.Error(), "[DONE]") {
			t.Errorf("error %v", err)
		}
		if len(*chunks) == 0 {
			t.Error("the chunks before the cut were not streamed")
		}
	})
	t.Run("connection dropped mid-event", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeFlushed(w, half, 50)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		}))
		defer srv.Close()
		_, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, nil)
		if me := asModelError(t, err); me.Kind != ErrNetwork {
			t.Errorf("error %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := newTestOpenAI(url, nil).Stream(context.Background(), Request{}, nil)
		if me := asModelError(t, err); me.Kind != ErrNetwork || me.StatusCode != 0 {
			t.Errorf("error %v", err)
		}
	})
	t.Run("error event in the stream", func(t *testing.T) {
		body := string(half[:strings.LastIndex(string(half), "\n\n")+2]) +
			"data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n"
		srv, _ := streamServer(t, []byte(body), 1<<20)
		_, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, nil)
		if me := asModelError(t, err); me.Kind != ErrNetwork || !strings.Contains(err.Error(), "server had an error") {
			t.Errorf("error %v", err)
		}
	})
}

func TestOpenAIEmptyCompletion(t *testing.T) {
	body := "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":0}}\n\n" +
		"data: [DONE]\n\n"
	srv, _ := streamServer(t, []byte(body), 10)
	resp, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, nil)
	me := asModelError(t, err)
	if me.Kind != ErrEmpty || !me.Retryable() {
		t.Errorf("error %v", err)
	}
	if resp.Usage.InputTokens != 12 {
		t.Errorf("the failed call's usage is lost: %+v", resp.Usage)
	}
}

func TestOpenAIIdleTimeoutAndCancel(t *testing.T) {
	first := readSSE(t, "openai-chat-stream-text.sse")
	first = first[:strings.Index(string(first), "\n\n")+2]
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeFlushed(w, first, len(first))
		select { // then go silent
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	m := newTestOpenAI(srv.URL, func(c *OpenAIConfig) { c.StreamIdleTimeout = 150 * time.Millisecond })
	start := time.Now()
	_, err := m.Stream(context.Background(), Request{}, nil)
	if me := asModelError(t, err); me.Kind != ErrNetwork || !strings.Contains(err.Error(), "nothing for too long") {
		t.Errorf("idle: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("idle timeout took %v", elapsed)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = newTestOpenAI(srv.URL, nil).Stream(ctx, Request{}, nil)
	if me := asModelError(t, err); !errors.Is(err, context.Canceled) || me.Retryable() {
		t.Errorf("cancel: %v", err)
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = newTestOpenAI(srv.URL, nil).Stream(ctx, Request{}, nil)
	if me := asModelError(t, err); !errors.Is(err, context.DeadlineExceeded) || me.Kind != ErrNetwork {
		t.Errorf("deadline: %v", err)
	}
}

func TestOpenAIBoundedLine(t *testing.T) {
	long := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("a", maxEventBytes) + "\"}}]}\n\n"
	srv, _ := streamServer(t, []byte(long), 1<<16)
	_, err := newTestOpenAI(srv.URL, nil).Stream(context.Background(), Request{}, nil)
	if me := asModelError(t, err); me.Kind != ErrFatal || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("error %v", err)
	}
}
