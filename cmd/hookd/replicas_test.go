package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// replicaScript is the scripted model of the replica tests: a run "stream …" takes seven slow
// steps, "long …" sixty, "write …" asks to write a file, anything else (the cron task) answers.
func replicaScript() string {
	var stream, long []string
	for i := range 6 {
		stream = append(stream, fmt.Sprintf(`{"thinking":"step %d","toolCalls":[{"name":"workspace_list_files","arguments":{"path":"."}}],"delayMs":300}`, i))
	}
	for i := range 60 {
		long = append(long, fmt.Sprintf(`{"thinking":"long step %d","toolCalls":[{"name":"workspace_list_files","arguments":{"path":"."}}],"delayMs":500}`, i))
	}
	return `{"scripts":[
		{"match":"/^stream/","steps":[` + strings.Join(stream, ",") + `,{"text":"streamed to the end","delayMs":300}]},
		{"match":"/^long/","steps":[` + strings.Join(long, ",") + `,{"text":"long done"}]},
		{"match":"/^write/","steps":[{"thinking":"save it","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"report.md","content":"# Q3"}}]},{"text":"saved report.md"}]},
		{"match":"*","steps":[{"text":"tick done"}]}]}`
}

// cluster is several hookd processes on one PostgreSQL database.
type cluster struct {
	t        *testing.T
	database string
	key      string
	script   string
	inFlight int
	// maxConns is each replica's databaseMaxConns. The tests keep it small: replicas × (it + 1)
	// stays far below the server's max_connections, which go test ./... shares with every other
	// package's PostgreSQL tests.
	maxConns int
	nodes    []*daemon
	dirs     []string
}

