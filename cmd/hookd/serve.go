package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/config"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/tracing"
)

func newServeCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "run the daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, os.Environ())
			if err != nil {
				return codeError{2, err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := newLogger(cfg.Log, cmd.ErrOrStderr())
			for _, name := range config.ServiceLinks(os.Environ()) {
				log.Debug("ignoring a Kubernetes service-link variable", "name", name)
			}
			return serve(ctx, cfg, path, log)
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// configFlag gives cmd the --config flag of the commands that read the daemon's config.
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "config", os.Getenv("HOOKD_CONFIG"), "YAML config file (HOOKD_CONFIG; default: none, the embedded defaults)")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
}

// serve runs the daemon, configured by cfg (loaded from configPath, if any), until ctx ends,
// then shuts down within cfg.ShutdownTimeout.
func serve(ctx context.Context, cfg config.Config, configPath string, log *slog.Logger) error {
	log.Info("starting hookd", "version", version, "config", cfg)
	// First: a shell that cannot run as configured refuses the start before anything is opened.
	shell, err := newShell(cfg, configPath, log)
	if err != nil {
		return err
	}
	tc := tracing.Config{Endpoint: cfg.OTel.Endpoint, Version: version}
	stopTracing, err := tracing.Setup(ctx, tc)
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(c); err != nil {
			log.Warn("traces not flushed", "err", err)
		}
	}()
	if tc.Enabled() {
		log.Info("tracing: spans go out over OTLP/HTTP", "endpoint", cmp.Or(hookdtype.RedactURL(tc.Endpoint), "from OTEL_EXPORTER_OTLP_*"))
	}
	db, err := openSealed(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()

	egressPolicy := netguard.Policy{AllowPrivateNetworks: cfg.Webhooks.AllowPrivateNetworks, AllowCIDRs: cfg.Webhooks.AllowedPrefixes()}
	guard := netguard.New(egressPolicy)
	hooks, err := dispatcher.NewRegistry(ctx, db, log, dispatcher.WithGuard(guard))
	if err != nil {
		return fmt.Errorf("load hooks: %w", err)
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookd_hooks_secret_unreadable",
			Help: "Hooks whose stored secrets open with no configured master key (they call no receiver until a PUT sets the secret)."},
			func() float64 { return float64(hooks.SecretsUnreadable()) }))
	disp := dispatcher.New(db, hooks, log, dispatcher.Settings{
		Metrics: metrics,
		Retry: dispatcher.RetryPolicy{Fast: durations(cfg.Webhooks.Retry.Fast), Ladder: durations(cfg.Webhooks.Retry.Ladder),
			Jitter: cfg.Webhooks.Retry.Jitter},
		Breaker: breaker.Settings{ConsecutiveFailures: uint32(cfg.Webhooks.Breaker.ConsecutiveFailures),
			OpenFor: cfg.Webhooks.Breaker.OpenFor.Std()},
		InterceptiveConcurrency: cfg.Webhooks.Bulkhead.InterceptiveConcurrency,
		ObservationalInFlight:   cfg.Webhooks.Bulkhead.ObservationalInFlight,
		Transport:               guard.Transport(),
		Version:                 version,
		Lease:                   cfg.Webhooks.ClaimLease.Std(),
		DecisionDurability:      cfg.Decisions.Durability,
		RecordArguments:         cfg.Decisions.RecordArguments,
		Writer: dispatcher.WriterLimits{MaxRows: cfg.Writer.MaxRows, MaxTime: orNone(cfg.Writer.MaxTime.Std()),
			MaxDelay: orNone(cfg.Writer.MaxDelay.Std()), Queue: cfg.Writer.Queue},
		Retention: dispatcher.Retention{Deliveries: cfg.Retention.Deliveries.Std(),
			Decisions: cfg.Retention.Decisions.Std()},
	})
	if err := disp.Start(ctx); err != nil {
		return fmt.Errorf("start dispatcher: %w", err)
	}
	regCtx, stopReg := context.WithCancel(context.Background())
	defer stopReg()
	go hooks.Run(regCtx)

	mdl, err := newModel(cfg.Model)
	if err != nil {
		return err
	}
	// The agent's tools dial through a guard of their own, the receivers' policy less this
	// daemon's own listener: with private networks allowed for receivers, http_request reached the
	// API on loopback, which in development mode takes requests without a token (a model could
	// delete the hooks that govern it).
	toolGuard := netguard.New(egressPolicy)
	if _, p, err := net.SplitHostPort(cfg.Listen); err == nil {
		if port, err := strconv.ParseUint(p, 10, 16); err == nil {
			toolGuard.RefuseLocalPort(uint16(port)) // the port bound below, unless it is 0
		}
	}
	egress := &http.Client{Transport: toolGuard.Transport(), Timeout: 60 * time.Second}
	toolset := tools.NewRegistry(tools.NewWriteFile(), tools.NewReadFile(), tools.NewListFiles(), tools.NewSendAttachment(),
		tools.NewHTTPRequest(egress))
	if u := cfg.Agent.WebSearch.URL; u != "" {
		search, err := tools.NewWebSearch(u, egress)
		if err != nil {
			return fmt.Errorf("agent.webSearch.url: %w", err)
		}
		toolset.Add(search)
	}
	if shell != nil {
		toolset.Add(shell)
	}
	// The owner names this process among replicas; the random part keeps two processes apart
	// even when host and pid repeat (containers).
	host, _ := os.Hostname()
	var nonce [3]byte
	_, _ = rand.Read(nonce[:])
	owner := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(nonce[:]))
	workspaces := tools.NewWorkspaces(workspacesRoot(cfg))
	runtime := agent.New(db, disp, mdl, toolset, workspaces, log, agent.Config{
		MaxIters: cfg.Agent.MaxIters, TokenBudget: int64(cfg.Agent.TokenBudget), ContextTokens: int64(cfg.Agent.ContextTokens), AgentName: cfg.Agent.Name,
		ModelName: modelName(cfg.Model), Owner: owner,
		DefaultBehavior: cfg.Agent.ToolDefault, AskTimeout: cfg.Agent.AskTimeout.Std(), RunLease: cfg.Agent.RunLease.Std(), Metrics: metrics})
	if err := runtime.Start(ctx); err != nil {
		return fmt.Errorf("start agent runtime: %w", err)
	}
	// A task's runs belong to the user of the api key with the task's principal, so that user
	// sees them through the chat APIs.
	users := map[int64]string{}
	for _, k := range cfg.Auth.APIKeys {
		users[k.PrincipalID] = k.UserID
	}
	sched := scheduler.New(db, runtime, disp, log, scheduler.Config{UserFor: func(p *int64) string {
		if p == nil || users[*p] == "" {
			return config.LocalUser
		}
		return users[*p]
	}, AgentFor: cfg.Auth.TaskAgent})
	if err := sched.Start(ctx); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	defer sched.Stop()

	loopback := cfg.LoopbackOnly()
	switch {
	case cfg.Auth.ChatDisabled():
		log.Info("chat APIs off (auth.chat: disabled)")
	case cfg.DevelopmentMode():
		log.Warn("no adminTokens or apiKeys configured: development mode, listening on loopback only;"+
			" chat callers name themselves (userId, X-User-Id)", "listen", cfg.Listen)
	case len(cfg.Auth.APIKeys) == 0:
		log.Warn("no apiKeys configured: every chat request is refused until auth.apiKeys is set")
	}
	// Request contexts derive from baseCtx, so ending it ends the streams still open at shutdown.
	// Its cause tells a decision cut short by it from one whose caller went away: that caller is
	// still there, and a coding agent is answered a block, not nothing.
	baseCtx, endRequests := context.WithCancelCause(context.Background())
	endStreams := func() { endRequests(dispatcher.ErrShutdown) }
	defer endStreams()
	srv := api.NewServer(api.Deps{DB: db, Hooks: hooks, Dispatcher: disp, Scheduler: sched, AdminTokens: cfg.Auth.AdminTokens,
		LoopbackOnly: loopback, Log: log, Runtime: runtime, Keys: wire.NewKeys(apiKeys(cfg.Auth.APIKeys)),
		Workspaces: workspaces, ConsoleTTL: cfg.Console.SessionTTL.Std(), Heartbeat: cfg.SSE.Heartbeat.Std(), Metrics: metrics, ChatDisabled: cfg.Auth.ChatDisabled(),
		AllowedOrigins: cfg.HTTP.AllowedOrigins, Limits: api.Limits{ReadTimeout: cfg.HTTP.ReadTimeout.Std(),
			IdleTimeout: cfg.HTTP.IdleTimeout.Std(), MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes,
			SSEWriteTimeout: cfg.SSE.WriteTimeout.Std()}})
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		toolGuard.RefuseLocalPort(uint16(a.Port))
	}
	ln = api.LimitListener(ln, cfg.HTTP.MaxConnections)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "database", string(db.Dialect()))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Std())
	defer cancel()
	// 1. No new connections; requests in progress go on for now.
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(sctx) }()
	// 2. No new firings, then running runs pause (SHUTDOWN_INTERRUPT) — their clients see that
	// pause as the last frame of their stream and resume after the restart.
	sched.Stop()
	runtime.Shutdown(sctx)
	// 3. Streams still open (a paused run's stream waits for a resume) end after a moment to
	// send that frame.
	select {
	case err := <-httpDone:
		logShutdownErr(log, err)
	case <-time.After(streamGrace):
		endStreams()
		logShutdownErr(log, <-httpDone)
	}
	// 4. Deliveries in flight finish within what is left of the bound; the rest go out after
	// the restart.
	disp.Stop(sctx)
	stopReg()
	log.Info("stopped")
	return nil
}

