// Package storage keeps hookd's state in SQLite (the embedded default) or PostgreSQL. Callers get
// plain structs; gorm stays inside.
package storage

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/hookdtype"
)

// Dialect names the database behind a DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is an open database. On SQLite every write goes through one connection (SQLite has one
// writer anyway; a single connection turns lock contention into queueing) and reads use a pool.
// On PostgreSQL both are the same pool.
type DB struct {
	w, r    *gorm.DB
	dialect Dialect
	sealer  *Sealer
	changes changes   // announces commits to live views
	listen  listenHub // the one LISTEN connection every Listen shares (PostgreSQL)
	// tail is the decision chain's tail as this process last committed it (nil: not known). A
	// guess only: another replica may have appended since, which the append checks (decisions.go).
	tail atomic.Pointer[string]
	// SQLite only: the outbox's and the decision log's statements, prepared on the writer.
	outbox        *outboxStmts
	decisionStmts *decisionStmts
}

// Options for Open.
type Options struct {
	// Key is the 32-byte master key that seals secrets at rest.
	Key []byte
	// OldKeys open secrets sealed before a rotation; Key seals (masterKeys: [Key, OldKeys…]).
	OldKeys [][]byte
	// MaxConns is how many connections the PostgreSQL pool opens at most (databaseMaxConns);
	// 0 is DefaultMaxConns. Listen holds one more, outside the pool. SQLite ignores it: one
	// writer and 8 readers.
	MaxConns int
	// Logger is told when the pool may take more than half of the server's connections; nil
	// discards that.
	Logger *slog.Logger
}

// DefaultMaxConns is the PostgreSQL pool's size when Options.MaxConns is 0.
const DefaultMaxConns = 32

// Open connects to the database named by rawURL ("sqlite:PATH" or "postgres://...") and runs the
// pending migrations.
func Open(ctx context.Context, rawURL string, opt Options) (*DB, error) {
	sealer, err := NewSealer(append([][]byte{opt.Key}, opt.OldKeys...)...)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	gcfg := &gorm.Config{Logger: logger.Discard, NowFunc: func() time.Time { return time.Now().UTC() }}
	db := &DB{sealer: sealer}
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("storage: sqlite URL has no path")
		}
		if dir := filepath.Dir(path); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("storage: create %s: %w", dir, err)
			}
		}
		// The file holds the outbox and the decision log: keep it to the daemon's user.
		if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close()
		}
		// WAL lets readers run beside the writer; _txlock=immediate takes the write lock at BEGIN so
		// two writers never deadlock upgrading a read lock; synchronous=FULL fsyncs each commit.
		q := "?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=on&_synchronous=FULL"
		if db.w, err = gorm.Open(sqlite.Open("file:"+path+q), gcfg); err != nil {
			return nil, fmt.Errorf("storage: open sqlite writer: %w", err)
		}
		rq := "?_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&mode=ro"
		if db.r, err = gorm.Open(sqlite.Open("file:"+path+rq), gcfg); err != nil {
			return nil, fmt.Errorf("storage: open sqlite readers: %w", err)
		}
		sqlW, _ := db.w.DB()
		sqlW.SetMaxOpenConns(1)
		sqlW.SetConnMaxLifetime(0)
		sqlR, _ := db.r.DB()
		sqlR.SetMaxOpenConns(8)
		sqlR.SetMaxIdleConns(8) // reopening a reader re-runs its setup; keep them
		db.dialect = SQLite
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if opt.MaxConns < 0 {
			return nil, fmt.Errorf("storage: MaxConns %d: want 0 (%d) or more", opt.MaxConns, DefaultMaxConns)
		}
		if db.w, err = gorm.Open(postgres.Open(withSessionLimits(rawURL)), gcfg); err != nil {
			// The driver's message may quote the URL with its query intact: scrubbed, and so not
			// wrapped (the original would still print through %+v or errors.Unwrap).
			return nil, fmt.Errorf("storage: open postgres %s: %s", redactURL(rawURL),
				hookdtype.ScrubSecrets(err.Error(), hookdtype.DSNSecrets(rawURL)))
		}
		pool := cmp.Or(opt.MaxConns, DefaultMaxConns)
		sqlW, _ := db.w.DB()
		sqlW.SetMaxOpenConns(pool)
		sqlW.SetMaxIdleConns(pool)
		db.r = db.w
		db.dialect = Postgres
	default:
		return nil, fmt.Errorf("storage: database %q: want sqlite:PATH or postgres://", redactURL(rawURL))
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if db.dialect == Postgres && opt.Logger != nil {
		db.warnPoolSize(ctx, opt.Logger)
	}
	if db.dialect == SQLite {
		sqlW, _ := db.w.DB()
		if db.outbox, err = prepareOutbox(ctx, sqlW); err != nil {
			db.Close()
			return nil, err
		}
		if db.decisionStmts, err = prepareDecisions(ctx, sqlW); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// warnPoolSize warns when this pool alone may take more than half of the server's
// max_connections: a second replica, or anything else on the server, would then be refused
// connections ("too many clients", SQLSTATE 53300) once the pools fill.
func (db *DB) warnPoolSize(ctx context.Context, log *slog.Logger) {
	sqlDB, _ := db.w.DB()
	var server int
	if err := sqlDB.QueryRowContext(ctx, "SHOW max_connections").Scan(&server); err != nil {
		log.Debug("PostgreSQL max_connections unknown; the pool size is not checked against it", "err", err)
		return
	}
	if pool := sqlDB.Stats().MaxOpenConnections; pool > server/2 {
		log.Warn("the PostgreSQL pool may take more than half of the server's connections: with replicas, "+
			"lower databaseMaxConns so that replicas × (databaseMaxConns + 1) stays below max_connections",
			"databaseMaxConns", pool, "max_connections", server)
	}
}

// Dialect tells which database this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// Ping checks the database answers (readiness).
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.w.DB()
	if err != nil {
		return err
	}
	// database/sql hands a ping a pooled connection without retrying: one the server has ended
	// (a failover, a restart) fails it with ErrBadConn and is discarded. Keep going until a live
	// or new connection answers; at most one try per pooled connection, and one more.
	err = sqlDB.PingContext(ctx)
	for i := sqlDB.Stats().MaxOpenConnections; i >= 0 && errors.Is(err, driver.ErrBadConn) && ctx.Err() == nil; i-- {
		err = sqlDB.PingContext(ctx)
	}
	return err
}

