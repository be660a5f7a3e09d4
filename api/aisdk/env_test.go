package aisdk_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api/aisdk"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// script answers every scenario, one script per input.
const script = `{"scripts":[
 {"match":"hello","steps":[{"thinking":"a greeting","text":"Hello there.","usage":{"inputTokens":10,"outputTokens":5,"reasoningTokens":2}}]},
 {"match":"/tasks/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":520,"outputTokens":80}},
   {"text":"Saved to tasks.md.","usage":{"inputTokens":600,"outputTokens":30}}]},
 {"match":"/secret/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"secret.txt","content":"x"}}]},
   {"text":"Not written."}]},
 {"match":"/confirm/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"original"}}]},
   {"text":"done"}]},
 {"match":"/pick/","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"You picked it."}]},
 {"match":"/fatal/","steps":[{"error":"fatal","text":"never"}]},
 {"match":"/slow/","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":400},
   {"text":"after the restart"}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

// env is a real hookd slice: a database, the dispatcher, the runtime on the scripted model, and
// the AI SDK routes on gin behind a real TCP listener.
type env struct {
	t    testing.TB
	ae   *agenttest.Env
	keys []wire.APIKey
	srv  *httptest.Server
}

func newEnv(t testing.TB, db *storage.DB, cfg agent.Config, keys ...wire.APIKey) *env {
	t.Helper()
	e := &env{t: t, ae: agenttest.New(t, db, agenttest.Options{Script: script, Config: cfg}), keys: keys}
	e.serve()
	return e
}

func (e *env) serve() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	aisdk.Register(r, aisdk.Deps{Runtime: e.ae.Runtime, Keys: wire.NewKeys(e.keys), Log: quiet(), Heartbeat: 50 * time.Millisecond})
	e.srv = httptest.NewServer(r)
	e.t.Cleanup(e.srv.Close)
}

// restart is a daemon restart: live runs pause (SHUTDOWN_INTERRUPT), streams end, and a new
// runtime and server start on the same database.
func (e *env) restart() {
	e.ae.Restart(e.t)
	e.srv.Close()
	e.serve()
}

// hook registers a hook whose receiver answers pre_tool_use with answer.
func (e *env) hook(answer string) {
	e.t.Helper()
	const secret = "whsec-aisdk"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		_ = json.Unmarshal(body, &env)
		if env.HookType == dispatcher.PreToolUse {
			_, _ = io.WriteString(w, answer)
			return
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	e.t.Cleanup(srv.Close)
	e.ae.Hook(e.t, `{"hookName":"policy","hookType":"pre_tool_use","toolNameMatch":"*","dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"`+secret+`"}}`)
}

// response is what one request answered.
type response struct {
	Status   int
	Header   http.Header
	Events   []map[string]any
	Raw      []json.RawMessage
	Comments int
	Done     bool   // the stream ended with [DONE]
	Body     []byte // the error body (status ≠ 200)
}

// stream posts a chat request and reads the response, calling on with every event as it comes.
func (e *env) stream(in any, on ...func(map[string]any)) response {
	e.t.Helper()
	return e.do(in, nil, on...)
}

func (e *env) do(in any, header []string, on ...func(map[string]any)) response {
	e.t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		e.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ai-sdk/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return e.send(req, header, on...)
}

// cut posts a chat request and goes away when stop says so, as a client whose connection
// drops; the run goes on.
func (e *env) cut(in any, stop func(map[string]any) bool) response {
	e.t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ai-sdk/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := response{Status: resp.StatusCode, Header: resp.Header}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, found := strings.CutPrefix(sc.Text(), "data: ")
		if !found {
			continue
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			e.t.Fatalf("frame %q: %v", line, err)
		}
		out.Events = append(out.Events, m)
		if stop(m) {
			break
		}
	}
	return out
}

// resume is GET /ai-sdk/chat/{id}/stream.
func (e *env) resume(chat string, header []string, on ...func(map[string]any)) response {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/ai-sdk/chat/"+chat+"/stream", nil)
	return e.send(req, header, on...)
}

func (e *env) send(req *http.Request, header []string, on ...func(map[string]any)) response {
	e.t.Helper()
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := response{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		out.Body, _ = io.ReadAll(resp.Body)
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			out.Comments++
		case line == "data: [DONE]":
			out.Done = true
		case strings.HasPrefix(line, "data: "):
			if out.Done {
				e.t.Fatalf("a part after [DONE]: %q", line)
			}
			raw := json.RawMessage(strings.TrimPrefix(line, "data: "))
			var m map[string]any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				e.t.Fatalf("frame %q: %v", line, err)
			}
			out.Raw = append(out.Raw, raw)
			out.Events = append(out.Events, m)
			for _, f := range on {
				f(m)
			}
		case line == "":
		default:
			e.t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// chat is a chat request as DefaultChatTransport sends it.
func chat(id string, msgs []any, extra ...any) map[string]any {
	in := map[string]any{"id": id, "messages": msgs, "trigger": "submit-message"}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	return in
}

func user(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
}

// types lists the events' types, a run of one type once.
func types(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		if t := e["type"].(string); len(s) == 0 || s[len(s)-1] != t {
			s = append(s, t)
		}
	}
	return strings.Join(s, " ")
}

func first(t *testing.T, evs []map[string]any, typ string) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e["type"] == typ {
			return e
		}
	}
	t.Fatalf("no %s in %s", typ, types(evs))
	return nil
}

func last(evs []map[string]any) map[string]any {
	if len(evs) == 0 {
		return map[string]any{}
	}
	return evs[len(evs)-1]
}
