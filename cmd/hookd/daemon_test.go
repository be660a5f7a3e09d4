package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/signing"
)

// binary is the hookd built once for every test of this file that runs the real process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookd-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "hookd")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=test", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build hookd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var held struct {
	once sync.Once
	path string
	err  error
}

// heldBinary is hookd built with the commithold tag (storage/commithold.go), once, for the
// crash tests that stop a write half way.
func heldBinary(t *testing.T) string {
	t.Helper()
	held.once.Do(func() {
		held.path = filepath.Join(filepath.Dir(binary), "hookd-commithold")
		if out, err := exec.Command("go", "build", "-tags", "commithold", "-o", held.path, ".").CombinedOutput(); err != nil {
			held.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if held.err != nil {
		t.Fatalf("build hookd with commithold: %v", held.err)
	}
	return held.path
}

// daemon is a running hookd process.
type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	line chan struct{} // one token: a log line arrived (waitLog)
	// http checks every answer against the OpenAPI document.
	http *http.Client
}

// startDaemon runs `hookd serve` with the config file and extra environment, and waits until it
// listens.
func startDaemon(t *testing.T, cfgPath string, env ...string) *daemon {
	t.Helper()
	return startBinary(t, binary, cfgPath, env...)
}

// startBinary is startDaemon with another build of hookd.
func startBinary(t *testing.T, bin, cfgPath string, env ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, done: make(chan struct{}), line: make(chan struct{}, 1),
		http: &http.Client{Transport: openapitest.Transport(t, nil)}}
	d.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Dir = filepath.Dir(cfgPath)
	stderr, _ := d.cmd.StderrPipe()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.logs.WriteString(line + "\n")
			d.mu.Unlock()
			select {
			case d.line <- struct{}{}:
			default:
			}
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addrc <- rec.Addr
			}
		}
		d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.kill() })
	select {
	case d.addr = <-addrc:
	case <-d.done:
		t.Fatalf("hookd exited before listening:\n%s", d.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("hookd did not listen:\n%s", d.log())
	}
	return d
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// stream POSTs a chat turn to path (with token as its bearer, if any) and returns the whole
// event stream once the turn has ended.
func (d *daemon) stream(path, body, token string) string {
	d.t.Helper()
	req, _ := http.NewRequest("POST", d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		d.t.Fatalf("chat %s: %v %v", path, err, resp)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

// waitLog waits until the daemon's log holds s, and fails the test if it exits or a minute passes
// first.
func (d *daemon) waitLog(s string) {
	d.t.Helper()
	timeout := time.After(time.Minute)
	for !strings.Contains(d.log(), s) {
		select {
		case <-d.line:
		case <-d.done:
			d.t.Fatalf("hookd exited before logging %q:\n%s", s, d.log())
		case <-timeout:
			d.t.Fatalf("hookd did not log %q:\n%s", s, d.log())
		}
	}
}

func (d *daemon) kill() {
	select {
	case <-d.done:
	default:
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
	}
}

// bearer authenticates req as the test configurations' chat user (key-test) on a chat route and
// as their admin (adm-test) elsewhere: neither credential stands in for the other.
func bearer(req *http.Request) *http.Request {
	tok := "adm-test"
	if p := req.URL.Path; strings.HasPrefix(p, "/harness/") || strings.HasPrefix(p, "/api/agent/") {
		tok = "key-test"
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

func (d *daemon) url(path string) string { return "http://" + d.addr + path }

// call sends a JSON request and decodes the wrapper's data into out (if not nil).
func (d *daemon) call(method, path, body string, out any) int {
	d.t.Helper()
	req, _ := http.NewRequest(method, d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	bearer(req)
	resp, err := d.http.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		var w struct{ Data json.RawMessage }
		if err := json.Unmarshal(raw, &w); err != nil {
			d.t.Fatalf("%s %s: %s", method, path, raw)
		}
		json.Unmarshal(w.Data, out)
	}
	return resp.StatusCode
}

// testMasterKey is the master key of the daemons whose database may be PostgreSQL, where one must
// be configured.
const testMasterKey = "dGVzdC1tYXN0ZXIta2V5LW9mLXRoZS1kYWVtb25zLTM="

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "hookd.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// jsonList reads what a list printed with --json: an array or a page of items.
func jsonList(t *testing.T, out string) []map[string]any {
	t.Helper()
	var items []map[string]any
	if json.Unmarshal([]byte(out), &items) == nil {
		return items
	}
	var page struct{ Items []map[string]any }
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("not a JSON list: %v\n%s", err, out)
	}
	return page.Items
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		file string
		env  []string
		want string
	}{
		{"webhooks:\n  retry:\n    jitter: 2\n", nil, "webhooks.retry.jitter"},
		{"listen: 0.0.0.0:0\n", nil, "listen"},
		{"", []string{"HOOKD_WEBHOOKS_BREAKER_OPEN_FOR=soon"}, "HOOKD_WEBHOOKS_BREAKER_OPEN_FOR"},
		{"nosuchkey: 1\n", nil, "nosuchkey"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary, "serve", "--config", writeConfig(t, dir, c.file))
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%q: started", c.file)
			continue
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Errorf("%q: %v", c.file, err)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%q: error does not name %s: %s", c.file, c.want, out)
		}
	}
}

func TestServeHealthAndGracefulStop(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "db", "hookd.db")+"\n")
	d := startDaemon(t, cfg)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(d.url(p))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", p, err, resp)
		}
		resp.Body.Close()
	}
	if st, err := os.Stat(filepath.Join(dir, "db", "master.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key: %v", err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, d.log())
	}
	if !strings.Contains(d.log(), `"msg":"stopped"`) {
		t.Fatalf("no clean stop in log:\n%s", d.log())
	}
}

