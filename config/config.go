// Package config loads hookd's configuration: a YAML file (every key optional), then HOOKD_*
// environment variables, then validation. Default() is the configuration with no file and no
// environment; DefaultYAML is the same thing written out with a comment on every key.
//
// Environment variables are named after the YAML path: HOOKD_ followed by each camelCase key in
// UPPER_SNAKE, joined with "_" (webhooks.retry.fast → HOOKD_WEBHOOKS_RETRY_FAST, allowCIDRs →
// ALLOW_CIDRS: a run of capitals is one word). Lists are comma-separated; auth.apiKeys is a JSON
// array. A HOOKD_ variable that names no key is an error, except HOOKD_TEST_* (reserved for
// tests), HOOKD_CLI_* (the operator CLI's address and token) and HOOKD_CONFIG (the command
// line's config path), and the service-link variables Kubernetes injects for a Service named hookd
// (HOOKD_PORT=tcp://…, HOOKD_SERVICE_HOST, …; see ServiceLinks).
//
// Error messages name the key as written in YAML, dotted ("webhooks.retry.jitter"), and the
// variable too when the value came from the environment. They never echo a secret.
package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/hookd/hookd/hookdtype"
)

// DefaultYAML is the default configuration as a documented YAML file. Loading it gives Default().
const DefaultYAML = `# hookd configuration. Every key is optional; a missing key keeps the value shown here.
# Any key can be overridden by an environment variable HOOKD_<PATH> in UPPER_SNAKE, e.g.
# HOOKD_LISTEN, HOOKD_WEBHOOKS_RETRY_FAST=1s,2s (lists comma-separated) or
# HOOKD_AUTH_API_KEYS='[{"key":"k","userId":"u","principalId":1}]' (JSON).

listen: 127.0.0.1:8080                # host:port of the HTTP API
database: sqlite:./data/hookd.db      # or postgres://user@host:5432/db?sslmode=disable
databaseMaxConns: 32                  # PostgreSQL: connections this daemon's pool opens at most (1 to 1000), and one
                                      # more to LISTEN; replicas × (this + 1) must stay below the server's
                                      # max_connections. SQLite ignores it (one writer, 8 readers)
masterKey: ""                         # 32-byte key, base64; encrypts secrets at rest; generated into dataDir when empty
                                      # (sqlite only: on postgres every replica must be given the same key)
masterKeys: []                        # rotation: [new, old…] instead of masterKey; the first seals, any opens
                                      # (then run hookd keys rotate, and drop the old ones)
masterKeyFiles: []                    # masterKeys read from files instead, one base64 key per file (mounted
                                      # secrets); same order, same rules
dataDir: ""                           # where the generated master key lives; empty = the directory of the
                                      # sqlite file, or ./data for postgres
shutdownTimeout: 10s                  # how long a graceful shutdown waits for in-flight work

auth:
  adminTokens: []                     # bearer tokens for the admin API
  apiKeys: []                         # bearer tokens for the chat APIs, each bound to one principal:
                                      #   - {key: "key-...", userId: "user-10001", principalId: 1001}
                                      #   (agentId: 5001: the key is that agent; its runs and hooks get that agent's hooks; no other user's key may name it)
                                      # a reviewer key also answers the permission asks of the users it lists:
                                      #   - {key: "key-...", userId: "rev-1", principalId: 9001, role: reviewer, reviews: [user-10001]}
  chat: enabled                       # enabled | disabled: disabled serves no chat API at all
  # With no tokens and no keys (development mode) the daemon only listens on loopback, and chat
  # callers name themselves (body userId or X-User-Id). Any other setup needs an API key on every
  # chat route; listening beyond loopback without apiKeys is refused at start unless chat: disabled.

webhooks:
  allowPrivateNetworks: false         # loopback / RFC1918 / link-local / metadata targets refused unless true
  allowCIDRs: []                      # finer allow-list of CIDRs (a bare IP means /32 or /128)
  retry:
    fast: [1.5s, 3s, 6s]              # quick retries, truncated by dispatchConfig.maxRetries
    ladder: [1m, 3m, 5m, 10m, 20m, 30m]   # slow retries after the fast ones
    jitter: 0.25                      # each delay varies by up to this fraction (0..1)
  breaker:
    consecutiveFailures: 5            # failures in a row that open a target's circuit
    openFor: 30s                      # how long an open circuit refuses calls
  bulkhead:
    interceptiveConcurrency: 256      # concurrent interceptive (blocking) webhook calls
    observationalInFlight: 1024       # observational deliveries in flight; the rest wait in the outbox
  claimLease: 2m                      # a claimed delivery whose worker died is handed out again after
                                      # this (twice a longer hook timeoutMs, for that hook's deliveries)

model:
  provider: scripted                  # scripted | openai
  script: ""                          # path of a script file; empty = the built-in demo script
  baseURL: ""                         # openai: any OpenAI-compatible endpoint (required)
  apiKey: ""                          # openai: bearer key, if the endpoint wants one
  name: ""                            # openai: model name (required)
  streamRecoveries: 2                 # openai: times one call goes on after its stream broke off mid-answer
                                      # (LLM_AUTO_RECOVERING); 0 = retry the call whole instead

agent:
  maxIters: 10                        # model/tool iterations per turn
  tokenBudget: 0                      # tokens per turn; 0 = no budget
  contextTokens: 0                    # largest model request (estimated: UTF-8 bytes / 4); a larger one is
                                      # preceded by the model summarising the older turns; 0 = never compact
  name: assistant                     # the agent's name in events and agent_completion
  workspaces: ""                      # per-session working directories; empty = dataDir/workspaces
  shell:
    enabled: false                    # offer the shell_execute tool (runs commands in the workspace)
    timeout: 30s                      # per command
    maxOutput: 65536                  # bytes of output kept per command
    sandbox: namespaces               # namespaces: each command sees only its own workspace of the daemon's
                                      # files (needs user namespaces; refused at start without them);
                                      # none: commands see all the daemon's user sees (data, keys, config)
    network: ""                       # none (what empty means with the sandbox): commands have a network of
                                      # their own, only its loopback; host: the daemon's, its API and
                                      # internal addresses included, past the egress guard. Without the
                                      # sandbox the network is the host's (none is refused)
  webSearch:
    url: ""                           # a SearXNG-style search API (GET url?q=…&format=json); empty = no
                                      # web_search tool. Asked through the webhooks egress guard
  toolDefault: ask                    # writing/executing tools with no matching rule: ask | allow
  askTimeout: 10m                     # an unanswered confirmation counts as denied after this
  runLease: 15s                       # PostgreSQL replicas: a running run whose owner is silent this long is suspended by another

http:
  allowedOrigins: []                  # development mode: web origins (scheme://host[:port]) besides the daemon's own
                                      # that may call it from a browser
  readTimeout: 30s                    # a request body must arrive within this (streams: only their body)
  idleTimeout: 2m                     # a keep-alive connection with no request is closed after this
  maxHeaderBytes: 65536               # request headers beyond this get 431
  maxConnections: 0                   # connections served at once; 0 = no cap (the rest wait to be accepted)

decisions:
  durability: sync                    # sync: a decision is committed before it is returned (a crash never
                                      # loses one that was acted on); batched: written within ~10ms after
  recordArguments: false              # keep tool arguments / user input in the log, not only their SHA-256

writer:                               # the database writer: one transaction (on SQLite one fsync) per cycle
                                      # holds the new outbox rows, delivery outcomes, decisions and run events
  maxRows: 2000                       # rows one cycle takes at most (give or take one request)
  maxTime: 2ms                        # SQLite: and no more than their recent cost per row (the commit's fsync
                                      # aside) says fit in this time (at least 16; 0: rows alone decide): short
                                      # commits for whoever waits
  maxDelay: 10ms                      # rows nobody waits for (outcomes, batched decisions) gather at most this
                                      # long; a cycle holding a waited-for row never waits (0: none gather)
  queue: 4096                         # queued write requests per kind (outbox, outcome, decision, run_event), 1 to
                                      # 1048576; past it writers wait; hookd_write_queue_rows{kind} counts their rows

retention:
  deliveries: 720h                    # finished deliveries (delivered, failed, dead) older than this are
                                      # removed, with their attempts; 0 keeps them
  decisions: 8760h                    # decision log rows older than this are removed (the chain still
                                      # verifies from the oldest kept row); 0 keeps them

console:
  sessionTTL: 8h                      # how long a sign-in to the console at /console/ lasts (5m to 720h)

sse:
  heartbeat: 15s                      # comment line sent on idle event streams (at least 1s)
  writeTimeout: 30s                   # a stream whose client stops reading is dropped after this

log:
  level: info                         # debug | info | warn | error
  format: auto                        # json | text | auto (text on a terminal, json otherwise)

otel:
  endpoint: ""                        # OTLP/HTTP URL for traces (http://collector:4318); "" = OTEL_EXPORTER_OTLP_ENDPOINT, unset = off
`

