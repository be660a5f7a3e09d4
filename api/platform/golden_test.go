package platform_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/platform")

// platformScript drives every scenario; a run takes the script its input matches.
const platformScript = `{"scripts":[
 {"match":"hello","steps":[
   {"thinking":"用户在打招呼，简短回应","text":"你好！我是你的助手。","chunkSize":5,"usage":{"inputTokens":100,"outputTokens":20}}]},
 {"match":"tasks","steps":[
   {"thinking":"先写任务文件","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}},{"name":"workspace_read_file","arguments":{"path":"missing.txt"}}],"usage":{"inputTokens":520,"outputTokens":80,"reasoningTokens":12}},
   {"text":"已完成，任务清单已保存至 /workspace/tasks.md","chunkSize":10,"usage":{"inputTokens":1600,"outputTokens":330,"cachedTokens":512}}]},
 {"match":"ratelimit","steps":[{"error":"rate_limited","text":"限流过后的回答","usage":{"inputTokens":50,"outputTokens":10}}]},
 {"match":"fatal","steps":[{"error":"fatal","text":"never"}]},
 {"match":"write","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"approved"}}],"usage":{"inputTokens":200,"outputTokens":30}},
   {"text":"done","usage":{"inputTokens":300,"outputTokens":5}}]},
 {"match":"two","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}],"usage":{"inputTokens":200,"outputTokens":40}},
   {"text":"both handled","usage":{"inputTokens":300,"outputTokens":5}}]},
 {"match":"supp","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":800,"usage":{"inputTokens":100,"outputTokens":10}},
   {"text":"saw it","usage":{"inputTokens":150,"outputTokens":5}}]},
 {"match":"steps","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":800,"usage":{"inputTokens":100,"outputTokens":10}},
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":120,"outputTokens":10}},
   {"text":"finished","usage":{"inputTokens":140,"outputTokens":5}}]},
 {"match":"slow","steps":[{"text":"first","delayMs":5000},{"text":"never"}]},
 {"match":"budget","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}},
   {"text":"after budget","usage":{"inputTokens":100,"outputTokens":50}}]},
 {"match":"long","steps":[
   {"thinking":"分几步回答","text":"第一部分：这是一段会被分成很多小片的文字。","chunkSize":2,"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":40}},
   {"delayMs":700,"text":"第二部分：工具之后的回答，同样分片。","chunkSize":2,"usage":{"inputTokens":200,"outputTokens":40}}]},
 {"match":"restart","steps":[
   {"text":"重启之前","chunkSize":2,"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":20}},
   {"delayMs":1500,"text":"重启之后继续","chunkSize":2,"usage":{"inputTokens":200,"outputTokens":20}}]},
 {"match":"report","steps":[
   {"toolCalls":[{"name":"render_report","arguments":{"type":"财务分析"}}],"usage":{"inputTokens":100,"outputTokens":20}},
   {"text":"报告任务超时了","usage":{"inputTokens":150,"outputTokens":10}}]},
 {"match":"send file","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"q3.csv","content":"month,revenue\n7,100\n"}}],"usage":{"inputTokens":100,"outputTokens":20}},
   {"toolCalls":[{"name":"send_attachment","arguments":{"path":"q3.csv"}}],"usage":{"inputTokens":150,"outputTokens":10}},
   {"text":"文件已发送","usage":{"inputTokens":200,"outputTokens":5}}]},
 {"match":"hinted","steps":[{"text":"收到","delayMs":800,"usage":{"inputTokens":100,"outputTokens":5}}]},
 {"match":"delegate","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"researcher","task":"research the topic"}}],"usage":{"inputTokens":100,"outputTokens":20}},
   {"text":"研究员说：找到了三个来源","usage":{"inputTokens":200,"outputTokens":20}}]},
 {"match":"research the topic","steps":[{"thinking":"looking","text":"found three sources","usage":{"inputTokens":50,"outputTokens":10}}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

// scenario is one run started with POST /api/agent/run/stream, whose whole stream is compared
// with testdata/platform/<name>.sse. act sees every frame as it arrives and may call the control
// routes; the stream must go on after them on the same connection.
type scenario struct {
	name  string
	input string
	cfg   agent.Config
	act   func(t *testing.T, e *tenv, requestID string, f frame)
	check func(t *testing.T, e *tenv, requestID string, frames []frame)
}

func scenarios() []scenario {
	askCfg := agent.Config{DefaultBehavior: agent.BehaviorAsk, AskTimeout: 10 * time.Second, SweepEvery: 25 * time.Millisecond}
	// One ask is denied at once, the other is left to time out.
	timeoutCfg := agent.Config{DefaultBehavior: agent.BehaviorAsk, AskTimeout: 400 * time.Millisecond, SweepEvery: 25 * time.Millisecond}
	return []scenario{
		{name: "text_and_reasoning", input: "hello"},
		{name: "tools_and_attachment", input: "tasks", check: checkAttachments},
		{name: "attachment_sent", input: "send file", check: checkSent},
		{name: "agent_status", input: "ratelimit"},
		{name: "failed", input: "fatal"},
		{name: "permission_approve", input: "write", cfg: askCfg,
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType != platform.MessageSuspended {
					return
				}
				// While the run waits, its session is busy.
				sid := e.sessionOf(requestID)
				e.expect(http.StatusConflict, alice, "POST", "/api/agent/run/stream",
					map[string]any{"sessionId": sid, "userInput": "write"}, requestID)
				askID := f.data()["suspendReason"].(map[string]any)["askId"].(string)
				// Another user's reply finds no such ask; a reply without a decision is refused.
				e.expect(http.StatusNotFound, bob, "POST", "/api/agent/permission/reply", map[string]any{"askId": askID, "approved": true}, "askId")
				e.expect(http.StatusBadRequest, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": askID}, "approved")
				w := e.expect(http.StatusOK, alice, "POST", "/api/agent/permission/reply",
					map[string]any{"askId": askID, "approved": true, "remember": true}, "success")
				if !strings.Contains(string(w.Data), `"remembered":true`) {
					t.Fatalf("reply: %s", w.Data)
				}
				e.expect(http.StatusConflict, alice, "POST", "/api/agent/permission/reply", map[string]any{"askId": askID, "approved": false}, "")
			},
			check: checkRemembered},
		{name: "permission_deny_and_timeout", input: "two", cfg: timeoutCfg,
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType == platform.PermissionAsk && f.str("toolCallId") == "call_0_0_"+callTag(f) {
					e.expect(http.StatusOK, alice, "POST", "/api/agent/permission/reply",
						map[string]any{"askId": f.str("askId"), "approved": false, "reason": "不需要"}, "success")
				}
			}},
		{name: "supplementary_input", input: "supp",
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType == platform.SessionCreated {
					agenttest.WaitModelCall(t, e.rt, requestID, 1)
					e.expect(http.StatusBadRequest, alice, "POST", "/api/agent/run/"+requestID+"/input", map[string]any{}, "content")
					e.expect(http.StatusNotFound, bob, "POST", "/api/agent/run/"+requestID+"/input", map[string]any{"content": "x"}, "requestId")
					e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/input", map[string]any{"content": "顺便再加一个夜间模式"}, "success")
				}
			},
			check: func(t *testing.T, e *tenv, requestID string, _ []frame) {
				e.expect(http.StatusConflict, alice, "POST", "/api/agent/run/"+requestID+"/input", map[string]any{"content": "late"}, "")
			}},
		{name: "manual_suspend_resume", input: "steps",
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				switch f.EventType {
				case platform.SessionCreated:
					agenttest.WaitModelCall(t, e.rt, requestID, 1) // the pause comes after this step
					e.expect(http.StatusConflict, alice, "POST", "/api/agent/run/"+requestID+"/resume", nil, "")
					e.expect(http.StatusNotFound, bob, "POST", "/api/agent/run/"+requestID+"/suspend", nil, "requestId")
					e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/suspend", nil, "success")
				case platform.MessageSuspended:
					e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/resume", nil, "success")
				}
			}},
		{name: "token_budget", input: "budget", cfg: agent.Config{TokenBudget: 120},
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType == platform.MessageSuspended {
					e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/resume", nil, "success")
				}
			}},
		{name: "async_tool", input: "report", cfg: agent.Config{SweepEvery: 25 * time.Millisecond}},
		{name: "hint", input: "hinted",
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType == platform.SessionCreated {
					agenttest.WaitModelCall(t, e.rt, requestID, 1)
					if _, err := e.rt.Hint(t.Context(), "alice", requestID, "alice", "alice 加入了会话"); err != nil {
						t.Fatal(err)
					}
				}
			}},
		// The subagent's own events (forwarded with a source) stay out of the stream: its end
		// does not end the stream; the spawn call's result carries its answer.
		{name: "subagent", input: "delegate"},
		{name: "stop", input: "slow",
			act: func(t *testing.T, e *tenv, requestID string, f frame) {
				if f.EventType == platform.SessionCreated {
					agenttest.WaitModelCall(t, e.rt, requestID, 1) // stopped in the middle of the model call
					e.expect(http.StatusNotFound, bob, "POST", "/api/agent/run/"+requestID+"/stop", nil, "requestId")
					e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/stop", nil, "success")
				}
			},
			check: func(t *testing.T, e *tenv, requestID string, _ []frame) {
				for _, op := range []string{"stop", "suspend", "resume"} {
					e.eventually(http.StatusConflict, alice, "POST", "/api/agent/run/"+requestID+"/"+op)
				}
			}},
	}
}

// callTag is the scripted model's per-run suffix of a tool call id ("call_<step>_<i>_<tag>").
func callTag(f frame) string {
	id := f.str("toolCallId")
	return id[strings.LastIndexByte(id, '_')+1:]
}

func TestGoldenTranscripts(t *testing.T) {
	schema := loadSchema(t)
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		for _, sc := range scenarios() {
			t.Run(sc.name, func(t *testing.T) {
				// A database of its own per scenario keeps the numeric ids of the transcript fixed.
				own := storagetest.SQLite(t)
				if db.Dialect() == storage.Postgres {
					own = storagetest.Postgres(t)
				}
				e := newTEnv(t, own, platformScript, sc.cfg, time.Hour)
				s := e.startRun(alice, map[string]any{"userInput": sc.input})
				requestID := s.Header.Get("X-Request-Id")
				if requestID == "" {
					t.Fatal("no X-Request-Id header")
				}
				frames := s.rest(func(f frame) {
					if sc.act != nil {
						sc.act(t, e, requestID, f)
					}
				})
				checkStream(t, schema, requestID, frames)
				// A replay of the finished run is the same stream, frame for frame, but for its
				// AGENT_STATUS frames: "任务终态后不可见".
				var shown []frame
				for _, f := range frames {
					if f.EventType != platform.AgentStatus {
						shown = append(shown, f)
					}
				}
				sameFrames(t, "replay", e.replay(alice, requestID, "").rest(nil), shown)
				if sc.check != nil {
					sc.check(t, e, requestID, frames)
				}
				n := newNormaliser(e)
				n.name(requestID, "<requestId>")
				golden(t, sc.name, n.transcript(frames), own.Dialect() == storage.SQLite)
			})
		}
	})
}

// checkStream checks what every stream must be: valid frames, SESSION_CREATED first with the
// request id, ids on every frame and increasing, one terminal frame, last.
func checkStream(t *testing.T, schema *frameSchema, requestID string, frames []frame) {
	t.Helper()
	// A heartbeat may come before the first event when the run is slow to start; it carries no
	// id, so the first event is still the stream's first frame as far as a client is concerned.
	first := withoutHeartbeats(frames)
	if len(first) == 0 || first[0].EventType != platform.SessionCreated || first[0].str("requestId") != requestID {
		t.Fatalf("first frame: %s", types(frames))
	}
	prev := platform.Cursor{}
	for i, f := range frames {
		if err := schema.validate(f.Data, false); err != nil {
			t.Fatalf("frame %d: %v\n%s", i, err, f.Data)
		}
		if f.EventType == platform.Heartbeat {
			continue
		}
		cur, err := platform.ParseCursor(f.LastEventID)
		if !f.HasID || err != nil || (i > 0 && !(cur.Seq > prev.Seq || (cur.Seq == prev.Seq && cur.K > prev.K))) {
			t.Fatalf("frame %d id %q after %+v", i, f.LastEventID, prev)
		}
		prev = cur
		if last := i == len(frames)-1; (f.EventType == platform.MessageCompleted || f.EventType == platform.MessageFailed) != last {
			t.Fatalf("terminal frame not last: %s", types(frames))
		}
	}
}

// eventually expects status from a bodyless call within a second. The runtime forgets an ended
// run a moment after its last event: until then stop and suspend still find it live (and do
// nothing).
func (e *tenv) eventually(status int, key, method, path string) {
	e.t.Helper()
	var w wrapper
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w = e.call(key, method, path, nil); w.HTTPStatusCode == status {
			return
		}
	}
	e.t.Fatalf("%s %s: %d %q, want %d", method, path, w.HTTPStatusCode, w.Message, status)
}

func (e *tenv) sessionOf(requestID string) int64 {
	e.t.Helper()
	run, err := e.rt.Run(e.t.Context(), "alice", requestID)
	if err != nil {
		e.t.Fatal(err)
	}
	return run.SessionID
}

// checkRemembered: the approval with remember=true lets the next run of the session write the
// same file without asking; another session still asks.
func checkRemembered(t *testing.T, e *tenv, requestID string, _ []frame) {
	sid := e.sessionOf(requestID)
	dir, _ := e.ws.Dir(sid)
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "approved" {
		t.Fatalf("the approved call wrote %q (%v)", b, err)
	}
	again := e.startRun(alice, map[string]any{"sessionId": sid, "userInput": "write"}).rest(nil)
	if strings.Contains(types(again), platform.PermissionAsk) || again[len(again)-1].EventType != platform.MessageCompleted ||
		again[0].num("sessionId") != sid {
		t.Fatalf("the remembered rule did not apply: %s", types(again))
	}
	other := e.startRun(alice, map[string]any{"sessionId": "another-session", "userInput": "write"})
	fs := other.until(platform.MessageSuspended, nil)
	if fs[0].num("sessionId") == sid || !strings.Contains(types(fs), platform.PermissionAsk) {
		t.Fatalf("the rule leaked into another session: %s", types(fs))
	}
	e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+fs[0].str("requestId")+"/stop", nil, "success")
	if end := other.rest(nil); end[len(end)-1].EventType != platform.MessageFailed || end[len(end)-1].str("errorCode") != agent.CodeInterrupted {
		t.Fatalf("stopping a suspended run: %s", types(end))
	}
}

// normaliser replaces what changes from run to run (times, random ids, temp paths) with
// placeholders; numeric ids stay, as every scenario has a database of its own.
type normaliser struct {
	e     *tenv
	names map[string]string
	count map[string]int
}

func newNormaliser(e *tenv) *normaliser {
	return &normaliser{e: e, names: map[string]string{}, count: map[string]int{}}
}

func (n *normaliser) name(value, placeholder string) { n.names[value] = placeholder }

var (
	tsRE      = regexp.MustCompile(`"timestamp":"[^"]*"`)
	askRE     = regexp.MustCompile(`ask_[0-9a-f]{20}`)
	inputRE   = regexp.MustCompile(`input_[0-9a-f]{16}`)
	sessKeyRE = regexp.MustCompile(`plat_[0-9a-f]{24}`)
	msRE      = regexp.MustCompile(`"submittedAtMs":[0-9]+`)
)

