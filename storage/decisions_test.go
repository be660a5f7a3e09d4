package storage_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// appendDecisions writes n decisions created at the given time, one transaction each.
func appendDecisions(t *testing.T, db *storage.DB, n int, at time.Time) []storage.Decision {
	t.Helper()
	out := make([]storage.Decision, n)
	for i := range out {
		sid := int64(10001)
		out[i] = storage.Decision{DecisionID: storage.NewTSIDString(), EventID: storage.NewTSIDString(), HookID: 7,
			HookName: "approve", HookPriority: 3, HookType: "pre_tool_use", SessionID: &sid, ToolName: "transferFunds",
			ToolCallID: fmt.Sprintf("call_%d", i), SubjectHash: "ab", Outcome: "allow", BreakerState: "closed",
			StatusCode: 200, LatencyMs: 4, CreatedAt: at}
		if err := db.InsertDecisions(context.Background(), out[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// appendFive writes five decisions now and returns them as listed, newest first.
func appendFive(t *testing.T, db *storage.DB) []storage.Decision {
	t.Helper()
	appendDecisions(t, db, 5, time.Now())
	rows, err := db.ListDecisions(context.Background(), storage.DecisionFilter{})
	if err != nil || len(rows) != 5 {
		t.Fatalf("list: %d %v", len(rows), err)
	}
	return rows
}

func verify(t *testing.T, db *storage.DB) storage.ChainReport {
	t.Helper()
	rep, err := db.VerifyDecisions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestDecisionChain(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		if rep := verify(t, db); !rep.OK || rep.Checked != 0 {
			t.Fatalf("empty log: %+v", rep)
		}
		appendDecisions(t, db, 5, time.Now())
		// One commit of several rows links them in order too.
		batch := appendDecisions(t, db, 0, time.Now())
		for i := range 3 {
			batch = append(batch, storage.Decision{DecisionID: "d", EventID: storage.NewTSIDString(), HookID: int64(i),
				HookName: "h", HookType: "user_message", Outcome: "deny", Reason: "no", CreatedAt: time.Now()})
		}
		if err := db.InsertDecisions(ctx, batch); err != nil {
			t.Fatal(err)
		}
		rep := verify(t, db)
		if !rep.OK || rep.Checked != 8 {
			t.Fatalf("intact log: %+v", rep)
		}
		rows, err := db.ListDecisions(ctx, storage.DecisionFilter{})
		if err != nil || len(rows) != 8 {
			t.Fatalf("list: %d %v", len(rows), err)
		}
		for i := 0; i+1 < len(rows); i++ { // newest first
			if rows[i].PrevHash != rows[i+1].Hash || rows[i].Hash == "" {
				t.Fatalf("row %d does not link to row %d", rows[i].ID, rows[i+1].ID)
			}
		}

		// An edit of any one field of one row is named, the last row's included.
		for _, edit := range []struct {
			set string
			row int
		}{{"outcome = 'deny'", 5}, {"reason = 'ok'", 2}, {"session_id = 10002", 3}, {"tool_name = 'x'", 8}} {
			id := rows[len(rows)-edit.row].ID
			var before storage.Decision
			for _, r := range rows {
				if r.ID == id {
					before = r
				}
			}
			if err := storage.Exec(ctx, db, "UPDATE decisions SET "+edit.set+" WHERE id = ?", id); err != nil {
				t.Fatal(err)
			}
			rep := verify(t, db)
			if rep.OK || rep.BrokenID != id || !strings.Contains(rep.Problem, "edited") {
				t.Fatalf("after %s on row %d: %+v", edit.set, id, rep)
			}
			// Put it back: the chain verifies again.
			if err := storage.Exec(ctx, db, "UPDATE decisions SET outcome = ?, reason = ?, session_id = ?, tool_name = ? WHERE id = ?",
				before.Outcome, before.Reason, before.SessionID, before.ToolName, id); err != nil {
				t.Fatal(err)
			}
			if rep := verify(t, db); !rep.OK {
				t.Fatalf("restored row %d: %+v", id, rep)
			}
		}

		// A deleted row: its successor names the gap.
		gone, next := rows[len(rows)-3].ID, rows[len(rows)-4].ID
		if err := storage.Exec(ctx, db, "DELETE FROM decisions WHERE id = ?", gone); err != nil {
			t.Fatal(err)
		}
		if rep := verify(t, db); rep.OK || rep.BrokenID != next || !strings.Contains(rep.Problem, "deleted") {
			t.Fatalf("after deleting row %d: %+v", gone, rep)
		}
	})
}

// Deleting the newest rows leaves a chain that links up; the tail each append moved shows the
// cut, naming the newest row left. The rows up to one row still verify on their own.
func TestDecisionChainNewestRowsDeleted(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		rows := appendFive(t, db)
		kept := rows[2].ID // newest first: rows[0] and rows[1] go
		if err := storage.Exec(ctx, db, "DELETE FROM decisions WHERE id > ?", kept); err != nil {
			t.Fatal(err)
		}
		rep := verify(t, db)
		if rep.OK || rep.BrokenID != kept || !strings.Contains(rep.Problem, fmt.Sprintf("rows after row %d were deleted", kept)) {
			t.Fatalf("after deleting the two newest rows: %+v", rep)
		}
		if rep, err := db.VerifyDecisionsThrough(ctx, kept); err != nil || !rep.OK || rep.Checked != 3 {
			t.Fatalf("through row %d: %+v %v", kept, rep, err)
		}
		if rep.BrokenDecisionID != rows[2].DecisionID {
			t.Fatalf("the report names decision %q, want the newest kept, %q", rep.BrokenDecisionID, rows[2].DecisionID)
		}
		// Appending again does not heal it: the gap is then between the kept rows and the new one.
		appendDecisions(t, db, 1, time.Now())
		if rep := verify(t, db); rep.OK {
			t.Fatalf("after another append: %+v", rep)
		}
		// Nor does deleting every row: no row is left, and the tail still names the last one.
		if err := storage.Exec(ctx, db, "DELETE FROM decisions"); err != nil {
			t.Fatal(err)
		}
		if rep := verify(t, db); rep.OK || rep.BrokenID != 0 || !strings.Contains(rep.Problem, "every row was deleted") {
			t.Fatalf("after deleting every row: %+v", rep)
		}
	})
}

func TestDecisionRetentionKeepsTheChain(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		old := time.Now().Add(-400 * 24 * time.Hour)
		appendDecisions(t, db, 7, old)
		kept := appendDecisions(t, db, 3, time.Now())
		cutoff := time.Now().Add(-365 * 24 * time.Hour)
		var removed int64
		for { // small batches, as the retention loop prunes
			n, err := db.PruneDecisions(ctx, cutoff, 3)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			removed += n
		}
		if removed != 7 {
			t.Fatalf("pruned %d, want 7", removed)
		}
		rows, err := db.ListDecisions(ctx, storage.DecisionFilter{})
		if err != nil || len(rows) != 3 || rows[2].EventID != kept[0].EventID {
			t.Fatalf("kept %d rows %v", len(rows), err)
		}
		rep := verify(t, db)
		if !rep.OK || rep.Checked != 3 || rep.PrunedThrough == 0 {
			t.Fatalf("after pruning: %+v", rep)
		}
		// Deleting the oldest kept row is not pruning: the verifier says so.
		if err := storage.Exec(ctx, db, "DELETE FROM decisions WHERE id = ?", rows[2].ID); err != nil {
			t.Fatal(err)
		}
		if rep := verify(t, db); rep.OK || rep.BrokenID != rows[1].ID {
			t.Fatalf("after deleting the oldest kept row: %+v", rep)
		}
		// Everything pruned: the next row still links to the last pruned one.
		if err := storage.Exec(ctx, db, "DELETE FROM decisions"); err != nil {
			t.Fatal(err)
		}
		appendDecisions(t, db, 1, old)
		if n, err := db.PruneDecisions(ctx, cutoff, 100); err != nil || n != 1 {
			t.Fatalf("prune: %d %v", n, err)
		}
		appendDecisions(t, db, 2, time.Now())
		if rep := verify(t, db); !rep.OK || rep.Checked != 2 {
			t.Fatalf("after pruning everything: %+v", rep)
		}
	})
}

