package platform_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/storage/storagetest"
)

// Requests the routes refuse, each with the wrapper and the status its cause calls for.
func TestRefusals(t *testing.T) {
	e := newTEnv(t, storagetest.SQLite(t), platformScript, agent.Config{}, time.Hour)
	// A finished run of alice's, and a session of bob's.
	s := e.startRun(alice, map[string]any{"userInput": "hello", "sessionId": "alice-1"})
	requestID := s.Header.Get("X-Request-Id")
	aliceSession := s.rest(nil)[0].num("sessionId")
	bobSession := e.startRun(bob, map[string]any{"userInput": "hello"}).rest(nil)[0].num("sessionId")
	run := "/api/agent/run/stream"
	e.eventually(http.StatusConflict, alice, "POST", "/api/agent/run/"+requestID+"/suspend") // forgotten by the runtime

	for _, c := range []struct {
		status      int
		key, method string
		path        string
		body        any
		msg         string
	}{
		// Auth (wire.Status): no key 401, a body userId other than the key's 403.
		{401, "", "POST", run, map[string]any{"userInput": "hi"}, "API key"},
		{401, "key-nobody", "GET", run + "?requestId=" + requestID, nil, "API key"},
		{403, alice, "POST", run, map[string]any{"userInput": "hi", "userId": "bob"}, "userId"},
		{401, "", "POST", "/api/agent/permission/reply", map[string]any{"askId": "a", "approved": true}, "API key"},
		{401, "", "POST", "/api/agent/run/" + requestID + "/stop", nil, "API key"},
		// Before the body is read: one without a key is refused for that, whatever it holds.
		{401, "", "POST", run, map[string]any{"userInput": "hi", "bogus": 1}, "API key"},
		{401, "key-nobody", "POST", "/api/agent/run/" + requestID + "/input", map[string]any{"nope": true}, "API key"},
		// POST run/stream: the field at fault is named.
		{400, alice, "POST", run, map[string]any{}, "userInput"},
		{400, alice, "POST", run, map[string]any{"userInput": "  "}, "userInput"},
		{400, alice, "POST", run, map[string]any{"userInput": 3}, "userInput"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "sessionId": true}, "sessionId"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "sessionId": 1.5}, "sessionId"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "sessionId": ""}, "sessionId"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "agentId": "x"}, "agentId"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "agentId": 0}, "agentId"},
		{400, alice, "POST", run, map[string]any{"userInput": "hi", "agentId": -5}, "agentId"},
		{404, alice, "POST", run, map[string]any{"userInput": "hi", "sessionId": 9999}, "sessionId"},
		{404, alice, "POST", run, map[string]any{"userInput": "hi", "sessionId": bobSession}, "sessionId"},
		// GET run/stream.
		{400, alice, "GET", run, nil, "requestId"},
		{400, alice, "GET", run + "?requestId=" + requestID + "&lastEventId=abc", nil, "lastEventId"},
		{404, alice, "GET", run + "?requestId=0NOSUCHRUN000", nil, "requestId"},
		{404, bob, "GET", run + "?requestId=" + requestID, nil, "requestId"},
		// Control routes.
		{400, alice, "POST", "/api/agent/permission/reply", map[string]any{"approved": true}, "askId"},
		{400, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": "ask_x", "approved": "yes"}, "approved"},
		{404, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": "ask_nosuchask", "approved": true}, "askId"},
		{404, alice, "POST", "/api/agent/run/0NOSUCHRUN000/stop", nil, "requestId"},
		{404, bob, "POST", "/api/agent/run/" + requestID + "/resume", nil, "requestId"},
		{409, alice, "POST", "/api/agent/run/" + requestID + "/resume", nil, "not waiting"},
		{409, alice, "POST", "/api/agent/run/" + requestID + "/suspend", nil, "not running"},
		{409, alice, "POST", "/api/agent/run/" + requestID + "/input", map[string]any{"content": "x"}, "not running"},
		{400, alice, "POST", "/api/agent/run/" + requestID + "/input", map[string]any{"content": 1}, "content"},
		// Attachments.
		{400, alice, "GET", "/api/agent/attachment/getByMessage", nil, "messageId"},
		{404, bob, "GET", "/api/agent/attachment/getByMessage?messageId=2", nil, "messageId"}, // another user's message, found by id alone
		{404, bob, "GET", "/api/agent/attachment/getByMessage?messageId=2&sessionId=" + strconv.FormatInt(aliceSession, 10), nil, "messageId"},
		{400, alice, "GET", "/api/agent/attachment/download", nil, "path"},
	} {
		e.expect(c.status, c.key, c.method, c.path, c.body, c.msg)
	}

	// The Last-Event-ID header is checked as well and named when wrong.
	h := e.openStream(alice, "GET", run+"?requestId="+requestID, http.Header{"Last-Event-Id": {"1.x"}}, nil)
	var w wrapper
	json.Unmarshal(h.Body, &w)
	if h.Status != 400 || !strings.Contains(w.Message, "Last-Event-ID") {
		t.Fatalf("bad Last-Event-ID: %d %s", h.Status, h.Body)
	}
	// A string session key names one session; its numeric id names the same one.
	again := e.startRun(alice, map[string]any{"userInput": "hello", "sessionId": "alice-1"}).rest(nil)
	byID := e.startRun(alice, map[string]any{"userInput": "hello", "sessionId": aliceSession}).rest(nil)
	if again[0].num("sessionId") != aliceSession || byID[0].num("sessionId") != aliceSession {
		t.Fatalf("session by key %s, by id %s", again[0].Data, byID[0].Data)
	}
	// bob's key "alice-1" is a session of his own.
	if other := e.startRun(bob, map[string]any{"userInput": "hello", "sessionId": "alice-1"}).rest(nil); other[0].num("sessionId") == aliceSession {
		t.Fatal("two users share a session key")
	}
}