func (n *normaliser) apply(s string) string {
	s = tsRE.ReplaceAllString(s, `"timestamp":"<ts>"`)
	s = msRE.ReplaceAllString(s, `"submittedAtMs":"<ms>"`)
	for v, p := range n.names {
		s = strings.ReplaceAll(s, v, p)
	}
	for _, r := range []struct {
		re   *regexp.Regexp
		kind string
	}{{askRE, "ask"}, {inputRE, "input"}, {sessKeyRE, "session-key"}} {
		s = r.re.ReplaceAllStringFunc(s, func(v string) string {
			if p, ok := n.names[v]; ok {
				return p
			}
			n.count[r.kind]++
			p := fmt.Sprintf("<%s-%d>", r.kind, n.count[r.kind])
			n.names[v] = p
			return p
		})
	}
	return s
}

// transcript writes frames back in the wire format the server uses: `id:` when the frame has
// one, the envelope on one `data:` line, a blank line.
func (n *normaliser) transcript(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.HasID {
			b.WriteString("id: " + f.LastEventID + "\n")
		}
		b.WriteString("data: " + n.apply(f.Data) + "\n\n")
	}
	return b.String()
}

// golden compares got with testdata/platform/<name>.sse; -update rewrites the file (from the
// SQLite run only, so both databases are held to one transcript).
func golden(t *testing.T, name, got string, writer bool) {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "platform", name+".sse")
	if *update && writer {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < len(wl) || i < len(gl); i++ {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("%s differs at line %d:\nwant %s\n got %s", path, i+1, w, g)
			}
		}
	}
}

