package agui_test

import (
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/agui"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/test/dialecttest"
)

// env is the AG-UI route on a real runtime behind a real TCP listener.
type env struct{ *dialecttest.Env }

type response = dialecttest.Response

func newEnv(t testing.TB, db *storage.DB, cfg agent.Config, keys ...wire.APIKey) *env {
	t.Helper()
	return &env{dialecttest.New(t, db, cfg, func(r gin.IRouter, rt *agent.Runtime, k *wire.Keys) {
		agui.Register(r, agui.Deps{Runtime: rt, Keys: k, Log: dialecttest.Quiet(), Heartbeat: dialecttest.Heartbeat})
	}, keys...)}
}

// stream posts a RunAgentInput and reads the response, calling on with every event as it comes.
func (e *env) stream(in any, on ...func(map[string]any)) response {
	e.T.Helper()
	return e.Post("/ag-ui/run", in, nil, on...)
}

func (e *env) do(in any, header []string) response {
	e.T.Helper()
	return e.Post("/ag-ui/run", in, header)
}

// input is a RunAgentInput.
func input(thread, run string, msgs []any, extra ...any) map[string]any {
	in := map[string]any{"threadId": thread, "runId": run, "messages": msgs, "tools": []any{}, "context": []any{},
		"state": map[string]any{}, "forwardedProps": map[string]any{}}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	return in
}

func user(id, text string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": text}
}

var (
	types = dialecttest.Types
	first = dialecttest.First
	last  = dialecttest.Last
)
