package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// A migration is applied once, in order, inside one transaction. Migrations are append-only: a
// released one is never edited; change the schema with a new one.
type migration struct {
	version int
	name    string
	stmts   []string
}

// DDL is written once for both databases; these words differ.
var dialectWords = map[Dialect]*strings.Replacer{
	SQLite:   strings.NewReplacer("{{pk}}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{{blob}}", "BLOB", "{{bool}}", "BOOLEAN"),
	Postgres: strings.NewReplacer("{{pk}}", "BIGSERIAL PRIMARY KEY", "{{blob}}", "BYTEA", "{{bool}}", "BOOLEAN"),
}

var migrations = []migration{
	{1, "hooks", []string{
		`CREATE TABLE hooks (
			id {{pk}},
			hook_type TEXT NOT NULL,
			agent_id BIGINT,
			enabled {{bool}} NOT NULL,
			priority INTEGER NOT NULL DEFAULT 0,
			doc TEXT NOT NULL,
			secrets_enc {{blob}},
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX hooks_type ON hooks (hook_type, enabled)`,
	}},
	{2, "outbox", []string{
		`CREATE TABLE deliveries (
			id {{pk}},
			event_id TEXT NOT NULL UNIQUE,
			hook_id BIGINT NOT NULL,
			hook_type TEXT NOT NULL,
			hook_name TEXT NOT NULL,
			occurred_at BIGINT NOT NULL,
			trace_id TEXT,
			session_id BIGINT,
			principal_id BIGINT,
			agent_id BIGINT,
			context TEXT NOT NULL,
			status TEXT NOT NULL,
			attempts INTEGER NOT NULL DEFAULT 0,
			next_attempt_at BIGINT NOT NULL,
			lease_until BIGINT NOT NULL DEFAULT 0,
			last_status_code INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at)`,
		`CREATE INDEX deliveries_hook ON deliveries (hook_id, id)`,
		`CREATE TABLE delivery_attempts (
			id {{pk}},
			delivery_id BIGINT NOT NULL,
			attempt INTEGER NOT NULL,
			dispatched_at BIGINT NOT NULL,
			status_code INTEGER NOT NULL DEFAULT 0,
			error_class TEXT NOT NULL DEFAULT '',
			error TEXT NOT NULL DEFAULT '',
			latency_ms BIGINT NOT NULL DEFAULT 0,
			response_body TEXT NOT NULL DEFAULT ''
		)`,
		`CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, attempt)`,
		`CREATE TABLE decisions (
			id {{pk}},
			decision_id TEXT NOT NULL,
			event_id TEXT NOT NULL,
			hook_id BIGINT NOT NULL,
			hook_name TEXT NOT NULL,
			hook_type TEXT NOT NULL,
			session_id BIGINT,
			trace_id TEXT,
			outcome TEXT NOT NULL,
			reason TEXT NOT NULL DEFAULT '',
			from_failure_mode {{bool}} NOT NULL,
			status_code INTEGER NOT NULL DEFAULT 0,
			error TEXT NOT NULL DEFAULT '',
			latency_ms BIGINT NOT NULL DEFAULT 0,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX decisions_type ON decisions (hook_type, id)`,
		`CREATE INDEX decisions_session ON decisions (session_id, id)`,
		`CREATE INDEX decisions_decision ON decisions (decision_id)`,
	}},
	{3, "sessions and runs", []string{
		`CREATE TABLE sessions (
			id {{pk}},
			user_id TEXT NOT NULL,
			session_key TEXT NOT NULL,
			principal_id BIGINT,
			agent_id BIGINT,
			parent_id BIGINT,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE UNIQUE INDEX sessions_key ON sessions (user_id, session_key)`,
		`CREATE TABLE messages (
			id {{pk}},
			session_id BIGINT NOT NULL,
			run_id BIGINT,
			role TEXT NOT NULL,
			body TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX messages_session ON messages (session_id, id)`,
		`CREATE TABLE runs (
			id {{pk}},
			request_id TEXT NOT NULL UNIQUE,
			session_id BIGINT NOT NULL,
			user_id TEXT NOT NULL,
			status TEXT NOT NULL,
			spec TEXT NOT NULL,
			state TEXT NOT NULL DEFAULT '',
			error_code TEXT NOT NULL DEFAULT '',
			error_message TEXT NOT NULL DEFAULT '',
			owner TEXT NOT NULL DEFAULT '',
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX runs_session ON runs (session_id, id)`,
		`CREATE INDEX runs_status ON runs (status)`,
		// One live run per session, enforced by the database so replicas agree too.
		`CREATE UNIQUE INDEX runs_live ON runs (session_id) WHERE status IN ('running', 'suspended')`,
		`CREATE TABLE attachments (
			id {{pk}},
			session_id BIGINT NOT NULL,
			message_id BIGINT,
			path TEXT NOT NULL,
			file_name TEXT NOT NULL,
			extension TEXT NOT NULL,
			content_type TEXT NOT NULL,
			size BIGINT NOT NULL,
			source TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE UNIQUE INDEX attachments_path ON attachments (session_id, path)`,
		`CREATE TABLE run_events (
			run_id BIGINT NOT NULL,
			seq BIGINT NOT NULL,
			body TEXT NOT NULL,
			PRIMARY KEY (run_id, seq)
		)`,
	}},
	{4, "permissions", []string{
		`CREATE TABLE permission_rules (
			id {{pk}},
			tool_name TEXT NOT NULL,
			rule_content TEXT NOT NULL,
			behavior TEXT NOT NULL,
			source TEXT NOT NULL,
			scope TEXT NOT NULL,
			scope_key TEXT NOT NULL,
			expires_at BIGINT NOT NULL DEFAULT 0,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX permission_rules_scope ON permission_rules (scope, scope_key)`,
		`CREATE TABLE asks (
			ask_id TEXT PRIMARY KEY,
			kind TEXT NOT NULL,
			run_id BIGINT NOT NULL,
			user_id TEXT NOT NULL,
			call_id TEXT NOT NULL,
			tool_name TEXT NOT NULL,
			args_hash TEXT NOT NULL,
			status TEXT NOT NULL,
			answer TEXT NOT NULL DEFAULT '',
			expires_at BIGINT NOT NULL,
			created_at BIGINT NOT NULL,
			answered_at BIGINT NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX asks_run ON asks (run_id, status)`,
		`CREATE TABLE run_inputs (
			id {{pk}},
			run_id BIGINT NOT NULL,
			input_id TEXT NOT NULL,
			content TEXT NOT NULL,
			consumed {{bool}} NOT NULL DEFAULT FALSE,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX run_inputs_run ON run_inputs (run_id, consumed, id)`,
	}},
	{5, "run reply ids", []string{
		`ALTER TABLE runs ADD COLUMN reply_id TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX runs_reply ON runs (reply_id)`,
	}},
	{6, "scheduled tasks", []string{
		`CREATE TABLE tasks (
			id {{pk}},
			task_name TEXT NOT NULL,
			cron TEXT NOT NULL,
			input TEXT NOT NULL,
			agent_id BIGINT,
			principal_id BIGINT,
			reuse_session {{bool}} NOT NULL,
			enabled {{bool}} NOT NULL,
			catch_up {{bool}} NOT NULL,
			session_id BIGINT,
			next_run_at BIGINT NOT NULL DEFAULT 0,
			last_run_at BIGINT NOT NULL DEFAULT 0,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE TABLE task_runs (
			id {{pk}},
			task_id BIGINT NOT NULL,
			kind TEXT NOT NULL,
			scheduled_at BIGINT NOT NULL,
			status TEXT NOT NULL,
			reason TEXT NOT NULL DEFAULT '',
			input TEXT NOT NULL DEFAULT '',
			trace_id TEXT NOT NULL DEFAULT '',
			request_id TEXT,
			session_id BIGINT,
			error_code TEXT NOT NULL DEFAULT '',
			error_message TEXT NOT NULL DEFAULT '',
			output TEXT NOT NULL DEFAULT '',
			duration_ms BIGINT NOT NULL DEFAULT 0,
			owner TEXT NOT NULL DEFAULT '',
			started_at BIGINT NOT NULL,
			finished_at BIGINT NOT NULL DEFAULT 0,
			heartbeat_at BIGINT NOT NULL DEFAULT 0
		)`,
		// A scheduled tick is fired once, by whichever daemon records it first.
		`CREATE UNIQUE INDEX task_runs_tick ON task_runs (task_id, scheduled_at) WHERE kind <> 'manual'`,
		// One running firing per task, whichever daemon runs it.
		`CREATE UNIQUE INDEX task_runs_running ON task_runs (task_id) WHERE status = 'running'`,
		`CREATE INDEX task_runs_task ON task_runs (task_id, id)`,
		`CREATE INDEX task_runs_status ON task_runs (status, heartbeat_at)`,
	}},
	{7, "run leases and control", []string{
		// The owner of a running run renews lease_until every few seconds; once it has run out,
		// any replica suspends the run so it can be resumed (docs/scaling.md).
		`ALTER TABLE runs ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0`,
		// A stop or suspend asked of a running run through another replica, for its owner.
		`ALTER TABLE runs ADD COLUMN control TEXT NOT NULL DEFAULT ''`,
	}},
	{8, "claim order index", []string{
		// The claim orders by (next_attempt_at, id); with id in the index, rows sharing a due time
		// (a breaker's reopen time) need no sort, however large the backlog.
		`CREATE INDEX deliveries_due_order ON deliveries (status, next_attempt_at, id)`,
		`DROP INDEX deliveries_due`,
	}},
	{9, "decision record and delivery lifecycle", []string{
		// The decision log names what was decided (the subject) for whom, and is a hash chain:
		// each row stores the hash of its predecessor and its own (decisions.go).
		`ALTER TABLE decisions ADD COLUMN hook_priority INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE decisions ADD COLUMN principal_id BIGINT`,
		`ALTER TABLE decisions ADD COLUMN agent_id BIGINT`,
		`ALTER TABLE decisions ADD COLUMN tool_name TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN tool_call_id TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN task_id BIGINT`,
		`ALTER TABLE decisions ADD COLUMN subject_hash TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN subject TEXT`,
		`ALTER TABLE decisions ADD COLUMN modified_hash TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN breaker_state TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN prev_hash TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE decisions ADD COLUMN hash TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX decisions_hook ON decisions (hook_id, id)`,
		`CREATE INDEX decisions_principal ON decisions (principal_id, id)`,
		`CREATE INDEX decisions_tool ON decisions (tool_name, id)`,
		`CREATE INDEX decisions_created ON decisions (created_at)`,
		// Where pruning cut the chain: the oldest kept row's predecessor, so a verifier tells a
		// pruned prefix from a deleted one. One row at most (id 1).
		`CREATE TABLE decision_chain (
			id INTEGER PRIMARY KEY,
			pruned_through BIGINT NOT NULL,
			pruned_hash TEXT NOT NULL
		)`,
		// A disabled hook's queued deliveries wait, paused, outside the claim's index range.
		`ALTER TABLE deliveries ADD COLUMN paused {{bool}} NOT NULL DEFAULT FALSE`,
		`CREATE INDEX deliveries_claim ON deliveries (status, paused, next_attempt_at, id)`,
		`DROP INDEX deliveries_due_order`,
		// Retention finds old rows by it; it is written once, at insert.
		`CREATE INDEX deliveries_created ON deliveries (created_at)`,
	}},
	{13, "readiness probe row", []string{
		// /readyz commits a write here: a database that answers but refuses writes (disk full,
		// read-only) is not ready.
		`CREATE TABLE readiness (id INTEGER PRIMARY KEY, checked_at BIGINT NOT NULL)`,
		`INSERT INTO readiness (id, checked_at) VALUES (1, 0)`,
	}},
	{15, "ask arguments", []string{
		// An ask keeps the arguments of the tool call it is about (their hash alone bound the
		// answer): clients show them without reading the run's events.
		`ALTER TABLE asks ADD COLUMN arguments TEXT NOT NULL DEFAULT ''`,
	}},
	{17, "decision rule names", []string{
		// The policy rule that decided, beside the hook that holds it.
		`ALTER TABLE decisions ADD COLUMN rule_name TEXT NOT NULL DEFAULT ''`,
	}},
	{19, "decision agent kind", []string{
		// The coding agent (claude-code, codex, …) whose own hook a decision answered.
		`ALTER TABLE decisions ADD COLUMN agent_kind TEXT NOT NULL DEFAULT ''`,
	}},
	{23, "delivery trace parent", []string{
		// The span that queued a delivery (W3C traceparent): its attempts continue that trace.
		`ALTER TABLE deliveries ADD COLUMN trace_parent TEXT NOT NULL DEFAULT ''`,
	}},
	{25, "console sessions", []string{
		`CREATE TABLE console_sessions (
			token_hash {{blob}} PRIMARY KEY,
			role TEXT NOT NULL,
			subject TEXT NOT NULL,
			reviews TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX console_sessions_expiry ON console_sessions (expires_at)`,
		// The console's overview reads an hour of the decision log by minute and outcome from this
		// rollup, kept in the transaction that writes the decisions; retention prunes it with them.
		`CREATE TABLE decision_minutes (
			minute BIGINT NOT NULL,
			outcome TEXT NOT NULL,
			from_failure_mode {{bool}} NOT NULL,
			n BIGINT NOT NULL,
			PRIMARY KEY (minute, outcome, from_failure_mode)
		)`,
		`INSERT INTO decision_minutes (minute, outcome, from_failure_mode, n)
			SELECT created_at / 60000, outcome, from_failure_mode, COUNT(*) FROM decisions
			GROUP BY created_at / 60000, outcome, from_failure_mode`,
	}},
	{26, "ask reasons", []string{
		// Who asked for a person (the permission rule, or the hook or policy that answered ask):
		// the approvals inbox shows it beside the call.
		`ALTER TABLE asks ADD COLUMN reason TEXT NOT NULL DEFAULT ''`,
	}},
	{27, "decision chain tail", []string{
		// The hash the next decision row links to, moved in the statement that appends: on
		// PostgreSQL its row lock orders the replicas' appends, and an append that links to a tail
		// another replica has since moved writes nothing (decisions.go). Pruning never moves it.
		`CREATE TABLE decision_tail (id INTEGER PRIMARY KEY, hash TEXT NOT NULL)`,
		`INSERT INTO decision_tail (id, hash) SELECT 1, COALESCE(
			(SELECT hash FROM decisions ORDER BY id DESC LIMIT 1),
			(SELECT pruned_hash FROM decision_chain WHERE id = 1), '')`,
	}},
	{29, "console session credentials", []string{
		// Which credential a session was signed in with, as an HMAC keyed by the session's own
		// token: a session whose credential is no longer configured ends. Sessions from before
		// have none, and end.
		`DELETE FROM console_sessions`,
		`ALTER TABLE console_sessions ADD COLUMN credential {{blob}}`,
	}},
	{30, "hooks version", []string{
		// A counter every hook write moves in its transaction: the registries of other replicas
		// see each change, where the rows' updated_at (the writer's clock) can go back.
		`CREATE TABLE hooks_version (id INTEGER PRIMARY KEY, version BIGINT NOT NULL)`,
		`INSERT INTO hooks_version (id, version) VALUES (1, 0)`,
	}},
	{31, "task run decision and task", []string{
		// The decision log row of the firing's pre_scheduled_task decision: a denied firing
		// names the decision an auditor reads.
		`ALTER TABLE task_runs ADD COLUMN decision_id TEXT`,
		// The task as the firing was claimed with: its report, sent when the firing ends (maybe
		// after a restart, the task edited or deleted since), names the task, principal and agent
		// it ran for.
		`ALTER TABLE task_runs ADD COLUMN task_name TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE task_runs ADD COLUMN principal_id BIGINT`,
		`ALTER TABLE task_runs ADD COLUMN agent_id BIGINT`,
	}},
	{32, "decision chain start", []string{
		// The newest row written before the log was chained (migration 9): only rows up to it may
		// lack a hash. Without it, blanking every row's hash and the tail read as a log that
		// predates the chain, and verified.
		`ALTER TABLE decision_tail ADD COLUMN unchained_through BIGINT NOT NULL DEFAULT 0`,
		`UPDATE decision_tail SET unchained_through = COALESCE((SELECT MAX(id) FROM decisions WHERE hash = ''
			AND id < COALESCE((SELECT MIN(id) FROM decisions WHERE hash <> ''), 9223372036854775807)), 0)`,
	}},
}

