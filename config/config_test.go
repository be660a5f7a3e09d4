package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// validKey is base64 of 32 bytes.
var validKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hookd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sec(f float64) Duration { return Duration(f * float64(time.Second)) }

func TestDefault(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("Load(\"\", nil) = %+v\nwant %+v", c, Default())
	}
	d := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", d.Listen, "127.0.0.1:8080"},
		{"database", d.Database, "sqlite:./data/hookd.db"},
		{"databaseMaxConns", d.DatabaseMaxConns, 32},
		{"masterKey", d.MasterKey, ""},
		{"dataDir", d.DataDir, ""},
		{"shutdownTimeout", d.ShutdownTimeout, sec(10)},
		{"adminTokens", len(d.Auth.AdminTokens), 0},
		{"apiKeys", len(d.Auth.APIKeys), 0},
		{"allowPrivateNetworks", d.Webhooks.AllowPrivateNetworks, false},
		{"allowCIDRs", len(d.Webhooks.AllowCIDRs), 0},
		{"fast", d.Webhooks.Retry.Fast, []Duration{sec(1.5), sec(3), sec(6)}},
		{"ladder", d.Webhooks.Retry.Ladder, []Duration{sec(60), sec(180), sec(300), sec(600), sec(1200), sec(1800)}},
		{"jitter", d.Webhooks.Retry.Jitter, 0.25},
		{"consecutiveFailures", d.Webhooks.Breaker.ConsecutiveFailures, 5},
		{"openFor", d.Webhooks.Breaker.OpenFor, sec(30)},
		{"interceptiveConcurrency", d.Webhooks.Bulkhead.InterceptiveConcurrency, 256},
		{"observationalInFlight", d.Webhooks.Bulkhead.ObservationalInFlight, 1024},
		{"provider", d.Model.Provider, "scripted"},
		{"maxIters", d.Agent.MaxIters, 10},
		{"tokenBudget", d.Agent.TokenBudget, 0},
		{"contextTokens", d.Agent.ContextTokens, 0},
		{"streamRecoveries", d.Model.StreamRecoveries, 2},
		{"webSearch.url", d.Agent.WebSearch.URL, ""},
		{"shell.sandbox", d.Agent.Shell.Sandbox, SandboxNamespaces},
		{"shell.network", d.Agent.Shell.Network, ""},
		{"shell host network", d.Agent.Shell.HostNetwork(), false},
		{"heartbeat", d.SSE.Heartbeat, sec(15)},
		{"log.level", d.Log.Level, "info"},
		{"log.format", d.Log.Format, "auto"},
		{"loopback", d.LoopbackOnly(), true},
		{"dataDir resolved", d.ResolvedDataDir(), "./data"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Each call returns its own slices.
	d.Webhooks.Retry.Fast[0] = 0
	if Default().Webhooks.Retry.Fast[0] == 0 {
		t.Fatal("Default() shares slices between calls")
	}
}

func TestDefaultYAMLIsDefault(t *testing.T) {
	c, err := Load(writeFile(t, DefaultYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("DefaultYAML loads as %+v\nwant %+v", c, Default())
	}
}

func TestEmptyFile(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n", "---\n"} {
		c, err := Load(writeFile(t, body), nil)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Fatalf("%q: got %+v", body, c)
		}
	}
}

const fullFile = `
listen: 0.0.0.0:9090
database: postgres://hookd@db:5432/hookd?sslmode=disable
databaseMaxConns: 12
masterKey: ` + "%s" + `
dataDir: /var/lib/hookd
shutdownTimeout: 45s
auth:
  adminTokens: ["adm-1", "adm-2"]
  apiKeys:
    - {key: "key-a", userId: "user-10001", principalId: 1001}
    - key: key-b
      userId: user-10002
      principalId: 1002
webhooks:
  allowPrivateNetworks: true
  allowCIDRs: [10.0.0.0/8, 192.168.1.7, "fd00::/8"]
  retry:
    fast: [500ms, 1s]
    ladder: [2m, 1h30m]
    jitter: 0.5
  breaker: {consecutiveFailures: 3, openFor: 1m}
  bulkhead: {interceptiveConcurrency: 8, observationalInFlight: 16}
  claimLease: 90s
model:
  provider: openai
  script: ./demo.script
  baseURL: http://localhost:11434/v1
  apiKey: sk-model
  name: llama3
  streamRecoveries: 1
agent: {maxIters: 4, tokenBudget: 20000, contextTokens: 8000, webSearch: {url: "http://searx.internal:8888/search"}, name: helper, workspaces: /srv/ws, shell: {enabled: true, timeout: 5s, maxOutput: 2048, sandbox: none, network: host}, toolDefault: allow, askTimeout: 2m, runLease: 30s}
decisions: {durability: batched, recordArguments: true}
retention: {deliveries: 48h, decisions: 0s}
writer: {maxRows: 500, maxTime: 5ms, maxDelay: 0s, queue: 64}
console: {sessionTTL: 2h}
sse: {heartbeat: 5s}
log: {level: debug, format: json}
`

