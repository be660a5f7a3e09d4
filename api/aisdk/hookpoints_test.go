package aisdk_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage/storagetest"
)

// Every hook point of a chat turn fires for this dialect as for the others, with the API key's
// principal on the envelope.
func TestEveryHookPointFires(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{}, wire.APIKey{Key: "key-carol", UserID: "carol", PrincipalID: 7})
	const secret = "whsec-points"
	got := make(chan dispatcher.Envelope, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		_ = json.Unmarshal(body, &env)
		got <- env
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(srv.Close)
	points := []dispatcher.HookType{dispatcher.UserMessage, dispatcher.SessionStart, dispatcher.PostLLMCall,
		dispatcher.PreToolUse, dispatcher.PostToolUse, dispatcher.AgentCompletion}
	for _, p := range points {
		e.ae.Hook(t, `{"hookName":"all-`+string(p)+`","hookType":"`+string(p)+`","dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"`+secret+`"}}`)
	}
	r := e.do(chat("c-points", []any{user("m1", "write my tasks")}), []string{"Authorization", "Bearer key-carol"})
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	seen := map[dispatcher.HookType]bool{}
	deadline := time.After(30 * time.Second) // observational events are delivered from the outbox
	for len(seen) < len(points) {
		select {
		case env := <-got:
			if env.PrincipalID == nil || *env.PrincipalID != 7 {
				t.Errorf("%s: principal %v", env.HookType, env.PrincipalID)
			}
			seen[env.HookType] = true
		case <-deadline:
			t.Fatalf("hook points seen: %v, want all of %v", seen, points)
		}
	}
}
