package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// A full scenario with every kind of secret hookd handles — admin token, API key, master key,
// signing secrets, receiver credentials — and then a search of everything the daemon printed,
// and of its database files, for each of them.
func TestSecretsNeverLeak(t *testing.T) {
	dir := t.TempDir()
	secrets := map[string]string{
		"admin token":    "adm-Zq81-secret-token",
		"api key":        "key-Pw22-chat-secret",
		"signing secret": "whsec-Kd93-signing-secret",
		"bearer cred":    "tok-Mx47-receiver-credential",
		"basic password": "pw-Hj56-basic-password",
		"token body":     "client-secret-Rt09",
		// A key carried in a URL's query: of a token endpoint that cannot be reached (its error
		// quotes the URL), of the OpenTelemetry collector.
		"token url query": "qs-Vb61-token-url-secret",
		"otel url query":  "qs-Lm72-collector-key",
		"echoed cred":     "tok-Ec33-echoed-by-receiver",
	}
	masterKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	var calls atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			io.WriteString(w, `{"data":{"token":"issued-token","expiresIn":60}}`)
			return
		}
		if r.URL.Path == "/echo" { // an error page that shows the request's headers
			w.WriteHeader(500)
			r.Header.Write(w)
			return
		}
		if calls.Add(1)%2 == 0 { // every other call fails, so failures get logged too
			w.WriteHeader(500)
			return
		}
		io.WriteString(w, `{"decision":"allow"}`)
	}))
	defer recv.Close()
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
masterKey: %s
log: {level: debug, format: json}
auth:
  adminTokens: [%s]
  apiKeys: [{key: %s, userId: alice, principalId: 1001}]
webhooks:
  allowPrivateNetworks: true
  retry: {fast: [50ms, 50ms, 50ms], ladder: [100ms], jitter: 0}
agent: {toolDefault: allow}
otel: {endpoint: "http://127.0.0.1:1/v1/traces?key=%s"}
`, filepath.Join(dir, "hookd.db"), masterKey, secrets["admin token"], secrets["api key"], secrets["otel url query"]))
	d := startDaemon(t, cfg)
	admin := func(method, path, body string) int {
		req, _ := http.NewRequest(method, d.url(path), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets["admin token"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for name, s := range secrets {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("%s in the answer to %s %s", name, method, path)
			}
		}
		return resp.StatusCode
	}
	for _, h := range []string{
		`{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"` + recv.URL + `/gate","signingSecret":"` + secrets["signing secret"] + `","auth":{"type":"BEARER","credential":"` + secrets["bearer cred"] + `"}}}`,
		`{"hookName":"input","hookType":"user_message","dispatchConfig":{"url":"` + recv.URL + `/in","auth":{"type":"BASIC","username":"u","password":"` + secrets["basic password"] + `"}}}`,
		`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + recv.URL + `/audit","signingSecret":"` + secrets["signing secret"] + `","auth":{"type":"CUSTOM_HTTP_TOKEN","tokenFetchConfig":{"url":"` + recv.URL + `/token","body":"` + secrets["token body"] + `","tokenPath":"data.token","expiresInPath":"data.expiresIn"}}}}`,
		`{"hookName":"tokq","hookType":"session_start","dispatchConfig":{"url":"` + recv.URL + `/s","auth":{"type":"CUSTOM_HTTP_TOKEN","tokenFetchConfig":{"url":"http://127.0.0.1:1/token?client_secret=` + secrets["token url query"] + `","tokenPath":"data.token"}}}}`,
		`{"hookName":"echo","hookType":"agent_completion","dispatchConfig":{"url":"` + recv.URL + `/echo","maxRetries":0,"auth":{"type":"BEARER","credential":"` + secrets["echoed cred"] + `"}}}`,
		`{"hookName":"llm","hookType":"post_llm_call","dispatchConfig":{"url":"http://127.0.0.1:1/closed","signingSecret":"` + secrets["signing secret"] + `","maxRetries":0}}`,
	} {
		if st := admin("POST", "/api/hooks", h); st != 201 {
			t.Fatalf("hook: %d", st)
		}
	}
	admin("GET", "/api/hooks", "")
	// API errors about bodies that carry secrets answer without them.
	for _, bad := range []string{
		`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"` + recv.URL + `","signingSecret":"` + secrets["signing secret"] + `","timeoutMs":"` + secrets["signing secret"] + `"}}`,
		`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"https://u:` + secrets["basic password"] + `@bad host/","auth":{"type":"BEARER","credential":"` + secrets["bearer cred"] + `","prefx":"B"}}}`,
		`{"hookName":"x","hookType":"pre_tool_use","dispatchConfig":{"url":"` + recv.URL + `","auth":{"type":"BASIC","username":"u","password":` + secrets["basic password"] + `}}}`,
	} {
		if st := admin("POST", "/api/hooks", bad); st != 400 {
			t.Errorf("bad hook: %d", st)
		}
	}
	admin("POST", "/api/hooks/1/test", "")
	admin("POST", "/api/hooks/3/test", "")
	admin("POST", "/api/hooks/4/test", "")
	admin("POST", "/api/hooks/5/test", "")
	admin("PUT", "/api/hooks/1", `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"`+recv.URL+`/gate","signingSecret":"***","auth":{"type":"BEARER","credential":"***"}}}`)

	// A chat through the harness dialect with the API key: user_message, pre/post_tool_use,
	// post_llm_call all fire.
	for i := 0; i < 3; i++ {
		d.stream("/harness/chat", fmt.Sprintf(`{"sessionId":"s%d","userId":"alice","input":"整理任务 tasks"}`, i), secrets["api key"])
	}
	// Wrong credentials get logged as refusals — without the credential.
	req, _ := http.NewRequest("GET", d.url("/api/hooks"), nil)
	req.Header.Set("Authorization", "Bearer "+secrets["admin token"]+"x")
	http.DefaultClient.Do(req)
	time.Sleep(1500 * time.Millisecond) // let retries and the closed-port failures log
	admin("GET", "/api/deliveries?limit=500", "")
	admin("GET", "/api/decisions", "")
	if st := admin("GET", "/metrics", ""); st != 200 {
		t.Errorf("metrics: %d", st)
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	logs := d.log()
	if !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, "hookName") {
		t.Fatalf("the scenario logged too little to prove anything:\n%s", logs)
	}
	for name, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("%s found in the daemon's log", name)
		}
	}
	if strings.Contains(logs, masterKey) {
		t.Error("master key found in the daemon's log")
	}
	for _, f := range []string{"hookd.db", "hookd.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for name, s := range secrets {
			if name == "admin token" || name == "api key" {
				continue // config, never stored
			}
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s in plaintext in %s", name, f)
			}
		}
	}
}

