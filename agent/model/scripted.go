package model

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookd/hookd/hookdtype"
)

// ScriptFile is a script file (CONTRACT §4): the scripts in the order they are tried.
type ScriptFile struct {
	Scripts []Script `json:"scripts"`
}

// Script answers the runs whose input its Match selects (toolNameMatch syntax: "*" or "" for
// every input, "/regex/" unanchored, "a|b" or an exact input), one step per model call.
type Script struct {
	Match string `json:"match"`
	Steps []Step `json:"steps"`
}

// Step is one scripted model answer.
type Step struct {
	Thinking  string           `json:"thinking,omitempty"`
	Text      string           `json:"text,omitempty"`
	ToolCalls []ScriptToolCall `json:"toolCalls,omitempty"`
	Usage     StepUsage        `json:"usage"`
	// DelayMs is slept before answering (a cancelled context ends it).
	DelayMs int `json:"delayMs,omitempty"`
	// ChunkSize is the number of characters (runes) per streamed delta; 0 means
	// DefaultChunkSize.
	ChunkSize int `json:"chunkSize,omitempty"`
	// Error, one of rate_limited, network, empty, fatal, makes the first attempt of this step
	// fail with an *Error of that kind; a retry (Request.Attempt > 0) answers the step.
	Error string `json:"error,omitempty"`
	// RetryAfterMs is the RetryAfter hint of a rate_limited error.
	RetryAfterMs int `json:"retryAfterMs,omitempty"`
}

// ScriptToolCall is a scripted tool call. Arguments may be any JSON value, sent as its compact
// JSON text; a JSON string is taken as the raw arguments text itself, so a script can produce
// invalid arguments ("{\"path\": \"a\"") to exercise repair. No arguments means "{}".
type ScriptToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// StepUsage is the token count a step reports.
type StepUsage struct {
	InputTokens     int64 `json:"inputTokens"`
	OutputTokens    int64 `json:"outputTokens"`
	CachedTokens    int64 `json:"cachedTokens"`
	ReasoningTokens int64 `json:"reasoningTokens"`
}

// DefaultChunkSize is the runes per streamed delta of a step without a chunkSize.
const DefaultChunkSize = 8

// ScriptedModelName is Response.Model of scripted answers.
const ScriptedModelName = "scripted"

// Scripted is the scripted model. It is stateless (the script and step come from the request),
// so one value serves any number of concurrent runs.
type Scripted struct {
	scripts []compiledScript
}

type compiledScript struct {
	match hookdtype.NameMatch
	steps []compiledStep
}

type compiledStep struct {
	Step
	calls []ToolCall // Name and Arguments; the ID is made per request
}

var _ Model = (*Scripted)(nil)

//go:embed default_script.json
var defaultScriptJSON []byte

// DefaultScript is the built-in demo script, used when no script is configured: task lists
// (a workspace_write_file call), transfers (an http_request call a pre_tool_use hook can stop),
// shell commands (a shell_execute call) and a greeting for everything else.
func DefaultScript() *Scripted {
	s, err := parseScript(defaultScriptJSON)
	if err != nil {
		panic("model: built-in default script: " + err.Error())
	}
	return s
}

// DefaultScriptJSON returns the text of the built-in demo script, a template for script files.
func DefaultScriptJSON() []byte { return bytes.Clone(defaultScriptJSON) }

// LoadScript reads and checks a script file. Unknown fields are errors, so a misspelt key does
// not pass silently; errors name the script and step, e.g. "script 2: match: invalid regular
// expression: ...".
func LoadScript(path string) (*Scripted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model script: %w", err)
	}
	s, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("model script %s: %w", path, err)
	}
	return s, nil
}

// parseScript decodes a script file strictly, level by level so that errors carry indices.
func parseScript(data []byte) (*Scripted, error) {
	var file struct {
		Scripts []json.RawMessage `json:"scripts"`
	}
	if err := strictUnmarshal(data, &file); err != nil {
		return nil, err
	}
	if file.Scripts == nil {
		return nil, errors.New(`no "scripts" list`)
	}
	var sf ScriptFile
	for i, raw := range file.Scripts {
		var sc struct {
			Match string            `json:"match"`
			Steps []json.RawMessage `json:"steps"`
		}
		if err := strictUnmarshal(raw, &sc); err != nil {
			return nil, fmt.Errorf("script %d: %w", i, err)
		}
		script := Script{Match: sc.Match}
		for j, rawStep := range sc.Steps {
			var st Step
			if err := strictUnmarshal(rawStep, &st); err != nil {
				return nil, fmt.Errorf("script %d: step %d: %w", i, j, err)
			}
			script.Steps = append(script.Steps, st)
		}
		sf.Scripts = append(sf.Scripts, script)
	}
	return NewScripted(sf)
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: data after the top-level value")
	}
	return nil
}

// NewScripted checks a script and makes a model of it.
func NewScripted(s ScriptFile) (*Scripted, error) {
	if len(s.Scripts) == 0 {
		return nil, errors.New("no scripts")
	}
	m := &Scripted{}
	for i, sc := range s.Scripts {
		match, err := hookdtype.ParseNameMatch(sc.Match)
		if err != nil {
			return nil, fmt.Errorf("script %d: match: %w", i, err)
		}
		cs := compiledScript{match: match}
		for j, st := range sc.Steps {
			step, err := compileStep(st)
			if err != nil {
				return nil, fmt.Errorf("script %d: step %d: %w", i, j, err)
			}
			cs.steps = append(cs.steps, step)
		}
		m.scripts = append(m.scripts, cs)
	}
	return m, nil
}