func TestDecisionFilters(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		p1, p2 := int64(1001), int64(1002)
		base := time.Now().Add(-time.Hour)
		ds := []storage.Decision{
			{HookID: 1, HookType: "pre_tool_use", ToolName: "a", PrincipalID: &p1, Outcome: "allow", CreatedAt: base},
			{HookID: 2, HookType: "pre_tool_use", ToolName: "b", PrincipalID: &p2, Outcome: "deny", CreatedAt: base.Add(time.Minute)},
			{HookID: 2, HookType: "user_message", PrincipalID: &p1, Outcome: "error", CreatedAt: base.Add(2 * time.Minute)},
		}
		for i := range ds {
			ds[i].DecisionID, ds[i].EventID, ds[i].HookName = storage.NewTSIDString(), storage.NewTSIDString(), "h"
		}
		if err := db.InsertDecisions(ctx, ds); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			f    storage.DecisionFilter
			want int
		}{
			{storage.DecisionFilter{HookType: "pre_tool_use"}, 2},
			{storage.DecisionFilter{HookID: 2}, 2},
			{storage.DecisionFilter{PrincipalID: &p1}, 2},
			{storage.DecisionFilter{ToolName: "b"}, 1},
			{storage.DecisionFilter{Outcome: "error"}, 1},
			{storage.DecisionFilter{Since: base.Add(time.Minute)}, 2},
			{storage.DecisionFilter{Until: base.Add(time.Minute)}, 1},
			{storage.DecisionFilter{HookID: 2, Outcome: "deny", PrincipalID: &p2}, 1},
		} {
			got, err := db.ListDecisions(ctx, c.f)
			if err != nil || len(got) != c.want {
				t.Errorf("%+v: %d rows %v, want %d", c.f, len(got), err, c.want)
			}
		}
	})
}