// Without API keys (the loopback development mode) the caller is the body's userId or the
// X-User-Id header, and users stay apart.
func TestDevelopmentModeCallers(t *testing.T) {
	e := newTEnv(t, storagetest.SQLite(t), platformScript, agent.Config{}, time.Hour)
	e.devMode = true
	e.restart()
	s := e.openStream("", "POST", "/api/agent/run/stream", http.Header{"X-User-Id": {"carol"}}, map[string]any{"userInput": "hello"})
	frames := s.rest(nil)
	if s.Status != 200 || frames[len(frames)-1].EventType != platform.MessageCompleted {
		t.Fatalf("carol's run: %d %s", s.Status, types(frames))
	}
	requestID := s.Header.Get("X-Request-Id")
	if r := e.openStream("", "GET", "/api/agent/run/stream?requestId="+requestID, http.Header{"X-User-Id": {"dave"}}, nil); r.Status != 404 {
		t.Fatalf("dave reads carol's run: %d", r.Status)
	}
	if r := e.openStream("", "GET", "/api/agent/run/stream?requestId="+requestID, http.Header{"X-User-Id": {"carol"}}, nil); r.Status != 200 {
		t.Fatalf("carol reads her run: %d", r.Status)
	}
	b := e.openStream("", "POST", "/api/agent/run/stream", nil, map[string]any{"userInput": "hello", "userId": "erin"})
	b.rest(nil)
	if run, err := e.rt.Run(t.Context(), "erin", b.Header.Get("X-Request-Id")); err != nil || run.UserID != "erin" {
		t.Fatalf("body userId: %v %+v", err, run)
	}
}

// An approval with remember for a call whose subject is too long for a rule is a 400 naming
// remember, keeping nothing, where it was an internal error; the call can still be approved alone.
func TestRememberOfASubjectTooLongForARule(t *testing.T) {
	script := fmt.Sprintf(`{"scripts":[{"match":"long","steps":[
	  {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":%q,"content":"x"}}]},
	  {"text":"done"}]}]}`, strings.Repeat("d/", 33<<10)+"f.txt")
	e := newTEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk, AskTimeout: 10 * time.Second}, time.Hour)
	s := e.startRun(alice, map[string]any{"userInput": "long"})
	defer s.close()
	var askID string
	s.until(platform.MessageSuspended, func(f frame) {
		if f.EventType == platform.MessageSuspended {
			askID = f.data()["suspendReason"].(map[string]any)["askId"].(string)
		}
	})
	if askID == "" {
		t.Fatal("no ask")
	}
	e.expect(http.StatusBadRequest, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": askID, "approved": true, "remember": true}, "remember")
	e.expect(http.StatusOK, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": askID, "approved": true}, "success")
}
