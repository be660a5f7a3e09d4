package model_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/model/modeltest"
)

// A stream that breaks off mid-answer is recovered from the point where it broke, over a real
// server that drops the connection: each break is announced, nothing is streamed twice, and the
// answer is whole.
func TestOpenAIRecoversADroppedStream(t *testing.T) {
	srv := modeltest.NewDropping(t, "第一段，", "第二段，", "完成。")
	m := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Model: "m"})
	var streamed strings.Builder
	var recoveries []model.Chunk
	resp, err := m.Stream(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}},
		func(c model.Chunk) {
			switch c.Kind {
			case model.ChunkText:
				streamed.WriteString(c.Text)
			case model.ChunkRecovering:
				recoveries = append(recoveries, c)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "第一段，第二段，完成。" || streamed.String() != resp.Text || resp.FinishReason != model.FinishStop {
		t.Fatalf("answer %q, streamed %q", resp.Text, streamed.String())
	}
	if len(recoveries) != 2 || recoveries[0].Attempt != 1 || recoveries[1].Attempt != 2 || recoveries[0].MaxAttempts != model.DefaultStreamRecoveries ||
		recoveries[0].Text == "" {
		t.Fatalf("recoveries %+v", recoveries)
	}
	if srv.Requests() != 3 || srv.Drops() != 2 {
		t.Fatalf("%d requests, %d drops", srv.Requests(), srv.Drops())
	}
	if resp.Usage.InputTokens != 20 || resp.Usage.OutputTokens != 8 {
		t.Fatalf("usage %+v", resp.Usage)
	}
}

// More breaks than the recoveries allowed fail the call as a network error, with what streamed.
func TestOpenAIRecoveriesRunOut(t *testing.T) {
	srv := modeltest.NewDropping(t, "a", "b", "c", "d")
	for _, c := range []struct {
		recoveries int
		requests   int64
	}{{-1, 1}, {1, 2}} {
		m := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL, Model: "m", StreamRecoveries: c.recoveries})
		before := srv.Requests()
		resp, err := m.Stream(context.Background(), model.Request{}, nil)
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.ErrNetwork {
			t.Fatalf("recoveries %d: %v", c.recoveries, err)
		}
		if got := srv.Requests() - before; got != c.requests || !strings.HasPrefix("abcd", resp.Text) || resp.Text == "" {
			t.Fatalf("recoveries %d: %d requests, text %q", c.recoveries, got, resp.Text)
		}
	}
}

// A break inside a tool call, or before any text, has no point to go on from: the call fails at
// once (the loop retries it whole).
func TestOpenAINoRecoveryWithoutText(t *testing.T) {
	for name, body := range map[string]string{
		"tool call": `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"a\""}}]}}]}` + "\n\n",
		"thinking":  `data: {"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}` + "\n\n",
	} {
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, body)
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}))
		_, err := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL}).Stream(context.Background(), model.Request{}, nil)
		srv.Close()
		var me *model.Error
		if !errors.As(err, &me) || me.Kind != model.ErrNetwork || requests.Load() != 1 {
			t.Errorf("%s: %v after %d requests", name, err, requests.Load())
		}
	}
}
