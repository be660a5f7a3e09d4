package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/hookdtype"
)

// OpenAIConfig configures an OpenAI-compatible chat-completions endpoint.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1; requests go to
	// {BaseURL}/chat/completions (a BaseURL already ending in /chat/completions is used as is).
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when set. It never appears in errors.
	APIKey string
	// Model is the model name; Request.Model overrides it.
	Model string
	// HTTPClient makes the requests; nil means a client with no overall timeout (streams may
	// last long), bounded by the request context and StreamIdleTimeout instead.
	HTTPClient *http.Client
	// DefaultTemperature is sent when the request has no Temperature; nil sends none.
	DefaultTemperature *float64
	// StreamIdleTimeout fails a call (ErrNetwork) when the server sends nothing for this long,
	// waiting for the response headers included; 0 means DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// StreamRecoveries is how many times one call goes on after its stream broke off mid-answer
	// (see Stream); 0 means DefaultStreamRecoveries, a negative number none.
	StreamRecoveries int
}

// DefaultStreamIdleTimeout is the StreamIdleTimeout of a config that sets none.
const DefaultStreamIdleTimeout = 5 * time.Minute

// DefaultStreamRecoveries is the StreamRecoveries of a config that sets none.
const DefaultStreamRecoveries = 2

// Bounds of what the provider reads from a server.
const (
	maxResponseBytes = 32 << 20 // a whole streamed or plain response body
	maxEventBytes    = 4 << 20  // one SSE line
	maxErrorBytes    = 64 << 10 // an error response body
)

// OpenAI is a Model speaking the OpenAI chat-completions API with streaming (OpenAI itself,
// and the many servers compatible with it: vLLM, llama.cpp, Ollama, DeepSeek, OpenRouter...).
// It does not retry a call that failed; the loop does, guided by the *Error kinds. It only
// recovers a stream that broke off mid-answer (Stream).
type OpenAI struct {
	cfg    OpenAIConfig
	url    string
	client *http.Client
	// secrets are hidden in every error: the API key, and a password or query key of the base URL
	// (an error of the client quotes the URL).
	secrets []string
}

var _ Model = (*OpenAI)(nil)

// NewOpenAI makes an OpenAI-compatible model.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	// The path is extended, not the text: a base URL may carry a query (?api-version=…).
	head, query, hasQuery := strings.Cut(cfg.BaseURL, "?")
	url := strings.TrimRight(head, "/")
	if !strings.HasSuffix(url, "/chat/completions") {
		url += "/chat/completions"
	}
	if hasQuery {
		url += "?" + query
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	switch {
	case cfg.StreamRecoveries == 0:
		cfg.StreamRecoveries = DefaultStreamRecoveries
	case cfg.StreamRecoveries < 0:
		cfg.StreamRecoveries = 0
	}
	secrets := hookdtype.URLSecrets(cfg.BaseURL)
	if cfg.APIKey != "" {
		secrets = append(secrets, cfg.APIKey)
	}
	return &OpenAI{cfg: cfg, url: url, client: client, secrets: secrets}
}

// Wire types of the request.
type oaRequest struct {
	Model         string           `json:"model"`
	Messages      []oaMessage      `json:"messages"`
	Tools         []oaTool         `json:"tools,omitempty"`
	Temperature   *float64         `json:"temperature,omitempty"`
	Stream        bool             `json:"stream"`
	StreamOptions *oaStreamOptions `json:"stream_options,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"` // a string, []oaPart, or nil (null)
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaPart struct {
	Type     string      `json:"type"`
	Text     string      `json:"text,omitempty"`
	ImageURL *oaImageURL `json:"image_url,omitempty"`
}

type oaImageURL struct {
	URL string `json:"url"`
}

type oaToolCall struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function oaFunctionCall `json:"function"`
}

type oaFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaTool struct {
	Type     string        `json:"type"`
	Function oaFunctionDef `json:"function"`
}

type oaFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Wire types of the response: a stream chunk, whose delta has the shape of a plain response's
// message, so both go through one accumulator.
type oaChunk struct {
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage"`
	Error   *oaError   `json:"error"`
}

type oaChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	Message      oaDelta `json:"message"` // a plain (non-streamed) response
	FinishReason *string `json:"finish_reason"`
}

