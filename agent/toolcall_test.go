package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// modifyHook rewrites every write's content, as a policy in the admin API's JSON.
const modifyHook = `{"hookName":"write-mod","hookType":"pre_tool_use","priority":-1,"toolNameMatch":"workspace_write_file",
	"dispatchType":"policy","policyConfig":{"rules":[{"name":"m","when":"true","decision":"modify",
	"modifiedValue":"args.with({'content': 'MODIFIED'})"}]}}`

// A pre_tool_use hook's modify is part of the call's final arguments: tool.call.ended carries
// them, as every dialect's "final arguments" frame (platform TOOL_START, VOLO's final
// TOOL_DELTA, AI SDK's tool-input-available) shows them; the tool runs with them; the argument
// deltas stay what the model wrote. An ask later in the chain asks about the same arguments.
func TestToolCallEndedCarriesHookModifiedArguments(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, hitlScript, Config{})
		e.hook(modifyHook)
		info, evs := e.run(StartRequest{UserID: "alice", Input: "write"})
		var streamed strings.Builder
		for _, ev := range evs {
			if ev.Kind == KindToolCallDelta {
				streamed.WriteString(ev.Tool.ArgsDelta)
			}
		}
		if got := streamed.String(); !strings.Contains(got, `"original"`) {
			t.Fatalf("deltas %q: want the model's own arguments", got)
		}
		ended := find(evs, KindToolCallEnded).Tool
		if !strings.Contains(ended.Arguments, `"MODIFIED"`) || strings.Contains(ended.Arguments, "original") {
			t.Fatalf("tool.call.ended arguments %s: want the hook's", ended.Arguments)
		}
		if res := find(evs, KindToolResultEnded).Tool; res.State != ToolSuccess || res.Arguments != ended.Arguments {
			t.Fatalf("result %+v: want the arguments of tool.call.ended", res)
		}
		dir, _ := e.rt.ws.Dir(info.SessionID)
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "MODIFIED" {
			t.Fatalf("file holds %q", b)
		}

		e.hook(`{"hookName":"write-ask","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file",
			"dispatchType":"policy","policyConfig":{"rules":[{"name":"a","when":"true","decision":"ask","reason":"'a person approves writes'"}]}}`)
		info = e.start("alice", "s-ask", "write")
		evs = e.until(info.RequestID, 0, KindSuspended)
		ended = find(evs, KindToolCallEnded).Tool
		ask := find(evs, KindAsk)
		if ask == nil || len(ask.Ask.Calls) != 1 {
			t.Fatalf("no ask: %s", kinds(evs))
		}
		if !strings.Contains(ended.Arguments, `"MODIFIED"`) || ask.Ask.Calls[0].Arguments != ended.Arguments {
			t.Fatalf("tool.call.ended %s, ask %s: want both the hook's arguments", ended.Arguments, ask.Ask.Calls[0].Arguments)
		}
		isStatus(t, e.rt, "alice", info.RequestID, storage.RunSuspended)
		if err := e.rt.Stop(context.Background(), "alice", info.RequestID); err != nil {
			t.Fatal(err)
		}
		e.until(info.RequestID, 0, KindRunEnded)
	})
}