// Config is hookd's whole configuration.
type Config struct {
	Listen   string `yaml:"listen"`
	Database string `yaml:"database"`
	// DatabaseMaxConns caps the PostgreSQL pool: replicas share the server's max_connections
	// (each also holds one LISTEN connection outside the pool). SQLite's pools are fixed.
	DatabaseMaxConns int    `yaml:"databaseMaxConns"`
	MasterKey        string `yaml:"masterKey"`
	// MasterKeys replaces MasterKey during a rotation: the first seals, every one opens.
	MasterKeys []string `yaml:"masterKeys"`
	// MasterKeyFiles is MasterKeys kept out of the config: each file holds one base64 key (a
	// mounted Kubernetes Secret, a file only the daemon's user reads).
	MasterKeyFiles  []string  `yaml:"masterKeyFiles"`
	DataDir         string    `yaml:"dataDir"`
	ShutdownTimeout Duration  `yaml:"shutdownTimeout"`
	Auth            Auth      `yaml:"auth"`
	Webhooks        Webhooks  `yaml:"webhooks"`
	Model           Model     `yaml:"model"`
	Agent           Agent     `yaml:"agent"`
	HTTP            HTTP      `yaml:"http"`
	Decisions       Decisions `yaml:"decisions"`
	Writer          Writer    `yaml:"writer"`
	Retention       Retention `yaml:"retention"`
	Console         Console   `yaml:"console"`
	SSE             SSE       `yaml:"sse"`
	Log             Log       `yaml:"log"`
	OTel            OTel      `yaml:"otel"`
}

// Auth holds the bearer credentials the daemon accepts.
type Auth struct {
	AdminTokens []string `yaml:"adminTokens"`
	APIKeys     []APIKey `yaml:"apiKeys"`
	// Chat is "enabled" or "disabled"; disabled serves no chat route, which lets a daemon beyond
	// loopback run the admin API alone without API keys.
	Chat string `yaml:"chat"`
}

// APIKey is a chat-API bearer token bound to one principal.
type APIKey struct {
	Key         string `yaml:"key" json:"key"`
	UserID      string `yaml:"userId" json:"userId"`
	PrincipalID int64  `yaml:"principalId" json:"principalId"`
	// Role is "user" (the default) or "reviewer": a reviewer key also answers the permission asks
	// of the users in Reviews.
	Role    string   `yaml:"role,omitempty" json:"role,omitempty"`
	Reviews []string `yaml:"reviews,omitempty" json:"reviews,omitempty"`
	// AgentID, when set, is the agentId of everything sent with this key: a coding agent's
	// events (/v1/agents/{kind}/hooks) and the runs of every chat API, which get that agent's
	// hooks; a request naming another agent is a 403.
	AgentID int64 `yaml:"agentId,omitempty" json:"agentId,omitempty"`
}

// ChatDisabled tells whether auth.chat turns the chat APIs off.
func (a Auth) ChatDisabled() bool { return a.Chat == "disabled" }