type oaDelta struct {
	Content          *string           `json:"content"`
	ReasoningContent *string           `json:"reasoning_content"`
	Reasoning        json.RawMessage   `json:"reasoning"` // a string on most servers; ignored otherwise
	Refusal          *string           `json:"refusal"`
	ToolCalls        []oaToolCallDelta `json:"tool_calls"`
}

type oaToolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type oaError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"` // a string on OpenAI, a number on some servers
}

// Stream sends the request and streams the answer.
//
// When the stream breaks off after some answer text and before any tool call (the connection
// dropped, the server went silent, the body ended before [DONE]), Stream recovers from that
// point rather than failing the call: it emits a ChunkRecovering and sends the request again
// with the text so far as the last assistant message — the prefill that OpenAI-compatible
// servers (vLLM, llama.cpp, Ollama, DeepSeek) continue from — and appends what comes back, so
// nothing streamed is streamed twice. A break before any text, or inside a tool call, has no
// point to go on from: it fails the call (ErrNetwork) and the loop retries it whole.
func (o *OpenAI) Stream(ctx context.Context, req Request, emit func(Chunk)) (Response, error) {
	start := time.Now()
	if emit == nil {
		emit = func(Chunk) {}
	}
	modelName := o.cfg.Model
	if req.Model != "" {
		modelName = req.Model
	}
	wreq := o.buildRequest(modelName, req)
	asked := wreq.Messages
	acc := &accumulator{emit: emit, model: modelName}
	for recovery := 0; ; recovery++ {
		err := o.exchange(ctx, wreq, acc)
		if err == nil {
			break
		}
		if recovery >= o.cfg.StreamRecoveries || !acc.resumable() || !errors.Is(err, errStreamCut) || ctx.Err() != nil {
			return acc.response(time.Since(start)), err
		}
		emit(Chunk{Kind: ChunkRecovering, Attempt: recovery + 1, MaxAttempts: o.cfg.StreamRecoveries, Text: err.Error()})
		wreq.Messages = append(asked[:len(asked):len(asked)], oaMessage{Role: RoleAssistant, Content: acc.text.String()})
	}
	resp := acc.response(time.Since(start))
	if resp.Text == "" && len(resp.ToolCalls) == 0 {
		return resp, &Error{Kind: ErrEmpty, Err: fmt.Errorf("the model answered with no text and no tool calls (finish reason %q)", acc.finish)}
	}
	return resp, nil
}

// errStreamCut marks the failures that broke a stream off after it began: those Stream
// recovers from.
var errStreamCut = errors.New("the stream broke off")

type cutError struct{ err *Error }

func (e *cutError) Error() string   { return e.err.Error() }
func (e *cutError) Unwrap() []error { return []error{e.err, errStreamCut} }

// exchange makes one request and feeds its answer to acc.
func (o *OpenAI) exchange(ctx context.Context, wreq oaRequest, acc *accumulator) error {
	body, err := json.Marshal(wreq)
	if err != nil {
		return &Error{Kind: ErrFatal, Err: fmt.Errorf("encode request: %w", err)}
	}

	// callCtx ends the call when the server stays silent for StreamIdleTimeout.
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := newIdleTimer(o.cfg.StreamIdleTimeout, func() { cancel(errStreamIdle) })
	defer idle.stop()

	httpReq, err := http.NewRequestWithContext(callCtx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return &Error{Kind: ErrFatal, Err: o.redactErr(fmt.Errorf("build request: %w", err))}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	if o.cfg.APIKey != "" {
		httpReq.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	httpResp, err := o.client.Do(httpReq)
	if err != nil {
		return o.transportError(ctx, callCtx, err)
	}
	defer httpResp.Body.Close()
	idle.reset()

	if httpResp.StatusCode < 200 || httpResp.StatusCode > 299 {
		return o.statusError(httpResp)
	}

	reader := &idleReader{r: httpResp.Body, idle: idle}
	mediaType, _, _ := mime.ParseMediaType(httpResp.Header.Get("Content-Type"))
	if mediaType == "application/json" {
		err = o.readPlain(reader, acc)
	} else {
		err = o.readStream(reader, acc)
	}
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	me = o.transportError(ctx, callCtx, err)
	if me.Kind == ErrNetwork && ctx.Err() == nil && mediaType != "application/json" {
		return &cutError{me} // the stream began and broke off while being read
	}
	return me
}

func (o *OpenAI) buildRequest(modelName string, req Request) oaRequest {
	out := oaRequest{
		Model:         modelName,
		Stream:        true,
		StreamOptions: &oaStreamOptions{IncludeUsage: true},
		Temperature:   o.cfg.DefaultTemperature,
		Messages:      make([]oaMessage, 0, len(req.Messages)),
	}
	if req.Temperature != nil {
		out.Temperature = req.Temperature
	}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, wireMessage(m))
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, oaTool{Type: "function", Function: oaFunctionDef{
			Name: t.Name, Description: t.Description, Parameters: params,
		}})
	}
	return out
}

