package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/hookd/hookd/config"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// newDoctorCmd checks, without changing anything, what serve would stand on: the config, the
// shell's sandbox, the database and its schema version, the master key against the sealed
// secrets, each hook against today's registration rules, and each hook's receiver against the
// SSRF guard. It exits 1 when any check fails.
func newDoctorCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "doctor [--config FILE]",
		Short: "check the config, database, master key and receivers serve would use (exit 1 on a problem)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := &doctor{out: cmd.OutOrStdout()}
			d.run(cmd.Context(), path)
			if d.failed > 0 {
				return fmt.Errorf("%d problem(s) found", d.failed)
			}
			fmt.Fprintln(d.out, "no problems found")
			return nil
		},
	}
	configFlag(cmd, &path)
	return cmd
}

type doctor struct {
	out    io.Writer
	failed int
}

func (d *doctor) ok(what, format string, a ...any) {
	fmt.Fprintf(d.out, "ok    %-10s %s\n", what, fmt.Sprintf(format, a...))
}

func (d *doctor) note(what, format string, a ...any) {
	fmt.Fprintf(d.out, "note  %-10s %s\n", what, fmt.Sprintf(format, a...))
}

func (d *doctor) fail(what, format string, a ...any) {
	d.failed++
	fmt.Fprintf(d.out, "FAIL  %-10s %s\n", what, fmt.Sprintf(format, a...))
}

// shell checks the shell_execute tool as serve would build it: a sandbox this machine cannot
// make refuses serve's start, and no sandbox at all is worth saying.
func (d *doctor) shell(cfg config.Config, path string) {
	switch c := cfg.Agent.Shell; {
	case !c.Enabled:
	case c.Sandbox == config.SandboxNone:
		d.note("shell", "agent.shell.sandbox is none: a shell_execute command sees the other sessions' workspaces, the database and the master key")
	default:
		if _, err := newShell(cfg, path, slog.New(slog.DiscardHandler)); err != nil {
			d.fail("shell", "%v", err)
			return
		}
		d.ok("shell", "shell_execute commands run sandboxed")
		if c.HostNetwork() {
			d.note("shell", "agent.shell.network is host: a shell_execute command reaches the daemon's API and internal addresses, past the egress guard")
		}
	}
}

func (d *doctor) run(ctx context.Context, path string) {
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		d.fail("config", "%v", err)
		return
	}
	d.ok("config", "%s", cmp.Or(path, "the embedded defaults"))
	d.shell(cfg, path)
	d.listen(cfg)
	// The model is built as serve builds it: a script that does not load stops serve's start.
	if _, err := newModel(cfg.Model); err != nil {
		d.fail("model", "%v", err)
	}

	// The schema is read before storage opens the database, since opening migrates it.
	applied, exists, err := schemaVersions(ctx, cfg.Database)
	if err != nil {
		d.fail("database", "%v", err)
		return
	}
	// The key is checked as serve finds it, or makes it: a key file that does not decode, or a
	// data directory where none can be written, stops serve before it opens the database.
	keys, _, err := masterKeys(cfg, false)
	if err != nil {
		d.fail("masterKey", "%v", err)
		return
	}
	if !exists {
		d.note("database", "%s has no schema yet: serve creates it", hookdtype.RedactDSN(cfg.Database))
		if keys == nil {
			d.newKeyFile(cfg)
		}
		return
	}
	known := storage.KnownSchemaVersion()
	newest := slices.Max(append(applied, 0))
	if newest > known {
		d.fail("schema", "version %d is newer than this binary's %d: a newer hookd migrated this database; run that version", newest, known)
		return
	}
	if keys == nil {
		// serve generates the key file over a database that holds no sealed secret, and refuses
		// to over one that does.
		sealed, err := sealedSecrets(ctx, cfg.Database)
		switch {
		case err != nil:
			d.fail("database", "%v", err)
		case sealed:
			d.fail("masterKey", "none configured and no %s: the secrets sealed in this database cannot be opened", filepath.Join(cfg.ResolvedDataDir(), "master.key"))
		default:
			d.newKeyFile(cfg)
		}
		return
	}
	if newest < known {
		// Opening it would migrate it: doctor changes nothing.
		d.note("schema", "version %d; serve will migrate it to %d (sealed secrets and receivers not checked before that)", newest, known)
		return
	}
	db, err := storage.Open(ctx, cfg.Database, storage.Options{Key: keys[0], OldKeys: keys[1:], MaxConns: cfg.DatabaseMaxConns,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		var tooNew *storage.SchemaTooNewError
		if errors.As(err, &tooNew) {
			d.fail("schema", "%v", err)
		} else {
			d.fail("database", "%v", err)
		}
		return
	}
	defer db.Close()
	d.ok("database", "%s, schema version %d", db.Dialect(), newest)
	d.keys(ctx, db, keyNames(cfg, len(keys)))

	reg, err := dispatcher.NewRegistry(ctx, db, slog.New(slog.DiscardHandler))
	if err != nil {
		d.fail("database", "hooks: %v", err)
		return
	}
	hooks, err := reg.List(ctx, storage.HookFilter{})
	if err != nil {
		d.fail("database", "hooks: %v", err)
		return
	}
	guard := netguard.New(netguard.Policy{AllowPrivateNetworks: cfg.Webhooks.AllowPrivateNetworks,
		AllowCIDRs: cfg.Webhooks.AllowedPrefixes()})
	for _, h := range hooks {
		d.stored(ctx, reg, h)
		d.receiver(ctx, guard, h)
	}
}