// TaskAgent is the agent a scheduled task of principal runs as, given the task's agentId: a
// principal acts through a task as through its keys, so when all its keys are bound to one agent
// the task is that agent (agentId absent, or repeating it), and no task names the agent of
// another principal's key. The chat APIs hold a key to the same rule (wire.Caller.RunAgent).
func (a Auth) TaskAgent(principal, agent *int64) (*int64, error) {
	var own []int64
	unbound, othersOwner := false, int64(0)
	for _, k := range a.APIKeys {
		switch {
		case principal == nil || k.PrincipalID != *principal:
			if agent != nil && k.AgentID == *agent {
				othersOwner = k.PrincipalID
			}
		case k.AgentID > 0:
			if !slices.Contains(own, k.AgentID) {
				own = append(own, k.AgentID)
			}
		default:
			unbound = true
		}
	}
	switch {
	case agent != nil && slices.Contains(own, *agent):
		return agent, nil
	case agent != nil && othersOwner != 0:
		return nil, fmt.Errorf("%d is the agent of another principal's API key (principal %d)", *agent, othersOwner)
	case agent != nil && (unbound || len(own) == 0):
		return agent, nil
	case agent != nil:
		return nil, fmt.Errorf("%d is not principal %d's agent: its API keys are bound to agent %s", *agent, *principal, joinIDs(own))
	case !unbound && len(own) == 1:
		return &own[0], nil
	case !unbound && len(own) > 1:
		return nil, fmt.Errorf("is required: principal %d's API keys are bound to agents %s; name one", *principal, joinIDs(own))
	}
	return nil, nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// Webhooks configures outbound webhook calls.
type Webhooks struct {
	AllowPrivateNetworks bool     `yaml:"allowPrivateNetworks"`
	AllowCIDRs           []string `yaml:"allowCIDRs"`
	Retry                Retry    `yaml:"retry"`
	Breaker              Breaker  `yaml:"breaker"`
	Bulkhead             Bulkhead `yaml:"bulkhead"`
	// ClaimLease is how long a delivery claimed by a worker stays claimed before the rescuer hands
	// it out again (its worker is presumed dead). A worker whose request may outlast it first moves
	// its claim on to twice the hook's timeout.
	ClaimLease Duration `yaml:"claimLease"`
}

// AllowedPrefixes returns AllowCIDRs parsed, a bare IP as a single-address prefix. Entries that do
// not parse are skipped; Validate reports them.
func (w Webhooks) AllowedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(w.AllowCIDRs))
	for _, s := range w.AllowCIDRs {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Retry is the delivery retry schedule.
type Retry struct {
	Fast   []Duration `yaml:"fast"`
	Ladder []Duration `yaml:"ladder"`
	Jitter float64    `yaml:"jitter"`
}

// Breaker is the per-target circuit breaker.
type Breaker struct {
	ConsecutiveFailures int      `yaml:"consecutiveFailures"`
	OpenFor             Duration `yaml:"openFor"`
}

// Bulkhead bounds concurrent webhook work.
type Bulkhead struct {
	InterceptiveConcurrency int `yaml:"interceptiveConcurrency"`
	ObservationalInFlight   int `yaml:"observationalInFlight"`
}

// Model selects the language model.
type Model struct {
	Provider string `yaml:"provider"`
	Script   string `yaml:"script"`
	BaseURL  string `yaml:"baseURL"`
	APIKey   string `yaml:"apiKey"`
	Name     string `yaml:"name"`
	// StreamRecoveries is how often the openai provider goes on from where a stream broke off
	// mid-answer within one call; 0 = never (the loop retries the call whole).
	StreamRecoveries int `yaml:"streamRecoveries"`
}

// Agent bounds one agent turn.
type Agent struct {
	MaxIters    int `yaml:"maxIters"`
	TokenBudget int `yaml:"tokenBudget"`
	// ContextTokens is the largest model request, estimated (a quarter of its UTF-8 bytes): a
	// larger one is preceded by the model summarising the run's older turns (CONTEXT_COMPACTING).
	// 0 never compacts.
	ContextTokens int    `yaml:"contextTokens"`
	Name          string `yaml:"name"`
	// Workspaces is where each session's working directory lives; empty = dataDir/workspaces.
	Workspaces string `yaml:"workspaces"`
	Shell      Shell  `yaml:"shell"`
	// WebSearch configures the web_search tool, offered only when its URL is set.
	WebSearch WebSearch `yaml:"webSearch"`
	// ToolDefault is what a call of a tool that writes or executes gets when no permission rule
	// matches: ask (a person confirms) or allow. Read-only tools are always allowed.
	ToolDefault string `yaml:"toolDefault"`
	// AskTimeout is how long a confirmation may wait before the call counts as denied.
	AskTimeout Duration `yaml:"askTimeout"`
	// RunLease is, with several daemons on one PostgreSQL database, how long a running run
	// survives its owner's silence before another daemon suspends it (SHUTDOWN_INTERRUPT). The
	// owner renews it every RunLease/5.
	RunLease Duration `yaml:"runLease"`
}

// Shell configures the shell_execute tool, which is off unless enabled.
type Shell struct {
	Enabled   bool     `yaml:"enabled"`
	Timeout   Duration `yaml:"timeout"`
	MaxOutput int      `yaml:"maxOutput"`
	// Sandbox is "namespaces" (the default): each command runs in Linux namespaces of its own,
	// where the data directory, the other sessions' workspaces, the config and the key files are
	// covered; or "none": as the daemon's user, seeing all it sees (a user's command could read
	// every other user's workspace and the master key).
	Sandbox string `yaml:"sandbox"`
	// Network is "none": in the sandbox, a command has a network of its own with nothing but its
	// loopback; or "host": the daemon's network, where a command reaches the daemon's own API on
	// loopback and internal addresses, past the egress guard of http_request and web_search.
	// Empty is none with the sandbox, and the host's without it: a command that is not in
	// namespaces cannot be in one of its own for the network.
	Network string `yaml:"network"`
}

// HostNetwork says whether commands use the daemon's network: asked for, or the only one there is
// without the sandbox.
func (s Shell) HostNetwork() bool { return s.Network == NetworkHost || s.Sandbox == SandboxNone }

// The agent.shell.sandbox values.
const (
	SandboxNamespaces = "namespaces"
	SandboxNone       = "none"
)

// The agent.shell.network values.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// WebSearch is the search backend of the web_search tool: a SearXNG-style JSON API
// (GET URL?q=<query>&format=json answering {"results": [{"title", "url", "content"}]}). It is asked
// through the same SSRF guard as http_request (webhooks.allowPrivateNetworks, webhooks.allowCIDRs).
type WebSearch struct {
	URL string `yaml:"url"`
}

// HTTP configures the HTTP server.
type HTTP struct {
	// AllowedOrigins are the browser origins (scheme://host[:port]) that may call a daemon in
	// development mode besides its own; every other Origin is refused there.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// ReadTimeout bounds the arrival of a request's body (a stream's too, but not the stream).
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout closes keep-alive connections with no request in flight.
	IdleTimeout    Duration `yaml:"idleTimeout"`
	MaxHeaderBytes int      `yaml:"maxHeaderBytes"`
	// MaxConnections caps the connections served at once; 0 is no cap.
	MaxConnections int `yaml:"maxConnections"`
}

// Decisions configures the decision log.
type Decisions struct {
	// Durability is sync (committed before the decision is returned) or batched (written just
	// after; a crash loses the last few milliseconds of decisions).
	Durability string `yaml:"durability"`
	// RecordArguments keeps a decision's tool arguments or user input, not only their hash.
	RecordArguments bool `yaml:"recordArguments"`
}

// Writer bounds the database writer's cycles.
type Writer struct {
	// MaxRows is the most rows one cycle (one transaction) takes.
	MaxRows int `yaml:"maxRows"`
	// MaxTime bounds a cycle by its measured cost per row; 0: MaxRows alone.
	MaxTime Duration `yaml:"maxTime"`
	// MaxDelay is how long rows nobody waits for may gather before their cycle; 0: none.
	MaxDelay Duration `yaml:"maxDelay"`
	// Queue is how many writes of each kind may wait for a cycle.
	Queue int `yaml:"queue"`
}

// Retention is how long finished rows are kept; 0 keeps them for ever.
type Retention struct {
	Deliveries Duration `yaml:"deliveries"`
	Decisions  Duration `yaml:"decisions"`
}

// Console configures the compliance console.
type Console struct {
	SessionTTL Duration `yaml:"sessionTTL"`
}

// SSE configures server-sent event streams.
type SSE struct {
	Heartbeat Duration `yaml:"heartbeat"`
	// WriteTimeout drops a stream whose client has stopped reading.
	WriteTimeout Duration `yaml:"writeTimeout"`
}

// Log configures the daemon's log.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// OTel configures tracing: spans go to Endpoint over OTLP/HTTP. Empty, the standard
// OTEL_EXPORTER_OTLP_ENDPOINT decides, and with that unset too tracing exports nothing.
type OTel struct {
	Endpoint string `yaml:"endpoint"`
}

// Duration is a time.Duration written as a Go duration string ("1.5s", "30m") in YAML and in the
// environment. A bare number is not accepted.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d without zero trailing units: 1m rather than 1m0s.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("expected a duration, got " + nodeKind(n))
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return 0, fmt.Errorf("%q is not a duration (add a unit: %ss)", s, strings.TrimSpace(s))
		}
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	return Duration(v), nil
}

