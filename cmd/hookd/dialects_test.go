package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage/storagetest"
	goldenfile "github.com/hookd/hookd/test/golden"
)

// The proof that every event type of each chat dialect's document has a producer: the real
// hookd binary, real TCP, real webhook receivers, and scenarios of the scripted model. Each test
// runs its dialect's scenarios, golden-checks the sequence of event types of every scenario
// (testdata/dialects/<dialect>.json) and asserts that the types seen are exactly its document's
// list. No event is fed to a mapper.

// dialectScript drives the scenarios of all three dialects; a run takes the script its input
// matches.
const dialectScript = `{"scripts":[
 {"match":"/tasks/","steps":[
   {"thinking":"先读取任务源文件，再生成 markdown","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":520,"outputTokens":80}},
   {"text":"已完成，任务清单已保存至 /workspace/tasks.md","chunkSize":8,"usage":{"inputTokens":1600,"outputTokens":330}}]},
 {"match":"/send report/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"report.md","content":"# 报告\n"}}]},
   {"toolCalls":[{"name":"send_attachment","arguments":{"path":"report.md"}}]},
   {"text":"报告已发送"}]},
 {"match":"/ask me/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"ask.txt","content":"x"}}]},
   {"text":"好的"}]},
 {"match":"/external pick/","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"picked"}]},
 {"match":"/loop/","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]},
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]}]},
 {"match":"/slow steps/","steps":[
   {"toolCalls":[{"name":"workspace_read_file","arguments":{"path":"missing.txt"}}],"delayMs":2500},
   {"text":"finished"}]},
 {"match":"/delegate/","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"researcher","task":"research the topic","expose_to_user":true,"label":"研究助手"}}]},
   {"text":"the researcher says it is done"}]},
 {"match":"/research the topic/","steps":[{"thinking":"looking","text":"found three sources"}]},
 {"match":"/fetch it/","steps":[
   {"toolCalls":[{"name":"http_request","arguments":{"method":"GET","url":"FETCH_URL/page"}}]},
   {"toolCalls":[{"name":"http_request","arguments":{"method":"GET","url":"FETCH_URL/secret"}}]},
   {"text":"fetched"}]},
 {"match":"/search it/","steps":[
   {"toolCalls":[{"name":"web_search","arguments":{"query":"季度报告","limit":2}}]},
   {"text":"找到两条结果"}]},
 {"match":"/compact me/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"big.txt","content":"BIG_CONTENT"}}]},
   {"toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"用户要求写入 big.txt，已写入并列出工作区。"},
   {"text":"压缩之后的回答"}]},
 {"match":"/ratelimit/","steps":[{"error":"rate_limited","text":"限流过后的回答"}]},
 {"match":"/netretry/","steps":[{"error":"network","text":"重连之后的回答"}]},
 {"match":"/emptyretry/","steps":[{"error":"empty","text":"重试之后的回答"}]},
 {"match":"/fatal/","steps":[{"error":"fatal","text":"never"}]},
 {"match":"*","steps":[{"text":"你好"}]}
]}`

// dialectDaemon is a hookd with the scenarios' script, a policy receiver on pre_tool_use and a
// web page the http_request tool may fetch.
type dialectDaemon struct {
	*daemon
	dir string
}

// policyAnswer is the receiver's answer to a pre_tool_use event: a person is asked about
// ask.txt; listing the workspace comes with a hint and a team_updated event; the secret page is
// denied with an auth_required tool event; everything else is allowed.
func policyAnswer(env dispatcher.Envelope) string {
	var c struct {
		ToolName  string          `json:"toolName"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(env.Context, &c)
	switch {
	case strings.Contains(string(c.Arguments), "ask.txt"):
		return `{"decision":"ask","reason":"写 ask.txt 需要确认"}`
	case c.ToolName == "workspace_list_files":
		return `{"decision":"allow","hint":"alice 加入了会话，可以开始协作。",
			"events":[{"name":"team_updated","value":{"action":"MEMBER_ADDED","member":"alice","teamId":"team-007"}}]}`
	case strings.Contains(string(c.Arguments), "/secret"):
		return `{"decision":"deny","reason":"需要授权",
			"toolEvent":{"category":"auth_required","payload":{"authUrl":"https://auth.example.com/approve"},"userMessage":"请先授权"}}`
	}
	return `{"decision":"allow"}`
}

// eachDatabase runs test on a SQLite file and on a fresh PostgreSQL schema (skipped without
// HOOKD_TEST_POSTGRES_DSN); database is the daemon's `database` setting, "" for the SQLite file.
func eachDatabase(t *testing.T, test func(t *testing.T, database string)) {
	t.Run("sqlite", func(t *testing.T) { test(t, "") })
	t.Run("postgres", func(t *testing.T) { test(t, storagetest.PostgresURL(t)) })
}

func startDialectDaemon(t *testing.T, database, modelCfg string) *dialectDaemon {
	t.Helper()
	dir := t.TempDir()
	if database == "" {
		database = "sqlite:" + filepath.Join(dir, "hookd.db")
	}
	const secret = "whsec-dialects"
	policy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, policyAnswer(env))
	}))
	t.Cleanup(policy.Close)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/search" { // a SearXNG-style search API, the web_search tool's backend
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"query":%q,"results":[{"title":"季度报告","url":"http://%s/page","content":"收入 100","engine":"x"},`+
				`{"title":"年度报告","url":"http://%s/year","content":"收入 400"},{"title":"更多","url":"http://%s/more","content":""}]}`,
				r.URL.Query().Get("q"), r.Host, r.Host, r.Host)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<html><head><title>季度报告</title></head><body>收入 100</body></html>")
	}))
	t.Cleanup(web.Close)
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(strings.NewReplacer("FETCH_URL", web.URL,
		"BIG_CONTENT", strings.Repeat("季度数据", 1200)).Replace(dialectScript)), 0o600); err != nil {
		t.Fatal(err)
	}
	if modelCfg == "" {
		modelCfg = "{provider: scripted, script: " + script + "}"
	}
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: "+database+"\nmasterKey: "+testMasterKey+"\n"+
		"auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}\n"+
		"webhooks: {allowPrivateNetworks: true}\nmodel: "+modelCfg+"\n"+
		"agent: {maxIters: 3, toolDefault: allow, contextTokens: 3000, webSearch: {url: "+web.URL+"/search}}\nsse: {heartbeat: 1s}\n")
	d := &dialectDaemon{daemon: startDaemon(t, cfg), dir: dir}
	hook := `{"hookName":"policy","hookType":"pre_tool_use","dispatchConfig":{"url":"` + policy.URL + `","signingSecret":"` + secret + `","failureMode":"DENY"}}`
	if code := d.call("POST", "/api/hooks", hook, nil); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("register the policy hook: %d", code)
	}
	return d
}

