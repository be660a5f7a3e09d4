// Package dialecttest is what the tests of the AG-UI and AI SDK dialects stand on: a real
// runtime on the scripted model with the dialect's routes behind a real TCP listener, an SSE
// reader, signed webhook receivers, and the check that every chat hook point fires.
package dialecttest

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
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
)

// Quiet is a logger that discards.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Heartbeat is the SSE keep-alive of the dialects under test: short, so a slow step shows one.
const Heartbeat = 50 * time.Millisecond

// Script answers every scenario of the dialects' tests, one script per input.
const Script = `{"scripts":[
 {"match":"hello","steps":[{"thinking":"a greeting","text":"Hello there.","usage":{"inputTokens":10,"outputTokens":5,"reasoningTokens":2}}]},
 {"match":"/tasks/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":520,"outputTokens":80}},
   {"text":"Saved to tasks.md.","usage":{"inputTokens":600,"outputTokens":30}}]},
 {"match":"/secret/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"secret.txt","content":"x"}}]},
   {"text":"Not written."}]},
 {"match":"/both files/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}]},
   {"text":"both handled"}]},
 {"match":"/mixed/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"m.txt","content":"M"}},{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"mixed handled"}]},
 {"match":"/confirm/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"original"}}]},
   {"text":"done"}]},
 {"match":"/pick/","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"You picked it."}]},
 {"match":"/fatal/","steps":[{"error":"fatal","text":"never"}]},
 {"match":"/slow/","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":1200},
   {"text":"after the restart"}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

// Register adds a dialect's routes for a runtime.
type Register func(r gin.IRouter, rt *agent.Runtime, keys *wire.Keys)

// Env is a real hookd slice: a database, the dispatcher, the runtime on the scripted model, and
// a dialect's routes on gin behind a real TCP listener.
type Env struct {
	T   testing.TB
	AE  *agenttest.Env
	Srv *httptest.Server

	keys     []wire.APIKey
	register Register
}

// New starts an Env on db, its model playing Script; with keys, the dialect requires them.
func New(t testing.TB, db *storage.DB, cfg agent.Config, register Register, keys ...wire.APIKey) *Env {
	t.Helper()
	return NewScripted(t, db, Script, cfg, register, keys...)
}

// NewScripted is New with the model playing script instead.
func NewScripted(t testing.TB, db *storage.DB, script string, cfg agent.Config, register Register, keys ...wire.APIKey) *Env {
	t.Helper()
	e := &Env{T: t, AE: agenttest.New(t, db, agenttest.Options{Script: script, Config: cfg}), keys: keys, register: register}
	e.serve()
	return e
}

func (e *Env) serve() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	e.register(r, e.AE.Runtime, wire.NewKeys(e.keys))
	e.Srv = httptest.NewServer(openapitest.Handler(e.T, r))
	e.T.Cleanup(e.Srv.Close)
}

// Restart is a daemon restart: live runs pause (SHUTDOWN_INTERRUPT), streams end, and a new
// runtime and server start on the same database.
func (e *Env) Restart() {
	e.AE.Restart(e.T)
	e.Srv.Close()
	e.serve()
}

// Receiver is a webhook receiver that verifies signatures, hands each envelope to got (if not
// nil) and answers pre_tool_use with answer, every other point with allow.
func Receiver(t testing.TB, secret, answer string, got chan<- dispatcher.Envelope) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		_ = json.Unmarshal(body, &env)
		if got != nil {
			got <- env
		}
		if env.HookType == dispatcher.PreToolUse && answer != "" {
			_, _ = io.WriteString(w, answer)
			return
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Hook registers a pre_tool_use hook on every tool whose receiver answers with answer.
func (e *Env) Hook(answer string) {
	e.T.Helper()
	url := Receiver(e.T, "whsec-dialect", answer, nil)
	e.AE.Hook(e.T, `{"hookName":"policy","hookType":"pre_tool_use","toolNameMatch":"*","dispatchConfig":{"url":"`+url+`","signingSecret":"whsec-dialect"}}`)
}

// EveryHookPoint registers a hook on every chat hook point, runs turn (a tool turn, sent with
// the API key of principal 7) and waits until each point was delivered with that principal.
func EveryHookPoint(t *testing.T, e *Env, turn func() Response) {
	t.Helper()
	got := make(chan dispatcher.Envelope, 64)
	url := Receiver(t, "whsec-points", "", got)
	points := []dispatcher.HookType{dispatcher.UserMessage, dispatcher.SessionStart, dispatcher.PostLLMCall,
		dispatcher.PreToolUse, dispatcher.PostToolUse, dispatcher.AgentCompletion}
	for _, p := range points {
		e.AE.Hook(t, `{"hookName":"all-`+string(p)+`","hookType":"`+string(p)+`","dispatchConfig":{"url":"`+url+`","signingSecret":"whsec-points"}}`)
	}
	if r := turn(); r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	seen := map[dispatcher.HookType]bool{}
	deadline := time.After(30 * time.Second) // observational events are delivered from the outbox
	for len(seen) < len(points) {
		select {
		case env := <-got:
			if env.PrincipalID == nil || *env.PrincipalID != 7 {
				t.Errorf("%s: principal %v", env.HookType, env.PrincipalID)
			}
			seen[env.HookType] = true
		case <-deadline:
			t.Fatalf("hook points seen: %v, want all of %v", seen, points)
		}
	}
}

// Response is what one request answered.
type Response struct {
	Status   int
	Header   http.Header
	Events   []map[string]any
	Comments int
	Done     bool   // the stream ended with data: [DONE]
	Body     []byte // the error body (status ≠ 200)
}

// Post posts body as JSON to path and reads the answer, calling on with every event.
func (e *Env) Post(path string, body any, header []string, on ...func(map[string]any)) Response {
	e.T.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.T.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.Srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return e.Send(req, header, nil, on...)
}

// Send sends req with the header pairs and reads the answer: an error body, or the SSE stream
// event by event (calling on with each) until it ends or stop accepts an event, when it hangs
// up as a client whose connection drops.
func (e *Env) Send(req *http.Request, header []string, stop func(map[string]any) bool, on ...func(map[string]any)) Response {
	e.T.Helper()
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	out := Response{Status: resp.StatusCode, Header: resp.Header}
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
				e.T.Fatalf("an event after [DONE]: %q", line)
			}
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(line, "data: ")))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				e.T.Fatalf("frame %q: %v", line, err)
			}
			out.Events = append(out.Events, m)
			for _, f := range on {
				f(m)
			}
			if stop != nil && stop(m) {
				return out
			}
		case line == "":
		default:
			e.T.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// Types lists the events' types, a run of one type once.
func Types(evs []map[string]any) string {
	var s []string
	for _, e := range evs {
		if t := e["type"].(string); len(s) == 0 || s[len(s)-1] != t {
			s = append(s, t)
		}
	}
	return strings.Join(s, " ")
}

// First is the first event of type typ.
func First(t *testing.T, evs []map[string]any, typ string) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e["type"] == typ {
			return e
		}
	}
	t.Fatalf("no %s in %s", typ, Types(evs))
	return nil
}

// Last is the last event (an empty one when there is none).
func Last(evs []map[string]any) map[string]any {
	if len(evs) == 0 {
		return map[string]any{}
	}
	return evs[len(evs)-1]
}
