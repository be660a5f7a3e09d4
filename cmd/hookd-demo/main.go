// Command hookd-demo shows hookd in one go: it starts the daemon on a throwaway SQLite file and
// the sample receiver, registers a compliance hook that denies one tool, chats with the scripted
// agent over SSE, and prints what the client and the receiver each saw.
//
//	make demo      (builds bin/hookd and bin/hookd-receiver, then runs this)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const secret = "whsec-demo-secret"

func main() {
	bin := flag.String("bin", "bin", "directory holding hookd and hookd-receiver")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(bin string) error {
	dir, err := os.MkdirTemp("", "hookd-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	recvAddr, daemonAddr := freeAddr(), freeAddr()
	step("1", "start the sample receiver: it verifies signatures and denies the http_request tool")
	recv := exec.CommandContext(ctx, filepath.Join(bin, "hookd-receiver"), "--listen", recvAddr, "--secret", secret, "--deny", "http_request")
	seen := newTally()
	if err := startPrefixed(recv, "   receiver │ ", seen.line); err != nil {
		return err
	}
	defer stop(recv)

	step("2", "start hookd on a fresh SQLite file with the scripted model")
	cfg := filepath.Join(dir, "hookd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen: %s\ndatabase: sqlite:%s\nlog: {level: warn}\nwebhooks: {allowPrivateNetworks: true}\nagent: {toolDefault: allow}\n",
		daemonAddr, filepath.Join(dir, "hookd.db"))), 0o600)
	daemon := exec.CommandContext(ctx, filepath.Join(bin, "hookd"), "serve", "--config", cfg)
	if err := startPrefixed(daemon, "   hookd    │ ", nil); err != nil {
		return err
	}
	defer stop(daemon)
	base := "http://" + daemonAddr
	if err := waitReady(ctx, base+"/readyz"); err != nil {
		return err
	}

	step("3", "register hooks: a fail-closed pre_tool_use gate, and audit hooks for what happened")
	hooks := []string{
		`{"hookName":"合规审批","hookType":"pre_tool_use","dispatchConfig":{"url":"http://%s/","signingSecret":"%s","failureMode":"DENY"}}`,
		`{"hookName":"输入审核","hookType":"user_message","dispatchConfig":{"url":"http://%s/","signingSecret":"%s"}}`,
		`{"hookName":"工具审计","hookType":"post_tool_use","dispatchConfig":{"url":"http://%s/","signingSecret":"%s"}}`,
		`{"hookName":"执行结果","hookType":"agent_completion","dispatchConfig":{"url":"http://%s/","signingSecret":"%s"}}`,
	}
	for _, h := range hooks {
		var out struct {
			ID       int64  `json:"id"`
			HookName string `json:"hookName"`
			HookType string `json:"hookType"`
		}
		if err := post(base+"/api/hooks", fmt.Sprintf(h, recvAddr, secret), &out); err != nil {
			return err
		}
		fmt.Printf("   hook %d: %s on %s (secret stored sealed, shown as ***)\n", out.ID, out.HookName, out.HookType)
	}

	var last *turn
	for i, input := range []string{"帮我整理今天的任务清单 tasks", "transfer 100 to ACC-002"} {
		step(fmt.Sprint(4+i), fmt.Sprintf("chat over SSE (POST /api/agent/run/stream): %q", input))
		if last, err = chat(ctx, base, fmt.Sprintf("demo-%d", i), input); err != nil {
			return err
		}
	}
	if err := checkDenied(last, "http_request", "compliance policy: http_request is not allowed"); err != nil {
		return err
	}
	// The audit events go out from the outbox after the turn; the receiver's lines say when.
	wait, cancelWait := context.WithTimeout(ctx, 20*time.Second)
	defer cancelWait()
	if err := seen.await(wait, expectedEvents); err != nil {
		return err
	}
	step("6", "what hookd recorded: the decision log of interceptive calls")
	var decisions struct {
		Items []struct {
			HookName, HookType, Outcome, Reason string
			LatencyMs                           int64
		}
	}
	if err := get(base+"/api/decisions", &decisions); err != nil {
		return err
	}
	for i := len(decisions.Items) - 1; i >= 0; i-- {
		d := decisions.Items[i]
		fmt.Printf("   %-14s %-6s %3d ms  %s %s\n", d.HookType, d.Outcome, d.LatencyMs, d.HookName, d.Reason)
	}
	verified, rejected := seen.total()
	if rejected > 0 {
		return fmt.Errorf("the receiver rejected %d requests whose signature did not verify", rejected)
	}
	fmt.Printf("\ndone: the denied tool never ran, and the receiver verified the signature of all %d events it got.\n", verified)
	return nil
}