func compileStep(st Step) (compiledStep, error) {
	switch {
	case st.DelayMs < 0:
		return compiledStep{}, fmt.Errorf("delayMs: %d is negative", st.DelayMs)
	case st.ChunkSize < 0:
		return compiledStep{}, fmt.Errorf("chunkSize: %d is negative", st.ChunkSize)
	case st.RetryAfterMs < 0:
		return compiledStep{}, fmt.Errorf("retryAfterMs: %d is negative", st.RetryAfterMs)
	case st.Usage.InputTokens < 0 || st.Usage.OutputTokens < 0 || st.Usage.CachedTokens < 0 || st.Usage.ReasoningTokens < 0:
		return compiledStep{}, errors.New("usage: token counts must not be negative")
	}
	switch ErrorKind(st.Error) {
	case "", ErrRateLimited, ErrNetwork, ErrEmpty, ErrFatal:
	default:
		return compiledStep{}, fmt.Errorf("error: %q is not one of rate_limited, network, empty, fatal", st.Error)
	}
	cs := compiledStep{Step: st}
	for k, tc := range st.ToolCalls {
		if strings.TrimSpace(tc.Name) == "" {
			return compiledStep{}, fmt.Errorf("toolCalls %d: name is empty", k)
		}
		args, err := scriptArguments(tc.Arguments)
		if err != nil {
			return compiledStep{}, fmt.Errorf("toolCalls %d: arguments: %w", k, err)
		}
		cs.calls = append(cs.calls, ToolCall{Name: tc.Name, Arguments: args})
	}
	return cs, nil
}

// scriptArguments turns a script's arguments value into the arguments text.
func scriptArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Stream answers with the step req.Step of the first script whose match selects req.RunInput
// (trimmed of surrounding white space). Past the last step, or when no script matches, the
// answer is an empty stop.
func (m *Scripted) Stream(ctx context.Context, req Request, emit func(Chunk)) (Response, error) {
	start := time.Now()
	resp := Response{Model: ScriptedModelName, FinishReason: FinishStop}
	if err := ctx.Err(); err != nil {
		return resp, contextError(err)
	}
	step, ok := m.step(req)
	if !ok {
		resp.Usage.Duration = time.Since(start)
		return resp, nil
	}
	if step.DelayMs > 0 {
		t := time.NewTimer(time.Duration(step.DelayMs) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, contextError(ctx.Err())
		case <-t.C:
		}
	}
	if step.Error != "" && req.Attempt == 0 {
		e := &Error{
			Kind: ErrorKind(step.Error),
			Err:  fmt.Errorf("scripted %s error at step %d", step.Error, req.Step),
		}
		if e.Kind == ErrRateLimited {
			e.RetryAfter = time.Duration(step.RetryAfterMs) * time.Millisecond
		}
		return resp, e
	}
	if emit == nil {
		emit = func(Chunk) {}
	}
	size := step.ChunkSize
	if size <= 0 {
		size = DefaultChunkSize
	}
	for _, piece := range splitRunes(step.Thinking, size) {
		if err := ctx.Err(); err != nil {
			return resp, contextError(err)
		}
		emit(Chunk{Kind: ChunkThinking, Text: piece})
	}
	for _, piece := range splitRunes(step.Text, size) {
		if err := ctx.Err(); err != nil {
			return resp, contextError(err)
		}
		emit(Chunk{Kind: ChunkText, Text: piece})
	}
	tag := callTag(req)
	calls := make([]ToolCall, len(step.calls))
	for i, c := range step.calls {
		if err := ctx.Err(); err != nil {
			return resp, contextError(err)
		}
		c.ID = fmt.Sprintf("call_%d_%d_%s", req.Step, i, tag)
		calls[i] = c
		emit(Chunk{Kind: ChunkToolCallStart, Index: i, ToolCallID: c.ID, ToolName: c.Name})
		for _, piece := range splitRunes(c.Arguments, size) {
			emit(Chunk{Kind: ChunkToolCallDelta, Index: i, ToolCallID: c.ID, ToolName: c.Name, ArgsDelta: piece})
		}
	}
	resp.Thinking = step.Thinking
	resp.Text = step.Text
	if len(calls) > 0 {
		resp.ToolCalls = calls
		resp.FinishReason = FinishToolCalls
	}
	resp.Usage = Usage{
		InputTokens:     step.Usage.InputTokens,
		OutputTokens:    step.Usage.OutputTokens,
		CachedTokens:    step.Usage.CachedTokens,
		ReasoningTokens: step.Usage.ReasoningTokens,
		Duration:        time.Since(start),
	}
	return resp, nil
}

// step finds the step a request answers with.
func (m *Scripted) step(req Request) (compiledStep, bool) {
	input := strings.TrimSpace(req.RunInput)
	for _, sc := range m.scripts {
		if !sc.match.Match(input) {
			continue
		}
		if req.Step < 0 || req.Step >= len(sc.steps) {
			return compiledStep{}, false
		}
		return sc.steps[req.Step], true
	}
	return compiledStep{}, false
}

// callTag makes tool call ids stable for a request yet distinct between runs of one session:
// it hashes the run input and the length of the conversation, which grows from run to run.
func callTag(req Request) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d\x00%s", len(req.Messages), req.RunInput)
	return fmt.Sprintf("%08x", h.Sum32())
}

// splitRunes cuts s into pieces of at most n runes; an empty s gives no pieces.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// contextError is the *Error of a call its context ended: a deadline is a timeout worth
// retrying, a cancellation is the caller giving up. Both unwrap to the context's error.
func contextError(err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: ErrNetwork, Err: err}
	}
	return &Error{Kind: ErrFatal, Err: err}
}