// orNone is a writer.* duration as WriterLimits takes it: there 0 means the default, and none is
// negative.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// streamGrace is how long open streams get to send their last frame at shutdown.
const streamGrace = time.Second

func logShutdownErr(log *slog.Logger, err error) {
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", err)
	}
}

// workspacesRoot is where the sessions' workspaces are.
func workspacesRoot(cfg config.Config) string {
	if cfg.Agent.Workspaces != "" {
		return cfg.Agent.Workspaces
	}
	return filepath.Join(cfg.ResolvedDataDir(), "workspaces")
}

// newShell is the shell_execute tool agent.shell configures, nil when it is off. A sandbox that
// cannot run a command on this machine refuses the start: commands never run unsandboxed unless
// agent.shell.sandbox says none.
func newShell(cfg config.Config, configPath string, log *slog.Logger) (*tools.Shell, error) {
	c := cfg.Agent.Shell
	if !c.Enabled {
		return nil, nil
	}
	sc := tools.ShellConfig{Timeout: c.Timeout.Std(), MaxOutput: c.MaxOutput}
	if c.Sandbox == config.SandboxNone {
		log.Warn("agent.shell.sandbox is none: shell_execute commands run with the daemon's view of the file system and its network;" +
			" one session's command can read the other sessions' workspaces, the database, the master key and the config," +
			" and reach the daemon's own API on loopback and internal addresses, past the egress guard")
		return tools.NewShell(sc), nil
	}
	hide, err := sandboxHide(cfg, configPath)
	if err != nil {
		return nil, fmt.Errorf("agent.shell.sandbox: %w", err)
	}
	// /proc/self/exe is the binary this process started from, even once its file is replaced (an
	// upgrade; or a command, where the daemon's user may write it).
	sc.Sandbox = &tools.Sandbox{Exe: "/proc/self/exe", Hide: hide, HostNetwork: c.HostNetwork()}
	if err := sc.Sandbox.Check(); err != nil {
		return nil, fmt.Errorf("agent.shell.sandbox: %s: shell_execute commands cannot run in the sandbox on this machine,"+
			" which needs user namespaces, mounts in them and, unless agent.shell.network is %s, a network namespace (%w);"+
			" set agent.shell.sandbox: %s to run them unsandboxed, with the daemon's view of the file system, or agent.shell.enabled: false",
			config.SandboxNamespaces, config.NetworkHost, err, config.SandboxNone)
	}
	if c.HostNetwork() {
		log.Warn("agent.shell.network is host: shell_execute commands use the daemon's network; they can reach the daemon's" +
			" own API on loopback and internal addresses, past the egress guard of http_request and web_search")
	}
	log.Info("shell_execute commands run sandboxed", "hidden", hide, "network", cmp.Or(c.Network, config.NetworkNone))
	return tools.NewShell(sc), nil
}

