package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/harness"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// env is a real hookd slice: a database file, the dispatcher, the runtime with the scripted
// model, and the Harness route on a gin engine behind a real TCP listener.
type env struct {
	t    testing.TB
	db   *storage.DB
	reg  *dispatcher.Registry
	rt   *agent.Runtime
	tool *tools.Registry
	srv  *httptest.Server
}

func newEnv(t testing.TB, db *storage.DB, script string, cfg agent.Config, keys ...wire.APIKey) *env {
	t.Helper()
	ae := agenttest.New(t, db, agenttest.Options{Script: script, Config: cfg})
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	harness.Register(r, harness.Deps{Runtime: ae.Runtime, Keys: wire.NewKeys(keys), Log: quiet()})
	srv := httptest.NewServer(openapitest.Handler(t, r))
	t.Cleanup(srv.Close)
	return &env{t: t, db: db, reg: ae.Hooks, rt: ae.Runtime, tool: ae.Tools, srv: srv}
}

// hook registers a hook through the real registry.
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

// receiver is a webhook receiver that verifies signatures and answers with answer.
func receiver(t testing.TB, secret string, answer func(dispatcher.Envelope) string) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(w, answer(env))
	}))
	t.Cleanup(srv.Close)
	return srv
}

const (
	acceptSSE  = "text/event-stream"
	acceptJSON = "application/json"
)

// response is what one POST /harness/chat returned.
type response struct {
	Status    int
	Header    http.Header
	Raw       []byte
	Events    []json.RawMessage // the stream's events (200)
	Wrapper   wire.Response     // the REST wrapper (errors)
	RequestID string
}

func (e *env) post(body any, accept string, header ...string) *http.Request {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	if s, ok := body.(string); ok {
		b = []byte(s)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/harness/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// chat sends one request and reads the whole response.
func (e *env) chat(body any, accept string, header ...string) response {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(e.post(body, accept, header...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := response{Status: resp.StatusCode, Header: resp.Header, Raw: raw, RequestID: resp.Header.Get("X-Request-Id")}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &out.Wrapper); err != nil {
			e.t.Fatalf("status %d without the wrapper: %s", resp.StatusCode, raw)
		}
		if out.Wrapper.HTTPStatusCode != resp.StatusCode || out.Wrapper.Success {
			e.t.Fatalf("wrapper %+v disagrees with status %d", out.Wrapper, resp.StatusCode)
		}
		return out
	}
	out.Events = decodeBody(e.t, resp.Header.Get("Content-Type"), raw)
	return out
}

// decodeBody reads a 200 response in either form.
func decodeBody(t testing.TB, contentType string, raw []byte) []json.RawMessage {
	t.Helper()
	if strings.HasPrefix(contentType, "text/event-stream") {
		evs, err := parseSSE(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("SSE: %v\n%s", err, raw)
		}
		var out []json.RawMessage
		for _, ev := range evs {
			if !json.Valid([]byte(ev.Data)) {
				t.Fatalf("SSE data is not JSON: %q", ev.Data)
			}
			out = append(out, json.RawMessage(ev.Data))
		}
		return out
	}
	if !strings.HasPrefix(contentType, "application/json") {
		t.Fatalf("content type %q", contentType)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("the JSON array form does not parse: %v\n%s", err, raw)
	}
	return out
}

// ---- an independent SSE parser (WHATWG HTML, "Interpreting an event stream") ----

type sseEvent struct {
	Type, Data, LastEventID string
}

// sseParser reads events from a byte stream as they arrive.
type sseParser struct {
	r       *bufio.Reader
	skipLF  bool // the last line ended with CR: a following LF belongs to it
	started bool
	data    strings.Builder
	typ     string
	lastID  string
}

func newSSEParser(r io.Reader) *sseParser { return &sseParser{r: bufio.NewReader(r)} }

// line reads one line; lines end with CRLF, LF or CR.
func (p *sseParser) line() (string, error) {
	var b []byte
	for {
		c, err := p.r.ReadByte()
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				return "", io.ErrUnexpectedEOF // an unterminated last line is not a line
			}
			return "", err
		}
		if p.skipLF {
			p.skipLF = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\r':
			p.skipLF = true
			return string(b), nil
		case '\n':
			return string(b), nil
		}
		b = append(b, c)
	}
}