func TestFullFile(t *testing.T) {
	c, err := Load(writeFile(t, fmt.Sprintf(fullFile, validKey)), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Listen:           "0.0.0.0:9090",
		Database:         "postgres://hookd@db:5432/hookd?sslmode=disable",
		DatabaseMaxConns: 12,
		MasterKey:        validKey,
		MasterKeys:       []string{},
		MasterKeyFiles:   []string{},
		DataDir:          "/var/lib/hookd",
		ShutdownTimeout:  sec(45),
		Auth: Auth{
			AdminTokens: []string{"adm-1", "adm-2"},
			APIKeys: []APIKey{
				{Key: "key-a", UserID: "user-10001", PrincipalID: 1001},
				{Key: "key-b", UserID: "user-10002", PrincipalID: 1002},
			},
			Chat: "enabled",
		},
		Webhooks: Webhooks{
			AllowPrivateNetworks: true,
			AllowCIDRs:           []string{"10.0.0.0/8", "192.168.1.7", "fd00::/8"},
			Retry:                Retry{Fast: []Duration{sec(0.5), sec(1)}, Ladder: []Duration{sec(120), sec(5400)}, Jitter: 0.5},
			Breaker:              Breaker{ConsecutiveFailures: 3, OpenFor: sec(60)},
			Bulkhead:             Bulkhead{InterceptiveConcurrency: 8, ObservationalInFlight: 16},
			ClaimLease:           sec(90),
		},
		Model: Model{Provider: "openai", Script: "./demo.script", BaseURL: "http://localhost:11434/v1",
			APIKey: "sk-model", Name: "llama3", StreamRecoveries: 1},
		Agent: Agent{MaxIters: 4, TokenBudget: 20000, ContextTokens: 8000, WebSearch: WebSearch{URL: "http://searx.internal:8888/search"},
			Name: "helper", Workspaces: "/srv/ws",
			Shell: Shell{Enabled: true, Timeout: sec(5), MaxOutput: 2048, Sandbox: SandboxNone, Network: NetworkHost}, ToolDefault: "allow", AskTimeout: sec(120),
			RunLease: sec(30)},
		HTTP:      HTTP{AllowedOrigins: []string{}, ReadTimeout: sec(30), IdleTimeout: sec(120), MaxHeaderBytes: 64 << 10},
		Decisions: Decisions{Durability: "batched", RecordArguments: true},
		Retention: Retention{Deliveries: sec(48 * 3600)},
		Writer:    Writer{MaxRows: 500, MaxTime: Duration(5 * time.Millisecond), Queue: 64},
		Console:   Console{SessionTTL: sec(2 * 3600)},
		SSE:       SSE{Heartbeat: sec(5), WriteTimeout: sec(30)},
		Log:       Log{Level: "debug", Format: "json"},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if got := c.ResolvedDataDir(); got != "/var/lib/hookd" {
		t.Errorf("ResolvedDataDir = %q", got)
	}
	wantPrefixes := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/8")}
	if got := c.Webhooks.AllowedPrefixes(); !reflect.DeepEqual(got, wantPrefixes) {
		t.Errorf("AllowedPrefixes = %v", got)
	}
}

func TestPartialFileKeepsDefaults(t *testing.T) {
	c, err := Load(writeFile(t, "webhooks:\n  retry:\n    jitter: 0.1\nagent: {maxIters: 3}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Webhooks.Retry.Jitter = 0.1
	want.Agent.MaxIters = 3
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v", c)
	}
}

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want func(*Config)
	}{
		{"string", []string{"HOOKD_LISTEN=127.0.0.1:9999"}, func(c *Config) { c.Listen = "127.0.0.1:9999" }},
		{"database", []string{"HOOKD_DATABASE=postgresql://u@h/db"}, func(c *Config) { c.Database = "postgresql://u@h/db" }},
		{"database pool", []string{"HOOKD_DATABASE_MAX_CONNS=8"}, func(c *Config) { c.DatabaseMaxConns = 8 }},
		{"master key", []string{"HOOKD_MASTER_KEY=" + validKey}, func(c *Config) { c.MasterKey = validKey }},
		{"value with =", []string{"HOOKD_MODEL_SCRIPT=./a=b.txt"}, func(c *Config) { c.Model.Script = "./a=b.txt" }},
		{"nested string", []string{"HOOKD_LOG_LEVEL=debug", "HOOKD_LOG_FORMAT=text"}, func(c *Config) {
			c.Log = Log{Level: "debug", Format: "text"}
		}},
		{"acronym key", []string{"HOOKD_MODEL_PROVIDER=openai", "HOOKD_MODEL_BASE_URL=https://api.example.com/v1",
			"HOOKD_MODEL_NAME=m", "HOOKD_MODEL_API_KEY=sk"}, func(c *Config) {
			c.Model = Model{Provider: "openai", BaseURL: "https://api.example.com/v1", Name: "m", APIKey: "sk", StreamRecoveries: 2}
		}},
		{"bool", []string{"HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true"}, func(c *Config) { c.Webhooks.AllowPrivateNetworks = true }},
		{"bool 0", []string{"HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS=0"}, func(c *Config) {}},
		{"int", []string{"HOOKD_WEBHOOKS_BREAKER_CONSECUTIVE_FAILURES=9", "HOOKD_AGENT_MAX_ITERS=3",
			"HOOKD_AGENT_TOKEN_BUDGET=5000", "HOOKD_WEBHOOKS_BULKHEAD_OBSERVATIONAL_IN_FLIGHT=7"}, func(c *Config) {
			c.Webhooks.Breaker.ConsecutiveFailures = 9
			c.Agent.MaxIters = 3
			c.Agent.TokenBudget = 5000
			c.Webhooks.Bulkhead.ObservationalInFlight = 7
		}},
		{"float", []string{"HOOKD_WEBHOOKS_RETRY_JITTER=0.75"}, func(c *Config) { c.Webhooks.Retry.Jitter = 0.75 }},
		{"duration", []string{"HOOKD_SSE_HEARTBEAT=2m", "HOOKD_WEBHOOKS_BREAKER_OPEN_FOR=1m30s",
			"HOOKD_SHUTDOWN_TIMEOUT=3s"}, func(c *Config) {
			c.SSE.Heartbeat = sec(120)
			c.Webhooks.Breaker.OpenFor = sec(90)
			c.ShutdownTimeout = sec(3)
		}},
		{"duration list", []string{"HOOKD_WEBHOOKS_RETRY_FAST=250ms, 1s,2.5s"}, func(c *Config) {
			c.Webhooks.Retry.Fast = []Duration{sec(0.25), sec(1), sec(2.5)}
		}},
		{"[] clears a list", []string{"HOOKD_WEBHOOKS_RETRY_FAST=[]"}, func(c *Config) { c.Webhooks.Retry.Fast = []Duration{} }},
		{"json duration list", []string{`HOOKD_WEBHOOKS_RETRY_FAST=["250ms", "1s"]`}, func(c *Config) {
			c.Webhooks.Retry.Fast = []Duration{sec(0.25), sec(1)}
		}},
		{"json string list", []string{`HOOKD_AUTH_ADMIN_TOKENS= ["adm-1","adm,2"]`}, func(c *Config) {
			c.Auth.AdminTokens = []string{"adm-1", "adm,2"}
		}},
		{"string list", []string{"HOOKD_AUTH_ADMIN_TOKENS=adm-1, adm-2,"}, func(c *Config) {
			c.Auth.AdminTokens = []string{"adm-1", "adm-2"}
		}},
		{"cidr list", []string{"HOOKD_WEBHOOKS_ALLOW_CIDRS=10.1.0.0/16,::1"}, func(c *Config) {
			c.Webhooks.AllowCIDRs = []string{"10.1.0.0/16", "::1"}
		}},
		{"json api keys", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","userId":"u","principalId":1},{"key":"k2","userId":"u2","principalId":2}]`},
			func(c *Config) {
				c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u", PrincipalID: 1}, {Key: "k2", UserID: "u2", PrincipalID: 2}}
			}},
		{"[] clears a list of objects", []string{"HOOKD_AUTH_API_KEYS=[]"}, func(c *Config) {}},
		{"data dir", []string{"HOOKD_DATA_DIR=/srv/hookd"}, func(c *Config) { c.DataDir = "/srv/hookd" }},
		{"last one wins", []string{"HOOKD_LISTEN=127.0.0.1:1", "HOOKD_LISTEN=127.0.0.1:2"}, func(c *Config) {
			c.Listen = "127.0.0.1:2"
		}},
		{"ignored", []string{"HOOKD_TEST_ANYTHING=1", "HOOKD_CONFIG=/etc/hookd.yaml", "PATH=/bin", "hookd_listen=x", "NOEQUALS"},
			func(c *Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load("", tt.env)
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestEnvBeatsFile(t *testing.T) {
	p := writeFile(t, "listen: 127.0.0.1:7000\nwebhooks:\n  retry:\n    fast: [1s]\n    jitter: 0.1\nauth:\n  adminTokens: [from-file]\n")
	c, err := Load(p, []string{"HOOKD_LISTEN=127.0.0.1:7001", "HOOKD_WEBHOOKS_RETRY_FAST=2s,4s", "HOOKD_AUTH_ADMIN_TOKENS=from-env"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7001" {
		t.Errorf("listen = %q", c.Listen)
	}
	if !reflect.DeepEqual(c.Webhooks.Retry.Fast, []Duration{sec(2), sec(4)}) {
		t.Errorf("fast = %v", c.Webhooks.Retry.Fast)
	}
	if c.Webhooks.Retry.Jitter != 0.1 {
		t.Errorf("jitter = %v, want the file's 0.1", c.Webhooks.Retry.Jitter)
	}
	if !reflect.DeepEqual(c.Auth.AdminTokens, []string{"from-env"}) {
		t.Errorf("adminTokens = %v", c.Auth.AdminTokens)
	}
}

func TestEnvNames(t *testing.T) {
	want := []string{
		"HOOKD_AGENT_ASK_TIMEOUT",
		"HOOKD_AGENT_CONTEXT_TOKENS",
		"HOOKD_AGENT_MAX_ITERS",
		"HOOKD_AGENT_NAME",
		"HOOKD_AGENT_RUN_LEASE",
		"HOOKD_AGENT_SHELL_ENABLED",
		"HOOKD_AGENT_SHELL_MAX_OUTPUT",
		"HOOKD_AGENT_SHELL_NETWORK",
		"HOOKD_AGENT_SHELL_SANDBOX",
		"HOOKD_AGENT_SHELL_TIMEOUT",
		"HOOKD_AGENT_TOKEN_BUDGET",
		"HOOKD_AGENT_TOOL_DEFAULT",
		"HOOKD_AGENT_WEB_SEARCH_URL",
		"HOOKD_AGENT_WORKSPACES",
		"HOOKD_AUTH_ADMIN_TOKENS",
		"HOOKD_AUTH_API_KEYS",
		"HOOKD_AUTH_CHAT",
		"HOOKD_CONSOLE_SESSION_TTL",
		"HOOKD_DATABASE",
		"HOOKD_DATABASE_MAX_CONNS",
		"HOOKD_DATA_DIR",
		"HOOKD_DECISIONS_DURABILITY",
		"HOOKD_DECISIONS_RECORD_ARGUMENTS",
		"HOOKD_HTTP_ALLOWED_ORIGINS",
		"HOOKD_HTTP_IDLE_TIMEOUT",
		"HOOKD_HTTP_MAX_CONNECTIONS",
		"HOOKD_HTTP_MAX_HEADER_BYTES",
		"HOOKD_HTTP_READ_TIMEOUT",
		"HOOKD_LISTEN",
		"HOOKD_LOG_FORMAT",
		"HOOKD_LOG_LEVEL",
		"HOOKD_MASTER_KEY",
		"HOOKD_MASTER_KEYS",
		"HOOKD_MASTER_KEY_FILES",
		"HOOKD_MODEL_API_KEY",
		"HOOKD_MODEL_BASE_URL",
		"HOOKD_MODEL_NAME",
		"HOOKD_MODEL_PROVIDER",
		"HOOKD_MODEL_SCRIPT",
		"HOOKD_MODEL_STREAM_RECOVERIES",
		"HOOKD_OTEL_ENDPOINT",
		"HOOKD_RETENTION_DECISIONS",
		"HOOKD_RETENTION_DELIVERIES",
		"HOOKD_SHUTDOWN_TIMEOUT",
		"HOOKD_SSE_HEARTBEAT",
		"HOOKD_SSE_WRITE_TIMEOUT",
		"HOOKD_WEBHOOKS_ALLOW_CIDRS",
		"HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS",
		"HOOKD_WEBHOOKS_BREAKER_CONSECUTIVE_FAILURES",
		"HOOKD_WEBHOOKS_BREAKER_OPEN_FOR",
		"HOOKD_WEBHOOKS_BULKHEAD_INTERCEPTIVE_CONCURRENCY",
		"HOOKD_WEBHOOKS_BULKHEAD_OBSERVATIONAL_IN_FLIGHT",
		"HOOKD_WEBHOOKS_CLAIM_LEASE",
		"HOOKD_WEBHOOKS_RETRY_FAST",
		"HOOKD_WEBHOOKS_RETRY_JITTER",
		"HOOKD_WEBHOOKS_RETRY_LADDER",
		"HOOKD_WRITER_MAX_DELAY",
		"HOOKD_WRITER_MAX_ROWS",
		"HOOKD_WRITER_MAX_TIME",
		"HOOKD_WRITER_QUEUE",
	}
	if got := EnvNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("EnvNames() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUpperSnake(t *testing.T) {
	for in, want := range map[string]string{
		"listen": "LISTEN", "masterKey": "MASTER_KEY", "allowCIDRs": "ALLOW_CIDRS", "baseURL": "BASE_URL",
		"apiKeys": "API_KEYS", "observationalInFlight": "OBSERVATIONAL_IN_FLIGHT", "sse": "SSE",
	} {
		if got := upperSnake(in); got != want {
			t.Errorf("upperSnake(%q) = %q, want %q", in, got, want)
		}
	}
}

// A key set to null keeps its default, a list's as much as a scalar's.
func TestNullKeepsDefaults(t *testing.T) {
	c, err := Load(writeFile(t, "webhooks:\n  retry: {fast: null, ladder: null, jitter: null}\n  allowCIDRs: ~\nagent: {maxIters: null}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c.Webhooks, want.Webhooks)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // the whole message, or its start when it ends in "…"
	}{
		{"listen not host:port", func(c *Config) { c.Listen = "8080" }, `config: listen: "8080" is not host:port…`},
		{"listen bad port", func(c *Config) { c.Listen = "127.0.0.1:http" }, `config: listen: "127.0.0.1:http": port must be…`},
		{"listen port range", func(c *Config) { c.Listen = "127.0.0.1:70000" }, `config: listen: "127.0.0.1:70000": port must be…`},
		{"database scheme", func(c *Config) { c.Database = "mysql://u:pw@h/db" }, `config: database: must start with…`},
		{"database sqlite path", func(c *Config) { c.Database = "sqlite:" }, `config: database: sqlite: needs a file path…`},
		{"database sqlite memory", func(c *Config) { c.Database = "sqlite::memory:" }, `config: database: an in-memory sqlite database…`},
		{"database sqlite file:", func(c *Config) { c.Database = "sqlite:file:/srv/h.db" }, `config: database: write the file's path without file:, e.g. sqlite:/srv/h.db`},
		{"database sqlite query", func(c *Config) { c.Database = "sqlite:./h.db?_busy_timeout=9000" },
			`config: database: sqlite: takes a file path alone (hookd sets the connection's options itself): drop "?_busy_timeout=9000"`},
		{"databaseMaxConns 0", func(c *Config) { c.DatabaseMaxConns = 0 }, `config: databaseMaxConns: must be from 1 to 1000`},
		{"databaseMaxConns negative", func(c *Config) { c.DatabaseMaxConns = -4 }, `config: databaseMaxConns: must be from 1 to 1000`},
		{"databaseMaxConns too many", func(c *Config) { c.DatabaseMaxConns = 1001 }, `config: databaseMaxConns: must be from 1 to 1000`},
		{"masterKey base64", func(c *Config) { c.MasterKey = "not base64!!" }, `config: masterKey: not valid base64…`},
		{"masterKey length", func(c *Config) { c.MasterKey = base64.StdEncoding.EncodeToString(make([]byte, 16)) },
			`config: masterKey: must decode to exactly 32 bytes, got 16`},
		{"shutdownTimeout", func(c *Config) { c.ShutdownTimeout = 0 }, `config: shutdownTimeout: must be greater than 0`},
		{"adminTokens empty", func(c *Config) { c.Auth.AdminTokens = []string{"a", " "} }, `config: auth.adminTokens[1]: must not be empty`},
		{"retry ladder empty", func(c *Config) { c.Webhooks.Retry.Ladder = []Duration{} },
			`config: webhooks.retry.ladder: must hold at least one step: the slow retries always follow the fast ones`},
		{"apiKey key", func(c *Config) { c.Auth.APIKeys = []APIKey{{UserID: "u", PrincipalID: 1}} }, `config: auth.apiKeys[0].key: must not be empty`},
		{"apiKey userId", func(c *Config) { c.Auth.APIKeys = []APIKey{{Key: "k", PrincipalID: 1}} }, `config: auth.apiKeys[0].userId: must not be empty`},
		{"apiKey userId local", func(c *Config) { c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "local", PrincipalID: 1}} },
			`config: auth.apiKeys[0].userId: "local" is reserved: the runs of scheduled tasks whose principal has no key are its, and a key of it would control them`},
		{"apiKey principalId", func(c *Config) { c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u"}} }, `config: auth.apiKeys[0].principalId: must be greater than 0`},
		{"apiKey duplicate", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u", PrincipalID: 1}, {Key: "k", UserID: "v", PrincipalID: 2}}
		}, `config: auth.apiKeys[1].key: same key as auth.apiKeys[0]`},
		{"apiKey user with two identities", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k1", UserID: "u", PrincipalID: 1}, {Key: "k2", UserID: "u", PrincipalID: 2}}
		}, `config: auth.apiKeys[1]: userId "u" is also auth.apiKeys[0], with another principalId, agentId, role or reviews; a user's keys must name one identity`},
		{"apiKey user's keys agree", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k1", UserID: "u", PrincipalID: 1, Role: "reviewer", Reviews: []string{"a", "b"}},
				{Key: "k2", UserID: "u", PrincipalID: 1, Role: "reviewer", Reviews: []string{"b", "a"}},
				{Key: "k3", UserID: "v", PrincipalID: 2}, {Key: "k4", UserID: "v", PrincipalID: 2, Role: "user"},
				{Key: "bad", UserID: "v", PrincipalID: 3}} // only this one names another identity
		}, `config: auth.apiKeys[4]: userId "v" is also auth.apiKeys[2], with another principalId, agentId, role or reviews; a user's keys must name one identity`},
		{"apiKey principal of two users", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k1", UserID: "u", PrincipalID: 1}, {Key: "k2", UserID: "v", PrincipalID: 1}}
		}, `config: auth.apiKeys[1].principalId: 1 is also auth.apiKeys[0]'s, userId "u": one principal is one user`},
		{"allowCIDRs", func(c *Config) { c.Webhooks.AllowCIDRs = []string{"10.0.0.0/8", "10.0.0.0/99"} },
			`config: webhooks.allowCIDRs[1]: "10.0.0.0/99" is not a CIDR or IP address`},
		{"allowCIDRs word", func(c *Config) { c.Webhooks.AllowCIDRs = []string{"intranet"} },
			`config: webhooks.allowCIDRs[0]: "intranet" is not a CIDR or IP address`},
		{"retry fast", func(c *Config) { c.Webhooks.Retry.Fast = []Duration{sec(1), 0} }, `config: webhooks.retry.fast[1]: must be greater than 0`},
		{"retry ladder", func(c *Config) { c.Webhooks.Retry.Ladder = []Duration{-sec(1)} }, `config: webhooks.retry.ladder[0]: must be greater than 0`},
		{"jitter high", func(c *Config) { c.Webhooks.Retry.Jitter = 1.5 }, `config: webhooks.retry.jitter: must be between 0 and 1`},
		{"jitter negative", func(c *Config) { c.Webhooks.Retry.Jitter = -0.1 }, `config: webhooks.retry.jitter: must be between 0 and 1`},
		{"consecutiveFailures", func(c *Config) { c.Webhooks.Breaker.ConsecutiveFailures = 0 }, `config: webhooks.breaker.consecutiveFailures: must be at least 1`},
		{"openFor", func(c *Config) { c.Webhooks.Breaker.OpenFor = 0 }, `config: webhooks.breaker.openFor: must be greater than 0`},
		{"interceptiveConcurrency", func(c *Config) { c.Webhooks.Bulkhead.InterceptiveConcurrency = 0 }, `config: webhooks.bulkhead.interceptiveConcurrency: must be at least 1`},
		{"observationalInFlight", func(c *Config) { c.Webhooks.Bulkhead.ObservationalInFlight = -1 }, `config: webhooks.bulkhead.observationalInFlight: must be at least 1`},
		{"provider", func(c *Config) { c.Model.Provider = "anthropic" }, `config: model.provider: "anthropic" is not one of scripted, openai`},
		{"openai baseURL", func(c *Config) { c.Model.Provider, c.Model.Name = "openai", "m" }, `config: model.baseURL: required when model.provider is openai`},
		{"openai baseURL scheme", func(c *Config) { c.Model.Provider, c.Model.Name, c.Model.BaseURL = "openai", "m", "localhost:1234" },
			`config: model.baseURL: must be an http:// or https:// URL`},
		{"openai name", func(c *Config) { c.Model.Provider, c.Model.BaseURL = "openai", "http://x/v1" }, `config: model.name: required when model.provider is openai`},
		{"maxIters", func(c *Config) { c.Agent.MaxIters = 0 }, `config: agent.maxIters: must be at least 1`},
		{"tokenBudget", func(c *Config) { c.Agent.TokenBudget = -1 }, `config: agent.tokenBudget: must be 0 (no budget) or more`},
		{"contextTokens", func(c *Config) { c.Agent.ContextTokens = -1 }, `config: agent.contextTokens: must be 0 (never compact) or more`},
		{"streamRecoveries", func(c *Config) { c.Model.StreamRecoveries = -1 }, `config: model.streamRecoveries: must be 0 (none) to 10`},
		{"webSearch.url", func(c *Config) { c.Agent.WebSearch.URL = "searx.local/search" }, `config: agent.webSearch.url: must be an http:// or https:// URL (a SearXNG-style search API)`},
		{"shell.sandbox", func(c *Config) { c.Agent.Shell.Sandbox = "chroot" }, `config: agent.shell.sandbox: "chroot" is not one of namespaces, none`},
		{"shell.network", func(c *Config) { c.Agent.Shell.Network = "bridge" }, `config: agent.shell.network: "bridge" is not one of none, host`},
		{"shell.network without sandbox", func(c *Config) { c.Agent.Shell.Sandbox, c.Agent.Shell.Network = SandboxNone, NetworkNone },
			`config: agent.shell.network: none needs the sandbox (agent.shell.sandbox: namespaces): without it commands use the daemon's network`},
		{"runLease", func(c *Config) { c.Agent.RunLease = Duration(2 * time.Second) }, `config: agent.runLease: must be at least 5s (the owner renews it every fifth of it)`},
		{"heartbeat", func(c *Config) { c.SSE.Heartbeat = Duration(500 * time.Millisecond) }, `config: sse.heartbeat: must be at least 1s`},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, `config: log.level: "trace" is not one of debug, info, warn, error`},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, `config: log.format: "xml" is not one of auto, json, text`},
		{"not loopback", func(c *Config) { c.Listen = "0.0.0.0:8080" },
			`config: listen: 0.0.0.0:8080 is not loopback and auth has no adminTokens or apiKeys; add tokens or listen on 127.0.0.1`},
		{"all interfaces", func(c *Config) { c.Listen = ":8080" },
			`config: listen: :8080 is not loopback and auth has no adminTokens or apiKeys; add tokens or listen on 127.0.0.1`},
		{"public admin tokens without chat keys", func(c *Config) { c.Listen, c.Auth.AdminTokens = "0.0.0.0:8080", []string{"t"} },
			`config: listen: 0.0.0.0:8080 is not loopback and auth has no apiKeys, so nobody could be told from anybody else on the chat APIs; add auth.apiKeys, or set auth.chat: disabled to serve the admin API alone`},
		{"allowedOrigins", func(c *Config) { c.HTTP.AllowedOrigins = []string{"https://ok.example", "https://x.example/path"} },
			`config: http.allowedOrigins[1]: "https://x.example/path" is not an origin like https://console.example:8443`},
		{"readTimeout", func(c *Config) { c.HTTP.ReadTimeout = 0 }, `config: http.readTimeout: must be at least 10ms`},
		{"maxConnections", func(c *Config) { c.HTTP.MaxConnections = -1 }, `config: http.maxConnections: must be 0 (no cap) or more`},
		{"sse writeTimeout", func(c *Config) { c.SSE.WriteTimeout = 0 }, `config: sse.writeTimeout: must be at least 10ms`},
		{"masterKeys and masterKey", func(c *Config) { c.MasterKey, c.MasterKeys = validKey, []string{validKey} },
			`config: masterKeys: set masterKey or masterKeys, not both`},
		{"masterKeys entry", func(c *Config) { c.MasterKeys = []string{validKey, "short"} }, `config: masterKeys[1]: not valid base64…`},
		{"masterKeyFiles and masterKey", func(c *Config) { c.MasterKey, c.MasterKeyFiles = validKey, []string{"/k"} },
			`config: masterKeyFiles: set masterKey or masterKeyFiles, not both…`},
		{"masterKeyFiles and masterKeys", func(c *Config) { c.MasterKeys, c.MasterKeyFiles = []string{validKey}, []string{"/k"} },
			`config: masterKeyFiles: set masterKeys or masterKeyFiles, not both…`},
		{"masterKeyFiles missing", func(c *Config) { c.MasterKeyFiles = []string{"/nonexistent/hookd.key"} },
			`config: masterKeyFiles[0]: open /nonexistent/hookd.key: no such file or directory`},
		{"masterKeyFiles empty path", func(c *Config) { c.MasterKeyFiles = []string{" "} }, `config: masterKeyFiles[0]: must not be empty`},
		{"chat value", func(c *Config) { c.Auth.Chat = "off" }, `config: auth.chat: "off" is not one of enabled, disabled`},
		{"apiKey is an admin token", func(c *Config) {
			c.Auth.AdminTokens, c.Auth.APIKeys = []string{"same"}, []APIKey{{Key: "same", UserID: "u", PrincipalID: 1}}
		}, `config: auth.apiKeys[0].key: same as an admin token; admin tokens and API keys never stand in for each other`},
		{"apiKey role", func(c *Config) { c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u", PrincipalID: 1, Role: "admin"}} },
			`config: auth.apiKeys[0].role: "admin" is not one of user, reviewer`},
		{"reviewer without users", func(c *Config) { c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u", PrincipalID: 1, Role: "reviewer"}} },
			`config: auth.apiKeys[0].reviews: a reviewer key must list the users whose asks it answers`},
		{"user key reviews", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "u", PrincipalID: 1, Reviews: []string{"v"}}}
		}, `config: auth.apiKeys[0].reviews: only a key with role: reviewer reviews other users`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			if prefix, ok := strings.CutSuffix(tt.want, "…"); ok {
				if !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("Validate() = %q\nwant prefix %q", err, prefix)
				}
			} else if err.Error() != tt.want {
				t.Fatalf("Validate() = %q\nwant %q", err, tt.want)
			}
		})
	}
}