// Default returns the configuration used when there is no file and no environment.
func Default() Config {
	return Config{
		Listen:           "127.0.0.1:8080",
		Database:         "sqlite:./data/hookd.db",
		DatabaseMaxConns: 32,
		ShutdownTimeout:  Duration(10 * time.Second),
		MasterKeys:       []string{},
		MasterKeyFiles:   []string{},
		Auth:             Auth{AdminTokens: []string{}, APIKeys: []APIKey{}, Chat: "enabled"},
		Webhooks: Webhooks{
			AllowCIDRs: []string{},
			Retry: Retry{
				Fast: []Duration{Duration(1500 * time.Millisecond), Duration(3 * time.Second),
					Duration(6 * time.Second)},
				Ladder: []Duration{Duration(time.Minute), Duration(3 * time.Minute), Duration(5 * time.Minute),
					Duration(10 * time.Minute), Duration(20 * time.Minute), Duration(30 * time.Minute)},
				Jitter: 0.25,
			},
			Breaker:    Breaker{ConsecutiveFailures: 5, OpenFor: Duration(30 * time.Second)},
			Bulkhead:   Bulkhead{InterceptiveConcurrency: 256, ObservationalInFlight: 1024},
			ClaimLease: Duration(2 * time.Minute),
		},
		Model: Model{Provider: "scripted", StreamRecoveries: 2},
		Agent: Agent{MaxIters: 10, Name: "assistant", ToolDefault: "ask", AskTimeout: Duration(10 * time.Minute),
			RunLease: Duration(15 * time.Second),
			Shell:    Shell{Timeout: Duration(30 * time.Second), MaxOutput: 64 << 10, Sandbox: SandboxNamespaces}},
		HTTP: HTTP{AllowedOrigins: []string{}, ReadTimeout: Duration(30 * time.Second),
			IdleTimeout: Duration(2 * time.Minute), MaxHeaderBytes: 64 << 10},
		Decisions: Decisions{Durability: "sync"},
		Writer:    Writer{MaxRows: 2000, MaxTime: Duration(2 * time.Millisecond), MaxDelay: Duration(10 * time.Millisecond), Queue: 4096},
		Retention: Retention{Deliveries: Duration(30 * 24 * time.Hour), Decisions: Duration(365 * 24 * time.Hour)},
		Console:   Console{SessionTTL: Duration(8 * time.Hour)},
		SSE:       SSE{Heartbeat: Duration(15 * time.Second), WriteTimeout: Duration(30 * time.Second)},
		Log:       Log{Level: "info", Format: "auto"},
	}
}

// Load returns Default() overlaid with the YAML file at path (none when path is ""), then with
// the HOOKD_* variables in env (entries "NAME=value", as from os.Environ), then validated.
func Load(path string, env []string) (Config, error) {
	c := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		if err := decodeFile(&c, path, data); err != nil {
			return Config{}, err
		}
	}
	fromEnv, err := applyEnv(&c, env)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, attributeEnv(err, fromEnv)
	}
	return c, nil
}

// ---- YAML file ----

func decodeFile(c *Config, path string, data []byte) error {
	// First walk the document: yaml.v3's own errors name neither the key nor its path, can quote
	// values (secrets included), and it silently truncates 1.5 into an int.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if len(doc.Content) == 0 { // empty file, or only comments
		return nil
	}
	if err := check(doc.Content[0], reflect.TypeOf(Config{}), ""); err != nil {
		return err
	}
	// A key set to null leaves its default, lists as much as the rest (yaml.v3 would decode a
	// null list as an empty one: `fast: null` turned the fast retries off).
	if dropNulls(doc.Content[0]) {
		out, err := yaml.Marshal(&doc)
		if err != nil {
			return fmt.Errorf("config: %s: %w", path, err)
		}
		data = out
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return fmt.Errorf("config: %s: more than one YAML document", path)
	}
	return nil
}

// dropNulls removes the members of every mapping in n whose value is null, and tells whether
// it removed any.
func dropNulls(n *yaml.Node) bool {
	dropped := false
	if n.Kind == yaml.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				dropped = true
				continue
			}
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropped = dropNulls(c) || dropped
	}
	return dropped
}

var durationType = reflect.TypeOf(Duration(0))

// check reports the first thing in n that cannot be decoded into a value of type t, naming its
// dotted path.
func check(n *yaml.Node, t reflect.Type, path string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // null leaves the default in place
	}
	where := path
	if where == "" {
		where = "(top level)"
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			return fieldErr(where, "expected a duration, got "+nodeKind(n))
		}
		if _, err := parseDuration(n.Value); err != nil {
			return fieldErr(where, err.Error())
		}
		return nil
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fieldErr(where, "expected a mapping, got "+nodeKind(n))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" { // merge key: the merged maps are checked as this struct
				if v.Kind == yaml.SequenceNode {
					for _, m := range v.Content {
						if err := check(m, t, path); err != nil {
							return err
						}
					}
					continue
				}
				if err := check(v, t, path); err != nil {
					return err
				}
				continue
			}
			name := k.Value
			f, ok := fieldByTag(t, name)
			if k.Kind != yaml.ScalarNode || !ok {
				msg := "unknown key"
				if s := suggest(name, tagNames(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return fieldErr(join(path, name), msg)
			}
			if seen[name] {
				return fieldErr(join(path, name), "defined more than once")
			}
			seen[name] = true
			if err := check(v, f.Type, join(path, name)); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fieldErr(where, "expected a list, got "+nodeKind(n))
		}
		for i, e := range n.Content {
			if err := check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		what := typeName(t)
		if n.Kind != yaml.ScalarNode {
			return fieldErr(where, "expected "+what+", got "+nodeKind(n))
		}
		if t.Kind() == reflect.String {
			return nil
		}
		if k := t.Kind(); k >= reflect.Int && k <= reflect.Int64 && n.ShortTag() == "!!float" {
			return fieldErr(where, fmt.Sprintf("%q is not %s", n.Value, what))
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return fieldErr(where, fmt.Sprintf("%q is not %s", n.Value, what))
		}
		return nil
	}
}

// nodeKind describes a node without quoting it: the value may be a secret.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() && yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() {
			out = append(out, yamlName(f))
		}
	}
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// ---- environment ----

// LocalUser is the user of what has no configured one: the runs of scheduled tasks whose principal
// has no API key. No key may name it.
const LocalUser = "local"

const envPrefix = "HOOKD_"

// envKey is one configuration key reachable from the environment.
type envKey struct {
	name  string // HOOKD_WEBHOOKS_RETRY_FAST
	path  string // webhooks.retry.fast
	index []int
	typ   reflect.Type
}

var envKeys, envSections = buildEnvKeys()

// buildEnvKeys maps each variable to its key, and each section's would-be variable
// (HOOKD_WEBHOOKS_RETRY) to one of the variables inside it.
func buildEnvKeys() (map[string]envKey, map[string]string) {
	out, sections := map[string]envKey{}, map[string]string{}
	var walk func(t reflect.Type, name, path string, index []int)
	walk = func(t reflect.Type, name, path string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := yamlName(f)
			k := envKey{name: name + "_" + upperSnake(tag), path: join(path, tag),
				index: append(append([]int(nil), index...), i), typ: f.Type}
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				walk(f.Type, k.name, k.path, k.index)
				continue
			}
			if prev, dup := out[k.name]; dup {
				panic("config: " + prev.path + " and " + k.path + " share the variable " + k.name)
			}
			out[k.name] = k
			for p := path; p != ""; p = p[:max(strings.LastIndex(p, "."), 0)] {
				section := envPrefix + strings.ReplaceAll(upperSnakePath(p), ".", "_")
				if _, seen := sections[section]; !seen {
					sections[section] = k.name
				}
			}
		}
	}
	walk(reflect.TypeOf(Config{}), strings.TrimSuffix(envPrefix, "_"), "", nil)
	return out, sections
}

func upperSnakePath(p string) string {
	parts := strings.Split(p, ".")
	for i := range parts {
		parts[i] = upperSnake(parts[i])
	}
	return strings.Join(parts, ".")
}

