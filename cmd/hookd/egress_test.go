package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The agent's http_request never reaches the daemon's own API, even with private networks
// allowed for receivers: in development mode the API takes requests from loopback without a
// token, and a model told to would delete the hook that governs it.
func TestToolsDoNotReachTheDaemon(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"decision":"allow"}`))
	}))
	defer receiver.Close()
	dir := t.TempDir()
	script := `{"scripts":[{"match":"/delete/","steps":[
   {"toolCalls":[{"name":"http_request","arguments":{"method":"DELETE","url":"http://localhost:` + port + `/api/hooks/1"}}]},
   {"text":"done"}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, writeConfig(t, dir, "listen: 127.0.0.1:"+port+"\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+
		"\nwebhooks: {allowPrivateNetworks: true}\nagent: {toolDefault: allow}\nmodel: {provider: scripted, script: "+filepath.Join(dir, "script.json")+"}\n"))
	if code := d.call("POST", "/api/hooks", `{"hookName":"审计","hookType":"pre_tool_use","dispatchConfig":{"url":"`+receiver.URL+`"}}`, nil); code != 201 {
		t.Fatalf("create the hook: %d", code)
	}
	out := d.stream("/harness/chat", `{"sessionId":"s-egress","userId":"u","input":"delete the hook"}`, "")
	if !strings.Contains(out, "hookd's own API") {
		t.Fatalf("the tool's result does not say it was refused:\n%s", out)
	}
	if code := d.call("GET", "/api/hooks/1", "", nil); code != 200 {
		t.Fatalf("the hook after the run: %d", code)
	}
}