func newCluster(t *testing.T, inFlight int) *cluster {
	t.Helper()
	c := &cluster{t: t, database: storagetest.PostgresURL(t), inFlight: inFlight, maxConns: 8,
		key: base64.StdEncoding.EncodeToString([]byte("replicas-share-one-master-key-32"))}
	c.script = filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(c.script, []byte(replicaScript()), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs one more replica: its own port and data directory, the shared database and key.
func (c *cluster) start() *daemon {
	c.t.Helper()
	dir := c.t.TempDir()
	cfg := writeConfig(c.t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %s
databaseMaxConns: %d
dataDir: %s
masterKey: %s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}
webhooks:
  allowPrivateNetworks: true
  claimLease: 3s
  bulkhead: {observationalInFlight: %d}
  retry: {fast: [200ms, 300ms, 400ms], ladder: [1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s], jitter: 0}
model: {provider: scripted, script: %s}
agent: {toolDefault: ask, maxIters: 100}
`, c.database, c.maxConns, dir, c.key, c.inFlight, c.script))
	d := startDaemon(c.t, cfg)
	c.nodes = append(c.nodes, d)
	c.dirs = append(c.dirs, dir)
	return d
}

// logs is what the replicas logged, minus the routine lines.
func (c *cluster) logs() string {
	var b strings.Builder
	for i, d := range c.nodes {
		fmt.Fprintf(&b, "--- replica %d (%s):\n", i, d.addr)
		for _, line := range strings.Split(d.log(), "\n") {
			if !strings.Contains(line, `"task firing ended"`) && !strings.Contains(line, `"starting hookd"`) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

func (f frame) at(t *testing.T) time.Time {
	v, err := time.Parse("2006-01-02T15:04:05.000", f.Timestamp)
	if err != nil {
		t.Fatalf("frame timestamp %q: %v", f.Timestamp, err)
	}
	return v
}

var streamClient = &http.Client{Timeout: 90 * time.Second}

// openStream starts a run (POST) or follows one (GET with requestId and lastEventId).
func openStream(t *testing.T, d *daemon, method, query, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, d.url("/api/agent/run/stream"+query), strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := streamClient.Do(bearer(req))
	if err != nil || resp.StatusCode != 200 {
		if resp != nil {
			raw, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s stream on %s: %d %s", method, d.addr, resp.StatusCode, raw)
		}
		t.Fatalf("%s stream on %s: %v", method, d.addr, err)
	}
	return resp, resp.Header.Get("X-Request-Id")
}

func terminal(f frame) bool {
	return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED"
}

func follow(t *testing.T, d *daemon, requestID, after string, stop func(frame) bool) []frame {
	t.Helper()
	resp, _ := openStream(t, d, "GET", "?requestId="+requestID+"&lastEventId="+after, "")
	return readFrames(t, resp, stop)
}

func last(fs []frame) frame { return fs[len(fs)-1] }

func messageData(t *testing.T, f frame) (code, suspendType string) {
	var m struct {
		ErrorCode     *string
		SuspendReason struct{ Type string }
	}
	if err := json.Unmarshal(f.Data, &m); err != nil {
		t.Fatalf("%s data: %v", f.EventType, err)
	}
	if m.ErrorCode != nil {
		code = *m.ErrorCode
	}
	return code, m.SuspendReason.Type
}

// sameFrames checks that got is want, frame for frame.
func sameFrames(t *testing.T, what string, got, want []frame) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].EventType != want[i].EventType {
			t.Fatalf("%s: frame %d is %s %s, want %s %s", what, i, got[i].ID, got[i].EventType, want[i].ID, want[i].EventType)
		}
	}
}

func (d *daemon) post(t *testing.T, path, body string) {
	t.Helper()
	if st := d.call("POST", path, body, nil); st != 200 {
		t.Fatalf("POST %s on %s: %d", path, d.addr, st)
	}
}

// TestReplicas runs three hookd processes on one PostgreSQL database and checks that they behave
// like one daemon: a run's stream moves between them with no gap and no repeat, control requests
// reach the replica executing the run, an approval resumes a run wherever it was started, a cron
// task fires once per tick, 10,000 observational events are delivered with duplicates only from
// the replica killed mid-delivery, a run whose replica died is suspended for a resume elsewhere,
// and a replica frozen past its lease gives its run up without writing to it again.
func TestReplicas(t *testing.T) {
	if os.Getenv(storagetest.PostgresEnv) == "" {
		t.Skipf("replica test skipped: %s is not set; replicas need PostgreSQL", storagetest.PostgresEnv)
	}
	if testing.Short() {
		t.Skip("replica test runs three real daemons")
	}
	began := time.Now()
	const inFlight = 256
	c := newCluster(t, inFlight)

	// The receiver of observational events. Until the gate opens it holds each request for up to
	// a second and then answers 503, so every replica keeps requests in flight; once the gate is
	// open it takes each event (counted before the answer is written) with a 200.
	gate := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	var held, orphans atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			EventID string
			Context struct{ ToolName string }
		}
		json.Unmarshal(body, &env)
		if env.Context.ToolName != "t" {
			return // the agent runs' own tool calls: taken at once
		}
		held.Add(1)
		timer := time.NewTimer(time.Second)
		defer timer.Stop()
		select {
		case <-gate:
		case <-r.Context().Done(): // its replica died: the event is taken all the same
			orphans.Add(1)
			<-gate
		case <-timer.C:
			held.Add(-1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		held.Add(-1)
		mu.Lock()
		seen[env.EventID]++
		mu.Unlock()
	}))
	defer recv.Close()

	a := c.start()
	var hook struct{ ID int64 }
	if st := a.call("POST", "/api/hooks", `{"hookName":"audit","hookType":"post_tool_use",
		"dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":2000,"signingSecret":"s3cr3t"}}`, &hook); st != 201 {
		t.Fatalf("create hook: %d\n%s", st, a.log())
	}
	b, cc := c.start(), c.start() // they load the hook at start
	names := map[*daemon]string{a: "A", b: "B", cc: "C"}
	pids := map[string]string{}
	for d, n := range names {
		pids[fmt.Sprint(d.cmd.Process.Pid)] = n
	}
	t.Logf("three replicas up in %v", time.Since(began).Round(time.Millisecond))

	// 1. A cron task every second: its ticks go on while the runs below are tested.
	var task struct{ ID int64 }
	if st := b.call("POST", "/api/tasks", `{"taskName":"tick","cron":"@every 1s","input":"tick"}`, &task); st != 201 {
		t.Fatalf("create task: %d", st)
	}
	taskBegan := time.Now()

	// 2. A stream started on A is read for a while, dropped, and resumed on B while the run still
	// executes on A: B follows it live (PostgreSQL NOTIFY), with no gap and no repeat.
	resp, requestID := openStream(t, a, "POST", "", `{"userInput":"stream please"}`)
	tools := 0
	fromA := readFrames(t, resp, func(f frame) bool {
		if f.EventType == "TOOL_COMPLETED" {
			tools++
		}
		return tools == 2 || terminal(f)
	})
	if terminal(last(fromA)) {
		t.Fatal("the run ended before the stream moved to B")
	}
	if len(fromA) == 0 || requestID == "" {
		t.Fatal("no frames from A")
	}
	subscribed := time.Now()
	fromB := follow(t, b, requestID, last(fromA).ID, terminal)
	if len(fromB) == 0 || last(fromB).EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("resumed on B after %s: %s\n%s", last(fromA).ID, kindsOf(fromB), b.log())
	}
	full := follow(t, cc, requestID, "0", terminal)
	sameFrames(t, "A then B against a replay on C", append(append([]frame{}, fromA...), fromB...), full)
	// Frames B received after it subscribed came from commits on A; the lag from the event to B
	// is the notification's, not the fallback poll's (5 s).
	var lag time.Duration
	live := 0
	for _, f := range fromB {
		if f.at(t).After(subscribed) {
			live++
			lag = max(lag, f.arrived.Sub(f.at(t)))
		}
	}
	if live < 3 || lag > 2500*time.Millisecond {
		t.Fatalf("B followed %d live frames with a worst lag of %v", live, lag)
	}
	t.Logf("stream: %d frames on A, %d on B (%d live, worst lag %v), replay on C identical", len(fromA), len(fromB), live, lag.Round(time.Millisecond))

	// 3. An approval posted to C resumes a run started on A (and C executes the rest of it); A's
	// stream follows to the end.
	resp, requestID = openStream(t, a, "POST", "", `{"userInput":"write the report"}`)
	before := readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
	var ask struct{ AskID string }
	for _, f := range before {
		if f.EventType == "PERMISSION_ASK" {
			json.Unmarshal(f.Data, &ask)
		}
	}
	if ask.AskID == "" {
		t.Fatalf("no ask: %+v", before)
	}
	cc.post(t, "/api/agent/permission/reply", `{"askId":"`+ask.AskID+`","approved":true}`)
	after := follow(t, a, requestID, last(before).ID, terminal)
	if last(after).EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("after the approval on C: %+v", last(after))
	}
	full = follow(t, b, requestID, "0", terminal)
	sameFrames(t, "approval run", append(append([]frame{}, before...), after...), full)
	// The replica that claimed the answered run executed the tool: C, unless the answer came
	// before A had recorded the pause, in which case A went on itself.
	ran := ""
	for i, dir := range c.dirs {
		if m, _ := filepath.Glob(filepath.Join(dir, "workspaces", "*", "report.md")); len(m) == 1 {
			ran += []string{"A", "B", "C"}[i]
		}
	}
	if ran != "A" && ran != "C" {
		t.Fatalf("the approved tool ran on %q", ran)
	}
	t.Logf("approval on C resumed the run started on A (%d + %d frames; the rest ran on %s)", len(before), len(after), ran)

	// 4. Stop through C of a run executing on A: it ends INTERRUPTED within its step.
	resp, requestID = openStream(t, a, "POST", "", `{"userInput":"long stop me"}`)
	stopDone := make(chan []frame, 1)
	go func(resp *http.Response) { stopDone <- readFrames(t, resp, terminal) }(resp)
	waitFrames(t, cc, requestID, 3)
	stopped := time.Now()
	cc.post(t, "/api/agent/run/"+requestID+"/stop", `{}`)
	var fs []frame
	select {
	case fs = <-stopDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end after the stop")
	}
	if code, _ := messageData(t, last(fs)); last(fs).EventType != "MESSAGE_FAILED" || code != "INTERRUPTED" {
		t.Fatalf("after the stop on C: %s %s", last(fs).EventType, last(fs).Data)
	}
	t.Logf("stop on C ended the run on A in %v", time.Since(stopped).Round(time.Millisecond))

	// 5. Suspend through A of a run executing on C; resume through B (B executes the rest); stop
	// it through A again.
	resp, requestID = openStream(t, cc, "POST", "", `{"userInput":"long suspend me"}`)
	go drain(resp)
	waitFrames(t, a, requestID, 3)
	a.post(t, "/api/agent/run/"+requestID+"/suspend", `{}`)
	fs = follow(t, b, requestID, "0", func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
	if _, typ := messageData(t, last(fs)); typ != "MANUAL_SUSPEND" {
		t.Fatalf("after the suspend on A: %s", last(fs).Data)
	}
	b.post(t, "/api/agent/run/"+requestID+"/resume", `{}`)
	waitFrames(t, cc, requestID, len(fs)+3) // B makes progress
	a.post(t, "/api/agent/run/"+requestID+"/stop", `{}`)
	rest := follow(t, cc, requestID, last(fs).ID, terminal)
	if code, _ := messageData(t, last(rest)); code != "INTERRUPTED" {
		t.Fatalf("resumed on B, stopped on A: %s\n%s", kindsOf(rest), c.logs())
	}
	t.Logf("suspend on A paused the run on C; resumed on B; stopped on A")

	// 6. The cron task: no tick fired twice, whichever replica fired it.
	var runs []storage.TaskRun
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var page struct{ Items []storage.TaskRun }
		a.call("GET", fmt.Sprintf("/api/tasks/%d/runs?limit=500", task.ID), "", &page)
		runs = page.Items
		if len(runs) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d firings in %v", len(runs), time.Since(taskBegan))
		}
	}
	if st := a.call("DELETE", fmt.Sprintf("/api/tasks/%d", task.ID), "", nil); st != 200 {
		t.Fatalf("delete task: %d", st)
	}
	ticks := map[time.Time]int{}
	by := map[string]int{}
	for _, r := range runs {
		ticks[r.ScheduledAt]++
		if ticks[r.ScheduledAt] > 1 {
			t.Fatalf("tick %s fired twice: %+v", r.ScheduledAt, runs)
		}
		parts := strings.Split(r.Owner, "/")
		by[pids[parts[min(1, len(parts)-1)]]]++
	}
	t.Logf("cron: %d ticks in %v, each fired once; by replica %v", len(runs), time.Since(taskBegan).Round(time.Second), by)

	// 7. A long run on B, which is about to die.
	resp, orphanRun := openStream(t, b, "POST", "", `{"userInput":"long orphan"}`)
	go drain(resp)
	waitFrames(t, a, orphanRun, 3)

	// 8. 10,000 observational events, spread over the replicas; B is killed while delivering.
	const events = 10000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	nodes := []*daemon{a, b, cc}
	queued := make(chan string, events)
	var wg sync.WaitGroup
	dispatchBegan := time.Now()
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < events; i += 24 {
				d := nodes[i%3]
				body := fmt.Sprintf(`{"hookType":"post_tool_use","sessionId":%d,"context":{"toolName":"t","toolCallId":"c%d","arguments":{},"output":"ok","succeeded":true,"durationMs":1}}`, i+1, i)
				req, _ := http.NewRequest("POST", d.url("/api/hooks/dispatch"), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer adm-test")
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("dispatch %d: %v", i, err)
					return
				}
				var out struct {
					Data    struct{ EventIDs []string }
					Message string
				}
				json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if resp.StatusCode != 202 || len(out.Data.EventIDs) != 1 {
					t.Errorf("dispatch %d on %s: %d %v %q; its errors:\n%s", i, d.addr, resp.StatusCode, out.Data.EventIDs, out.Message,
						errorLines(d.log()))
					return
				}
				queued <- out.Data.EventIDs[0]
			}
		}()
	}
	wg.Wait()
	close(queued)
	if t.Failed() {
		return
	}
	t.Logf("%d events queued through three replicas in %v", events, time.Since(dispatchBegan).Round(time.Millisecond))
	// Every replica has requests in flight at the receiver (it holds them): kill B now.
	for deadline := time.Now().Add(20 * time.Second); held.Load() < inFlight*2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Logf("only %d requests in flight before the kill", held.Load())
			break
		}
	}
	inflightAtKill := held.Load()
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	killed := time.Now()
	close(gate)
	want := map[string]bool{}
	for id := range queued {
		want[id] = true
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		missing := 0
		for id := range want {
			if seen[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never arrived\n%s", missing, events, a.log())
		}
	}
	arrived := time.Since(killed)
	// The survivors agree: nothing is left pending or in flight (B's claims came back after the
	// lease and were delivered again), so no more deliveries will come.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var pending, inflight struct{ Items []struct{ Status string } }
		a.call("GET", "/api/deliveries?status=pending&limit=500", "", &pending)
		cc.call("GET", "/api/deliveries?status=delivering&limit=500", "", &inflight)
		if len(pending.Items)+len(inflight.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending and %d delivering rows after every event arrived", len(pending.Items), len(inflight.Items))
		}
	}
	settled := time.Since(killed)
	var dups, dupEvents int
	mu.Lock()
	for id, n := range seen {
		if n > 1 {
			if !want[id] {
				t.Errorf("event %s was not queued by the test", id)
			}
			dups += n - 1
			dupEvents++
		}
	}
	mu.Unlock()
	t.Logf("all %d events arrived %v after the SIGKILL of B (%d requests held at the receiver then, at least %d of them B's); outbox settled after %v; %d duplicate deliveries (%d events)",
		events, arrived.Round(time.Millisecond), inflightAtKill, orphans.Load(), settled.Round(time.Millisecond), dups, dupEvents)
	// A duplicate is an event B had sent when it died (the receiver took nothing before the kill,
	// and A and C finish each request within their lease): no more than its in-flight bound.
	if dups > inFlight {
		t.Fatalf("%d duplicates, but the killed replica had at most %d requests in flight", dups, inFlight)
	}

	// 9. C freezes (SIGSTOP) while it executes a run: it is alive but silent, like a paused VM.
	resp, frozenRun := openStream(t, cc, "POST", "", `{"userInput":"long frozen"}`)
	go drain(resp)
	waitFrames(t, a, frozenRun, 3)
	cc.cmd.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	t.Cleanup(func() { cc.cmd.Process.Signal(syscall.SIGCONT) })

	// 10. B's running run outlives its lease: A suspends it (SHUTDOWN_INTERRUPT); it is resumed
	// on A and stopped there.
	suspended := func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" || terminal(f) }
	fs = follow(t, a, orphanRun, "0", suspended)
	if _, typ := messageData(t, last(fs)); typ != "SHUTDOWN_INTERRUPT" {
		t.Fatalf("the dead replica's run: %s %s", last(fs).EventType, last(fs).Data)
	}
	// Where the run was when its replica died is not known: step -1, as the source document says.
	var pause struct{ SuspendReason struct{ Step *int } }
	if json.Unmarshal(last(fs).Data, &pause); pause.SuspendReason.Step == nil || *pause.SuspendReason.Step != -1 {
		t.Fatalf("the dead replica's run paused at a step: %s", last(fs).Data)
	}
	t.Logf("B's running run was suspended %v after B died", time.Since(killed).Round(time.Millisecond))
	a.post(t, "/api/agent/run/"+orphanRun+"/resume", `{}`)
	waitFrames(t, a, orphanRun, len(fs)+3)
	a.post(t, "/api/agent/run/"+orphanRun+"/stop", `{}`)
	rest = follow(t, a, orphanRun, last(fs).ID, terminal)
	if code, _ := messageData(t, last(rest)); code != "INTERRUPTED" {
		t.Fatalf("the resumed run after a stop: %s", last(rest).Data)
	}
	full = follow(t, a, orphanRun, "0", terminal)
	sameFrames(t, "the dead replica's run", append(append([]frame{}, fs...), rest...), full)

	// 11. The frozen replica's run is taken over the same way. Then C thaws: it must notice it lost
	// the run and write nothing more of it — what it emitted on waking is not stored — before the
	// run is resumed on A and stopped through C.
	fs = follow(t, a, frozenRun, "0", suspended)
	if _, typ := messageData(t, last(fs)); typ != "SHUTDOWN_INTERRUPT" {
		t.Fatalf("the frozen replica's run: %s %s", last(fs).EventType, last(fs).Data)
	}
	t.Logf("C's running run was suspended %v after C froze", time.Since(frozen).Round(time.Millisecond))
	cc.cmd.Process.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(cc.log(), `"msg":"run abandoned`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("C did not abandon the run it lost:\n%s", c.logs())
		}
	}
	resumed := time.Now().UTC().Truncate(time.Millisecond)
	a.post(t, "/api/agent/run/"+frozenRun+"/resume", `{}`)
	waitFrames(t, a, frozenRun, len(fs)+3)
	cc.post(t, "/api/agent/run/"+frozenRun+"/stop", `{}`)
	rest = follow(t, a, frozenRun, last(fs).ID, terminal)
	if code, _ := messageData(t, last(rest)); code != "INTERRUPTED" {
		t.Fatalf("the run taken over from C, stopped through C: %s", last(rest).Data)
	}
	for _, f := range rest {
		if f.at(t).Before(resumed) {
			t.Fatalf("frame %s %s (at %s) was written before the resume on A (%s): C wrote after losing the run",
				f.ID, f.EventType, f.Timestamp, resumed.Format("15:04:05.000"))
		}
	}
	full = follow(t, cc, frozenRun, "0", terminal)
	sameFrames(t, "the frozen replica's run", append(append([]frame{}, fs...), rest...), full)
	dropped := strings.Contains(cc.log(), "run events not written")
	t.Logf("C thawed and abandoned the run A had taken over (events it made on waking dropped: %v); resumed on A, stopped through C", dropped)
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// drain reads a stream nobody watches to its end.
func drain(resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func kindsOf(fs []frame) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s:%s@%s ", f.ID, f.EventType, f.arrived.Format("05.000"))
	}
	return b.String()
}