// TestMasterKeyFiles: each file holds one base64 key (a trailing newline is fine); the keys come
// back in order; a file that is not a key is named by index and path, its content never shown;
// HOOKD_MASTER_KEY_FILES lists them comma-separated.
func TestMasterKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := base64.StdEncoding.EncodeToString([]byte("abcdefghijklmnopqrstuvwxyz012345"))
	newKey, oldKey := write("new.key", validKey+"\n"), write("old.key", other)
	c, err := Load("", []string{"HOOKD_MASTER_KEY_FILES=" + newKey + "," + oldKey})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.RotationKeys()
	if err != nil || len(keys) != 2 || base64.StdEncoding.EncodeToString(keys[0]) != validKey ||
		base64.StdEncoding.EncodeToString(keys[1]) != other {
		t.Fatalf("RotationKeys() = %d keys, %v", len(keys), err)
	}
	if keys, err := Default().RotationKeys(); keys != nil || err != nil {
		t.Fatalf("no rotation keys configured: %v %v", keys, err)
	}

	secretish := "c2hvcnQtc2VjcmV0LXZhbHVl" // valid base64, 18 bytes
	short := write("short.key", secretish)
	_, err = Load("", []string{"HOOKD_MASTER_KEY_FILES=" + newKey + "," + short})
	want := "config: HOOKD_MASTER_KEY_FILES: masterKeyFiles[1]: " + short + ": must decode to exactly 32 bytes, got 18"
	if err == nil || err.Error() != want {
		t.Fatalf("Load() = %v\nwant %s", err, want)
	}
	garbage := write("garbage.key", "not a key at all!")
	_, err = Load(writeFile(t, "masterKeyFiles: ["+garbage+"]\n"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "config: masterKeyFiles[0]: "+garbage+": not valid base64") ||
		strings.Contains(err.Error(), "not a key at all") {
		t.Fatalf("Load() = %v", err)
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"defaults", func(c *Config) {}},
		{"postgresql", func(c *Config) { c.Database = "postgresql://u@h:5432/db?sslmode=disable" }},
		{"sqlite absolute", func(c *Config) { c.Database = "sqlite:/var/lib/hookd/hookd.db" }},
		{"pool lower bound", func(c *Config) { c.Database, c.DatabaseMaxConns = "postgres://u@h/db", 1 }},
		{"pool upper bound", func(c *Config) { c.Database, c.DatabaseMaxConns = "postgres://u@h/db", 1000 }},
		// It has no effect on SQLite, like the other PostgreSQL-only keys: accepted, so one file
		// serves both.
		{"pool on sqlite", func(c *Config) { c.DatabaseMaxConns = 4 }},
		{"master key", func(c *Config) { c.MasterKey = validKey }},
		{"ephemeral port", func(c *Config) { c.Listen = "127.0.0.1:0" }},
		{"public admin API alone", func(c *Config) {
			c.Listen, c.Auth.AdminTokens, c.Auth.Chat = "0.0.0.0:8080", []string{"t"}, "disabled"
		}},
		{"reviewer key", func(c *Config) {
			c.Auth.APIKeys = []APIKey{{Key: "k", UserID: "rev", PrincipalID: 1, Role: "reviewer", Reviews: []string{"u1"}}}
		}},
		{"public with api key", func(c *Config) {
			c.Listen, c.Auth.APIKeys = ":8080", []APIKey{{Key: "k", UserID: "u", PrincipalID: 1}}
		}},
		{"openai", func(c *Config) {
			c.Model = Model{Provider: "openai", BaseURL: "https://api.openai.com/v1", Name: "gpt"}
		}},
		{"edge values", func(c *Config) {
			c.Webhooks.Retry.Jitter = 0
			c.Webhooks.Retry.Fast = nil
			c.SSE.Heartbeat = sec(1)
			c.Webhooks.AllowCIDRs = []string{"169.254.169.254", "fe80::/10"}
		}},
	}
	for _, tt := range tests {
		c := Default()
		tt.mod(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	c := Default()
	c.Agent.MaxIters = 0
	c.Log.Level = "loud"
	err := c.Validate()
	if err == nil {
		t.Fatal("nil")
	}
	for _, k := range []string{"config: agent.maxIters:", "config: log.level:"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("%q does not mention %s", err, k)
		}
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"unknown top-level key", "listen: 127.0.0.1:1\nlistn: x\n", `config: listn: unknown key (did you mean "listen"?)`},
		{"unknown nested key", "webhooks:\n  retry:\n    jiter: 0.1\n", `config: webhooks.retry.jiter: unknown key (did you mean "jitter"?)`},
		{"unknown key no suggestion", "webhooks:\n  breaker:\n    somethingElse: 1\n", `config: webhooks.breaker.somethingElse: unknown key`},
		{"unknown key in list item", "auth:\n  apiKeys:\n    - {key: k, userId: u, principalId: 1, rank: admin}\n", `config: auth.apiKeys[0].rank: unknown key`},
		{"bad duration", "webhooks:\n  breaker:\n    openFor: abc\n", `config: webhooks.breaker.openFor: "abc" is not a duration`},
		{"bare number duration", "sse:\n  heartbeat: 15\n", `config: sse.heartbeat: "15" is not a duration (add a unit: 15s)`},
		{"bad duration in list", "webhooks:\n  retry:\n    fast: [1s, soon]\n", `config: webhooks.retry.fast[1]: "soon" is not a duration`},
		{"bad int", "agent:\n  maxIters: many\n", `config: agent.maxIters: "many" is not an integer`},
		{"float for int", "webhooks:\n  bulkhead:\n    interceptiveConcurrency: 1.5\n", `config: webhooks.bulkhead.interceptiveConcurrency: "1.5" is not an integer`},
		{"pool not an integer", "databaseMaxConns: 8.5\n", `config: databaseMaxConns: "8.5" is not an integer`},
		{"pool out of range", "databaseMaxConns: 0\n", `config: databaseMaxConns: must be from 1 to 1000`},
		{"bad bool", "webhooks:\n  allowPrivateNetworks: perhaps\n", `config: webhooks.allowPrivateNetworks: "perhaps" is not a boolean (true or false)`},
		{"bad float", "webhooks:\n  retry:\n    jitter: lots\n", `config: webhooks.retry.jitter: "lots" is not a number`},
		{"list for scalar", "listen: [a, b]\n", `config: listen: expected a string, got a list`},
		{"scalar for list", "webhooks:\n  retry:\n    fast: 1s\n", `config: webhooks.retry.fast: expected a list, got a single value`},
		{"scalar for section", "webhooks: yes\n", `config: webhooks: expected a mapping, got a single value`},
		{"duplicate key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", `config: listen: defined more than once`},
		{"top level list", "- a\n- b\n", `config: (top level): expected a mapping, got a list`},
		{"validation after file", "webhooks:\n  retry:\n    jitter: 2\n", `config: webhooks.retry.jitter: must be between 0 and 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeFile(t, tt.body), nil)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if err.Error() != tt.want {
				t.Fatalf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}

	t.Run("syntax error names the file", func(t *testing.T) {
		p := writeFile(t, "listen: [unclosed\n")
		_, err := Load(p, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+p+": yaml:") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("two documents", func(t *testing.T) {
		p := writeFile(t, "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n")
		_, err := Load(p, nil)
		if err == nil || err.Error() != "config: "+p+": more than one YAML document" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
		if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("merge keys", func(t *testing.T) {
		body := "x-breaker: &b {consecutiveFailures: 2, openFor: 5s}\n"
		if _, err := Load(writeFile(t, body), nil); err == nil || !strings.Contains(err.Error(), "config: x-breaker: unknown key") {
			t.Fatalf("err = %v", err)
		}
		body = "webhooks:\n  breaker:\n    <<: {consecutiveFailures: 2, openFor: 5s}\n    openFor: 6s\n"
		c, err := Load(writeFile(t, body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Webhooks.Breaker != (Breaker{ConsecutiveFailures: 2, OpenFor: sec(6)}) {
			t.Fatalf("breaker = %+v", c.Webhooks.Breaker)
		}
	})
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"unknown variable", []string{"HOOKD_LISTN=x"}, `config: HOOKD_LISTN: no such setting (did you mean HOOKD_LISTEN?)`},
		{"unknown variable no suggestion", []string{"HOOKD_FROBNICATE=1"}, `config: HOOKD_FROBNICATE: no such setting`},
		{"section is not a setting", []string{"HOOKD_WEBHOOKS_RETRY=1s"}, `config: HOOKD_WEBHOOKS_RETRY: names a section, not a setting (set its keys, e.g. HOOKD_WEBHOOKS_RETRY_FAST)`},
		{"top section", []string{"HOOKD_MODEL=openai"}, `config: HOOKD_MODEL: names a section, not a setting (set its keys, e.g. HOOKD_MODEL_PROVIDER)`},
		{"partial name is no section", []string{"HOOKD_AUTH_API=x"}, `config: HOOKD_AUTH_API: no such setting`},
		{"bad bool", []string{"HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS=maybe"},
			`config: HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS: webhooks.allowPrivateNetworks: "maybe" is not a boolean (true or false)`},
		{"empty bool", []string{"HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS="},
			`config: HOOKD_WEBHOOKS_ALLOW_PRIVATE_NETWORKS: webhooks.allowPrivateNetworks: "" is not a boolean (true or false)`},
		{"bad int", []string{"HOOKD_AGENT_MAX_ITERS=ten"}, `config: HOOKD_AGENT_MAX_ITERS: agent.maxIters: "ten" is not an integer`},
		{"pool not an integer", []string{"HOOKD_DATABASE_MAX_CONNS=eight"}, `config: HOOKD_DATABASE_MAX_CONNS: databaseMaxConns: "eight" is not an integer`},
		{"pool refused", []string{"HOOKD_DATABASE_MAX_CONNS=0"}, `config: HOOKD_DATABASE_MAX_CONNS: databaseMaxConns: must be from 1 to 1000`},
		{"bad float", []string{"HOOKD_WEBHOOKS_RETRY_JITTER=half"}, `config: HOOKD_WEBHOOKS_RETRY_JITTER: webhooks.retry.jitter: "half" is not a number`},
		{"durability", []string{"HOOKD_DECISIONS_DURABILITY=async"}, `config: HOOKD_DECISIONS_DURABILITY: decisions.durability: "async" is not one of sync, batched`},
		{"writer", []string{"HOOKD_WRITER_MAX_DELAY=2s"}, `config: HOOKD_WRITER_MAX_DELAY: writer.maxDelay: must be from 0 to 1s`},
		{"writer queue", []string{"HOOKD_WRITER_QUEUE=100000000"}, `config: HOOKD_WRITER_QUEUE: writer.queue: must be from 1 to 1048576`},
		{"retention", []string{"HOOKD_RETENTION_DECISIONS=10m"}, `config: HOOKD_RETENTION_DECISIONS: retention.decisions: must be 0 (keep) or at least 1h`},
		{"bad duration", []string{"HOOKD_SSE_HEARTBEAT=often"}, `config: HOOKD_SSE_HEARTBEAT: sse.heartbeat: "often" is not a duration`},
		{"bad duration in list", []string{"HOOKD_WEBHOOKS_RETRY_FAST=1s,x"}, `config: HOOKD_WEBHOOKS_RETRY_FAST: webhooks.retry.fast[1]: "x" is not a duration`},
		// An unset secret gives an empty value: it would drop the file's tokens or keys.
		{"empty list", []string{"HOOKD_AUTH_ADMIN_TOKENS="},
			`config: HOOKD_AUTH_ADMIN_TOKENS: auth.adminTokens: is empty: unset HOOKD_AUTH_ADMIN_TOKENS to keep the configuration file's value, or give [] for an empty list`},
		{"empty master key", []string{"HOOKD_MASTER_KEY="},
			`config: HOOKD_MASTER_KEY: masterKey: is empty: unset HOOKD_MASTER_KEY to use the configuration file's masterKey or the key file in dataDir`},
		{"blank list of objects", []string{"HOOKD_AUTH_API_KEYS= "},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys: is empty: unset HOOKD_AUTH_API_KEYS to keep the configuration file's value, or give [] for an empty list`},
		{"json list cut short", []string{`HOOKD_AUTH_ADMIN_TOKENS=["tok-a","tok-b"`},
			`config: HOOKD_AUTH_ADMIN_TOKENS: auth.adminTokens: must be a JSON array of strings like ["a","b"], or items separated by commas: unexpected EOF`},
		{"json list of objects for strings", []string{`HOOKD_AUTH_ADMIN_TOKENS=[{"token":"t"}]`},
			`config: HOOKD_AUTH_ADMIN_TOKENS: auth.adminTokens: must be a JSON array of strings like ["a","b"], or items separated by commas: item 0 is not a string`},
		{"json list empty item", []string{`HOOKD_AUTH_ADMIN_TOKENS=["tok-a"," "]`},
			`config: HOOKD_AUTH_ADMIN_TOKENS: auth.adminTokens: must be a JSON array of strings like ["a","b"], or items separated by commas: item 1 is empty`},
		{"bad json", []string{"HOOKD_AUTH_API_KEYS=key-secret"},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys: must be a JSON array like [{"key":"...","userId":"...","principalId":1}]: invalid JSON at offset 1`},
		{"json unknown field", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","user":"u","principalId":1}]`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys[0].user: unknown field (did you mean "userId"?)`},
		// As in the YAML file: a field twice, or in another case, is refused, not taken as
		// encoding/json would (the last userId; "userid" as userId).
		{"json field twice", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","userId":"alice","principalId":1,"userId":"bob"}]`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys[0].userId: appears twice; send each field once`},
		{"json field in another case", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","userid":"alice","principalId":1}]`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys[0].userid: unknown field (did you mean "userId"?)`},
		{"json trailing data", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","userId":"alice","principalId":1}] x`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys: must be a JSON array like [{"key":"...","userId":"...","principalId":1}]: invalid JSON at offset 48`},
		{"json not an array", []string{`HOOKD_AUTH_API_KEYS={"key":"k-secret","userId":"alice","principalId":1}`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys: must be a JSON array like [{"key":"...","userId":"...","principalId":1}]: must be an array, not object`},
		{"validation names the variable", []string{"HOOKD_WEBHOOKS_RETRY_JITTER=2"},
			`config: HOOKD_WEBHOOKS_RETRY_JITTER: webhooks.retry.jitter: must be between 0 and 1`},
		{"validation of a list item names the variable", []string{"HOOKD_WEBHOOKS_ALLOW_CIDRS=10.0.0.0/8,nope"},
			`config: HOOKD_WEBHOOKS_ALLOW_CIDRS: webhooks.allowCIDRs[1]: "nope" is not a CIDR or IP address`},
		{"validation of json keys names the variable", []string{`HOOKD_AUTH_API_KEYS=[{"key":"k","userId":"u"}]`},
			`config: HOOKD_AUTH_API_KEYS: auth.apiKeys[0].principalId: must be greater than 0`},
		{"non-loopback refusal from env", []string{"HOOKD_LISTEN=0.0.0.0:8080"},
			`config: listen: 0.0.0.0:8080 is not loopback and auth has no adminTokens or apiKeys; add tokens or listen on 127.0.0.1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", tt.env)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if err.Error() != tt.want {
				t.Fatalf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}
}

func TestLoopbackOnly(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:0":          true,
		"127.0.0.1:8080":       true,
		"127.1.2.3:8080":       true,
		"localhost:8080":       true,
		"LocalHost:8080":       true,
		"[::1]:8080":           true,
		"[::ffff:127.0.0.1]:1": true,
		"0.0.0.0:8080":         false,
		":8080":                false,
		"[::]:8080":            false,
		"192.168.1.5:8080":     false,
		"example.com:8080":     false,
		"localhost.evil:80":    false,
		"garbage":              false,
	} {
		c := Default()
		c.Listen = listen
		if got := c.LoopbackOnly(); got != want {
			t.Errorf("LoopbackOnly(%q) = %v, want %v", listen, got, want)
		}
		// Loopback addresses need no credentials; others are refused without them.
		err := c.Validate()
		if listen == "garbage" {
			continue
		}
		if want && err != nil {
			t.Errorf("%q: %v", listen, err)
		}
		if !want && (err == nil || !strings.Contains(err.Error(), "is not loopback")) {
			t.Errorf("%q: err = %v, want the refusal", listen, err)
		}
	}
}

func TestResolvedDataDir(t *testing.T) {
	tests := []struct{ dataDir, database, want string }{
		{"/srv/x", "sqlite:./data/hookd.db", "/srv/x"},
		{"", "sqlite:./data/hookd.db", "./data"},
		{"", "sqlite:/var/lib/hookd/h.db", "/var/lib/hookd"},
		{"", "sqlite:///var/lib/hookd/h.db", "/var/lib/hookd"},
		{"", "sqlite:h.db", "."},
		{"", "sqlite:/h.db", "/"},
		{"", "sqlite:state/h.db?cache=shared", "state"},
		{"", "sqlite::memory:", "./data"},
		{"", "postgres://u@h:5432/db", "./data"},
		{"/srv/pg", "postgres://u@h:5432/db", "/srv/pg"},
	}
	for _, tt := range tests {
		c := Config{DataDir: tt.dataDir, Database: tt.database}
		if got := c.ResolvedDataDir(); got != tt.want {
			t.Errorf("ResolvedDataDir(%q, %q) = %q, want %q", tt.dataDir, tt.database, got, tt.want)
		}
	}
}

func TestStringHidesSecrets(t *testing.T) {
	c, err := Load(writeFile(t, fmt.Sprintf(fullFile, validKey)), []string{
		"HOOKD_DATABASE=postgres://hookd:db-password@db:5432/hookd?sslmode=disable",
	})
	if err != nil {
		t.Fatal(err)
	}
	orig := c.String()
	secrets := []string{validKey, "adm-1", "adm-2", "key-a", "key-b", "sk-model", "db-password"}

	var slogBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&slogBuf, nil)).Info("config", "config", c)
	var textBuf bytes.Buffer
	slog.New(slog.NewTextHandler(&textBuf, nil)).Info("config", "config", c)
	outputs := map[string]string{
		"String": c.String(), "%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c),
		"slog json": slogBuf.String(), "slog text": textBuf.String(),
	}
	for name, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output contains secret %q:\n%s", name, s, out)
			}
		}
	}
	for _, want := range []string{"masterKey: '***'", "- '***'", "key: '***'", "apiKey: '***'", "userId: user-10001",
		"hookd:***@db:5432", "listen: 0.0.0.0:9090", "- 500ms", "- 1h30m", "openFor: 1m"} {
		if !strings.Contains(orig, want) {
			t.Errorf("String() lacks %q:\n%s", want, orig)
		}
	}
	// Redaction works on a copy.
	if c.MasterKey != validKey || c.Auth.AdminTokens[0] != "adm-1" || c.Auth.APIKeys[0].Key != "key-a" ||
		c.Model.APIKey != "sk-model" || !strings.Contains(c.Database, "db-password") {
		t.Fatalf("String() modified the config: %+v", []any{c.MasterKey, c.Auth, c.Model.APIKey, c.Database})
	}
	// Unset secrets stay visibly unset.
	if s := Default().String(); !strings.Contains(s, `masterKey: ""`) || strings.Contains(s, "***") {
		t.Errorf("default String():\n%s", s)
	}
}

func TestStringRoundTrips(t *testing.T) {
	// Without secrets, String() is a loadable config equal to the original.
	c := Default()
	c.Webhooks.Retry.Fast = []Duration{sec(1.5), Duration(90 * time.Minute)}
	c.Auth.APIKeys = []APIKey{}
	got, err := Load(writeFile(t, c.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v\nwant %+v", got, c)
	}
}

func TestErrorsHideSecrets(t *testing.T) {
	const secret = "s3cret-token-value"
	tests := []struct {
		name string
		body string
		env  []string
	}{
		{"master key too short in file", "masterKey: " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n", nil},
		{"master key not base64 in env", "", []string{"HOOKD_MASTER_KEY=" + secret}},
		{"token where a list belongs", "auth:\n  adminTokens: " + secret + "\n", nil},
		{"key where a mapping belongs", "auth:\n  apiKeys: [" + secret + "]\n", nil},
		{"model key as a list", "model:\n  apiKey: [" + secret + "]\n", nil},
		{"database with password", "database: mysql://u:" + secret + "@h/db\n", nil},
		{"json keys", "", []string{`HOOKD_AUTH_API_KEYS=[{"key":"` + secret + `"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.body != "" {
				path = writeFile(t, tt.body)
			}
			_, err := Load(path, tt.env)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if strings.Contains(err.Error(), secret) ||
				strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(secret))) {
				t.Fatalf("error reveals the secret: %v", err)
			}
		})
	}
}

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "1.5s", time.Minute: "1m", 90 * time.Minute: "1h30m", 2 * time.Hour: "2h",
		30 * time.Second: "30s", 0: "0s", 61 * time.Second: "1m1s",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("Duration(%v).String() = %q, want %q", d, got, want)
		}
	}
}