// stored checks h against the registration rules of this binary, as a PUT of it unchanged (GET
// then PUT) would be: a hook stored before a rule it breaks was made still runs as stored, and
// may fail on every call (an auth header named like one hookd sets, say).
func (d *doctor) stored(ctx context.Context, reg *dispatcher.Registry, h dispatcher.Hook) {
	if _, err := reg.Check(ctx, h.ID, h.Masked()); err != nil {
		d.fail(fmt.Sprintf("hook %d", h.ID), "%s: stored before a rule it breaks: %v; a PUT that mends it brings it in line", h.HookName, err)
	}
	for _, n := range h.Notes() {
		d.note(fmt.Sprintf("hook %d", h.ID), "%s: %s", h.HookName, n)
	}
}

// receiver checks that h's receiver (and token endpoint) resolve to addresses the guard allows.
func (d *doctor) receiver(ctx context.Context, guard *netguard.Guard, h dispatcher.Hook) {
	if h.DispatchType != dispatcher.DispatchWebhook {
		return
	}
	what := fmt.Sprintf("hook %d", h.ID)
	targets := []string{h.DispatchConfig.URL}
	if a := h.DispatchConfig.Auth; a != nil && a.TokenFetchConfig != nil {
		targets = append(targets, a.TokenFetchConfig.URL)
	}
	for _, t := range targets {
		u, err := url.Parse(t)
		if err != nil {
			d.fail(what, "%s: %q is not a URL", h.HookName, t)
			continue
		}
		lookup, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = guard.CheckHost(lookup, u.Hostname())
		cancel()
		var blocked *netguard.BlockedError
		switch {
		case errors.As(err, &blocked):
			d.fail(what, "%s: receiver %s: %v (webhooks.allowPrivateNetworks or webhooks.allowCIDRs decide)", h.HookName, u.Host, blocked)
		case err != nil:
			d.fail(what, "%s: receiver %s does not resolve: %v", h.HookName, u.Host, err)
		default:
			d.ok(what, "%s: receiver %s resolves to an allowed address", h.HookName, u.Host)
		}
	}
}

// keys reports which of the configured master keys opens each hook's sealed secrets: secrets
// that open with none are a problem; an older key still in use, or one opening nothing, a note.
func (d *doctor) keys(ctx context.Context, db *storage.DB, names []string) {
	opens, err := db.SealedSecretKeys(ctx)
	if err != nil {
		d.fail("masterKey", "%v", err)
		return
	}
	byKey := map[int][]int64{}
	for id, k := range opens {
		byKey[k] = append(byKey[k], id)
	}
	for _, ids := range byKey {
		slices.Sort(ids)
	}
	if len(opens) == 0 {
		d.ok("masterKey", "%s seals; no sealed secrets are stored yet", names[0])
	}
	for i, name := range names {
		switch ids := byKey[i]; {
		case len(ids) > 0 && i == 0:
			d.ok("masterKey", "%s (sealing) opens the sealed secrets of hooks %v", name, ids)
		case len(ids) > 0:
			d.note("masterKey", "%s (older) opens the sealed secrets of hooks %v: hookd keys rotate re-seals them with %s", name, ids, names[0])
		case i > 0 && len(opens) > 0:
			d.note("masterKey", "%s opens no stored secret: it can be removed", name)
		}
	}
	if ids := byKey[-1]; len(ids) > 0 {
		d.fail("masterKey", "no configured key opens the sealed secrets of hooks %v: they call no receiver until a PUT sets their secrets again", ids)
	}
}