// CheckWritable commits a write (readiness): a database that answers reads but refuses writes —
// a full disk, a read-only file or server — is not ready.
func (db *DB) CheckWritable(ctx context.Context) error {
	res := db.w.WithContext(ctx).Exec(`UPDATE readiness SET checked_at = ? WHERE id = 1`, time.Now().UnixMilli())
	if res.Error != nil {
		return fmt.Errorf("storage: database refuses writes: %w", res.Error)
	}
	return nil
}

// oneRow is the error of a write that must touch a row: its own, wrapped with what it did
// (format and args), or ErrNotFound when it touched none.
func oneRow(res *gorm.DB, format string, args ...any) error {
	if res.Error != nil {
		return fmt.Errorf("storage: "+format+": %w", append(args, res.Error)...)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// readers is the pool reads go to, for the few queries made without gorm.
func (db *DB) readers() *sql.DB {
	s, _ := db.r.DB() // always a *sql.DB here: Open made it
	return s
}

// appendParams appends n placeholders for the statements built without gorm: "?,?,…" on SQLite
// (which parses numbered ones as names, in time that grows with their number), "$first,…" on
// PostgreSQL.
func (db *DB) appendParams(q []byte, first, n int) []byte {
	for i := range n {
		if i > 0 {
			q = append(q, ',')
		}
		if db.dialect == SQLite {
			q = append(q, '?')
			continue
		}
		q = append(q, '$')
		q = strconv.AppendInt(q, int64(first+i), 10)
	}
	return q
}

// Close releases every connection.
func (db *DB) Close() error {
	db.outbox.close()
	db.decisionStmts.close()
	var errs []error
	for _, g := range []*gorm.DB{db.r, db.w} {
		if g == nil {
			continue
		}
		if s, err := g.DB(); err == nil {
			errs = append(errs, s.Close())
		}
		if db.r == db.w {
			break
		}
	}
	return errors.Join(errs...)
}

// withSessionLimits makes the server end a transaction left open by a frozen or partitioned
// replica, which would otherwise hold its row locks against the others; an explicit setting in the
// URL wins.
func withSessionLimits(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	if q.Get("idle_in_transaction_session_timeout") == "" {
		q.Set("idle_in_transaction_session_timeout", "60000") // milliseconds
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redactURL hides the passwords of a database URL before it reaches a log or an error.
func redactURL(raw string) string { return hookdtype.RedactDSN(raw) }

// ms and fromMs convert between time.Time and the epoch milliseconds stored in every time column;
// integers sort and compare the same on both databases.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
