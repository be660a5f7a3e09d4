package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A policy's ask reaches a person in every dialect of the running daemon, even though the
// permission rules allow the tool (toolDefault allow): the ask appears with the policy's reason,
// is answered, and the tool runs only when approved.
func TestPolicyAskEndToEnd(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	var steps []string
	for _, name := range []string{"platform", "harness", "volo", "denied"} {
		steps = append(steps, fmt.Sprintf(`{"match":"/%s/","steps":[
			{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"%s.secret","content":"x"}}]},
			{"text":"finished"}]}`, name, name))
	}
	os.WriteFile(script, []byte(`{"scripts":[`+strings.Join(steps, ",")+`]}`), 0o600)
	workspaces := filepath.Join(dir, "ws")
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
model: {provider: scripted, script: %s}
agent: {toolDefault: allow, workspaces: %s}
`, filepath.Join(dir, "hookd.db"), script, workspaces))
	d := startDaemon(t, cfg)
	const reason = "secret files need a second pair of eyes"
	if st := d.call("POST", "/api/hooks", `{"hookName":"secrets ask","hookType":"pre_tool_use","dispatchType":"policy",
		"toolNameMatch":"workspace_write_file","policyConfig":{"rules":[{"name":"secret-files",
		"when":"args.path.glob('*.secret')","decision":"ask","reason":"'`+reason+`'"}]}}`, nil); st != 201 {
		t.Fatalf("policy hook: %d\n%s", st, d.log())
	}
	written := func(name string) bool { return fileUnder(workspaces, name+".secret") }
	post := func(path, body string) *http.Response { return d.postStream(t, path, body) }

	t.Run("platform PERMISSION_ASK", func(t *testing.T) {
		for _, approve := range []bool{true, false} {
			name := map[bool]string{true: "platform", false: "denied"}[approve]
			resp := post("/api/agent/run/stream", `{"sessionId":"s-`+name+`","userInput":"/`+name+`/"}`)
			requestID := resp.Header.Get("X-Request-Id")
			frames := readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
			var ask struct{ AskID, RuleDescription string }
			for _, f := range frames {
				if f.EventType == "PERMISSION_ASK" {
					json.Unmarshal(f.Data, &ask)
				}
			}
			if ask.AskID == "" || ask.RuleDescription != reason {
				t.Fatalf("no ask with the policy's reason: %+v", frames)
			}
			if written(name) {
				t.Fatal("the tool ran before the answer")
			}
			if st := d.call("POST", "/api/agent/permission/reply", fmt.Sprintf(`{"askId":%q,"approved":%v}`, ask.AskID, approve), nil); st != 200 {
				t.Fatalf("reply: %d", st)
			}
			r, _ := http.NewRequest("GET", d.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+frames[len(frames)-1].ID), nil)
			rs, err := (&http.Client{Timeout: 30 * time.Second}).Do(bearer(r))
			if err != nil || rs.StatusCode != 200 {
				t.Fatalf("resume: %v %v", err, rs)
			}
			after := readFrames(t, rs, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
			if last := after[len(after)-1]; last.EventType != "MESSAGE_COMPLETED" {
				t.Fatalf("after the answer: %+v", after)
			}
			if written(name) != approve {
				t.Fatalf("approved %v, file written %v", approve, written(name))
			}
		}
	})

	t.Run("harness REQUIRE_USER_CONFIRM", func(t *testing.T) {
		events := func(resp *http.Response, stop string) []map[string]any {
			return sseJSON(t, resp, func(ev map[string]any) bool { return ev["type"] == stop })
		}
		first := events(post("/harness/chat", `{"sessionId":"s-h","userId":"tester","input":"/harness/"}`), "AGENT_END")
		var callID string
		for _, ev := range first {
			if ev["type"] == "REQUIRE_USER_CONFIRM" {
				calls, _ := ev["toolCalls"].([]any)
				if len(calls) == 1 {
					callID, _ = calls[0].(map[string]any)["id"].(string)
				}
			}
		}
		if callID == "" || written("harness") {
			t.Fatalf("no confirmation asked (or the tool ran): %v", first)
		}
		second := events(post("/harness/chat", `{"sessionId":"s-h","userId":"tester","input":"",
			"confirmResults":[{"toolCallId":"`+callID+`","confirmed":true}]}`), "AGENT_END")
		types := []string{}
		for _, ev := range second {
			types = append(types, fmt.Sprint(ev["type"]))
		}
		if !strings.Contains(strings.Join(types, " "), "USER_CONFIRM_RESULT") || !written("harness") {
			t.Fatalf("after the confirmation: %v (written %v)", types, written("harness"))
		}
	})

	t.Run("volo TOOL_APPROVAL", func(t *testing.T) {
		frames := func(resp *http.Response, stop func(map[string]any) bool) []map[string]any {
			return sseJSON(t, resp, stop)
		}
		const base = "/api/agent/chat/volo-ai/"
		var turnID, callID, desc string
		first := frames(post(base+"s-v/intent", `{"sessionId":"s-v","userMessage":"write the volo file"}`), func(map[string]any) bool { return false })
		for _, ev := range first {
			if in, ok := ev["interaction"].(map[string]any); ok && in["interactionType"] == "TOOL_APPROVAL" {
				callID, _ = in["toolCallId"].(string)
				desc, _ = in["ruleDescription"].(string)
				tr, _ := ev["traceInfo"].(map[string]any)
				turnID, _ = tr["turnId"].(string)
			}
		}
		if callID == "" || desc != reason || written("volo") {
			t.Fatalf("no tool approval with the policy's reason (or the tool ran): %v", first)
		}
		if st := d.call("POST", base+"tool-approval/"+callID, `{"approved":true,"turnId":"`+turnID+`"}`, nil); st != 200 {
			t.Fatalf("tool-approval: %d", st)
		}
		frames(post(base+"resume?turnId="+turnID, ""), func(map[string]any) bool { return false })
		if !written("volo") {
			t.Fatal("approved, but the tool did not run")
		}
	})
}

// fileUnder reports whether a file of that name is anywhere under root (a session's workspace).
func fileUnder(root, name string) bool {
	found := false
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		found = found || (err == nil && e.Name() == name)
		return nil
	})
	return found
}

// postStream POSTs a JSON body to a streaming chat route and fails the test unless it answers 200.
func (d *daemon) postStream(t *testing.T, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(bearer(req))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return resp
}

// sseJSON reads a stream's data frames as JSON objects until stop says so or the stream ends.
func sseJSON(t *testing.T, resp *http.Response, stop func(map[string]any) bool) []map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var out []map[string]any
	scanSSE(t, resp.Body, func(_, _, data string) bool {
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) != nil {
			return false
		}
		out = append(out, ev)
		return stop(ev)
	})
	return out
}
