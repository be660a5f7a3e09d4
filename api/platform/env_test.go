package platform_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The callers of the tests: two API keys, two users.
var testKeys = []wire.APIKey{
	{Key: "key-alice", UserID: "alice", PrincipalID: 1001},
	{Key: "key-bob", UserID: "bob", PrincipalID: 1002},
	{Key: "key-agent", UserID: "carol", PrincipalID: 1003, AgentID: 5001},
}

const (
	alice = "key-alice"
	bob   = "key-bob"
)

// tenv is a daemon in miniature: a real database, the real dispatcher, the scripted model, the
// agent runtime (agenttest) and the platform routes on a real HTTP server.
type tenv struct {
	t   testing.TB
	env *agenttest.Env
	hb  time.Duration
	// devMode runs the routes without API keys (callers by body userId or X-User-Id).
	devMode bool
	rt      *agent.Runtime
	ws      *tools.Workspaces
	srv     *httptest.Server
}

func newTEnv(t testing.TB, db *storage.DB, script string, cfg agent.Config, heartbeat time.Duration) *tenv {
	t.Helper()
	env := agenttest.New(t, db, agenttest.Options{Script: script, Config: cfg, Tools: []tools.Tool{asyncJob{}}})
	e := &tenv{t: t, env: env, hb: heartbeat, ws: env.Workspaces}
	e.serve()
	return e
}

// asyncJob is an asynchronous tool: it starts work elsewhere and returns at once; the result
// never comes, so the run waits (ASYNC_TOOL_PENDING) until the call times out.
type asyncJob struct{}