// ---- attachments ----

// checkSent: send_attachment gives ATTACHMENT_SENT for the attachment write_file made, whose
// file downloads as it was written.
func checkSent(t *testing.T, e *tenv, requestID string, frames []frame) {
	var changed, sent frame
	for _, f := range frames {
		switch f.EventType {
		case platform.AttachmentChanged:
			changed = f
		case platform.AttachmentSent:
			sent = f
		}
	}
	if changed.Env == nil || sent.Env == nil {
		t.Fatalf("attachments: %s", types(frames))
	}
	if sent.str("fileName") != "q3.csv" || sent.str("contentType") != "text/csv; charset=utf-8" || sent.num("attachmentId") != changed.num("attachmentId") ||
		sent.str("changeType") != "UPDATED" || sent.num("fileSize") != int64(len("month,revenue\n7,100\n")) {
		t.Fatalf("sent %s", sent.Data)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/agent/attachment/download?path="+url.QueryEscape(sent.str("virtualPath")), nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != "month,revenue\n7,100\n" {
		t.Fatalf("download: %d %q", resp.StatusCode, b)
	}
}

func checkAttachments(t *testing.T, e *tenv, requestID string, frames []frame) {
	var att frame
	for _, f := range frames {
		if f.EventType == platform.AttachmentChanged {
			att = f
		}
	}
	if att.Env == nil {
		t.Fatalf("no attachment: %s", types(frames))
	}
	sid, mid, vpath := att.num("sessionId"), att.num("messageId"), att.str("virtualPath")
	if vpath != "/sessions/"+strconv.FormatInt(sid, 10)+"/workspace/tasks.md" || mid != frames[0].num("assistantMessageId") {
		t.Fatalf("attachment %s", att.Data)
	}
	// The list by message.
	q := fmt.Sprintf("/api/agent/attachment/getByMessage?messageId=%d&sessionId=%d", mid, sid)
	w := e.expect(http.StatusOK, alice, "GET", q, nil, "success")
	var list []map[string]any
	json.Unmarshal(w.Data, &list)
	if len(list) != 1 || list[0]["virtualPath"] != vpath || list[0]["fileName"] != "tasks.md" || list[0]["attachmentId"] != att.data()["attachmentId"] {
		t.Fatalf("getByMessage: %s", w.Data)
	}
	e.expect(http.StatusNotFound, bob, "GET", q, nil, "messageId")
	e.expect(http.StatusOK, alice, "GET", fmt.Sprintf("/api/agent/attachment/getByMessage?messageId=%d&sessionId=%d", frames[0].num("userMessageId"), sid), nil, "success")
	e.expect(http.StatusNotFound, alice, "GET", fmt.Sprintf("/api/agent/attachment/getByMessage?messageId=%d&sessionId=%d", mid+100, sid), nil, "messageId")
	e.expect(http.StatusBadRequest, alice, "GET", "/api/agent/attachment/getByMessage?messageId=x", nil, "messageId")
	e.expect(http.StatusUnauthorized, "", "GET", q, nil, "API key")

	// The file.
	get := func(key, p string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/agent/attachment/download?path="+p, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, b.String()
	}
	resp, body := get(alice, vpath)
	if resp.StatusCode != 200 || body != "- [ ] a" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/markdown") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "tasks.md") {
		t.Fatalf("download: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	for _, c := range []struct {
		key, path string
		status    int
	}{
		{bob, vpath, 404}, // another user's
		{alice, fmt.Sprintf("/sessions/%d/workspace/../../../etc/passwd", sid), 400},
		{alice, fmt.Sprintf("/sessions/%d/workspace/%%2e%%2e/secret", sid), 400},
		{alice, "/etc/passwd", 400},
		{alice, "", 400},
		{alice, fmt.Sprintf("/sessions/%d/workspace/other.txt", sid), 404}, // not an attachment
		{alice, fmt.Sprintf("/sessions/%d/workspace/tasks.md", sid+1000), 404},
	} {
		if resp, body := get(c.key, c.path); resp.StatusCode != c.status || !strings.Contains(body, `"success":false`) {
			t.Fatalf("download %q as %s: %d %s", c.path, c.key, resp.StatusCode, body)
		}
	}
	// A link put in the attachment's place that leads out of the workspace is not followed.
	dir, _ := e.ws.Dir(sid)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o600)
	os.Remove(filepath.Join(dir, "tasks.md"))
	if err := os.Symlink(outside, filepath.Join(dir, "tasks.md")); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(alice, vpath); resp.StatusCode != 404 || strings.Contains(body, "secret") {
		t.Fatalf("download through a link: %d %s", resp.StatusCode, body)
	}
}