// startOperatorDaemon starts a daemon with the admin token adm-test, and a receiver answering
// every call with answer.
func startOperatorDaemon(t *testing.T, answer string) (*daemon, *httptest.Server) {
	t.Helper()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nauth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}\nwebhooks: {allowPrivateNetworks: true}\n")
	d := startDaemon(t, cfg)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, answer) }))
	t.Cleanup(recv.Close)
	return d, recv
}

func TestOperatorCLI(t *testing.T) {
	d, recv := startOperatorDaemon(t, `{"decision":"deny","reason":"no"}`)
	cli := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d.addr, "HOOKD_CLI_TOKEN=adm-test")
		cmd.Stdin = strings.NewReader(stdin)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli(`{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`","signingSecret":"s3cr3t"}}`, "hooks", "add")
	if code != 0 || !strings.Contains(out, `"signingSecret": "***"`) || strings.Contains(out, "s3cr3t") {
		t.Fatalf("add: %d %s", code, out)
	}
	// What the daemon notes of a hook is shown, on stderr: the glob-like name, the id a copy dropped.
	glob := exec.Command(binary, "hooks", "add")
	glob.Env = append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d.addr, "HOOKD_CLI_TOKEN=adm-test")
	glob.Stdin = strings.NewReader(`{"id":1,"hookName":"glob","hookType":"pre_tool_use","toolNameMatch":"transfer*","dispatchConfig":{"url":"` + recv.URL + `"}}`)
	var stdout, stderr strings.Builder
	glob.Stdout, glob.Stderr = &stdout, &stderr
	if err := glob.Run(); err != nil || !strings.Contains(stdout.String(), `"hookName": "glob"`) || strings.Contains(stdout.String(), "note:") ||
		!strings.Contains(stderr.String(), `note: toolNameMatch: "transfer*" is matched as that exact tool name`) ||
		!strings.Contains(stderr.String(), "note: id: 1 is not taken from a POST") {
		t.Fatalf("add with notes: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if out, code := cli("", "hooks", "rm", "2"); code != 0 {
		t.Fatalf("rm the noted hook: %d %s", code, out)
	}
	out, code = cli("", "hooks", "list")
	if code != 0 || !strings.Contains(out, "pre_tool_use") || !strings.Contains(out, "gate") {
		t.Fatalf("list: %d %s", code, out)
	}
	out, code = cli("", "hooks", "test", "1")
	if code != 0 || !strings.Contains(out, `"decision": "deny"`) || !strings.Contains(out, `"statusCode": 200`) {
		t.Fatalf("test: %d %s", code, out)
	}
	// Flags go anywhere on the line, after the arguments too.
	if out, code = cli("", "hooks", "test", "1", "--json"); code != 0 || !strings.Contains(out, `"decision": "deny"`) {
		t.Fatalf("test 1 --json: %d %s", code, out)
	}
	if out, code = cli("", "hooks", "--addr", "http://"+d.addr, "list", "--type", "pre_tool_use", "--json"); code != 0 {
		t.Fatalf("list --json: %d %s", code, out)
	} else if hooks := jsonList(t, out); len(hooks) != 1 || hooks[0]["hookName"] != "gate" {
		t.Fatalf("list --json: %s", out)
	}
	if out, code = cli("", "hooks", "list", "--type", "post_tool_use"); code != 0 || strings.Contains(out, "gate") {
		t.Fatalf("list --type post_tool_use: %d %s", code, out)
	}
	// A filter given empty (--tool "$T", T unset) is refused, never read as no filter.
	for _, args := range [][]string{{"hooks", "list", "--type", ""}, {"decisions", "list", "--tool", ""}, {"deliveries", "list", "--hook", ""}} {
		if out, code = cli("", args...); code != 1 || !strings.Contains(out, "is empty") {
			t.Errorf("%v: %d %s", args, code, out)
		}
	}
	out, code = cli("", "hooks", "rm", "1")
	if code != 0 {
		t.Fatalf("rm: %d %s", code, out)
	}
	if out, code = cli("", "hooks", "rm", "1"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("rm twice: %d %s", code, out)
	}
	// A test or a redeliver that shows the receiver failing exits 1, after printing what it saw.
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if out, code = cli(`{"hookName":"down","hookType":"pre_tool_use","dispatchConfig":{"url":"`+down.URL+`"}}`, "hooks", "add"); code != 0 {
		t.Fatalf("add the hook of a closed receiver: %d %s", code, out)
	}
	downID := fmt.Sprint(jsonList(t, "["+out[:strings.LastIndex(out, "}")+1]+"]")[0]["id"])
	if out, code = cli("", "hooks", "test", downID); code != 1 || !strings.Contains(out, `"fromFailureMode": true`) ||
		!strings.Contains(out, "hook "+downID+" failed the test: ") {
		t.Fatalf("test of a closed receiver: %d %s", code, out)
	}
	var healed atomic.Bool
	audit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healed.Load() {
			w.WriteHeader(http.StatusBadRequest) // not worth a retry: the delivery fails at once
		}
	}))
	defer audit.Close()
	if out, code = cli(`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"`+audit.URL+`"}}`, "hooks", "add"); code != 0 {
		t.Fatalf("add the audit hook: %d %s", code, out)
	}
	req, _ := http.NewRequest("POST", "http://"+d.addr+"/api/hooks/dispatch", strings.NewReader(
		`{"hookType":"post_tool_use","context":{"toolName":"search"}}`))
	req.Header.Set("Authorization", "Bearer adm-test")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 202 {
		t.Fatalf("dispatch the observational event: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	// The daemon's delivery owns the row: its first attempt ends it failed.
	var failed []map[string]any
	for deadline := time.Now().Add(30 * time.Second); len(failed) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the audit delivery never failed")
		}
		out, _ = cli("", "deliveries", "list", "--json", "--status", "failed")
		failed = jsonList(t, out)
	}
	failedID := fmt.Sprint(failed[0]["id"])
	if out, code = cli("", "deliveries", "redeliver", failedID); code != 1 || !strings.Contains(out, `"statusCode": 400`) ||
		!strings.Contains(out, "delivery "+failedID+" was not delivered: it is failed: HTTP 400") {
		t.Fatalf("redeliver to a failing receiver: %d %s", code, out)
	}
	healed.Store(true)
	if out, code = cli("", "deliveries", "redeliver", failedID); code != 0 || !strings.Contains(out, `"status": "delivered"`) {
		t.Fatalf("redeliver to a healed receiver: %d %s", code, out)
	}
	if out, code = cli("", "deliveries", "list"); code != 0 || !strings.Contains(out, "STATUS") {
		t.Fatalf("deliveries: %d %s", code, out)
	}
	if out, code = cli("", "deliveries", "list", "--json", "--status", "dead"); code != 0 || len(jsonList(t, out)) != 0 {
		t.Fatalf("deliveries --json: %d %s", code, out)
	}
	if out, code = cli("", "deliveries", "list", "--status", "gone"); code != 1 || !strings.Contains(out, "status") {
		t.Fatalf("deliveries --status gone: %d %s", code, out)
	}
	// verify is offline: it checks what a receiver got.
	body := `{"eventId":"x"}`
	now := fmt.Sprint(time.Now().UnixMilli())
	good := signing.Sign("s3cr3t", now, []byte(body))
	if out, code = cli(body, "verify", "--secret", "s3cr3t", "--timestamp", now, "--signature", good); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("verify good: %d %s", code, out)
	}
	if out, code = cli(body+" ", "verify", "--secret", "s3cr3t", "--timestamp", now, "--signature", good); code != 1 || !strings.Contains(out, "invalid") {
		t.Fatalf("verify tampered: %d %s", code, out)
	}
	if out, code = cli(body, "verify", "--secret", "s3cr3t"); code != 2 || !strings.Contains(out, `"signature", "timestamp"`) {
		t.Fatalf("verify without --signature: %d %s", code, out)
	}
}

