package main

import (
	"context"
	"testing"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/model/modeltest"
	"github.com/hookd/hookd/config"
)

// model.streamRecoveries reaches the OpenAI-compatible provider: 0 is none (not the provider's
// default), n goes on after n breaks of one call's stream.
func TestStreamRecoveriesConfig(t *testing.T) {
	for _, c := range []struct {
		recoveries int
		drops      int64
		text       string // what streamed: all of it, or up to the break that ended the call
		ok         bool
	}{{0, 1, "a,", false}, {1, 2, "a,b,", false}, {2, 2, "a,b,c", true}} {
		drops := modeltest.NewDropping(t, "a,", "b,", "c")
		m, err := newModel(config.Model{Provider: "openai", BaseURL: drops.URL, Name: "m", StreamRecoveries: c.recoveries})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := m.Stream(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, func(model.Chunk) {})
		if resp.Text != c.text || drops.Drops() != c.drops || (err == nil) != c.ok {
			t.Errorf("streamRecoveries %d: text %q, %d drops, err %v", c.recoveries, resp.Text, drops.Drops(), err)
		}
	}
}