// wireMessage turns a Message into its chat-completions form. Thinking is not resent.
func wireMessage(m Message) oaMessage {
	switch m.Role {
	case RoleUser:
		if len(m.Images) == 0 {
			return oaMessage{Role: RoleUser, Content: m.Text}
		}
		parts := make([]oaPart, 0, 1+len(m.Images))
		if m.Text != "" {
			parts = append(parts, oaPart{Type: "text", Text: m.Text})
		}
		for _, img := range m.Images {
			parts = append(parts, oaPart{Type: "image_url", ImageURL: &oaImageURL{URL: img}})
		}
		return oaMessage{Role: RoleUser, Content: parts}
	case RoleAssistant:
		out := oaMessage{Role: RoleAssistant, Content: m.Text}
		if len(m.ToolCalls) > 0 {
			if m.Text == "" {
				out.Content = nil
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				out.ToolCalls = append(out.ToolCalls, oaToolCall{ID: c.ID, Type: "function",
					Function: oaFunctionCall{Name: c.Name, Arguments: args}})
			}
		}
		return out
	case RoleTool:
		return oaMessage{Role: RoleTool, Content: m.Text, ToolCallID: m.ToolCallID}
	default:
		return oaMessage{Role: m.Role, Content: m.Text}
	}
}

// readStream reads the server-sent events up to "data: [DONE]".
func (o *OpenAI) readStream(r io.Reader, acc *accumulator) error {
	events := newSSEReader(r)
	for {
		data, err := events.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &cutError{&Error{Kind: ErrNetwork, Err: errors.New("the stream ended before [DONE]")}}
			}
			return err
		}
		if strings.TrimSpace(data) == "[DONE]" {
			return nil
		}
		var chunk oaChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return &Error{Kind: ErrNetwork, Err: fmt.Errorf("bad stream chunk: %v", err)}
		}
		if chunk.Error != nil {
			return o.apiError(chunk.Error)
		}
		acc.add(chunk, false)
	}
}

// readPlain reads a whole (non-streamed) JSON completion, for servers that ignore "stream".
func (o *OpenAI) readPlain(r io.Reader, acc *accumulator) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(data) > maxResponseBytes {
		return errTooLarge()
	}
	var chunk oaChunk
	if err := json.Unmarshal(data, &chunk); err != nil {
		return &Error{Kind: ErrNetwork, Err: fmt.Errorf("bad response: %v", err)}
	}
	if chunk.Error != nil {
		return o.apiError(chunk.Error)
	}
	acc.add(chunk, true)
	return nil
}

// apiError classifies an error object the server sent with a 200 answer or inside the stream.
func (o *OpenAI) apiError(e *oaError) *Error {
	code := fmt.Sprint(e.Code)
	kind := ErrNetwork
	switch {
	case strings.Contains(e.Type, "rate_limit") || strings.Contains(code, "rate_limit") || code == "429":
		kind = ErrRateLimited
	case e.Type == "invalid_request_error" || e.Type == "authentication_error" || e.Type == "permission_error":
		kind = ErrFatal
	}
	msg := e.Message
	if msg == "" {
		msg = "the server sent an error"
	}
	return &Error{Kind: kind, Err: errors.New(o.redact(msg))}
}

// statusError reads the error body of a non-2xx answer.
func (o *OpenAI) statusError(resp *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	msg := errorBodyMessage(data)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e := &Error{StatusCode: resp.StatusCode, Err: errors.New(o.redact(msg))}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
		e.RetryAfter = parseRetryAfter(resp.Header, time.Now())
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusConflict:
		e.Kind = ErrNetwork
		e.RetryAfter = parseRetryAfter(resp.Header, time.Now())
	default:
		e.Kind = ErrFatal
	}
	return e
}