// chat runs one turn, prints its stream readably and returns what it saw of the tools.
func chat(ctx context.Context, base, session, input string) (*turn, error) {
	body, _ := json.Marshal(map[string]string{"sessionId": session, "userInput": input})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/agent/run/stream", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("chat: HTTP %d: %s", resp.StatusCode, b)
	}
	seen := newTurn()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inText, inReasoning := false, false
	endLine := func() {
		if inText || inReasoning {
			fmt.Println()
			inText, inReasoning = false, false
		}
	}
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var f struct {
			EventType string         `json:"eventType"`
			Data      map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &f) != nil {
			continue
		}
		d := f.Data
		switch f.EventType {
		case "SESSION_CREATED":
			fmt.Printf("   client   │ session %v, run %v\n", d["sessionId"], d["requestId"])
		case "REASONING_START":
			endLine()
			fmt.Print("   client   │ 💭 ")
			inReasoning = true
		case "REASONING_DELTA":
			fmt.Print(d["text"])
		case "TEXT_START":
			endLine()
			fmt.Print("   client   │ 🤖 ")
			inText = true
		case "TEXT_DELTA":
			fmt.Print(d["text"])
		case "TOOL_START":
			endLine()
			fmt.Printf("   client   │ 🔧 %v %v\n", d["toolName"], d["arguments"])
		case "TOOL_COMPLETED":
			endLine()
			fmt.Printf("   client   │ ✅ %v: %v\n", d["toolName"], firstLine(fmt.Sprint(d["output"])))
			seen.completed[fmt.Sprint(d["toolName"])] = true
		case "TOOL_FAILED":
			endLine()
			fmt.Printf("   client   │ ⛔ %v: %v\n", d["toolName"], d["errorMessage"])
			seen.failed[fmt.Sprint(d["toolName"])] = fmt.Sprint(d["errorMessage"])
		case "ATTACHMENT_CHANGED":
			endLine()
			fmt.Printf("   client   │ 📎 %v (%v bytes)\n", d["fileName"], d["fileSize"])
		case "MESSAGE_COMPLETED":
			endLine()
			fmt.Println("   client   │ (completed)")
			return seen, nil
		case "MESSAGE_FAILED":
			endLine()
			fmt.Printf("   client   │ (failed: %v)\n", d["errorMessage"])
			return nil, fmt.Errorf("the turn failed: %v", d["errorMessage"])
		}
	}
	return nil, fmt.Errorf("the stream ended without a final event")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func step(n, what string) { fmt.Printf("\n── %s. %s\n", n, what) }

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrefixed starts cmd with its output printed line by line behind a prefix, each line also
// given to tap (if not nil).
func startPrefixed(cmd *exec.Cmd, prefix string, tap func(string)) error {
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Println(prefix + sc.Text())
			if tap != nil {
				tap(sc.Text())
			}
		}
	}()
	go func() { cmd.Wait(); w.Close() }()
	return nil
}

func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	}
}

func waitReady(ctx context.Context, url string) error {
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hookd did not become ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func post(url, body string, out any) error { return call("POST", url, body, out) }
func get(url string, out any) error        { return call("GET", url, "", out) }

func call(method, url, body string, out any) error {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var w struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Message string          `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return err
	}
	if !w.Success {
		return fmt.Errorf("%s %s: %s", method, url, w.Message)
	}
	return json.Unmarshal(w.Data, out)
}
