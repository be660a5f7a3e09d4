package aisdk_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/aisdk"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/test/dialecttest"
)

// env is the AI SDK routes on a real runtime behind a real TCP listener.
type env struct{ *dialecttest.Env }

type response = dialecttest.Response

func newEnv(t testing.TB, db *storage.DB, cfg agent.Config, keys ...wire.APIKey) *env {
	t.Helper()
	return &env{dialecttest.New(t, db, cfg, register, keys...)}
}

func register(r gin.IRouter, rt *agent.Runtime, k *wire.Keys) {
	aisdk.Register(r, aisdk.Deps{Runtime: rt, Keys: k, Log: dialecttest.Quiet(), Heartbeat: dialecttest.Heartbeat})
}

// stream posts a chat request and reads the response, calling on with every part as it comes.
func (e *env) stream(in any, on ...func(map[string]any)) response {
	e.T.Helper()
	return e.Post("/ai-sdk/chat", in, nil, on...)
}

func (e *env) do(in any, header []string) response {
	e.T.Helper()
	return e.Post("/ai-sdk/chat", in, header)
}

// cut posts a chat request and goes away when stop says so, as a client whose connection
// drops; the run goes on.
func (e *env) cut(in any, stop func(map[string]any) bool) response {
	e.T.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, e.Srv.URL+"/ai-sdk/chat", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return e.Send(req, nil, stop)
}

// resume is GET /ai-sdk/chat/{id}/stream.
func (e *env) resume(chat string, header []string, on ...func(map[string]any)) response {
	e.T.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.Srv.URL+"/ai-sdk/chat/"+chat+"/stream", nil)
	return e.Send(req, header, nil, on...)
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

var (
	types = dialecttest.Types
	first = dialecttest.First
	last  = dialecttest.Last
)