// sse is one event of a stream: its SSE event name and id (when the dialect sends them) and its
// data.
type sse struct {
	Event, ID string
	Data      map[string]any
	Raw       string
}

// stream sends a chat request and hands each event to on (with the response's headers) as it
// arrives, until the stream ends or on says stop. It returns the status and the events.
func (d *dialectDaemon) stream(method, path, body string, on func(ev sse, h http.Header) (stop bool)) (int, []sse) {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	bearer(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out []sse
	scanSSE(d.t, resp.Body, func(event, id, data string) bool {
		ev := sse{Event: event, ID: id, Raw: data}
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&ev.Data); err != nil {
			d.t.Fatalf("%s %s: event data %v: %s", method, path, err, data)
		}
		out = append(out, ev)
		return on != nil && on(ev, resp.Header)
	})
	return resp.StatusCode, out
}

// scanSSE reads the events of an SSE stream (event name, id, data; comments and events without
// data left out) and hands each to on until on says stop or the stream ends.
func scanSSE(t *testing.T, r io.Reader, on func(event, id, data string) (stop bool)) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	var event, id string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			stop := on(event, id, data.String())
			event, id = "", ""
			data.Reset()
			if stop {
				return
			}
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
}

// typeSet is what the scenarios of one dialect saw: per scenario the sequence of types (for the
// golden file), and every type with the scenario it first came in.
type typeSet struct {
	mu    sync.Mutex
	key   func(sse) string // the event's type
	skip  map[string]bool  // types left out of the golden sequences (their count depends on time)
	seqs  map[string][]string
	where map[string]string
}

func newTypeSet(key func(sse) string, skip ...string) *typeSet {
	s := &typeSet{key: key, skip: map[string]bool{}, seqs: map[string][]string{}, where: map[string]string{}}
	for _, k := range skip {
		s.skip[k] = true
	}
	return s
}

func (s *typeSet) add(scenario string, evs []sse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		typ := s.key(ev)
		if _, ok := s.where[typ]; !ok {
			s.where[typ] = scenario
		}
		if !s.skip[typ] {
			s.seqs[scenario] = append(s.seqs[scenario], typ)
		}
	}
}

// check golden-checks the sequences and asserts the types seen are want plus nothing else, and
// that every exception was indeed not seen.
func (s *typeSet) check(t *testing.T, dialect string, want []string, exceptions map[string]string) {
	t.Helper()
	goldenfile.Compare(t, filepath.Join("..", "..", "testdata", "dialects", dialect+".json"), s.seqs, *update)
	wanted := map[string]bool{}
	for _, typ := range want {
		wanted[typ] = true
		_, seen := s.where[typ]
		switch reason, excepted := exceptions[typ]; {
		case excepted && seen:
			t.Errorf("%s is listed as an exception (%s) but scenario %q produced it", typ, reason, s.where[typ])
		case !excepted && !seen:
			t.Errorf("no scenario produced %s", typ)
		}
	}
	var extra []string
	for typ := range s.where {
		if !wanted[typ] {
			extra = append(extra, typ+" (in "+s.where[typ]+")")
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("types outside the document: %v", extra)
	}
}

// pngBase64 is a 1×1 PNG.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func str(v any) string {
	s, _ := v.(string)
	return s
}

func decodedPNG() []byte {
	b, _ := base64.StdEncoding.DecodeString(pngBase64)
	return b
}