// upperSnake turns a camelCase key into UPPER_SNAKE, a run of capitals being one word:
// allowCIDRs → ALLOW_CIDRS, baseURL → BASE_URL.
func upperSnake(s string) string {
	var b strings.Builder
	var prev rune
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
		prev = r
	}
	return b.String()
}

// EnvNames lists every environment variable Load understands, sorted.
func EnvNames() []string {
	out := make([]string, 0, len(envKeys))
	for n := range envKeys {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// applyEnv sets the keys named by HOOKD_* variables and returns which key paths were set by which
// variable.
func applyEnv(c *Config, env []string) (map[string]string, error) {
	set := map[string]string{}
	var errs []error
	v := reflect.ValueOf(c).Elem()
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) ||
			strings.HasPrefix(name, envPrefix+"TEST_") || strings.HasPrefix(name, envPrefix+"CLI_") || name == envPrefix+"CONFIG" {
			continue
		}
		k, ok := envKeys[name]
		if !ok && serviceLink(name, val) {
			continue // a Kubernetes service-link variable; ServiceLinks lists them for the log
		}
		if !ok {
			msg := "no such setting"
			if s, ok := envSections[name]; ok {
				msg = "names a section, not a setting (set its keys, e.g. " + s + ")"
			} else if s := suggest(name, EnvNames()); s != "" {
				msg += " (did you mean " + s + "?)"
			}
			errs = append(errs, fmt.Errorf("config: %s: %s", name, msg))
			continue
		}
		if err := setEnv(v.FieldByIndex(k.index), k, val); err != nil {
			errs = append(errs, err)
			continue
		}
		set[k.path] = name
	}
	return set, errors.Join(errs...)
}

// serviceLinkForms are the variables Kubernetes injects for a Service named hookd (or
// hookd-<anything>) when enableServiceLinks is on, each with the form of its value:
// HOOKD_SERVICE_HOST, HOOKD_SERVICE_PORT, HOOKD_SERVICE_PORT_<NAME>, HOOKD_PORT,
// HOOKD_PORT_<n>_<PROTO> and its _PROTO, _PORT and _ADDR.
var serviceLinkForms = func() []struct {
	name  *regexp.Regexp
	value func(string) bool
} {
	isIP := func(s string) bool { _, err := netip.ParseAddr(s); return err == nil }
	isPort := func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n > 0 && n < 65536 }
	isProto := func(s string) bool { return s == "tcp" || s == "udp" || s == "sctp" }
	isURL := func(s string) bool { // proto://ip:port
		proto, hostport, ok := strings.Cut(s, "://")
		host, port, err := net.SplitHostPort(hostport)
		return ok && isProto(proto) && err == nil && isIP(host) && isPort(port)
	}
	const svc = `^HOOKD_(?:[A-Z0-9_]+_)?`
	const port = svc + `PORT_[0-9]+_(?:TCP|UDP|SCTP)`
	return []struct {
		name  *regexp.Regexp
		value func(string) bool
	}{
		{regexp.MustCompile(svc + `SERVICE_HOST$`), isIP},
		{regexp.MustCompile(svc + `SERVICE_PORT(?:_[A-Z0-9_]+)?$`), isPort},
		{regexp.MustCompile(svc + `PORT$`), isURL},
		{regexp.MustCompile(port + `$`), isURL},
		{regexp.MustCompile(port + `_PROTO$`), isProto},
		{regexp.MustCompile(port + `_PORT$`), isPort},
		{regexp.MustCompile(port + `_ADDR$`), isIP},
	}
}()

// serviceLink reports whether name=val is a Kubernetes service-link variable: the name has the
// shape and the value the form Kubernetes writes, so a typo of a real setting is not taken for one.
func serviceLink(name, val string) bool {
	for _, f := range serviceLinkForms {
		if f.name.MatchString(name) && f.value(val) {
			return true
		}
	}
	return false
}

// ServiceLinks returns the names of the Kubernetes service-link variables in env, which Load
// ignores; the daemon logs them at debug level.
func ServiceLinks(env []string) []string {
	var out []string
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if _, real := envKeys[name]; !real && serviceLink(name, val) {
			out = append(out, name)
		}
	}
	return out
}

func setEnv(f reflect.Value, k envKey, val string) error {
	bad := func(key, msg string) error { return &fieldError{env: k.name, key: key, msg: msg} }
	t := k.typ
	switch {
	case t == durationType:
		d, err := parseDuration(val)
		if err != nil {
			return bad(k.path, err.Error())
		}
		f.SetInt(int64(d))
	case k.path == "masterKey" && strings.TrimSpace(val) == "":
		// An unset secret gives an empty value too; taken as no key, secrets would be sealed with
		// a key file generated in dataDir, which the key, once the secret is set, never opens.
		return bad(k.path, "is empty: unset "+k.name+" to use the configuration file's masterKey or the key file in dataDir")
	case t.Kind() == reflect.Slice && strings.TrimSpace(val) == "":
		// An unset secret in a pod spec or a shell gives an empty value; taken as an empty list it
		// would drop the file's admin tokens or API keys without a word.
		return bad(k.path, "is empty: unset "+k.name+" to keep the configuration file's value, or give [] for an empty list")
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		// A list of objects (auth.apiKeys) comes as a JSON array, held to what the YAML file is:
		// a field named twice, or in another case ("userid"), is refused, not taken as encoding/json
		// would (the last of two userIds, a field matched whatever its case).
		out := reflect.New(t)
		var se *json.SyntaxError
		err := json.Unmarshal([]byte(val), new(any))
		if errors.As(err, &se) { // its message quotes input, which may be a key
			err = fmt.Errorf("invalid JSON at offset %d", se.Offset)
		} else {
			err = hookdtype.Duplicate([]byte(val), k.path)
		}
		if err == nil {
			err = hookdtype.DecodeStrict([]byte(val), out.Interface(), k.path)
		}
		if ve := (*hookdtype.ValidationError)(nil); errors.As(err, &ve) {
			if ve.Field != k.path {
				return bad(ve.Field, ve.Msg) // a field of one item, named as validation names it
			}
			err = errors.New(ve.Msg)
		}
		if err != nil {
			return bad(k.path, `must be a JSON array like [{"key":"...","userId":"...","principalId":1}]: `+err.Error())
		}
		if out.Elem().IsNil() {
			out.Elem().Set(reflect.MakeSlice(t, 0, 0))
		}
		f.Set(out.Elem())
	case t.Kind() == reflect.Slice:
		// Comma-separated, blanks around items and empty items dropped; or a JSON array, as the
		// lists of objects come ('["a","b"]' read as items would make `["a"` a token).
		items := strings.Split(val, ",")
		if strings.HasPrefix(strings.TrimSpace(val), "[") {
			var err error
			if items, err = jsonItems(val); err != nil {
				return bad(k.path, `must be a JSON array of strings like ["a","b"], or items separated by commas: `+err.Error())
			}
		}
		out := reflect.MakeSlice(t, 0, 0)
		i := 0
		for _, item := range items {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			e := reflect.New(t.Elem()).Elem()
			if err := setScalar(e, item); err != nil {
				return bad(fmt.Sprintf("%s[%d]", k.path, i), err.Error())
			}
			out = reflect.Append(out, e)
			i++
		}
		f.Set(out)
	default:
		if err := setScalar(f, val); err != nil {
			return bad(k.path, err.Error())
		}
	}
	return nil
}