// kubernetesEnv is what Kubernetes injects into a pod for a Service named hookd with a named
// port, and for a second Service named hookd-metrics.
var kubernetesEnv = []string{
	"HOOKD_SERVICE_HOST=10.96.14.2",
	"HOOKD_SERVICE_PORT=8080",
	"HOOKD_SERVICE_PORT_HTTP=8080",
	"HOOKD_PORT=tcp://10.96.14.2:8080",
	"HOOKD_PORT_8080_TCP=tcp://10.96.14.2:8080",
	"HOOKD_PORT_8080_TCP_PROTO=tcp",
	"HOOKD_PORT_8080_TCP_PORT=8080",
	"HOOKD_PORT_8080_TCP_ADDR=10.96.14.2",
	"HOOKD_PORT_9090_UDP=udp://[fd00::7]:9090",
	"HOOKD_METRICS_SERVICE_HOST=10.96.14.3",
	"HOOKD_METRICS_PORT_9100_TCP_PORT=9100",
}

func TestKubernetesServiceLinksIgnored(t *testing.T) {
	c, err := Load("", append([]string{"HOOKD_LISTEN=127.0.0.1:9999"}, kubernetesEnv...))
	if err != nil {
		t.Fatalf("Load with service links: %v", err)
	}
	if c.Listen != "127.0.0.1:9999" {
		t.Errorf("listen = %q", c.Listen)
	}
	if got := ServiceLinks(append([]string{"HOOKD_LISTEN=127.0.0.1:9999", "PATH=/bin"}, kubernetesEnv...)); len(got) != len(kubernetesEnv) {
		t.Errorf("ServiceLinks = %v", got)
	}
	// A typo of a real setting, or a link-shaped name with a value Kubernetes never writes, still stops it.
	for _, kv := range []string{"HOOKD_LISTN=0.0.0.0:80", "HOOKD_PORT=8080", "HOOKD_SERVICE_HOST=db.internal", "HOOKD_PORT_80_TCP_PROTO=http"} {
		_, err := Load("", append([]string{kv}, kubernetesEnv...))
		name, _, _ := strings.Cut(kv, "=")
		if err == nil || !strings.Contains(err.Error(), "config: "+name+": no such setting") {
			t.Errorf("%s: err = %v", kv, err)
		}
	}
	if _, err := Load("", []string{"HOOKD_LISTN=0.0.0.0:80"}); err == nil || !strings.Contains(err.Error(), "did you mean HOOKD_LISTEN?") {
		t.Errorf("typo: %v", err)
	}
}