// waitFrames waits until the run's stream, read through d, has at least n frames.
func waitFrames(t *testing.T, d *daemon, requestID string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId=0"), nil)
	resp, err := http.DefaultClient.Do(bearer(req))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("follow %s on %s: %v %v", requestID, d.addr, err, resp)
	}
	got := 0
	readFrames(t, resp, func(frame) bool { got++; return got >= n })
	if got < n {
		t.Fatalf("run %s: %d frames, want %d", requestID, got, n)
	}
}

// TestReplicaThroughput measures observational delivery through one replica and through three on
// the same PostgreSQL database (docs/benchmarks.md, "Replicas"). It runs only when
// HOOKD_TEST_REPLICA_BENCH is set (to the number of events; "1" means 20000):
//
//	HOOKD_TEST_REPLICA_BENCH=20000 HOOKD_TEST_POSTGRES_DSN=... go test -run TestReplicaThroughput -v ./cmd/hookd/
func TestReplicaThroughput(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("HOOKD_TEST_REPLICA_BENCH"), &n)
	if n == 0 {
		t.Skip("throughput measurement: set HOOKD_TEST_REPLICA_BENCH (events; 1 = 20000) to run it")
	}
	if n == 1 {
		n = 20000
	}
	if os.Getenv(storagetest.PostgresEnv) == "" {
		t.Skipf("%s is not set; replicas need PostgreSQL", storagetest.PostgresEnv)
	}
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			var got atomic.Int64
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				got.Add(1)
			}))
			defer recv.Close()
			c := newCluster(t, 1024)
			c.maxConns = storage.DefaultMaxConns // measured with the daemon's default pool
			first := c.start()
			var hook struct{ ID int64 }
			if st := first.call("POST", "/api/hooks", `{"hookName":"audit","hookType":"post_tool_use",
				"dispatchConfig":{"url":"`+recv.URL+`","timeoutMs":5000}}`, &hook); st != 201 {
				t.Fatalf("create hook: %d", st)
			}
			for len(c.nodes) < replicas {
				c.start()
			}
			db, err := storage.Open(context.Background(), c.database, storage.Options{Key: storagetest.Key})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()

			// End to end: n POST /api/hooks/dispatch from 64 clients spread over the replicas,
			// until the receiver has every event and every row is recorded delivered.
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
			start := time.Now()
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
						d := c.nodes[i%len(c.nodes)]
						req, _ := http.NewRequest("POST", d.url("/api/hooks/dispatch"), strings.NewReader(fmt.Sprintf(
							`{"hookType":"post_tool_use","sessionId":%d,"context":{"toolName":"t","toolCallId":"c","arguments":{},"output":"ok","succeeded":true,"durationMs":1}}`, i+1)))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer adm-test")
						resp, err := client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 202 {
							t.Errorf("dispatch: %d", resp.StatusCode)
							return
						}
					}
				}()
			}
			wg.Wait()
			ingest := time.Since(start)
			waitAll(t, db, &got, int64(n), start)
			e2e := time.Since(start)

			// Drain: a backlog of n rows written straight into the outbox (2,000 a transaction),
			// delivered by the replicas: claims, sends and completions only.
			got.Store(0)
			rows := make([]storage.Delivery, n)
			for i := range rows {
				rows[i] = storage.Delivery{EventID: storage.NewTSIDString(), HookID: hook.ID, HookType: "post_tool_use", HookName: "audit",
					OccurredAt: time.Now(), Context: []byte(`{"toolName":"t","toolCallId":"c","arguments":{},"output":"ok","succeeded":true,"durationMs":1}`)}
			}
			start = time.Now()
			for i := 0; i < n; i += 2000 {
				if err := db.EnqueueDeliveries(context.Background(), rows[i:min(i+2000, n)]); err != nil {
					t.Fatal(err)
				}
			}
			waitAll(t, db, &got, int64(n), start)
			drain := time.Since(start)
			t.Logf("REPLICAS=%d events=%d  end-to-end %.0f events/s (ingest alone %.0f/s)  drain %.0f events/s",
				replicas, n, float64(n)/e2e.Seconds(), float64(n)/ingest.Seconds(), float64(n)/drain.Seconds())
		})
	}
}

// waitAll waits until the receiver counted n requests and no delivery is pending or in flight.
func waitAll(t *testing.T, db *storage.DB, got *atomic.Int64, n int64, start time.Time) {
	t.Helper()
	for deadline := start.Add(5 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if got.Load() >= n {
			if depth, _, err := db.OutboxStats(context.Background()); err == nil && depth == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delivered", got.Load(), n)
		}
	}
}

// errorLines are the lines of a daemon's log at level ERROR or WARN: what a failure needs beside it.
func errorLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
