// Package clients runs the Node tests of this folder — the real AG-UI and AI SDK clients —
// against a real hookd daemon. They run when node and npm are on the PATH and are skipped with
// the reason otherwise; `npm ci` installs the versions package-lock.json pins, once.
package clients

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/signing"
)

// script is the scripted model's conversations the Node tests hold.
const script = `{"scripts":[
 {"match":"hello","steps":[{"thinking":"a greeting","text":"Hello there.","usage":{"inputTokens":10,"outputTokens":5,"reasoningTokens":2}}]},
 {"match":"/list my files/","steps":[{"toolCalls":[{"name":"workspace_list_files","arguments":{"path":"."}}]},{"text":"Listed."}]},
 {"match":"/read the secret/","steps":[{"toolCalls":[{"name":"workspace_read_file","arguments":{"path":"secret.txt"}}]},{"text":"I may not read it."}]},
 {"match":"/write slowly/","steps":[{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"slow.txt","content":"hi"}}]},{"text":"Noted, slowly.","delayMs":1500}]},
 {"match":"/write a note/","steps":[{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"note.txt","content":"hi"}}]},{"text":"Noted."}]},
 {"match":"/pick a color/","steps":[{"toolCalls":[{"name":"pick_color","arguments":{}}]},{"text":"Blue it is."}]},
 {"match":"/pay by card/","steps":[{"toolCalls":[{"name":"pay_by_card","arguments":{"card":"4111111111111111"}}]},{"text":"Paid."}]},
 {"match":"/pick a forbidden color/","steps":[{"toolCalls":[{"name":"pick_forbidden","arguments":{}}]},{"text":"It was refused."}]},
 {"match":"/fatal/","steps":[{"error":"fatal","text":"never"}]},
 {"match":"/slow work/","steps":[{"toolCalls":[{"name":"workspace_list_files"}],"delayMs":1500},{"text":"Done after the restart."}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

func TestClients(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node and npm are not on the PATH: the AG-UI and AI SDK client tests need them")
	}
	if _, err := os.Stat("node_modules"); err != nil {
		t.Log("npm ci (once: node_modules is missing)")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "hookd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/hookd").CombinedOutput(); err != nil {
		t.Fatalf("build hookd: %v\n%s", err, out)
	}
	policy := denyReads(t)
	addr := freeAddr(t)
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hookd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: %s
database: sqlite:%s/hookd.db
shutdownTimeout: 5s
auth:
  adminTokens: [adm-test]
  apiKeys:
    - {key: key-alice, userId: alice, principalId: 1}
    - {key: key-bob, userId: bob, principalId: 2}
webhooks:
  allowPrivateNetworks: true
model:
  script: %s/script.json
sse:
  heartbeat: 1s
`, addr, dir, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{bin: bin, cfg: cfg, addr: addr}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.admin(t, http.MethodPost, "/api/hooks", `{"hookName":"no-secrets","hookType":"pre_tool_use","toolNameMatch":"workspace_read_file",
		"dispatchConfig":{"url":"`+policy+`","signingSecret":"whsec-clients"}}`)
	d.admin(t, http.MethodPost, "/api/hooks", `{"hookName":"no-forbidden","hookType":"pre_tool_use","toolNameMatch":"pick_forbidden",
		"dispatchType":"policy","dispatchConfig":{"failureMode":"DENY"},
		"policyConfig":{"rules":[{"name":"never","when":"true","decision":"deny","reason":"'not that one'"}]}}`)

	d.admin(t, http.MethodPost, "/api/hooks", `{"hookName":"mask-card","hookType":"pre_tool_use","toolNameMatch":"pay_by_card",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"mask","when":"has(args.card)","decision":"modify",
		"modifiedValue":"args.with({'card': '****' + args.card.substring(args.card.size() - 4)})"}]}}`)

	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/restart":
			d.stop()
		case r.Method == http.MethodPost && r.URL.Path == "/crash":
			d.kill()
		default:
			http.NotFound(w, r)
			return
		}
		if err := d.start(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ctl.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-concurrency=1", "--test-reporter=spec", "agui.test.mjs", "aisdk.test.mjs")
	cmd.Env = append(os.Environ(), "HOOKD_URL=http://"+addr, "HOOKD_CONTROL="+ctl.URL, "NODE_ENV=test")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the client tests failed: %v\ndaemon log:\n%s", err, d.logs())
	}
}

// denyReads is a signed-webhook receiver that denies every pre_tool_use it is sent.
func denyReads(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, "whsec-clients", 0, 1<<20)
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env dispatcher.Envelope
		_ = json.Unmarshal(body, &env)
		if env.HookType == dispatcher.PreToolUse {
			_, _ = io.WriteString(w, `{"decision":"deny","reason":"that file is not for you"}`)
			return
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// freeAddr is a loopback address nothing listens on, kept across the daemon's restarts.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// daemon is the hookd process; start and stop may be called again (a restart).
type daemon struct {
	bin  string
	cfg  string
	addr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  strings.Builder
}

func (d *daemon) start() error {
	cmd := exec.Command(d.bin, "serve", "--config", d.cfg)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	listening := make(chan struct{})
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			d.mu.Unlock()
			var rec struct{ Msg string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				once.Do(func() { close(listening) })
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-listening:
	case <-done:
		return fmt.Errorf("hookd exited before listening:\n%s", d.logs())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("hookd did not listen:\n%s", d.logs())
	}
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	return nil
}

// stop stops the daemon gracefully (SIGTERM) and waits for it to exit.
func (d *daemon) stop() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill SIGKILLs the daemon: a crash, nothing wound down.
func (d *daemon) kill() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-done
	}
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

func (d *daemon) admin(t *testing.T, method, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer adm-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
}