// A principal acts through a scheduled task as through its API keys: bound to one agent, the task
// is that agent; no task names the agent of another principal's key.
func TestTaskAgent(t *testing.T) {
	a := Auth{APIKeys: []APIKey{
		{Key: "k1", UserID: "dave", PrincipalID: 104, AgentID: 7},
		{Key: "k2", UserID: "erin", PrincipalID: 105, AgentID: 8},
		{Key: "k3", UserID: "alice", PrincipalID: 101},
		{Key: "k4", UserID: "multi", PrincipalID: 106, AgentID: 9},
		{Key: "k5", UserID: "multi2", PrincipalID: 106, AgentID: 10},
	}}
	id := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		principal, agent *int64
		want             *int64
		err              string
	}{
		{id(104), nil, id(7), ""},
		{id(104), id(7), id(7), ""},
		{id(104), id(8), nil, "8 is the agent of another principal's API key (principal 105)"},
		{id(104), id(5001), nil, "5001 is not principal 104's agent: its API keys are bound to agent 7"},
		{id(101), nil, nil, ""},
		{id(101), id(5001), id(5001), ""},
		{id(101), id(7), nil, "7 is the agent of another principal's API key (principal 104)"},
		{nil, id(8), nil, "8 is the agent of another principal's API key (principal 105)"},
		{nil, id(5001), id(5001), ""},
		{id(999), id(5001), id(5001), ""},
		{id(106), nil, nil, "is required: principal 106's API keys are bound to agents 9, 10; name one"},
		{id(106), id(10), id(10), ""},
	} {
		got, err := a.TaskAgent(c.principal, c.agent)
		if errText := fmt.Sprint(err); (c.err == "" && err != nil) || (c.err != "" && errText != c.err) ||
			(c.want == nil) != (got == nil) || (c.want != nil && *got != *c.want) {
			t.Errorf("principal %v agent %v: %v %v, want %v %q", ptrText(c.principal), ptrText(c.agent), ptrText(got), err, ptrText(c.want), c.err)
		}
	}
}

