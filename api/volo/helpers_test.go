package volo_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/volo"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/volo")

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ---- an independent SSE parser (WHATWG "event stream interpretation") ----

type sseFrame struct {
	Event string // the event type ("message" when no event field)
	Data  string
	ID    string // the last event id
}

type sseReader struct {
	r      *bufio.Reader
	lastID string
	first  bool
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r), first: true} }

// readLine reads one line ended by CRLF, LF or CR (the terminator is dropped).
func (s *sseReader) readLine() (string, error) {
	var b []byte
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				return "", io.ErrUnexpectedEOF // a line without its end: discarded, like the spec says
			}
			return "", err
		}
		switch c {
		case '\n':
			return string(b), nil
		case '\r':
			if next, err := s.r.Peek(1); err == nil && next[0] == '\n' {
				_, _ = s.r.ReadByte()
			}
			return string(b), nil
		}
		b = append(b, c)
	}
}

// Next returns the next dispatched event.
func (s *sseReader) Next() (sseFrame, error) {
	var data strings.Builder
	event, hasData := "", false
	for {
		line, err := s.readLine()
		if err != nil {
			return sseFrame{}, err
		}
		if s.first {
			line = strings.TrimPrefix(line, "\uFEFF")
			s.first = false
		}
		if line == "" { // dispatch
			if !hasData {
				event = ""
				continue
			}
			typ := event
			if typ == "" {
				typ = "message"
			}
			return sseFrame{Event: typ, Data: strings.TrimSuffix(data.String(), "\n"), ID: s.lastID}, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			event = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				s.lastID = value
			}
		case "retry": // reconnection time: irrelevant here
		}
	}
}

func TestSSEParser(t *testing.T) {
	in := "\uFEFF: comment\r\nevent: A\r\ndata: one\r\ndata:two\r\n\r\ndata\n\nid: 7\revent: B\rdata:  spaced\r\r" +
		"event: ignored\n\nevent: C\ndata: {\"x\":1}\n\ndata: cut off"
	r := newSSEReader(strings.NewReader(in))
	want := []sseFrame{{"A", "one\ntwo", ""}, {"message", "", ""}, {"B", " spaced", "7"}, {"C", `{"x":1}`, "7"}}
	for i, w := range want {
		got, err := r.Next()
		if err != nil || got != w {
			t.Fatalf("frame %d: %+v %v, want %+v", i, got, err, w)
		}
	}
	if _, err := r.Next(); err == nil {
		t.Fatal("an event without its blank line was dispatched")
	}
}

// ---- the test environment: real SQLite, real dispatcher, scripted model, real HTTP server ----

type opts struct {
	db        *storage.DB // nil: a new SQLite file
	script    string
	cfg       agent.Config
	keys      []wire.APIKey
	tools     []tools.Tool
	heartbeat time.Duration
	hooks     []string // registered as the admin API's JSON
}

type env struct {
	t   *testing.T
	db  *storage.DB
	rt  *agent.Runtime
	srv *httptest.Server
	ae  *agenttest.Env
	o   opts
	h   swapHandler
}

// swapHandler serves with the routes of the current runtime: a restart mounts a new one behind
// the same address, as a restarted daemon listens where the old one did.
type swapHandler struct {
	mu sync.RWMutex
	h  http.Handler
}

func (s *swapHandler) set(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = h
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	h := s.h
	s.mu.RUnlock()
	h.ServeHTTP(w, r)
}

func (e *env) mount() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	hb := e.o.heartbeat
	if hb == 0 {
		hb = time.Hour
	}
	volo.Register(r, volo.Deps{Runtime: e.rt, Keys: wire.NewKeys(e.o.keys), Log: quiet(), Heartbeat: hb})
	e.h.set(r)
}

// restart stops the runtime (its live runs are suspended: SHUTDOWN_INTERRUPT, as the recovery
// after a crash suspends them) and starts a new one on the same database, served at the same
// address.
func (e *env) restart() {
	e.t.Helper()
	e.srv.CloseClientConnections()
	e.ae.Restart(e.t)
	e.rt = e.ae.Runtime
	e.mount()
}

func newEnv(t *testing.T, o opts) *env {
	t.Helper()
	db := o.db
	if db == nil {
		db = storagetest.SQLite(t)
	}
	ae := agenttest.New(t, db, agenttest.Options{Script: o.script, Config: o.cfg, Tools: o.tools})
	for _, h := range o.hooks {
		ae.Hook(t, h)
	}
	e := &env{t: t, db: db, rt: ae.Runtime, ae: ae, o: o}
	e.mount()
	e.srv = httptest.NewServer(openapitest.Handler(t, &e.h))
	t.Cleanup(func() { // before the runtime stops (cleanups run last-registered first)
		e.srv.CloseClientConnections()
		e.srv.Close()
	})
	return e
}

