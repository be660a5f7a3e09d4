// Package modeltest serves model APIs over real HTTP for tests of the providers and of the
// runtime above them.
package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Dropping is an OpenAI-compatible chat-completions server whose streams break off: it answers
// with parts[0] and drops the connection, then a request that prefills the parts so far as its
// last assistant message gets the next part, and so on; the last part ends the stream properly.
// It keeps no state between requests, so every run that talks to it sees the same thing. A
// request whose prefill is not a prefix it sent is answered 400, so a provider that lost or
// repeated text fails loudly.
type Dropping struct {
	*httptest.Server
	parts    []string
	requests atomic.Int64
	drops    atomic.Int64
}

// NewDropping starts a Dropping server with at least two parts; it stops when the test ends.
func NewDropping(t testing.TB, parts ...string) *Dropping {
	t.Helper()
	if len(parts) < 2 {
		t.Fatal("modeltest: a dropping stream needs two parts or more")
	}
	d := &Dropping{parts: parts}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

// Requests counts the requests served; Drops the streams broken off.
func (d *Dropping) Requests() int64 { return d.requests.Load() }
func (d *Dropping) Drops() int64    { return d.drops.Load() }

func (d *Dropping) serve(w http.ResponseWriter, r *http.Request) {
	d.requests.Add(1)
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	next := 0
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
		prefill, _ := req.Messages[n-1].Content.(string)
		for next < len(d.parts) && strings.HasPrefix(prefill, strings.Join(d.parts[:next+1], "")) {
			next++
		}
		if strings.Join(d.parts[:next], "") != prefill || next == len(d.parts) {
			http.Error(w, fmt.Sprintf("prefill %q is not a prefix this server sent", prefill), http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	chunk := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	delta := func(text string) map[string]any {
		return map[string]any{"model": "dropping", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}}}
	}
	// Each part in two pieces, so a part is streamed, not sent whole.
	part := []rune(d.parts[next])
	chunk(delta(string(part[:len(part)/2])))
	chunk(delta(string(part[len(part)/2:])))
	if next < len(d.parts)-1 {
		d.drops.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // mid-stream: no [DONE], no end of the chunked body
		}
		return
	}
	chunk(map[string]any{"model": "dropping", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
	chunk(map[string]any{"model": "dropping", "choices": []any{}, "usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 8}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