// jsonItems are the items of a JSON array of strings or numbers, as text.
func jsonItems(val string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(val))
	dec.UseNumber()
	var raw []any
	err := dec.Decode(&raw)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the array")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) { // its message quotes input, which may be a token
		err = fmt.Errorf("invalid JSON at offset %d", se.Offset)
	}
	if err != nil {
		return nil, err
	}
	items := make([]string, len(raw))
	for i, v := range raw {
		switch v := v.(type) {
		case string:
			if strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("item %d is empty", i)
			}
			items[i] = v
		case json.Number:
			items[i] = v.String()
		default:
			return nil, fmt.Errorf("item %d is not a string", i)
		}
	}
	return items, nil
}

func setScalar(f reflect.Value, val string) error {
	if f.Type() == durationType {
		d, err := parseDuration(val)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	s := strings.TrimSpace(val)
	switch f.Kind() {
	case reflect.String:
		f.SetString(val)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", val)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", val)
		}
		f.SetInt(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a number", val)
		}
		f.SetFloat(n)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// attributeEnv adds the variable's name to validation errors about keys the environment set.
func attributeEnv(err error, fromEnv map[string]string) error {
	if len(fromEnv) == 0 {
		return err
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, len(list))
	for i, e := range list {
		out[i] = e
		var fe *fieldError
		if errors.As(e, &fe) && fe.env == "" && !fe.crossKey {
			base, _, _ := strings.Cut(fe.key, "[")
			if name, ok := fromEnv[base]; ok {
				cp := *fe
				cp.env = name
				out[i] = &cp
			}
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// ---- validation ----

// fieldError is an error about one key: "config: [HOOKD_VAR: ]key: msg".
type fieldError struct {
	env      string // the variable that set the key, if any
	key      string // dotted YAML path
	msg      string
	crossKey bool // about several keys at once: not attributed to one variable
}

func (e *fieldError) Error() string {
	if e.env != "" {
		return "config: " + e.env + ": " + e.key + ": " + e.msg
	}
	return "config: " + e.key + ": " + e.msg
}

func fieldErr(key, msg string) error { return &fieldError{key: key, msg: msg} }

// Validate reports every invalid key, one error per line.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fieldErr(key, fmt.Sprintf(format, args...)))
	}

	listenOK := false
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (e.g. 127.0.0.1:8080)", c.Listen)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		bad("listen", "%q: port must be a number from 0 to 65535", c.Listen)
	} else if strings.ContainsAny(host, " /") {
		bad("listen", "%q is not host:port (e.g. 127.0.0.1:8080)", c.Listen)
	} else {
		listenOK = true
	}

	switch {
	case strings.HasPrefix(c.Database, "sqlite:"):
		// storage opens the path as written, with options of its own after it: a query, a file:
		// prefix or :memory: would name another file than the one given (an empty file called
		// "hookd.db?cache=shared" beside a failed start), or a database each connection has alone.
		switch p := strings.TrimPrefix(strings.TrimPrefix(c.Database, "sqlite:"), "//"); {
		case p == "":
			bad("database", "sqlite: needs a file path, e.g. sqlite:./data/hookd.db")
		case strings.HasPrefix(p, ":memory:") || strings.Contains(p, "mode=memory"):
			bad("database", "an in-memory sqlite database keeps no decision log or outbox and is not shared by the daemon's connections; give a file path, e.g. sqlite:./data/hookd.db")
		case strings.HasPrefix(p, "file:"):
			bad("database", "write the file's path without file:, e.g. sqlite:%s", strings.TrimPrefix(p, "file:"))
		case strings.Contains(p, "?"):
			bad("database", "sqlite: takes a file path alone (hookd sets the connection's options itself): drop %q", p[strings.Index(p, "?"):])
		}
	case strings.HasPrefix(c.Database, "postgres://"), strings.HasPrefix(c.Database, "postgresql://"):
		if _, err := url.Parse(c.Database); err != nil {
			bad("database", "not a valid postgres:// URL") // the URL may hold a password: not quoted
		}
	default:
		bad("database", `must start with "sqlite:", "postgres://" or "postgresql://"`)
	}
	if n := c.DatabaseMaxConns; n < 1 || n > 1000 {
		bad("databaseMaxConns", "must be from 1 to 1000")
	}

	if c.MasterKey != "" {
		if _, err := hookdtype.DecodeMasterKey(c.MasterKey); err != nil {
			bad("masterKey", "%v", err)
		}
	}
	switch {
	case c.MasterKey != "" && len(c.MasterKeys) > 0:
		bad("masterKeys", "set masterKey or masterKeys, not both")
	case c.MasterKey != "" && len(c.MasterKeyFiles) > 0:
		bad("masterKeyFiles", "set masterKey or masterKeyFiles, not both")
	case len(c.MasterKeys) > 0 && len(c.MasterKeyFiles) > 0:
		bad("masterKeyFiles", "set masterKeys or masterKeyFiles, not both")
	}
	_, keyErrs := c.rotationKeys()
	errs = append(errs, keyErrs...)

	if c.ShutdownTimeout <= 0 {
		bad("shutdownTimeout", "must be greater than 0")
	}

	for i, t := range c.Auth.AdminTokens {
		if strings.TrimSpace(t) == "" {
			bad(fmt.Sprintf("auth.adminTokens[%d]", i), "must not be empty")
		}
	}
	keys := map[string]int{}
	for i, k := range c.Auth.APIKeys {
		p := fmt.Sprintf("auth.apiKeys[%d]", i)
		if strings.TrimSpace(k.Key) == "" {
			bad(p+".key", "must not be empty")
		} else if j, dup := keys[k.Key]; dup {
			bad(p+".key", "same key as auth.apiKeys[%d]", j)
		} else {
			keys[k.Key] = i
		}
		if strings.TrimSpace(k.UserID) == "" {
			bad(p+".userId", "must not be empty")
		} else if k.UserID == LocalUser {
			bad(p+".userId", "%q is reserved: the runs of scheduled tasks whose principal has no key are its, and a key of it would control them", LocalUser)
		}
		if k.PrincipalID <= 0 {
			bad(p+".principalId", "must be greater than 0")
		}
		if k.AgentID < 0 {
			bad(p+".agentId", "must be greater than 0")
		}
		if slices.Contains(c.Auth.AdminTokens, k.Key) && k.Key != "" {
			bad(p+".key", "same as an admin token; admin tokens and API keys never stand in for each other")
		}
		switch k.Role {
		case "", "user":
			if len(k.Reviews) > 0 {
				bad(p+".reviews", "only a key with role: reviewer reviews other users")
			}
		case "reviewer":
			if len(k.Reviews) == 0 {
				bad(p+".reviews", "a reviewer key must list the users whose asks it answers")
			}
			for j, u := range k.Reviews {
				if strings.TrimSpace(u) == "" {
					bad(fmt.Sprintf("%s.reviews[%d]", p, j), "must not be empty")
				}
			}
		default:
			bad(p+".role", "%q is not one of user, reviewer", k.Role)
		}
	}
	// A user's keys are one identity (several keys let one be rotated), and a principal is one
	// user: chat sessions are the userId's, coding agents' sessions and hooks the principal's, so
	// keys that disagreed would let one act in the other's sessions.
	byUser, byPrincipal := map[string]int{}, map[int64]int{}
	for i, k := range c.Auth.APIKeys {
		p := fmt.Sprintf("auth.apiKeys[%d]", i)
		if j, seen := byUser[k.UserID]; seen {
			o := c.Auth.APIKeys[j]
			role := func(k APIKey) string { return cmp.Or(k.Role, "user") }
			reviews := func(k APIKey) []string { return slices.Sorted(slices.Values(k.Reviews)) }
			if o.PrincipalID != k.PrincipalID || o.AgentID != k.AgentID || role(o) != role(k) || !slices.Equal(reviews(o), reviews(k)) {
				bad(p, "userId %q is also auth.apiKeys[%d], with another principalId, agentId, role or reviews; "+
					"a user's keys must name one identity", k.UserID, j)
			}
		} else {
			byUser[k.UserID] = i
		}
		if j, seen := byPrincipal[k.PrincipalID]; seen && c.Auth.APIKeys[j].UserID != k.UserID {
			bad(p+".principalId", "%d is also auth.apiKeys[%d]'s, userId %q: one principal is one user",
				k.PrincipalID, j, c.Auth.APIKeys[j].UserID)
		} else if !seen {
			byPrincipal[k.PrincipalID] = i
		}
	}
	if c.Auth.Chat != "enabled" && c.Auth.Chat != "disabled" {
		bad("auth.chat", "%q is not one of enabled, disabled", c.Auth.Chat)
	}

	for i, s := range c.Webhooks.AllowCIDRs {
		if _, err := parsePrefix(s); err != nil {
			bad(fmt.Sprintf("webhooks.allowCIDRs[%d]", i), "%q is not a CIDR or IP address", s)
		}
	}
	for i, d := range c.Webhooks.Retry.Fast {
		if d <= 0 {
			bad(fmt.Sprintf("webhooks.retry.fast[%d]", i), "must be greater than 0")
		}
	}
	if len(c.Webhooks.Retry.Ladder) == 0 {
		// The source document appends the minute ladder after the fast retries, always: without
		// it a receiver that is down for a minute loses every event.
		bad("webhooks.retry.ladder", "must hold at least one step: the slow retries always follow the fast ones")
	}
	for i, d := range c.Webhooks.Retry.Ladder {
		if d <= 0 {
			bad(fmt.Sprintf("webhooks.retry.ladder[%d]", i), "must be greater than 0")
		}
	}
	if j := c.Webhooks.Retry.Jitter; !(j >= 0 && j <= 1) {
		bad("webhooks.retry.jitter", "must be between 0 and 1")
	}
	if c.Webhooks.Breaker.ConsecutiveFailures < 1 {
		bad("webhooks.breaker.consecutiveFailures", "must be at least 1")
	}
	if c.Webhooks.Breaker.OpenFor <= 0 {
		bad("webhooks.breaker.openFor", "must be greater than 0")
	}
	if c.Webhooks.Bulkhead.InterceptiveConcurrency < 1 {
		bad("webhooks.bulkhead.interceptiveConcurrency", "must be at least 1")
	}
	if c.Webhooks.Bulkhead.ObservationalInFlight < 1 {
		bad("webhooks.bulkhead.observationalInFlight", "must be at least 1")
	}
	if c.Webhooks.ClaimLease < Duration(time.Second) {
		bad("webhooks.claimLease", "must be at least 1s")
	}

	switch c.Model.Provider {
	case "scripted":
	case "openai":
		if c.Model.BaseURL == "" {
			bad("model.baseURL", "required when model.provider is openai")
		} else if u, err := url.Parse(c.Model.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("model.baseURL", "must be an http:// or https:// URL")
		}
		if c.Model.Name == "" {
			bad("model.name", "required when model.provider is openai")
		}
	default:
		bad("model.provider", "%q is not one of scripted, openai", c.Model.Provider)
	}

	if c.Model.StreamRecoveries < 0 || c.Model.StreamRecoveries > 10 {
		bad("model.streamRecoveries", "must be 0 (none) to 10")
	}
	if c.Agent.ToolDefault != "ask" && c.Agent.ToolDefault != "allow" {
		bad("agent.toolDefault", "must be ask or allow")
	}
	if c.Agent.AskTimeout < Duration(time.Second) {
		bad("agent.askTimeout", "must be at least 1s")
	}
	if c.Agent.RunLease < Duration(5*time.Second) {
		bad("agent.runLease", "must be at least 5s (the owner renews it every fifth of it)")
	}
	if c.Agent.Name == "" {
		bad("agent.name", "must not be empty")
	}
	if c.Agent.Shell.Timeout <= 0 {
		bad("agent.shell.timeout", "must be greater than 0")
	}
	if c.Agent.Shell.MaxOutput < 1024 {
		bad("agent.shell.maxOutput", "must be at least 1024")
	}
	if s := c.Agent.Shell.Sandbox; s != SandboxNamespaces && s != SandboxNone {
		bad("agent.shell.sandbox", "%q is not one of %s, %s", s, SandboxNamespaces, SandboxNone)
	}
	switch n := c.Agent.Shell.Network; {
	case n != "" && n != NetworkNone && n != NetworkHost:
		bad("agent.shell.network", "%q is not one of %s, %s", n, NetworkNone, NetworkHost)
	case n == NetworkNone && c.Agent.Shell.Sandbox == SandboxNone:
		bad("agent.shell.network", "%s needs the sandbox (agent.shell.sandbox: %s): without it commands use the daemon's network",
			NetworkNone, SandboxNamespaces)
	}
	if w := c.Agent.WebSearch.URL; w != "" {
		if u, err := url.Parse(w); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("agent.webSearch.url", "must be an http:// or https:// URL (a SearXNG-style search API)")
		}
	}
	if c.Agent.MaxIters < 1 {
		bad("agent.maxIters", "must be at least 1")
	}
	if c.Agent.TokenBudget < 0 {
		bad("agent.tokenBudget", "must be 0 (no budget) or more")
	}
	if c.Agent.ContextTokens < 0 {
		bad("agent.contextTokens", "must be 0 (never compact) or more")
	}
	for i, o := range c.HTTP.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			bad(fmt.Sprintf("http.allowedOrigins[%d]", i), "%q is not an origin like https://console.example:8443", o)
		}
	}
	if c.Decisions.Durability != "sync" && c.Decisions.Durability != "batched" {
		bad("decisions.durability", "%q is not one of sync, batched", c.Decisions.Durability)
	}
	if c.Writer.MaxRows < 1 {
		bad("writer.maxRows", "must be at least 1")
	}
	if d := c.Writer.MaxTime; d < 0 || d > Duration(time.Second) {
		bad("writer.maxTime", "must be from 0 to 1s")
	}
	if d := c.Writer.MaxDelay; d < 0 || d > Duration(time.Second) {
		bad("writer.maxDelay", "must be from 0 to 1s")
	}
	if c.Writer.Queue < 1 || c.Writer.Queue > 1<<20 {
		// Each kind's queue is allocated whole at start.
		bad("writer.queue", "must be from 1 to 1048576")
	}
	if r := c.Retention.Deliveries; r != 0 && r < Duration(time.Hour) {
		bad("retention.deliveries", "must be 0 (keep) or at least 1h")
	}
	if r := c.Retention.Decisions; r != 0 && r < Duration(time.Hour) {
		bad("retention.decisions", "must be 0 (keep) or at least 1h")
	}
	if t := c.Console.SessionTTL; t < Duration(5*time.Minute) || t > Duration(720*time.Hour) {
		bad("console.sessionTTL", "must be from 5m to 720h")
	}
	if c.HTTP.ReadTimeout < Duration(10*time.Millisecond) {
		bad("http.readTimeout", "must be at least 10ms")
	}
	if c.HTTP.IdleTimeout < Duration(10*time.Millisecond) {
		bad("http.idleTimeout", "must be at least 10ms")
	}
	if c.HTTP.MaxHeaderBytes < 4096 {
		bad("http.maxHeaderBytes", "must be at least 4096")
	}
	if c.HTTP.MaxConnections < 0 {
		bad("http.maxConnections", "must be 0 (no cap) or more")
	}
	if c.SSE.WriteTimeout < Duration(10*time.Millisecond) {
		bad("sse.writeTimeout", "must be at least 10ms")
	}
	if c.SSE.Heartbeat < Duration(time.Second) {
		bad("sse.heartbeat", "must be at least 1s")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "json", "text":
	default:
		bad("log.format", "%q is not one of auto, json, text", c.Log.Format)
	}
	if e := c.OTel.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("otel.endpoint", "must be an http:// or https:// URL") // not quoted: it may hold a key
		}
	}

	if listenOK && !c.LoopbackOnly() {
		switch {
		case len(c.Auth.AdminTokens) == 0 && len(c.Auth.APIKeys) == 0:
			errs = append(errs, &fieldError{key: "listen", crossKey: true, msg: c.Listen +
				" is not loopback and auth has no adminTokens or apiKeys; add tokens or listen on 127.0.0.1"})
		case len(c.Auth.APIKeys) == 0 && !c.Auth.ChatDisabled():
			errs = append(errs, &fieldError{key: "listen", crossKey: true, msg: c.Listen +
				" is not loopback and auth has no apiKeys, so nobody could be told from anybody else on the chat APIs;" +
				" add auth.apiKeys, or set auth.chat: disabled to serve the admin API alone"})
		}
	}

	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// LoopbackOnly reports whether Listen's host is a loopback address or "localhost". An empty host,
