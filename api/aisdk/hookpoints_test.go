package aisdk_test

import (
	"testing"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/dialecttest"
)

// Every hook point of a chat turn fires for this dialect as for the others, with the API key's
// principal on the envelope.
func TestEveryHookPointFires(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{}, wire.APIKey{Key: "key-carol", UserID: "carol", PrincipalID: 7})
	dialecttest.EveryHookPoint(t, e.Env, func() dialecttest.Response {
		return e.do(chat("c-points", []any{user("m1", "write my tasks")}), []string{"Authorization", "Bearer key-carol"})
	})
}