func ptrText(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestSQLiteFile(t *testing.T) {
	for db, want := range map[string]string{
		"sqlite:./data/hookd.db":             "./data/hookd.db",
		"sqlite:///var/lib/hookd/hookd.db":   "/var/lib/hookd/hookd.db",
		"sqlite:file:/srv/h.db?cache=shared": "/srv/h.db",
		"sqlite::memory:":                    "",
		"postgres://hookd@db:5432/hookd":     "",
	} {
		if got := (Config{Database: db}).SQLiteFile(); got != want {
			t.Errorf("SQLiteFile of %s = %q, want %q", db, got, want)
		}
	}
}

// Commands use the daemon's network when asked to, and always without the sandbox.
func TestShellHostNetwork(t *testing.T) {
	for _, c := range []struct {
		sandbox, network string
		want             bool
	}{
		{SandboxNamespaces, "", false}, {SandboxNamespaces, NetworkNone, false}, {SandboxNamespaces, NetworkHost, true},
		{SandboxNone, "", true}, {SandboxNone, NetworkHost, true},
	} {
		if got := (Shell{Sandbox: c.sandbox, Network: c.network}).HostNetwork(); got != c.want {
			t.Errorf("sandbox %q, network %q: HostNetwork = %v", c.sandbox, c.network, got)
		}
	}
}