// an unspecified address (0.0.0.0, ::) or any other host listens beyond this machine.
func (c Config) LoopbackOnly() bool {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// DevelopmentMode reports whether the daemon runs without any credential: it listens on loopback
// and has neither admin tokens nor API keys. Only then are the admin API open and chat callers
// trusted to name themselves.
func (c Config) DevelopmentMode() bool {
	return c.LoopbackOnly() && len(c.Auth.AdminTokens) == 0 && len(c.Auth.APIKeys) == 0
}

// ResolvedDataDir is DataDir, or when empty the directory of the sqlite database file, or ./data
// (for postgres, or an in-memory sqlite database).
func (c Config) ResolvedDataDir() string {
	if c.DataDir != "" {
		return c.DataDir
	}
	p := c.SQLiteFile()
	if p == "" {
		return "./data"
	}
	i := strings.LastIndexAny(p, "/"+string(os.PathSeparator))
	switch {
	case i < 0:
		return "."
	case i == 0:
		return p[:1]
	}
	return p[:i] // keeps "./data" as written rather than cleaning it to "data"
}

// SQLiteFile is the file of a sqlite database, as written (relative to the working directory if
// it is relative); "" for postgres or an in-memory sqlite database.
func (c Config) SQLiteFile() string {
	if !strings.HasPrefix(c.Database, "sqlite:") {
		return ""
	}
	// The same path storage.Open uses: "sqlite:" and an optional "//" stripped.
	p := strings.TrimPrefix(strings.TrimPrefix(c.Database, "sqlite:"), "//")
	p, _, _ = strings.Cut(p, "?")
	p = strings.TrimPrefix(p, "file:")
	if strings.HasPrefix(p, ":memory:") {
		return ""
	}
	return p
}

// ---- master keys ----

// RotationKeys returns masterKeys, or the keys read from masterKeyFiles, decoded and in order (the
// first seals, any opens); nil when neither is set, and masterKey or the generated key file
// applies. The files are read on every call: a rotated Secret is picked up at the next start.
func (c Config) RotationKeys() ([][]byte, error) {
	keys, errs := c.rotationKeys()
	return keys, errors.Join(errs...)
}

func (c Config) rotationKeys() (keys [][]byte, errs []error) {
	for i, s := range c.MasterKeys {
		k, err := hookdtype.DecodeMasterKey(s)
		if err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("masterKeys[%d]", i), err.Error()))
		}
		keys = append(keys, k)
	}
	for i, path := range c.MasterKeyFiles {
		key := fmt.Sprintf("masterKeyFiles[%d]", i)
		if strings.TrimSpace(path) == "" {
			errs = append(errs, fieldErr(key, "must not be empty"))
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fieldErr(key, err.Error())) // names the path, never the content
			continue
		}
		k, err := hookdtype.DecodeMasterKey(strings.TrimSpace(string(b)))
		if err != nil {
			errs = append(errs, fieldErr(key, path+": "+err.Error()))
		}
		keys = append(keys, k)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return keys, nil
}