const prefix = "/api/agent/chat/volo-ai"

// request sends a request over TCP; body is JSON-encoded unless it is a string; hdr are pairs.
func (e *env) request(method, path string, body any, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// call makes a JSON request and decodes the VOLO response.
func (e *env) call(method, path string, body any, hdr ...string) (int, volo.Response, []byte) {
	e.t.Helper()
	resp := e.request(method, path, body, hdr...)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("%s %s: content type %q: %s", method, path, ct, raw)
	}
	var r volo.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		e.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
	}
	if r.Code != resp.StatusCode {
		e.t.Fatalf("%s %s: code %d but HTTP %d", method, path, r.Code, resp.StatusCode)
	}
	return resp.StatusCode, r, raw
}

// frame is one parsed SSE frame with its decoded data.
type frame struct {
	sse sseFrame
	ev  volo.Event
	raw map[string]any
}

func (f frame) String() string {
	s := f.ev.Type
	if f.ev.Phase != "" {
		s += ":" + f.ev.Phase
	}
	return s
}

func names(fs []frame) string {
	var b []string
	for _, f := range fs {
		b = append(b, f.String())
	}
	return strings.Join(b, " ")
}

// decodeFrame checks what every frame must hold: JSON data whose type is the event name, and a
// traceInfo with sessionId, turnId and parentTurnId (null or a string).
func decodeFrame(t *testing.T, s sseFrame) frame {
	t.Helper()
	f := frame{sse: s}
	if err := json.Unmarshal([]byte(s.Data), &f.raw); err != nil {
		t.Fatalf("frame %s: data is not JSON: %v: %s", s.Event, err, s.Data)
	}
	if err := json.Unmarshal([]byte(s.Data), &f.ev); err != nil {
		t.Fatal(err)
	}
	if f.raw["type"] != s.Event {
		t.Fatalf("event %q but type %v", s.Event, f.raw["type"])
	}
	tr, ok := f.raw["traceInfo"].(map[string]any)
	if !ok {
		t.Fatalf("frame %s has no traceInfo: %s", s.Event, s.Data)
	}
	if p, present := tr["parentTurnId"]; !present || (p != nil && p == "") {
		t.Fatalf("frame %s: parentTurnId missing or empty: %s", s.Event, s.Data)
	}
	if tr["turnId"] == "" || tr["turnId"] == nil {
		t.Fatalf("frame %s: no turnId: %s", s.Event, s.Data)
	}
	if _, ok := tr["sessionId"].(string); !ok {
		t.Fatalf("frame %s: no sessionId: %s", s.Event, s.Data)
	}
	if f.raw["timestamp"] == "" {
		t.Fatalf("frame %s: no timestamp", s.Event)
	}
	return f
}

// rawFrame is the exact wire form of a frame: two lines and a blank one.
var rawFrame = regexp.MustCompile(`^event: ([A-Z_]+)\ndata: ([^\n]*)\n\n`)

// stream makes a request and reads the whole event stream.
func (e *env) stream(method, path string, body any, hdr ...string) (int, []frame) {
	e.t.Helper()
	resp := e.request(method, path, body, hdr...)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("%s %s: %d content type %q: %s", method, path, resp.StatusCode, ct, raw)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	for rest := raw; len(rest) > 0; {
		if bytes.HasPrefix(rest, []byte(": ")) { // a heartbeat comment
			i := bytes.Index(rest, []byte("\n\n"))
			rest = rest[i+2:]
			continue
		}
		m := rawFrame.FindSubmatchIndex(rest)
		if m == nil {
			e.t.Fatalf("not a two-line frame at %q", rest[:min(len(rest), 120)])
		}
		rest = rest[m[1]:]
	}
	r := newSSEReader(bytes.NewReader(raw))
	var out []frame
	for {
		s, err := r.Next()
		if errors.Is(err, io.EOF) {
			return resp.StatusCode, out
		}
		if err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
		out = append(out, decodeFrame(e.t, s))
	}
}

// live is an event stream read frame by frame.
type live struct {
	t    *testing.T
	resp *http.Response
	r    *sseReader
	got  []frame
}

func (e *env) open(method, path string, body any, hdr ...string) *live {
	e.t.Helper()
	resp := e.request(method, path, body, hdr...)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	l := &live{t: e.t, resp: resp, r: newSSEReader(resp.Body)}
	e.t.Cleanup(func() { resp.Body.Close() })
	return l
}

// until reads frames up to and including the first for which match is true.
func (l *live) until(match func(frame) bool) frame {
	l.t.Helper()
	for {
		s, err := l.r.Next()
		if err != nil {
			l.t.Fatalf("stream ended (%v) after %s", err, names(l.got))
		}
		f := decodeFrame(l.t, s)
		l.got = append(l.got, f)
		if match(f) {
			return f
		}
	}
}

