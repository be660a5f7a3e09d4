package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// gate is a tool that runs until the test opens it: the run is in progress for as long as the
// test needs, without anyone waiting on a clock.
type gate struct {
	started chan struct{}
	open    chan struct{}
}

func (g gate) Spec() tools.Spec {
	return tools.Spec{Name: "wait_for_team", Description: "waits", ReadOnly: true, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (g gate) Run(ctx context.Context, _ tools.Env, _ json.RawMessage) (tools.Result, error) {
	close(g.started)
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return tools.Result{Text: "the team is ready"}, nil
}

// Business middleware pushes a CUSTOM event and a HINT_BLOCK into alice's session through the
// admin API while her run is in progress; her Harness stream, read over TCP, carries both, and
// they are in the run's log. The route is strict and admin-only, and answers 404 / 409 for a
// session that is not there or has no run in progress.
func TestPushIntoASession(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		g := gate{started: make(chan struct{}), open: make(chan struct{})}
		env := agenttest.New(t, db, agenttest.Options{Tools: []tools.Tool{g}, Script: `{"scripts":[{"match":"","steps":[
			{"toolCalls":[{"name":"wait_for_team","arguments":{}}]},{"text":"好的，一起开始。"}]}]}`})
		srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: env.DB, Hooks: env.Hooks, Dispatcher: env.Dispatcher,
			AdminTokens: []string{authAdmin}, LoopbackOnly: true, Log: agenttest.Quiet(), Runtime: env.Runtime,
			Keys: wire.NewKeys([]wire.APIKey{{Key: keyAlice, UserID: "alice", PrincipalID: 1001}}), Workspaces: env.Workspaces})))
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })

		req, _ := http.NewRequest("POST", srv.URL+"/harness/chat", strings.NewReader(`{"sessionId":"team-1","userId":"alice","input":"等团队到齐"}`))
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		frames := make(chan map[string]any, 256)
		go func() {
			defer close(frames)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
					var f map[string]any
					if json.Unmarshal([]byte(data), &f) == nil {
						frames <- f
					}
				}
			}
		}()
		for waiting := true; waiting; {
			select {
			case <-g.started:
				waiting = false
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("the stream ended before the tool ran (HTTP %d)", resp.StatusCode)
				}
				_ = f // what streams before the tool runs
			}
		}

		const path = "/api/users/alice/sessions/team-1/events"
		status, body := call(t, srv, "POST", path, authAdmin, `{"type":"CUSTOM","name":"team_updated","value":{"action":"MEMBER_ADDED","member":"bob","teamId":"team-007"}}`)
		if status != 201 || !strings.Contains(body, `"seq":`) {
			t.Fatalf("custom: %d %s", status, body)
		}
		status, body = call(t, srv, "POST", path, authAdmin, `{"type":"HINT_BLOCK","hint":"bob 加入了会话，可以开始协作。","hintSource":"bob"}`)
		if status != 201 {
			t.Fatalf("hint: %d %s", status, body)
		}
		for _, c := range []struct {
			path, bearer, body string
			status             int
			has                string
		}{
			{path, "", `{"type":"CUSTOM","name":"x","value":{}}`, 401, ""},
			{path, keyAlice, `{"type":"CUSTOM","name":"x","value":{}}`, 401, ""},
			{path, authAdmin, `{"type":"CUSTOMS","name":"x","value":{}}`, 400, "did you mean"},
			{path, authAdmin, `{"type":"CUSTOM","value":{}}`, 400, "name"},
			{path, authAdmin, `{"type":"CUSTOM","name":"x","value":[1]}`, 400, "value"},
			{path, authAdmin, `{"type":"CUSTOM","name":"state_updated","value":{}}`, 400, "name"},
			{path, authAdmin, `{"type":"CUSTOM","name":"x","value":{},"hint":"h"}`, 400, "hint"},
			{path, authAdmin, `{"type":"HINT_BLOCK","hint":" "}`, 400, "hint"},
			{path, authAdmin, `{"type":"HINT_BLOCK","hint":"h","hnitSource":"x"}`, 400, "hintSource"},
			{"/api/users/bob/sessions/team-1/events", authAdmin, `{"type":"HINT_BLOCK","hint":"h"}`, 404, "bob"},
		} {
			if status, body := call(t, srv, "POST", c.path, c.bearer, c.body); status != c.status || !strings.Contains(body, c.has) {
				t.Errorf("%s %s: %d %s, want %d with %q", c.path, c.body, status, body, c.status, c.has)
			}
		}
		close(g.open)

		var seen []string
		var custom, hint map[string]any
		for f := range frames {
			typ, _ := f["type"].(string)
			seen = append(seen, typ)
			switch typ {
			case "CUSTOM":
				if f["name"] == "team_updated" {
					custom = f
				}
			case "HINT_BLOCK":
				hint = f
			}
			if typ == "AGENT_END" {
				break
			}
		}
		if v, _ := custom["value"].(map[string]any); v["member"] != "bob" {
			t.Fatalf("CUSTOM %v in %v", custom, seen)
		}
		if hint["hint"] != "bob 加入了会话，可以开始协作。" || hint["hintSource"] != "bob" || hint["blockId"] == nil {
			t.Fatalf("HINT_BLOCK %v in %v", hint, seen)
		}
		got := strings.Join(seen, " ")
		if i, j := strings.Index(got, "CUSTOM"), strings.Index(got, "TOOL_RESULT_END"); i < 0 || i > j || !strings.HasSuffix(got, "AGENT_END") {
			t.Fatalf("order %s", got)
		}
		// The run ended: nothing is in progress any more.
		if status, body := call(t, srv, "POST", path, authAdmin, `{"type":"HINT_BLOCK","hint":"late"}`); status != 409 {
			t.Fatalf("after the end: %d %s", status, body)
		}
	})
}