// Two writers on one database — on PostgreSQL as two replicas are, each with a pool of its own —
// append to one chain, in turns and then all at once, and it never forks: every row links to the
// row before it. Each writer's guess at the tail goes stale whenever the other appends, so both
// ways of appending (the one statement, and the transaction that locks the tail) are taken.
func TestDecisionChainTwoWriters(t *testing.T) {
	for name, newURL := range map[string]func(testing.TB) string{"sqlite": storagetest.SQLiteURL, "postgres": storagetest.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := newURL(t)
			var dbs []*storage.DB
			for range 2 {
				db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				dbs = append(dbs, db)
			}
			a, b := dbs[0], dbs[1]
			for _, db := range []*storage.DB{a, a, b, a, b, b, a} {
				appendDecisions(t, db, 1, time.Now())
			}
			if rep := verify(t, a); !rep.OK || rep.Checked != 7 {
				t.Fatalf("in turns: %+v", rep)
			}
			const writers, appends = 4, 30 // per database
			var wg sync.WaitGroup
			for _, db := range dbs {
				for w := range writers {
					wg.Go(func() {
						for i := range appends {
							batch := make([]storage.Decision, 1+i%3)
							for j := range batch {
								batch[j] = storage.Decision{DecisionID: storage.NewTSIDString(), EventID: storage.NewTSIDString(),
									HookID: int64(w), HookName: "h", HookType: "pre_tool_use", Outcome: "allow", CreatedAt: time.Now()}
							}
							if err := db.InsertDecisions(ctx, batch); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			want := int64(7 + 2*writers*(appends/3)*(1+2+3))
			if rep := verify(t, b); !rep.OK || rep.Checked != want {
				t.Fatalf("at once: %+v, want %d rows checked", rep, want)
			}
			o, err := a.ReadOverview(ctx, time.Now().Add(-time.Hour), time.Now())
			if err != nil || o.Decisions.Total != want {
				t.Fatalf("overview counts %d decisions (%v), want %d", o.Decisions.Total, err, want)
			}
		})
	}
}

// A log written before migration 27 keeps its chain: the migration takes the tail from the newest
// row, or, once retention removed every row, from where it cut the chain.
func TestDecisionTailMigration(t *testing.T) {
	for name, newURL := range map[string]func(testing.TB) string{"sqlite": storagetest.SQLiteURL, "postgres": storagetest.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := newURL(t)
			// reopen undoes migration 27 (and 32, which adds to its table), as on a database an older
			// version wrote, and migrates again.
			reopen := func(db *storage.DB) *storage.DB {
				for _, q := range []string{`DROP TABLE decision_tail`, `DELETE FROM schema_migrations WHERE version IN (27, 32)`} {
					if err := storage.Exec(ctx, db, q); err != nil {
						t.Fatal(err)
					}
				}
				db.Close()
				db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
			if err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-400 * 24 * time.Hour)
			appendDecisions(t, db, 3, old)
			db = reopen(db)
			appendDecisions(t, db, 2, old)
			if rep := verify(t, db); !rep.OK || rep.Checked != 5 {
				t.Fatalf("rows kept: %+v", rep)
			}
			if n, err := db.PruneDecisions(ctx, time.Now(), 100); err != nil || n != 5 {
				t.Fatalf("prune: %d %v", n, err)
			}
			// A stream's cursor at the last row removed is still a row the log had.
			if last, err := db.LastDecisionID(ctx); err != nil || last != 5 {
				t.Fatalf("last decision id with every row pruned: %d %v, want 5", last, err)
			}
			db = reopen(db)
			appendDecisions(t, db, 2, time.Now())
			if rep := verify(t, db); !rep.OK || rep.Checked != 2 || rep.PrunedThrough == 0 {
				t.Fatalf("every row pruned: %+v", rep)
			}
		})
	}
}

// TestDecisionChainHashesRemoved: only the rows written before the log was chained may lack a
// hash. Blanking every row's hash and the tail (two UPDATEs, no hashing) is a break, and so are a
// cleared tail and a deleted one; before, the first read as a log that predates the chain, and
// verified.
func TestDecisionChainHashesRemoved(t *testing.T) {
	for name, newURL := range map[string]func(testing.TB) string{"sqlite": storagetest.SQLiteURL, "postgres": storagetest.PostgresURL} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := newURL(t)
			open := func() *storage.DB {
				db, err := storage.Open(ctx, u, storage.Options{Key: storagetest.Key})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			db := open()
			appendDecisions(t, db, 3, time.Now())
			rows, err := db.ListDecisions(ctx, storage.DecisionFilter{})
			if err != nil || len(rows) != 3 {
				t.Fatalf("list: %d %v", len(rows), err)
			}
			oldest := rows[2].ID
			for _, q := range []string{`UPDATE decisions SET hash = '', prev_hash = ''`, `UPDATE decision_tail SET hash = ''`} {
				if err := storage.Exec(ctx, db, q); err != nil {
					t.Fatal(err)
				}
			}
			if rep := verify(t, db); rep.OK || rep.BrokenID != oldest || !strings.Contains(rep.Problem, "has no hash") {
				t.Fatalf("hashes and tail blanked: %+v", rep)
			}

			// Rows that really predate the chain: migration 32 finds them (as these blanked rows
			// now look) and they stay unchained; the rows after them are checked.
			for _, q := range []string{`ALTER TABLE decision_tail DROP COLUMN unchained_through`,
				`DELETE FROM schema_migrations WHERE version = 32`} {
				if err := storage.Exec(ctx, db, q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			db = open()
			appendDecisions(t, db, 2, time.Now())
			if rep := verify(t, db); !rep.OK || rep.Unchained != 3 || rep.Checked != 2 {
				t.Fatalf("rows from before the chain: %+v", rep)
			}
			if err := storage.Exec(ctx, db, `UPDATE decision_tail SET hash = ''`); err != nil {
				t.Fatal(err)
			}
			if rep := verify(t, db); rep.OK || !strings.Contains(rep.Problem, "the tail was cleared") {
				t.Fatalf("tail cleared: %+v", rep)
			}
			if err := storage.Exec(ctx, db, `DELETE FROM decision_tail`); err != nil {
				t.Fatal(err)
			}
			if rep := verify(t, db); rep.OK || !strings.Contains(rep.Problem, "tail row is missing") {
				t.Fatalf("tail deleted: %+v", rep)
			}
		})
	}
}

// TestVerifyWhilePruning: a prune that commits while a verification walks the log (retention
// runs every minute, on every replica) does not make the walk report a broken chain: the walk
// reads one snapshot.
func TestVerifyWhilePruning(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		appendDecisions(t, db, 2500, time.Now().Add(-2*time.Hour))
		pruned := false
		storage.AfterVerifyPage(t, func() {
			if pruned {
				return
			}
			pruned = true
			if n, err := db.PruneDecisions(ctx, time.Now().Add(-time.Hour), 1500); err != nil || n != 1500 {
				t.Errorf("prune: %d %v", n, err)
			}
		})
		if rep := verify(t, db); !rep.OK || rep.Checked != 2500 {
			t.Fatalf("verify while a prune committed: %+v", rep)
		}
		if rep := verify(t, db); !rep.OK || rep.Checked != 1000 || rep.PrunedThrough == 0 {
			t.Fatalf("verify after the prune: %+v", rep)
		}
	})
}

// TestDecisionVerifyThroughMissingRow: the record up to a row holds only if the row is there; a
// walk up to one that was deleted with the rows after it links up all the same.
func TestDecisionVerifyThroughMissingRow(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		rows := appendFive(t, db)
		newest := rows[0].ID
		if rep, err := db.VerifyDecisionsThrough(ctx, newest+10); err != nil || rep.OK || !strings.Contains(rep.Problem, "past the newest row") {
			t.Fatalf("through a row not yet written: %+v %v", rep, err)
		}
		if err := storage.Exec(ctx, db, "DELETE FROM decisions WHERE id >= ?", rows[1].ID); err != nil {
			t.Fatal(err)
		}
		for _, id := range []int64{rows[1].ID, newest} {
			rep, err := db.VerifyDecisionsThrough(ctx, id)
			if err != nil || rep.OK || rep.BrokenID != id || !strings.Contains(rep.Problem, "deleted") {
				t.Fatalf("through row %d, deleted: %+v %v", id, rep, err)
			}
		}
		if rep, err := db.VerifyDecisionsThrough(ctx, rows[2].ID); err != nil || !rep.OK || rep.Checked != 3 {
			t.Fatalf("through row %d, kept: %+v %v", rows[2].ID, rep, err)
		}
	})
}