func (db *DB) migrate(ctx context.Context) error {
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if db.dialect == Postgres {
			// Replicas starting together must not run the same migration twice.
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(4867001)`).Error; err != nil {
				return fmt.Errorf("storage: migration lock: %w", err)
			}
		}
		if err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`).Error; err != nil {
			return fmt.Errorf("storage: migrations table: %w", err)
		}
		var applied []int
		if err := tx.Raw(`SELECT version FROM schema_migrations ORDER BY version`).Scan(&applied).Error; err != nil {
			return fmt.Errorf("storage: read schema version: %w", err)
		}
		if err := checkSchema(applied); err != nil {
			return err
		}
		words := dialectWords[db.dialect]
		for _, m := range migrations {
			// Every migration not yet applied runs, also one whose version is below the newest
			// applied: versions are reserved ahead, so they need not reach a database in order.
			if slices.Contains(applied, m.version) {
				continue
			}
			for _, stmt := range m.stmts {
				if err := tx.Exec(words.Replace(stmt)).Error; err != nil {
					return fmt.Errorf("storage: migration %d %s: %w", m.version, m.name, err)
				}
			}
			if err := tx.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UnixMilli()).Error; err != nil {
				return fmt.Errorf("storage: record migration %d: %w", m.version, err)
			}
		}
		return nil
	})
}