// TestStartsWithKubernetesServiceLinks: a pod behind a Service named hookd gets HOOKD_PORT and
// its kin from Kubernetes; the daemon starts and says at debug level what it ignored.
func TestStartsWithKubernetesServiceLinks(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nlog: {level: debug, format: json}\n")
	links := []string{"HOOKD_SERVICE_HOST=10.96.14.2", "HOOKD_SERVICE_PORT=8080", "HOOKD_SERVICE_PORT_HTTP=8080",
		"HOOKD_PORT=tcp://10.96.14.2:8080", "HOOKD_PORT_8080_TCP=tcp://10.96.14.2:8080", "HOOKD_PORT_8080_TCP_PROTO=tcp",
		"HOOKD_PORT_8080_TCP_PORT=8080", "HOOKD_PORT_8080_TCP_ADDR=10.96.14.2"}
	d := startDaemon(t, cfg, links...)
	if st := d.call("GET", "/healthz", "", nil); st != 200 {
		t.Fatalf("healthz: %d", st)
	}
	for _, kv := range links {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.Contains(d.log(), `"msg":"ignoring a Kubernetes service-link variable","name":"`+name+`"`) {
			t.Errorf("no debug line for %s:\n%s", name, d.log())
		}
	}
}

// TestCLITablesEscapeControlCharacters: decisions list shows another party's text (an agent's
// tool name, a receiver's reason) with its control and bidirectional characters escaped: printed
// raw, an escape sequence in it rewrote the operator's terminal (a deny shown as an allow) and a
// tab split the row into columns of its own.
func TestCLITablesEscapeControlCharacters(t *testing.T) {
	d, recv := startOperatorDaemon(t, `{"decision":"deny","reason":"no\r\u001b[2Kallow \u202eyllaer \u001b]52;c;ZXZpbA==\u0007"}`)
	if st := d.call("POST", "/api/hooks", `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`"}}`, nil); st != 201 {
		t.Fatalf("create: %d", st)
	}
	ev := `{"hookType":"pre_tool_use","context":{"toolName":"x\u001b[31mred\ttab","toolCallId":"c1","arguments":{}}}`
	if st := d.call("POST", "/api/hooks/dispatch", ev, nil); st != 200 {
		t.Fatalf("dispatch: %d", st)
	}
	cmd := exec.Command(binary, "decisions", "list")
	cmd.Env = append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d.addr, "HOOKD_CLI_TOKEN=adm-test")
	b, err := cmd.Output()
	out := string(b)
	if err != nil {
		t.Fatalf("decisions list: %v\n%s", err, out)
	}
	for _, want := range []string{`x\x1b[31mred\x09tab`, `no\x0d\x1b[2Kallow \u202eyllaer \x1b]52;c;ZXZpbA==\x07`} {
		if !strings.Contains(out, want) {
			t.Errorf("decisions list: no %q in\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\r\t\u202e\a") {
		t.Errorf("a control character printed raw:\n%q", out)
	}
}