func (asyncJob) Spec() tools.Spec {
	return tools.Spec{Name: "render_report", Description: "starts rendering a report", ReadOnly: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"type":{"type":"string"}}}`)}
}

func (asyncJob) Run(context.Context, tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Result{Text: "job queued", Async: &tools.Async{TaskID: "task_456", Timeout: 300 * time.Millisecond, Strategy: "POLL"}}, nil
}

// serve starts the platform routes on the current runtime.
func (e *tenv) serve() {
	e.t.Helper()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	keys := wire.NewKeys(testKeys)
	if e.devMode {
		keys = wire.NewKeys(nil)
	}
	e.rt = e.env.Runtime
	platform.Register(r, platform.Deps{Runtime: e.rt, Workspaces: e.ws, Keys: keys, Heartbeat: e.hb, Log: quiet()})
	e.srv = httptest.NewServer(openapitest.Handler(e.t, r))
	srv := e.srv
	e.t.Cleanup(func() {
		srv.CloseClientConnections() // open streams end, so Close does not wait for them
		srv.Close()
	})
}

// restart stops the server and the runtime (live runs are suspended: SHUTDOWN_INTERRUPT) and
// starts new ones on the same database: a daemon restart.
func (e *tenv) restart() {
	e.t.Helper()
	e.srv.CloseClientConnections()
	e.srv.Close()
	e.env.Restart(e.t)
	e.serve()
}

// ---- plain REST calls ----

type wrapper struct {
	Success        bool            `json:"success"`
	HTTPStatusCode int             `json:"httpStatusCode"`
	Data           json.RawMessage `json:"data"`
	Message        string          `json:"message"`
}

// call makes a REST call with key as the bearer token and decodes the wrapper, checking that
// the HTTP status and httpStatusCode agree.
func (e *tenv) call(key, method, path string, body any) wrapper {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var w wrapper
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		e.t.Fatalf("%s %s: %d, body not the wrapper: %v", method, path, resp.StatusCode, err)
	}
	if w.HTTPStatusCode != resp.StatusCode || w.Success != (resp.StatusCode < 300) {
		e.t.Fatalf("%s %s: status %d, wrapper %+v", method, path, resp.StatusCode, w)
	}
	return w
}

func (e *tenv) expect(status int, key, method, path string, body any, msgHas string) wrapper {
	e.t.Helper()
	w := e.call(key, method, path, body)
	if w.HTTPStatusCode != status || !strings.Contains(w.Message, msgHas) {
		e.t.Fatalf("%s %s: got %d %q, want %d with %q", method, path, w.HTTPStatusCode, w.Message, status, msgHas)
	}
	return w
}

// ---- SSE over a raw TCP connection ----

// frame is one SSE event of the platform stream, with its envelope decoded.
type frame struct {
	sseEvent
	EventType string
	Env       map[string]any
}

func (f frame) data() map[string]any {
	d, _ := f.Env["data"].(map[string]any)
	return d
}

func (f frame) str(key string) string {
	s, _ := f.data()[key].(string)
	return s
}

func (f frame) num(key string) int64 {
	n, _ := f.data()[key].(float64)
	return int64(n)
}

// stream is an SSE response read from a TCP connection the test dialled itself.
type stream struct {
	t      testing.TB
	conn   net.Conn
	Status int
	Header http.Header
	Body   []byte // the body of a non-200 answer
	p      *sseParser
}

// openStream sends one HTTP/1.1 request over a new TCP connection and reads the response head.
func (e *tenv) openStream(key, method, path string, header http.Header, body any) *stream {
	e.t.Helper()
	u, _ := url.Parse(e.srv.URL + path)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		e.t.Fatal(err)
	}
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, u.String(), rd)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := req.Write(conn); err != nil {
		e.t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &stream{t: e.t, conn: conn, Status: resp.StatusCode, Header: resp.Header}
	e.t.Cleanup(func() { conn.Close() })
	if resp.StatusCode != http.StatusOK {
		s.Body, _ = io.ReadAll(resp.Body)
		conn.Close()
		return s
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		e.t.Fatalf("content type %q", ct)
	}
	s.p = newSSEParser(resp.Body)
	return s
}

// next reads the next frame; io.EOF once the server closed the stream.
func (s *stream) next() (frame, error) {
	ev, err := s.p.Next()
	if err != nil {
		return frame{}, err
	}
	f := frame{sseEvent: ev}
	if err := json.Unmarshal([]byte(ev.Data), &f.Env); err != nil {
		s.t.Fatalf("frame data is not JSON: %q", ev.Data)
	}
	f.EventType, _ = f.Env["eventType"].(string)
	return f, nil
}

// until reads frames, heartbeats included, until one of type typ (inclusive); each frame goes
// to on, when set, as it arrives.
func (s *stream) until(typ string, on func(frame)) []frame {
	s.t.Helper()
	var out []frame
	for {
		f, err := s.next()
		if err != nil {
			s.t.Fatalf("stream ended (%v) before %s; got %s", err, typ, types(out))
		}
		out = append(out, f)
		if on != nil {
			on(f)
		}
		if f.EventType == typ {
			return out
		}
	}
}

// rest reads frames until the server closes the stream.
func (s *stream) rest(on func(frame)) []frame {
	s.t.Helper()
	var out []frame
	for {
		f, err := s.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			s.t.Fatalf("stream broke: %v after %s", err, types(out))
		}
		out = append(out, f)
		if on != nil {
			on(f)
		}
	}
}

func (s *stream) close() { s.conn.Close() }

func types(fs []frame) string {
	var b []string
	for _, f := range fs {
		b = append(b, f.EventType)
	}
	return strings.Join(b, " ")
}

// withoutHeartbeats drops HEARTBEAT frames.
func withoutHeartbeats(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.EventType != platform.Heartbeat {
			out = append(out, f)
		}
	}
	return out
}

// sameFrames fails unless a and b are the same frames: same ids, same envelopes.
func sameFrames(t testing.TB, what string, a, b []frame) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d frames vs %d:\n%s\n%s", what, len(a), len(b), types(a), types(b))
	}
	for i := range a {
		if a[i].LastEventID != b[i].LastEventID || a[i].HasID != b[i].HasID || a[i].Data != b[i].Data {
			t.Fatalf("%s: frame %d differs:\n%s %s\n%s %s", what, i, a[i].LastEventID, a[i].Data, b[i].LastEventID, b[i].Data)
		}
	}
}

func (e *tenv) startRun(key string, body map[string]any) *stream {
	e.t.Helper()
	s := e.openStream(key, http.MethodPost, "/api/agent/run/stream", nil, body)
	if s.Status != http.StatusOK {
		e.t.Fatalf("POST run/stream: %d %s", s.Status, s.Body)
	}
	return s
}

func (e *tenv) replay(key, requestID, lastEventID string) *stream {
	e.t.Helper()
	path := "/api/agent/run/stream?requestId=" + url.QueryEscape(requestID)
	if lastEventID != "" {
		path += "&lastEventId=" + url.QueryEscape(lastEventID)
	}
	s := e.openStream(key, http.MethodGet, path, nil, nil)
	if s.Status != http.StatusOK {
		e.t.Fatalf("GET run/stream: %d %s", s.Status, s.Body)
	}
	return s
}