// ---- output ----

const mask = "***"

// redacted returns a copy of c with every secret replaced by "***" (left empty when unset), the
// password of a database URL hidden, and the passwords and query values of the other URLs. Slices are copied: c is not modified.
func (c Config) redacted() Config {
	hide := func(s string) string {
		if s == "" {
			return ""
		}
		return mask
	}
	r := c
	r.MasterKey = hide(c.MasterKey)
	r.MasterKeys = make([]string, len(c.MasterKeys))
	for i, k := range c.MasterKeys {
		r.MasterKeys[i] = hide(k)
	}
	r.Model.APIKey = hide(c.Model.APIKey)
	r.Database = redactURL(c.Database)
	// A model server, a search API or a collector may take its key in the URL (?api-key=, a
	// password): shown with the values hidden, as receivers' URLs are in errors.
	r.Model.BaseURL = hookdtype.RedactURL(c.Model.BaseURL)
	r.Agent.WebSearch.URL = hookdtype.RedactURL(c.Agent.WebSearch.URL)
	r.OTel.Endpoint = hookdtype.RedactURL(c.OTel.Endpoint)
	r.Auth.AdminTokens = make([]string, len(c.Auth.AdminTokens))
	for i, t := range c.Auth.AdminTokens {
		r.Auth.AdminTokens[i] = hide(t)
	}
	r.Auth.APIKeys = make([]APIKey, len(c.Auth.APIKeys))
	for i, k := range c.Auth.APIKeys {
		k.Key = hide(k.Key)
		r.Auth.APIKeys[i] = k
	}
	return r
}

// redactURL hides the passwords of a database URL; a sqlite path without one stays as written.
func redactURL(raw string) string {
	if len(hookdtype.DSNSecrets(raw)) == 0 && !strings.Contains(raw, "@") {
		return raw
	}
	return hookdtype.RedactDSN(raw)
}

// String is c as YAML for logs, with masterKey, auth.adminTokens, auth.apiKeys[].key,
// model.apiKey and any database password shown as "***".
func (c Config) String() string {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c.redacted()); err != nil {
		return "config: " + err.Error()
	}
	_ = enc.Close()
	return b.String()
}

// GoString keeps %#v from printing secrets.
func (c Config) GoString() string { return c.String() }

// LogValue keeps slog (whose JSON handler would otherwise marshal the struct, secrets included)
// to the redacted form.
func (c Config) LogValue() slog.Value {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(c.String()), &m); err != nil {
		return slog.StringValue(c.String())
	}
	return slog.AnyValue(m)
}

// suggest returns the candidate closest to s when it is close enough to be a likely typo.
var suggest = hookdtype.Suggest