// keyNames names the n configured master keys as the config does, in masterKeys' order.
func keyNames(cfg config.Config, n int) []string {
	names := make([]string, n)
	for i := range names {
		switch {
		case len(cfg.MasterKeyFiles) > 0:
			names[i] = fmt.Sprintf("masterKeyFiles[%d] (%s)", i, cfg.MasterKeyFiles[i])
		case len(cfg.MasterKeys) > 0:
			names[i] = fmt.Sprintf("masterKeys[%d]", i)
		case cfg.MasterKey != "":
			names[i] = "masterKey"
		default:
			names[i] = filepath.Join(cfg.ResolvedDataDir(), "master.key")
		}
	}
	return names
}

// listen checks that serve could listen where the config says: an address this machine does not
// have, or a port it may not bind, stops serve. One in use is a note: doctor is run beside the
// daemon it checks.
func (d *doctor) listen(cfg config.Config) {
	ln, err := net.Listen("tcp", cfg.Listen)
	switch {
	case err == nil:
		ln.Close()
	case errors.Is(err, syscall.EADDRINUSE):
		d.note("listen", "%s is in use (by the daemon this config runs?)", cfg.Listen)
	default:
		d.fail("listen", "serve cannot listen on %s: %v", cfg.Listen, err)
	}
}

// newKeyFile checks that serve, finding no master key configured, can write the one it generates.
func (d *doctor) newKeyFile(cfg config.Config) {
	dir := cfg.ResolvedDataDir()
	keyFile := filepath.Join(dir, "master.key")
	if err := keyNotGenerated(cfg); err != nil {
		d.fail("masterKey", "%v", err)
		return
	}
	if err := writableDir(dir); err != nil {
		d.fail("masterKey", "none configured, and serve cannot generate %s: %v", keyFile, err)
		return
	}
	d.note("masterKey", "none configured: serve generates %s; back it up", keyFile)
}

// writableDir tells whether dir is, or can be made, a directory this process writes in: its
// nearest existing ancestor must be a directory it may write in.
func writableDir(dir string) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s is not a directory", p)
		case err == nil:
			if err := unix.Access(p, unix.W_OK); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist) || filepath.Dir(p) == p:
			return err
		}
	}
}

// sealedSecrets tells whether the database holds any hook's sealed secrets, read as
// schemaVersions reads, without opening the database.
func sealedSecrets(ctx context.Context, rawURL string) (bool, error) {
	db, err := openRaw(rawURL)
	if err != nil {
		return false, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM hooks WHERE secrets_enc IS NOT NULL AND LENGTH(secrets_enc) > 0`).Scan(&n); err != nil {
		return false, fmt.Errorf("%s: sealed secrets: %v", hookdtype.RedactDSN(rawURL), err)
	}
	return n > 0, nil
}

// openRaw opens the database with database/sql alone (a sqlite file read-only), nothing migrated.
func openRaw(rawURL string) (*sql.DB, error) {
	var db *sql.DB
	var err error
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		db, err = sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		db, err = sql.Open("pgx", rawURL)
	default:
		return nil, fmt.Errorf("database %q: want sqlite:PATH or postgres://", hookdtype.RedactDSN(rawURL))
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %v", hookdtype.RedactDSN(rawURL), err)
	}
	return db, nil
}

// schemaVersions reads the applied migrations without opening (and so migrating) the database;
// exists is false for a database that does not exist yet or has no schema.
func schemaVersions(ctx context.Context, rawURL string) (versions []int, exists bool, err error) {
	if path, ok := strings.CutPrefix(rawURL, "sqlite:"); ok {
		if _, err := os.Stat(strings.TrimPrefix(path, "//")); errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
	}
	db, err := openRaw(rawURL)
	if err != nil {
		return nil, false, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return nil, false, fmt.Errorf("cannot reach %s: %v", hookdtype.RedactDSN(rawURL), err)
	}
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, false, nil // no table: a database hookd has not set up yet
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, true, err
		}
		versions = append(versions, v)
	}
	return versions, len(versions) > 0, rows.Err()
}
