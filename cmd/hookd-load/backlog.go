package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/hookd/hookd/storage"
)

// postgresEnv names the PostgreSQL server to use, as for the tests (storage/storagetest).
const postgresEnv = "HOOKD_TEST_POSTGRES_DSN"

func runBacklog(ctx context.Context, args []string) error {
	fs := newFlags("backlog", `Inserts pending deliveries through the storage package (storage.Open, EnqueueDeliveries in
batches) up to each backlog size in turn, and at each size times -claims calls of
ClaimDeliveries(n) after -warmup untimed ones. Each claimed batch is completed at once as a retry due
now (CompleteDeliveries, status pending), so the due set keeps its size. SQLite always; PostgreSQL
too when HOOKD_TEST_POSTGRES_DSN is set, in a fresh schema dropped at the end.`)
	sizesFlag := fs.String("sizes", "10000,100000", "backlog sizes, ascending (the issue's figures: 10000,100000,1000000)")
	claims := fs.Int("claims", 200, "timed claims per size")
	warmup := fs.Int("warmup", 5, "untimed claims before the timed ones at each size")
	n := fs.Int("n", 256, "rows per claim (the dispatcher's batch)")
	insertBatch := fs.Int("insert-batch", 2000, "rows per EnqueueDeliveries call (one transaction)")
	dbs := fs.String("db", "", "sqlite, postgres or sqlite,postgres (default: sqlite, and postgres when "+postgresEnv+" is set)")
	oneDue := fs.Bool("one-due-time", false, "enqueue every row, and re-queue every claimed row, with one and the same next_attempt_at (as rows rescheduled to an open breaker's reopen time get)")
	explain := fs.Bool("explain", true, "print the plan of the claim's row selection at each size")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound on the whole command")
	fs.Parse(args)
	if *claims < 1 || *warmup < 0 || *n < 1 || *insertBatch < 1 {
		return errors.New("backlog: want -claims ≥ 1, -warmup ≥ 0, -n ≥ 1 and -insert-batch ≥ 1")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < *n || (len(sizes) > 0 && v <= sizes[len(sizes)-1]) {
			return fmt.Errorf("-sizes: want ascending integers of at least -n (%d), got %q", *n, *sizesFlag)
		}
		sizes = append(sizes, v)
	}
	which := strings.Split(*dbs, ",")
	if *dbs == "" {
		which = []string{"sqlite"}
		if os.Getenv(postgresEnv) != "" {
			which = append(which, "postgres")
		} else {
			fmt.Printf("backlog: PostgreSQL skipped: %s is not set\n", postgresEnv)
		}
	}
	fmt.Printf("backlog: ClaimDeliveries(n=%d) at backlogs %s, %d timed claims each — %s\n", *n, *sizesFlag, *claims, machine())

	var rows [][]string
	for _, name := range which {
		r, err := backlogOn(ctx, strings.TrimSpace(name), sizes, *claims, *warmup, *n, *insertBatch, *explain, *oneDue)
		rows = append(rows, r...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	fmt.Println()
	table(os.Stdout, []string{"database", "pending", "claim p50", "claim p99", "claim max", "complete p50", "rows/claim", "insert rows/s"}, rows)
	return nil
}

func backlogOn(ctx context.Context, name string, sizes []int, claims, warmup, n, insertBatch int, explain, oneDue bool) ([][]string, error) {
	var dsn string
	switch name {
	case "sqlite":
		dir, err := os.MkdirTemp("", "hookd-load-backlog")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		dsn = "sqlite:" + filepath.Join(dir, "hookd.db")
	case "postgres":
		admin := os.Getenv(postgresEnv)
		if admin == "" {
			return nil, fmt.Errorf("%s is not set", postgresEnv)
		}
		u, drop, err := freshSchema(admin)
		if err != nil {
			return nil, err
		}
		defer drop()
		dsn = u
	default:
		return nil, fmt.Errorf("unknown database %q (sqlite or postgres)", name)
	}
	key := make([]byte, 32)
	rand.Read(key)
	db, err := storage.Open(ctx, dsn, storage.Options{Key: key})
	if err != nil {
		return nil, err
	}
	defer db.Close()

	hookID := int64(1)
	// With oneDue, every row falls due at the same past instant.
	fixedDue := time.Now().Add(-time.Hour)
	var out [][]string
	have, prev := 0, 0
	for _, size := range sizes {
		// Fill up to size.
		t0 := time.Now()
		for have < size {
			k := min(insertBatch, size-have)
			batch := make([]storage.Delivery, k)
			now := time.Now()
			for i := range batch {
				ctxJSON := fmt.Sprintf(`{"toolName":"workspace_write_file","toolCallId":"call_%d","arguments":{"path":"notes/%d.md"},"output":"wrote 4 bytes","succeeded":true,"errorMessage":null,"durationMs":3}`, have+i, have+i)
				batch[i] = storage.Delivery{EventID: storage.NewTSIDString(), HookID: hookID, HookType: "post_tool_use",
					HookName: "load", OccurredAt: now, Context: []byte(ctxJSON)}
				if oneDue {
					batch[i].NextAttemptAt = fixedDue
				}
			}
			if err := db.EnqueueDeliveries(ctx, batch); err != nil {
				return out, err
			}
			have += k
		}
		insertRate := float64(size-prev) / time.Since(t0).Seconds()
		prev = size

		var claimLat, completeLat []time.Duration
		fewest := n
		for i := range warmup + claims {
			c0 := time.Now()
			got, err := db.ClaimDeliveries(ctx, time.Now(), n, 2*time.Minute)
			dc := time.Since(c0)
			if err != nil {
				return out, err
			}
			outs := make([]storage.Outcome, len(got))
			retryAt := time.Now()
			if oneDue {
				retryAt = fixedDue
			}
			for j, d := range got {
				outs[j] = storage.Outcome{Delivery: d, Status: storage.StatusPending, Attempts: d.Attempts + 1,
					NextAttemptAt: retryAt, StatusCode: 503, Error: "HTTP 503"}
			}
			c1 := time.Now()
			if err := db.CompleteDeliveries(ctx, outs); err != nil {
				return out, err
			}
			if i >= warmup {
				claimLat, completeLat = append(claimLat, dc), append(completeLat, time.Since(c1))
				fewest = min(fewest, len(got))
			}
		}
		slices.Sort(claimLat)
		slices.Sort(completeLat)
		row := []string{name, commas(int64(size)), ms(percentile(claimLat, 50)), ms(percentile(claimLat, 99)),
			ms(claimLat[len(claimLat)-1]), ms(percentile(completeLat, 50)), fmt.Sprint(fewest), commas(int64(insertRate))}
		fmt.Println(strings.Join(row, "  "))
		out = append(out, row)
		if explain {
			plan, err := claimPlan(name, dsn, n)
			if err != nil {
				return out, fmt.Errorf("explain: %w", err)
			}
			fmt.Println("  plan: " + plan)
		}
	}
	return out, nil
}

// freshSchema creates a schema of its own on the server admin names and returns a DSN whose
// search_path is that schema, and a func that drops it.
func freshSchema(admin string) (string, func(), error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "load_" + hex.EncodeToString(b[:])
	g, err := gorm.Open(postgres.Open(admin), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	sqlDB, _ := g.DB()
	if err := g.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		sqlDB.Close()
		return "", nil, fmt.Errorf("postgres: create schema: %w", err)
	}
	drop := func() {
		g.Exec("DROP SCHEMA " + schema + " CASCADE")
		sqlDB.Close()
	}
	u, err := url.Parse(admin)
	if err != nil {
		drop()
		return "", nil, fmt.Errorf("%s: %w", postgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// claimPlan returns the database's plan for the row selection of storage.ClaimDeliveries (the
// sub-select of its UPDATE, copied here), on one line.
func claimPlan(name, dsn string, n int) (string, error) {
	sel := "SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at <= %d ORDER BY next_attempt_at, id LIMIT %d"
	var dial gorm.Dialector
	var query string
	switch name {
	case "sqlite":
		dial = sqlite.Open("file:" + strings.TrimPrefix(dsn, "sqlite:") + "?mode=ro")
		query = "EXPLAIN QUERY PLAN " + fmt.Sprintf(sel, time.Now().UnixMilli(), n)
	default:
		dial = postgres.Open(dsn)
		query = "EXPLAIN " + fmt.Sprintf(sel, time.Now().UnixMilli(), n) + " FOR UPDATE SKIP LOCKED"
	}
	g, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return "", err
	}
	sqlDB, _ := g.DB()
	defer sqlDB.Close()
	rows, err := sqlDB.Query(query)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		// SQLite: (id, parent, notused, detail); PostgreSQL: one text column.
		lines = append(lines, strings.TrimSpace(fmt.Sprint(vals[len(vals)-1])))
	}
	return strings.Join(lines, " | "), rows.Err()
}