// next returns the next dispatched event; io.EOF at the end of the stream (an event not ended by
// a blank line is discarded, as the algorithm says).
func (p *sseParser) next() (sseEvent, error) {
	for {
		line, err := p.line()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return sseEvent{}, err
		}
		if !p.started {
			p.started = true
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		if line == "" { // dispatch
			if p.data.Len() == 0 {
				p.typ = ""
				continue
			}
			d := strings.TrimSuffix(p.data.String(), "\n")
			ev := sseEvent{Type: p.typ, Data: d, LastEventID: p.lastID}
			if ev.Type == "" {
				ev.Type = "message"
			}
			p.data.Reset()
			p.typ = ""
			return ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment
		}
		field, value := line, ""
		if i := strings.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			p.typ = value
		case "data":
			p.data.WriteString(value)
			p.data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				p.lastID = value
			}
		case "retry": // reconnection time: nothing to do here
		}
	}
}

func parseSSE(r io.Reader) ([]sseEvent, error) {
	p := newSSEParser(r)
	var out []sseEvent
	for {
		ev, err := p.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// ---- the schema of §4–§5 ----

type fieldSpec struct{ req, opt []string }

var eventSchema = map[string]fieldSpec{
	harness.TypeAgentStart:               {req: []string{"sessionId", "replyId", "name", "role"}},
	harness.TypeThinkingBlockStart:       {req: []string{"replyId", "blockId"}},
	harness.TypeThinkingBlockDelta:       {req: []string{"replyId", "blockId", "delta"}},
	harness.TypeThinkingBlockEnd:         {req: []string{"replyId", "blockId"}},
	harness.TypeModelCallStart:           {req: []string{"replyId"}},
	harness.TypeModelCallEnd:             {req: []string{"replyId", "usage"}},
	harness.TypeToolCallStart:            {req: []string{"replyId", "toolCallId", "toolCallName"}},
	harness.TypeToolCallDelta:            {req: []string{"replyId", "toolCallId", "toolCallName", "delta"}},
	harness.TypeToolCallEnd:              {req: []string{"replyId", "toolCallId", "toolCallName"}},
	harness.TypeToolResultStart:          {req: []string{"replyId", "toolCallId", "toolCallName"}},
	harness.TypeToolResultTextDelta:      {req: []string{"replyId", "toolCallId", "toolCallName", "delta"}},
	harness.TypeToolResultDataDelta:      {req: []string{"replyId", "toolCallId", "toolCallName", "data"}},
	harness.TypeToolResultEnd:            {req: []string{"replyId", "toolCallId", "toolCallName", "state"}},
	harness.TypeDataBlockStart:           {req: []string{"replyId", "blockId"}},
	harness.TypeDataBlockDelta:           {req: []string{"replyId", "blockId", "delta"}},
	harness.TypeDataBlockEnd:             {req: []string{"replyId", "blockId"}},
	harness.TypeTextBlockStart:           {req: []string{"replyId", "blockId"}},
	harness.TypeTextBlockDelta:           {req: []string{"replyId", "blockId", "delta"}},
	harness.TypeTextBlockEnd:             {req: []string{"replyId", "blockId"}},
	harness.TypeAgentResult:              {req: []string{"result"}},
	harness.TypeAgentEnd:                 {req: []string{"replyId"}},
	harness.TypeExceedMaxIters:           {req: []string{"replyId", "maxIters", "currentIter"}},
	harness.TypeRequireUserConfirm:       {req: []string{"replyId", "toolCalls"}},
	harness.TypeUserConfirmResult:        {req: []string{"replyId", "confirmResults"}},
	harness.TypeAllToolsDenied:           {req: []string{"deniedToolCalls"}},
	harness.TypeRequireExternalExecution: {req: []string{"replyId", "toolCalls"}},
	harness.TypeExternalExecutionResult:  {req: []string{"replyId", "toolResults"}},
	harness.TypeRequestStop:              {req: []string{"reason"}, opt: []string{"generateReason"}},
	harness.TypeSubagentExposed:          {req: []string{"subagentId", "agentId", "sessionId", "label"}},
	harness.TypeHintBlock:                {req: []string{"replyId", "blockId", "hint"}, opt: []string{"hintSource"}},
	harness.TypeCustom:                   {req: []string{"name"}, opt: []string{"value"}},
}

var (
	generateReasons = set("MODEL_STOP", "TOOL_CALLS", "STRUCTURED_OUTPUT", "TOOL_SUSPENDED", "REASONING_STOP_REQUESTED",
		"ACTING_STOP_REQUESTED", "PERMISSION_ASKING", "MIDDLEWARE_STOP_REQUESTED", "ALL_TOOLS_DENIED", "INTERRUPTED", "MAX_ITERATIONS")
	resultStates  = set("success", "error", "interrupted", "denied", "running")
	toolUseStates = set("pending", "asking", "allowed", "submitted", "finished")
	roles         = set("USER", "ASSISTANT", "SYSTEM", "TOOL")
)

func set(v ...string) map[string]bool {
	m := map[string]bool{}
	for _, s := range v {
		m[s] = true
	}
	return m
}

// validator checks events against the schema. strict also checks value formats (off for the
// normalised golden files, whose ids and times are placeholders).
type validator struct {
	strict bool
	errs   []string
	path   string
}

func (v *validator) fail(format string, a ...any) {
	v.errs = append(v.errs, v.path+": "+fmt.Sprintf(format, a...))
}

func decode(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

func (v *validator) event(ev map[string]any) {
	typ, _ := ev["type"].(string)
	spec, ok := eventSchema[typ]
	if !ok {
		v.fail("unknown type %q", ev["type"])
		return
	}
	v.path += " " + typ
	allowed := set("type", "id", "createdAt", "source", "metadata")
	for _, k := range append(spec.req, spec.opt...) {
		allowed[k] = true
	}
	for k, val := range ev {
		if !allowed[k] {
			v.fail("unexpected key %q", k)
		}
		if val == nil {
			v.fail("%s is null (NON_NULL: absent instead)", k)
		}
	}
	for _, k := range append([]string{"type", "id", "createdAt"}, spec.req...) {
		if _, ok := ev[k]; !ok {
			v.fail("missing %q", k)
		}
	}
	v.str(ev, "id", hex32)
	v.str(ev, "createdAt", createdAtRE)
	if s, ok := ev["source"]; ok {
		if str, _ := s.(string); !strings.HasPrefix(str, "main/") {
			v.fail("source %v", s)
		}
	}
	if md, ok := ev["metadata"]; ok {
		if m, _ := md.(map[string]any); len(m) == 0 {
			v.fail("metadata present but empty")
		}
	}
	for _, k := range []string{"sessionId", "replyId", "name", "role", "blockId", "toolCallId", "toolCallName",
		"delta", "reason", "subagentId", "agentId", "label", "hintSource", "hint"} {
		if val, ok := ev[k]; ok {
			if _, isStr := val.(string); !isStr {
				v.fail("%s is not a string", k)
			}
		}
	}
	if typ == harness.TypeAgentStart && ev["role"] != "assistant" {
		v.fail("role %v", ev["role"])
	}
	if u, ok := ev["usage"]; ok {
		v.usage(u)
	}
	if d, ok := ev["data"]; ok {
		v.block(d)
	}
	if s, ok := ev["state"]; ok && !resultStates[fmt.Sprint(s)] {
		v.fail("state %v", s)
	}
	if r, ok := ev["result"]; ok {
		v.msg(r)
	}
	for _, k := range []string{"maxIters", "currentIter"} {
		if val, ok := ev[k]; ok {
			if n, isNum := val.(json.Number); !isNum || strings.ContainsAny(n.String(), ".eE") {
				v.fail("%s is not an integer", k)
			}
		}
	}
	for _, k := range []string{"toolCalls", "deniedToolCalls"} {
		if val, ok := ev[k]; ok {
			for _, tu := range v.array(val, k) {
				v.toolUse(tu)
			}
		}
	}
	if val, ok := ev["confirmResults"]; ok {
		for _, cr := range v.array(val, "confirmResults") {
			m := v.object(cr, "confirmResult", "confirmed", "toolCall", "rules")
			if _, isBool := m["confirmed"].(bool); !isBool {
				v.fail("confirmed is not a boolean")
			}
			v.toolUse(m["toolCall"])
			if rules := m["rules"]; rules != nil {
				for _, r := range v.array(rules, "rules") {
					v.object(r, "rule", "tool_name", "rule_content", "behavior", "source")
				}
			}
		}
	}
	if val, ok := ev["toolResults"]; ok {
		for _, tr := range v.array(val, "toolResults") {
			m := v.object(tr, "toolResult", "id", "name", "output", "metadata", "state")
			for _, b := range v.array(m["output"], "output") {
				v.block(b)
			}
			if !resultStates[fmt.Sprint(m["state"])] {
				v.fail("tool result state %v", m["state"])
			}
		}
	}
	if g, ok := ev["generateReason"]; ok && !generateReasons[fmt.Sprint(g)] {
		v.fail("generateReason %v", g)
	}
	if val, ok := ev["value"]; ok {
		if _, isStr := val.(string); isStr {
			v.fail("value is a string, not JSON")
		}
	}
}

func (v *validator) str(m map[string]any, key string, re interface{ MatchString(string) bool }) {
	s, ok := m[key].(string)
	if !ok {
		if _, present := m[key]; present {
			v.fail("%s is not a string", key)
		}
		return
	}
	if v.strict && !re.MatchString(s) {
		v.fail("%s %q has the wrong format", key, s)
	}
}

func (v *validator) array(val any, what string) []any {
	a, ok := val.([]any)
	if !ok {
		v.fail("%s is not an array", what)
	}
	return a
}

// object checks val is an object with exactly keys.
func (v *validator) object(val any, what string, keys ...string) map[string]any {
	m, ok := val.(map[string]any)
	if !ok {
		v.fail("%s is not an object", what)
		return nil
	}
	want := set(keys...)
	for k := range m {
		if !want[k] {
			v.fail("%s: unexpected key %q", what, k)
		}
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			v.fail("%s: missing %q", what, k)
		}
	}
	return m
}

func (v *validator) usage(val any) {
	m := v.object(val, "usage", "inputTokens", "outputTokens", "cachedTokens", "time", "totalTokens")
	if m == nil {
		return
	}
	num := func(k string) int64 {
		n, ok := m[k].(json.Number)
		if !ok {
			if s, isStr := m[k].(string); isStr && !v.strict && strings.HasPrefix(s, "<") {
				return 0
			}
			v.fail("usage.%s is not a number", k)
			return 0
		}
		i, err := n.Int64()
		if err != nil && k != "time" {
			v.fail("usage.%s is not an integer", k)
		}
		return i
	}
	in, out, total := num("inputTokens"), num("outputTokens"), num("totalTokens")
	num("cachedTokens")
	num("time")
	if total != in+out {
		v.fail("usage.totalTokens %d != %d + %d", total, in, out)
	}
}

func (v *validator) toolUse(val any) {
	m := v.object(val, "ToolUseBlock", "id", "name", "input", "content", "metadata", "state")
	if m == nil {
		return
	}
	if _, ok := m["input"].(map[string]any); !ok {
		v.fail("ToolUseBlock.input is not an object")
	}
	if c := m["content"]; c != nil {
		if _, ok := c.(string); !ok {
			v.fail("ToolUseBlock.content is neither null nor a string")
		}
	}
	if _, ok := m["metadata"].(map[string]any); !ok {
		v.fail("ToolUseBlock.metadata is not an object")
	}
	if !toolUseStates[fmt.Sprint(m["state"])] {
		v.fail("ToolUseBlock.state %v", m["state"])
	}
}

func (v *validator) block(val any) {
	m, ok := val.(map[string]any)
	if !ok {
		v.fail("content block is not an object")
		return
	}
	switch m["type"] {
	case "text":
		v.object(m, "text block", "type", "text")
	case "thinking":
		v.object(m, "thinking block", "type", "thinking")
	case "image", "audio", "video":
		v.source(v.object(m, "media block", "type", "source")["source"])
	case "data":
		d := v.object(m, "data block", "type", "source", "id", "name")
		v.source(d["source"])
		v.str(d, "id", hex32)
	case "hint":
		v.object(m, "hint block", "type", "hint", "hintSource")
	case "tool_use":
		cp := map[string]any{}
		for k, x := range m {
			if k != "type" {
				cp[k] = x
			}
		}
		v.toolUse(cp)
	case "tool_result":
		v.object(m, "tool_result block", "type", "id", "name", "output", "metadata", "state")
	default:
		v.fail("content block type %v", m["type"])
	}
}

func (v *validator) source(val any) {
	m, ok := val.(map[string]any)
	if !ok {
		v.fail("source is not an object")
		return
	}
	switch m["type"] {
	case "base64":
		v.object(m, "base64 source", "type", "media_type", "data")
	case "url":
		v.object(m, "url source", "type", "url", "mime_type")
	default:
		v.fail("source type %v", m["type"])
	}
}

func (v *validator) msg(val any) {
	m := v.object(val, "Msg", "id", "name", "role", "content", "metadata", "timestamp", "usage")
	if m == nil {
		return
	}
	v.str(m, "id", uuidRE)
	v.str(m, "timestamp", timestampRE)
	if n := m["name"]; n != nil {
		if _, ok := n.(string); !ok {
			v.fail("Msg.name is neither null nor a string")
		}
	}
	if !roles[fmt.Sprint(m["role"])] {
		v.fail("Msg.role %v", m["role"])
	}
	for _, b := range v.array(m["content"], "Msg.content") {
		v.block(b)
	}
	md, _ := m["metadata"].(map[string]any)
	if !generateReasons[fmt.Sprint(md["agentscope_generate_reason"])] {
		v.fail("Msg.metadata.agentscope_generate_reason %v", md["agentscope_generate_reason"])
	}
	if u := m["usage"]; u != nil {
		v.usage(u)
	}
}

// validateEvents checks a response's events; it returns the problems found.
func validateEvents(raws []json.RawMessage, strict bool) []string {
	var errs []string
	seen := map[string]bool{}
	for i, raw := range raws {
		m, err := decode(raw)
		if err != nil {
			errs = append(errs, fmt.Sprintf("event %d: %v", i, err))
			continue
		}
		v := &validator{strict: strict, path: fmt.Sprintf("event %d", i)}
		v.event(m)
		errs = append(errs, v.errs...)
		if id, _ := m["id"].(string); strict {
			if seen[id] {
				errs = append(errs, fmt.Sprintf("event %d: id %s repeats", i, id))
			}
			seen[id] = true
		}
	}
	return errs
}

var (
	hex32       = regexp.MustCompile(`^[0-9a-f]{32}$`)
	createdAtRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)
	timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$`)
	uuidRE      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)