// errorBodyMessage is the message of an error body: error.message of the OpenAI shape, a
// top-level message or error string, or else the start of the body text.
func errorBodyMessage(data []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(data, &body) == nil {
		var e oaError
		if json.Unmarshal(body.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
		var s string
		if json.Unmarshal(body.Error, &s) == nil && s != "" {
			return s
		}
		if body.Message != "" {
			return body.Message
		}
		return "" // JSON without a message: the status text says more
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 300 {
		text = strings.ToValidUTF8(text[:300], "") + "..."
	}
	return text
}

// parseRetryAfter reads retry-after-ms (OpenAI, Azure) or Retry-After in seconds or as a date.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

var errStreamIdle = errors.New("the server sent nothing for too long")

func errTooLarge() *Error {
	return &Error{Kind: ErrFatal, Err: fmt.Errorf("the response exceeds %d bytes", maxResponseBytes)}
}

// transportError classifies a failure to send or to read: the caller's context ending, the
// idle timeout, or the network.
func (o *OpenAI) transportError(ctx, callCtx context.Context, err error) *Error {
	if ctx.Err() != nil {
		return contextError(ctx.Err())
	}
	if errors.Is(context.Cause(callCtx), errStreamIdle) {
		return &Error{Kind: ErrNetwork, Err: fmt.Errorf("%w (%s)", errStreamIdle, o.cfg.StreamIdleTimeout)}
	}
	if ue, ok := errors.AsType[*neturl.Error](err); ok {
		ue.URL = hookdtype.RedactURL(ue.URL) // with its query: a key given as ?api-key=
	}
	return &Error{Kind: ErrNetwork, Err: o.redactErr(err)}
}

func (o *OpenAI) redact(s string) string { return hookdtype.ScrubSecrets(s, o.secrets) }

// redactErr hides the secrets in an error's text, keeping the error for errors.Is.
func (o *OpenAI) redactErr(err error) error {
	msg := err.Error()
	if r := o.redact(msg); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// accumulator builds the Response from chunks and emits the streamed pieces.
type accumulator struct {
	emit     func(Chunk)
	model    string
	sawModel bool
	text     strings.Builder
	thinking strings.Builder
	calls    []*callState
	byIndex  map[int]*callState
	lastIdx  int
	finish   string
	usage    *oaUsage
}

type callState struct {
	index   int // in the Response
	id      string
	name    string
	args    strings.Builder
	pending string // arguments that came before the name
	started bool
}

func (a *accumulator) add(c oaChunk, plain bool) {
	if c.Model != "" && !a.sawModel {
		a.model, a.sawModel = c.Model, true
	}
	if c.Usage != nil {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		d := ch.Delta
		if plain {
			d = ch.Message
			for i := range d.ToolCalls {
				if d.ToolCalls[i].Index == nil {
					d.ToolCalls[i].Index = &i
				}
			}
		}
		if d.ReasoningContent != nil && *d.ReasoningContent != "" {
			a.thinking.WriteString(*d.ReasoningContent)
			a.emit(Chunk{Kind: ChunkThinking, Text: *d.ReasoningContent})
		} else if r := rawString(d.Reasoning); r != "" {
			a.thinking.WriteString(r)
			a.emit(Chunk{Kind: ChunkThinking, Text: r})
		}
		if d.Content != nil && *d.Content != "" {
			a.text.WriteString(*d.Content)
			a.emit(Chunk{Kind: ChunkText, Text: *d.Content})
		}
		if d.Refusal != nil && *d.Refusal != "" {
			a.text.WriteString(*d.Refusal)
			a.emit(Chunk{Kind: ChunkText, Text: *d.Refusal})
		}
		for _, td := range d.ToolCalls {
			a.addToolCall(td)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
	}
}

func (a *accumulator) addToolCall(td oaToolCallDelta) {
	idx := a.lastIdx
	if td.Index != nil {
		idx = *td.Index
	}
	a.lastIdx = idx
	if a.byIndex == nil {
		a.byIndex = map[int]*callState{}
	}
	st := a.byIndex[idx]
	// A new id at a known index is a new call (servers that send every call at index 0).
	if st == nil || (td.ID != "" && st.id != "" && td.ID != st.id) {
		st = &callState{index: len(a.calls)}
		a.calls = append(a.calls, st)
		a.byIndex[idx] = st
	}
	if st.id == "" && !st.started {
		st.id = td.ID
	}
	if st.name == "" {
		st.name = td.Function.Name
	}
	if args := td.Function.Arguments; args != "" {
		st.args.WriteString(args)
		if st.started {
			a.emit(Chunk{Kind: ChunkToolCallDelta, Index: st.index, ToolCallID: st.id, ToolName: st.name, ArgsDelta: args})
		} else {
			st.pending += args
		}
	}
	if !st.started && st.name != "" {
		a.start(st)
	}
}

func (a *accumulator) start(st *callState) {
	st.started = true
	if st.id == "" {
		st.id = fmt.Sprintf("call_%d", st.index)
	}
	a.emit(Chunk{Kind: ChunkToolCallStart, Index: st.index, ToolCallID: st.id, ToolName: st.name})
	if st.pending != "" {
		a.emit(Chunk{Kind: ChunkToolCallDelta, Index: st.index, ToolCallID: st.id, ToolName: st.name, ArgsDelta: st.pending})
		st.pending = ""
	}
}

// resumable reports whether the answer so far has a point to go on from: some text, and no tool
// call begun (a call's arguments cannot be continued).
func (a *accumulator) resumable() bool { return a.text.Len() > 0 && len(a.calls) == 0 }

func (a *accumulator) response(d time.Duration) Response {
	resp := Response{Model: a.model, Thinking: a.thinking.String(), Text: a.text.String(), FinishReason: a.finish}
	for _, st := range a.calls {
		if !st.started {
			a.start(st)
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: st.id, Name: st.name, Arguments: st.args.String()})
	}
	switch {
	case resp.FinishReason == "function_call":
		resp.FinishReason = FinishToolCalls
	case len(resp.ToolCalls) > 0 && (resp.FinishReason == "" || resp.FinishReason == FinishStop):
		resp.FinishReason = FinishToolCalls // some servers say stop after tool calls
	case resp.FinishReason == "":
		resp.FinishReason = FinishStop
	}
	if u := a.usage; u != nil {
		resp.Usage.InputTokens = u.PromptTokens
		resp.Usage.OutputTokens = u.CompletionTokens
		if u.PromptTokensDetails != nil {
			resp.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.CompletionTokensDetails != nil {
			resp.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	resp.Usage.Duration = d
	return resp
}

func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// sseReader reads the data of server-sent events (the "data:" lines of one event joined by
// newlines; comments and other fields skipped), one bounded line at a time.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the data of the next event that has some; io.EOF when the body ends between
// events, io.ErrUnexpectedEOF when it ends inside one.
func (s *sseReader) next() (string, error) {
	var data []string
	inEvent := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (inEvent || line != "") {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		if line == "" {
			if len(data) > 0 {
				return strings.Join(data, "\n"), nil
			}
			inEvent = false
			continue
		}
		inEvent = true
		if line[0] == ':' {
			continue // a comment, e.g. a keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		if field == "data" {
			data = append(data, value)
		}
	}
}

// readLine reads one line without its line ending; at the end of the body it returns what it
// read with io.EOF.
func (s *sseReader) readLine() (string, error) {
	var buf []byte
	for {
		part, err := s.r.ReadSlice('\n')
		if len(buf)+len(part) > maxEventBytes {
			return "", &Error{Kind: ErrFatal, Err: fmt.Errorf("a stream line exceeds %d bytes", maxEventBytes)}
		}
		buf = append(buf, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return string(buf), err
		}
		buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r"))
		return string(buf), nil
	}
}

// idleReader resets the idle timer on every read and stops reading past maxResponseBytes.
type idleReader struct {
	r    io.Reader
	n    int64
	idle *idleTimer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.idle.reset()
		r.n += int64(n)
		if r.n > maxResponseBytes {
			return 0, errTooLarge()
		}
	}
	return n, err
}

// idleTimer calls fire when it is not reset for d.
type idleTimer struct {
	mu      sync.Mutex
	d       time.Duration
	t       *time.Timer
	stopped bool
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	return &idleTimer{d: d, t: time.AfterFunc(d, fire)}
}

func (t *idleTimer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.t.Reset(t.d)
	}
}

func (t *idleTimer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.t.Stop()
}