// rest reads to the end of the stream.
func (l *live) rest() []frame {
	l.t.Helper()
	for {
		s, err := l.r.Next()
		if errors.Is(err, io.EOF) {
			return l.got
		}
		if err != nil {
			l.t.Fatal(err)
		}
		l.got = append(l.got, decodeFrame(l.t, s))
	}
}

func isType(typ string) func(frame) bool { return func(f frame) bool { return f.ev.Type == typ } }

func isPhase(phase string) func(frame) bool { return func(f frame) bool { return f.ev.Phase == phase } }

func find(fs []frame, typ string) *frame {
	for i := range fs {
		if fs[i].ev.Type == typ {
			return &fs[i]
		}
	}
	return nil
}

// ---- golden transcripts ----

var (
	reSynthetic = regexp.MustCompile(`synthetic-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reUUID      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)
	reAsk       = regexp.MustCompile(`\b(?:ask|ext|async)_[0-9a-f]{20}\b`)
	reInput     = regexp.MustCompile(`\binput_[0-9a-f]{16}\b`)
	reBlock     = regexp.MustCompile(`\bblk-[0-9a-f]{12}\b`)
	reChildKey  = regexp.MustCompile(`\.([a-z]+)-[0-9a-f]{8}\b`)
	timeKeys    = map[string]bool{"timestamp": true, "expiresAt": true, "createdAt": true, "updatedAt": true, "at": true}
	zeroKeys    = map[string]bool{"time": true}
)

// normaliser replaces what differs between runs (ids, times, durations) with stable names,
// numbered in order of appearance.
type normaliser struct {
	ids    map[string]string
	counts map[string]int
}

func newNormaliser() *normaliser {
	return &normaliser{ids: map[string]string{}, counts: map[string]int{}}
}

func (n *normaliser) name(kind, v string) string {
	if r, ok := n.ids[v]; ok {
		return r
	}
	n.counts[kind]++
	r := fmt.Sprintf("<%s-%d>", kind, n.counts[kind])
	n.ids[v] = r
	return r
}

func (n *normaliser) str(s string) string {
	s = reSynthetic.ReplaceAllStringFunc(s, func(v string) string { return n.name("synthetic", v) })
	s = reUUID.ReplaceAllStringFunc(s, func(v string) string { return n.name("turn", v) })
	s = reAsk.ReplaceAllStringFunc(s, func(v string) string { return n.name(v[:strings.IndexByte(v, '_')], v) })
	s = reInput.ReplaceAllStringFunc(s, func(v string) string { return n.name("input", v) })
	s = reBlock.ReplaceAllStringFunc(s, func(v string) string { return n.name("block", v) })
	s = reChildKey.ReplaceAllString(s, ".$1-<hex>")
	return s
}

func (n *normaliser) walk(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch {
			case timeKeys[k]:
				if s, ok := x[k].(string); ok && s != "" {
					x[k] = "<time>"
				}
			case k == "durationMs": // omitted when 0: its presence varies too
				delete(x, k)
			case zeroKeys[k]:
				if _, ok := x[k].(float64); ok {
					x[k] = 0
				}
			case k == "eventId":
				x[k] = "<event>"
			case k == "requestId" || k == "subagentId":
				if s, ok := x[k].(string); ok {
					x[k] = n.name("request", s)
				}
			default:
				x[k] = n.walk(x[k])
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = n.walk(x[i])
		}
		return x
	case string:
		return n.str(x)
	}
	return v
}

func (n *normaliser) json(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return n.str(string(raw))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(n.walk(v))
	return strings.TrimSuffix(b.String(), "\n")
}

type golden struct {
	t    *testing.T
	name string
	b    strings.Builder
	n    *normaliser
}

func newGolden(t *testing.T, name string) *golden {
	return &golden{t: t, name: name, n: newNormaliser()}
}

func (g *golden) request(method, path string, status int) {
	fmt.Fprintf(&g.b, "### %s %s -> %d\n", method, g.n.str(path), status)
}

func (g *golden) frames(fs []frame) {
	for _, f := range fs {
		fmt.Fprintf(&g.b, "event: %s\ndata: %s\n\n", f.sse.Event, g.n.json([]byte(f.sse.Data)))
	}
}

func (g *golden) body(raw []byte) { fmt.Fprintf(&g.b, "%s\n\n", g.n.json(raw)) }

func (g *golden) check() {
	g.t.Helper()
	path := filepath.Join("..", "..", "testdata", "volo", g.name+".golden")
	got := g.b.String()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%v (run go test ./api/volo/ -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var a, b string
			if i < len(gl) {
				a = gl[i]
			}
			if i < len(wl) {
				b = wl[i]
			}
			if a != b {
				g.t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test ./api/volo/ -update after checking the change)", path, i+1, a, b)
			}
		}
	}
}