// sandboxHide is what a sandboxed command must not see, as absolute paths: the data directory
// (the generated master key, the database by default), the workspaces root (the command's own
// workspace is mounted back), the database's files wherever they are, the config file and the
// master key files.
func sandboxHide(cfg config.Config, configPath string) ([]string, error) {
	paths := []string{cfg.ResolvedDataDir(), workspacesRoot(cfg), configPath}
	switch db := cfg.SQLiteFile(); {
	case db != "":
		// SQLite keeps the latest commits beside the file.
		paths = append(paths, db, db+"-wal", db+"-shm", db+"-journal")
	case strings.HasPrefix(cfg.Database, "postgres"):
		paths = append(paths, postgresFiles(cfg.Database)...)
	}
	paths = append(paths, cfg.MasterKeyFiles...)
	var hide []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(hide, abs) {
			hide = append(hide, abs)
		}
	}
	return hide, nil
}

// postgresFiles are the files a PostgreSQL connection may take its credentials from (as pgx
// does): those its URL or the PG* environment names, and the defaults in the daemon's home.
func postgresFiles(dsn string) []string {
	var files []string
	if u, err := url.Parse(dsn); err == nil {
		q := u.Query()
		files = append(files, q.Get("passfile"), q.Get("servicefile"), q.Get("sslkey"))
	}
	for _, v := range []string{"PGPASSFILE", "PGSERVICEFILE", "PGSSLKEY"} {
		files = append(files, os.Getenv(v))
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		files = append(files, filepath.Join(u.HomeDir, ".pgpass"), filepath.Join(u.HomeDir, ".pg_service.conf"),
			filepath.Join(u.HomeDir, ".postgresql"))
	}
	return files
}

