package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// TestAskSurvivesCrash: a daemon killed after a run saved the step's calls that wait for a person
// and before it stored their asks, or before it announced them, restarts with each run paused on
// its ask, which is stored and announced once: PERMISSION_ASK on the platform stream, TOOL_APPROVAL on VOLO's replay. The asks can
// be answered, and each tool runs once approved. Before, such a run stayed paused on an ask that
// did not exist, which nobody could answer or resume, and VOLO offered a RESUME whose "continue"
// approved the call the person was never shown.
func TestAskSurvivesCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real daemon")
	}
	// asks: killed before the asks are stored; asksStored: after, before they are announced.
	for _, hold := range []string{"asks", "asksStored"} {
		t.Run("sqlite/"+hold, func(t *testing.T) {
			dir := t.TempDir()
			askCrashTest(t, dir, "sqlite:"+filepath.Join(dir, "hookd.db"), hold)
		})
		t.Run("postgres/"+hold, func(t *testing.T) {
			askCrashTest(t, t.TempDir(), storagetest.PostgresURL(t), hold)
		})
	}
}

func askCrashTest(t *testing.T, dir, database, hold string) {
	script := filepath.Join(dir, "script.json")
	var scripts []string
	for _, name := range []string{"platform", "volo"} {
		scripts = append(scripts, fmt.Sprintf(`{"match":"/%s/","steps":[
			{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"%s.txt","content":"x"}}]},
			{"text":"written"}]}`, name, name))
	}
	os.WriteFile(script, []byte(`{"scripts":[`+strings.Join(scripts, ",")+`]}`), 0o600)
	workspaces := filepath.Join(dir, "ws")
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
agent: {toolDefault: ask, workspaces: %s, runLease: 5s}
`, database, testMasterKey, script, workspaces))
	written := func(name string) bool { return fileUnder(workspaces, name+".txt") }
	const volo = "/api/agent/chat/volo-ai/"

	// Both runs stop in AddAsks, their calls checkpointed as asking and their asks not stored.
	d := startBinary(t, heldBinary(t), cfg, "HOOKD_TEST_HOLD_COMMIT="+hold)
	resp := d.postStream(t, "/api/agent/run/stream", `{"sessionId":"s-p","userInput":"/platform/"}`)
	requestID := resp.Header.Get("X-Request-Id")
	resp.Body.Close()
	d.waitLog(`"msg":"commit held"`)
	var turnID string
	sseJSON(t, d.postStream(t, volo+"s-v/intent", `{"sessionId":"s-v","userMessage":"write the volo file"}`), func(ev map[string]any) bool {
		tr, _ := ev["traceInfo"].(map[string]any)
		turnID, _ = tr["turnId"].(string)
		return turnID != ""
	})
	for deadline := time.Now().Add(time.Minute); strings.Count(d.log(), `"msg":"commit held"`) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the VOLO run did not reach its ask:\n%s", d.log())
		}
	}
	d.kill()

	d2 := startDaemon(t, cfg)
	t.Run("platform", func(t *testing.T) {
		r, _ := http.NewRequest("GET", d2.url("/api/agent/run/stream?requestId="+requestID), nil)
		rs, err := (&http.Client{Timeout: 30 * time.Second}).Do(bearer(r))
		if err != nil || rs.StatusCode != 200 {
			t.Fatalf("reconnect: %v %v", err, rs)
		}
		frames := readFrames(t, rs, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
		var ask struct{ AskID, ToolName string }
		var pause struct {
			SuspendReason struct {
				Type  string
				AskID string
				Step  int
			}
		}
		asks := 0
		for _, f := range frames {
			switch f.EventType {
			case "PERMISSION_ASK":
				asks++
				json.Unmarshal(f.Data, &ask)
			case "MESSAGE_SUSPENDED":
				json.Unmarshal(f.Data, &pause)
			}
		}
		if asks != 1 || ask.AskID == "" || ask.ToolName != "workspace_write_file" || pause.SuspendReason.Type != "PERMISSION_ASK" || pause.SuspendReason.AskID != ask.AskID || pause.SuspendReason.Step != 1 {
			t.Fatalf("the recovered run does not pause on an announced ask: ask %+v, pause %+v\n%+v", ask, pause, frames)
		}
		if st := d2.call("POST", "/api/agent/permission/reply", fmt.Sprintf(`{"askId":%q,"approved":true}`, ask.AskID), nil); st != 200 {
			t.Fatalf("reply: %d", st)
		}
		r, _ = http.NewRequest("GET", d2.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+frames[len(frames)-1].ID), nil)
		rs, err = (&http.Client{Timeout: 30 * time.Second}).Do(bearer(r))
		if err != nil || rs.StatusCode != 200 {
			t.Fatalf("follow: %v %v", err, rs)
		}
		after := readFrames(t, rs, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
		if last := after[len(after)-1]; last.EventType != "MESSAGE_COMPLETED" || !written("platform") {
			t.Fatalf("after the approval (written %v): %+v", written("platform"), after)
		}
	})
	t.Run("volo", func(t *testing.T) {
		var callID string
		var types []string
		// A reconnect from the turn's start: on PostgreSQL the run may not be recovered yet (its
		// lease runs out first), and the stream then waits for its pause.
		for _, ev := range sseJSON(t, d2.postStream(t, volo+"resume?turnId="+turnID+"&afterSeq=0", ""), func(map[string]any) bool { return false }) {
			in, _ := ev["interaction"].(map[string]any)
			types = append(types, fmt.Sprint(ev["type"], "/", in["interactionType"]))
			if in["interactionType"] == "TOOL_APPROVAL" && in["toolName"] == "workspace_write_file" {
				callID, _ = in["toolCallId"].(string)
			}
			if in["interactionType"] == "RESUME" {
				t.Errorf("a RESUME is offered for a turn that waits for an approval: %v", ev)
			}
		}
		if callID == "" || written("volo") {
			t.Fatalf("the replay shows no tool approval (or the tool ran): %v\n%s", types, d2.log())
		}
		if st := d2.call("POST", volo+"tool-approval/"+callID, `{"approved":true,"turnId":"`+turnID+`"}`, nil); st != 200 {
			t.Fatalf("tool-approval: %d", st)
		}
		sseJSON(t, d2.postStream(t, volo+"resume?turnId="+turnID, ""), func(map[string]any) bool { return false })
		if !written("volo") {
			t.Fatal("approved, but the tool did not run")
		}
	})
}