// SchemaVersion is the newest applied migration.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.r.WithContext(ctx).Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v).Error
	return v, err
}

// SchemaTooNewError is returned by Open when the database was migrated by a newer hookd: its
// schema holds a migration this binary does not know, so this binary could misread its rows or
// write rows the newer one misreads.
type SchemaTooNewError struct {
	Database int // the newest migration applied to the database
	Binary   int // the newest migration this binary knows
	Unknown  int // the first applied migration this binary does not know
}

func (e *SchemaTooNewError) Error() string {
	if e.Database > e.Binary {
		return fmt.Sprintf("storage: the database schema is at version %d, newer than this binary's version %d; "+
			"run a hookd at least as new as the one that migrated it", e.Database, e.Binary)
	}
	return fmt.Sprintf("storage: the database schema (version %d) has migration %d, which this binary (version %d) "+
		"does not know; run a hookd at least as new as the one that migrated it", e.Database, e.Unknown, e.Binary)
}

// KnownSchemaVersion is the newest migration this binary knows.
func KnownSchemaVersion() int {
	return slices.MaxFunc(migrations, func(a, b migration) int { return a.version - b.version }).version
}

// checkSchema refuses a database that has a migration applied which this binary does not know.
func checkSchema(applied []int) error {
	for _, v := range applied {
		if !slices.ContainsFunc(migrations, func(m migration) bool { return m.version == v }) {
			return &SchemaTooNewError{Database: slices.Max(applied), Binary: KnownSchemaVersion(), Unknown: v}
		}
	}
	return nil
}