// newModel builds the configured model provider.
func newModel(c config.Model) (model.Model, error) {
	switch c.Provider {
	case "openai":
		recoveries := c.StreamRecoveries
		if recoveries == 0 {
			recoveries = -1 // the provider's 0 is its default; the config's 0 is none
		}
		return model.NewOpenAI(model.OpenAIConfig{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Name,
			StreamRecoveries: recoveries}), nil
	default:
		if c.Script == "" {
			return model.DefaultScript(), nil
		}
		m, err := model.LoadScript(c.Script)
		if err != nil {
			return nil, fmt.Errorf("model.script: %w", err)
		}
		return m, nil
	}
}

func modelName(c config.Model) string {
	if c.Provider == "openai" {
		return c.Name
	}
	return model.ScriptedModelName
}

func apiKeys(keys []config.APIKey) []wire.APIKey {
	out := make([]wire.APIKey, len(keys))
	for i, k := range keys {
		out[i] = wire.APIKey{Key: k.Key, UserID: k.UserID, PrincipalID: k.PrincipalID, Role: wire.Role(k.Role),
			Reviews: k.Reviews, AgentID: k.AgentID}
	}
	return out
}

func durations(ds []config.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Std()
	}
	return out
}

// newLogger writes JSON lines, or text when format is auto and stderr is a terminal.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(strings.ToUpper(c.Level)))
	opts := &slog.HandlerOptions{Level: level}
	text := c.Format == "text"
	if c.Format == "auto" || c.Format == "" {
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				text = true
			}
		}
	}
	if text {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
}