// TestDatabasePasswordNeverShown: a database password given in the URL's userinfo or as a query
// parameter (password, sslpassword) appears in no startup error, whether the URL came from the
// file or the environment, and — on a real PostgreSQL server — in no log line of a daemon that
// starts with it at debug level.
func TestDatabasePasswordNeverShown(t *testing.T) {
	pw := []string{"pw-Ux1-userinfo", "pw-Qy2-query", "pw-Sz3-sslquery"}
	check := func(what, out string) {
		t.Helper()
		for _, p := range pw {
			if strings.Contains(out, p) {
				t.Errorf("%s: password %s shown:\n%s", what, p, out)
			}
		}
	}
	dir := t.TempDir()
	for _, dsn := range []string{
		"postgres://hookd:" + pw[0] + "@127.0.0.1:1/hookd?password=" + pw[1] + "&sslpassword=" + pw[2] + "&sslmode=disable",
		"postgres://hookd:" + pw[0] + "@127.0.0.1:notaport/hookd?password=" + pw[1],
		"postgres://hookd:" + pw[0] + "@127.0.0.1:1/hookd?password=" + pw[1] + "&sslmode=bogus",
		"postgresql://hookd@127.0.0.1:1/hookd?sslpassword=" + pw[2] + "&password=" + pw[1] + "&connect_timeout=x",
	} {
		for _, viaEnv := range []bool{false, true} {
			cfg := "listen: 127.0.0.1:0\nlog: {level: debug, format: json}\ndataDir: " + dir + "\nmasterKey: " + testMasterKey + "\n"
			var env []string
			if viaEnv {
				env = append(env, "HOOKD_DATABASE="+dsn)
			} else {
				cfg += "database: '" + dsn + "'\n"
			}
			cmd := exec.Command(binary, "serve", "--config", writeConfig(t, dir, cfg))
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("%s: started", dsn)
			}
			if !strings.Contains(string(out), "database") && !strings.Contains(string(out), "postgres") {
				t.Fatalf("the error says nothing of the database:\n%s", out)
			}
			check("start error", string(out))
		}
	}

	base := os.Getenv("HOOKD_TEST_POSTGRES_DSN")
	if base == "" {
		t.Log("HOOKD_TEST_POSTGRES_DSN not set: the live PostgreSQL part is skipped")
		return
	}
	// A schema of its own: the shared public one may carry migrations this binary does not know.
	base = storagetest.PostgresURL(t)
	// The test server trusts local connections, so the passwords are carried and never needed.
	u := strings.Replace(base, "postgres://postgres@", "postgres://postgres:"+pw[0]+"@", 1) + "&password=" + pw[1]
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\nlog: {level: debug, format: json}\ndataDir: "+dir+"\nmasterKey: "+testMasterKey+"\ndatabase: '"+u+"'\n")
	d := startDaemon(t, cfg)
	if st := d.call("GET", "/readyz", "", nil); st != 200 {
		t.Fatalf("readyz: %d", st)
	}
	d.call("GET", "/api/hooks?nosuch=1", "", nil)
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
	if !strings.Contains(d.log(), "postgres://postgres:***@") {
		t.Fatalf("the log does not show the masked URL:\n%s", d.log())
	}
	check("log", d.log())
}
