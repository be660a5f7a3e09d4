package dispatcher

// BenchmarkDecisionDurability puts the two decision log durabilities side by side in one run,
// with their baselines (docs/benchmarks.md, "Decision log durability"):
//
//	batched  op after op: a bare POST, a batched Intercept; each one's p50 and p99, and
//	         batched/bare
//	sync     op after op: a bare one-row decision log commit, a bare POST followed by that commit
//	         (one op), a sync Intercept; each one's p50 and p99, and sync-(bare+commit)
//	c64      64 callers deciding at once, batched then sync, in alternating rounds: decisions/s
//	         of each and sync/batched, and what each took of the machine: the process's CPU time
//	         per decision and the cores it kept busy on average (CPU time over wall time)
//
// batched and sync are apart because an op that waits for an fsync leaves the process idle, and
// the op after it starts cold: a bare POST right after a commit took 140–240 µs against 20 µs
// after another POST (2026-12-06), which in one loop of all four ops hid most of what a decision
// adds to it. In sync every op ends in an fsync, so each starts as cold as the others.
//
// Each dispatcher has a database file of its own, as a daemon would. Nothing asserts a speed.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

func BenchmarkDecisionDurability(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			open := storagetest.SQLite
			if dialect == "postgres" {
				open = storagetest.Postgres
			}
			srv := benchAllowReceiver(b)
			hook := `{"hookName":"bench-intercept","hookType":"pre_tool_use","toolNameMatch":"transferFunds",
				"dispatchConfig":{"url":"` + srv.URL + `","signingSecret":"bench-secret","failureMode":"DENY"}}`
			batched := benchDispatcherWith(b, open(b), hook, DurabilityBatched)
			commitDB := open(b)
			synced := benchDispatcherWith(b, commitDB, hook, DurabilitySync)
			post, _ := benchBarePoster(b, &http.Client{Transport: benchTransport(b)}, srv.URL)
			ev := benchPreToolUse()
			ctx := context.Background()
			intercept := func(d *Dispatcher) func() error {
				return func() error {
					if dec, err := d.Intercept(ctx, ev); err != nil || dec.Decision != Allow {
						return fmt.Errorf("intercept: %+v %v", dec, err)
					}
					return nil
				}
			}
			// The commit alone: the row a sync decision writes, through the same storage call, on
			// the sync dispatcher's database.
			row := storage.Decision{DecisionID: "bench", EventID: "bench", HookID: 1, HookName: "bench-intercept",
				HookType: string(PreToolUse), SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID,
				ToolName: "transferFunds", ToolCallID: "call_abc123", SubjectHash: sha256Hex([]byte(`{}`)), Outcome: Allow,
				BreakerState: "closed", StatusCode: 200}
			commit := func() error {
				r := row
				r.CreatedAt = time.Now()
				return commitDB.InsertDecisions(ctx, []storage.Decision{r})
			}

			p50 := func(op benchOp) float64 { return float64(benchPercentile(op.lat, 0.5)) }
			b.Run(DurabilityBatched, func(b *testing.B) {
				ops := []benchOp{{name: "bare-", do: post}, {name: "batched-", do: intercept(batched)}}
				interleave(b, ops)
				b.ReportMetric(p50(ops[1])/p50(ops[0]), "batched/bare-p50")
			})
			b.Run(DurabilitySync, func(b *testing.B) {
				// What a sync decision does beyond the webhook's round trip is this commit: the
				// baseline is both, one after the other.
				bareCommit := func() error {
					if err := post(); err != nil {
						return err
					}
					return commit()
				}
				ops := []benchOp{{name: "commit-", do: commit}, {name: "bare+commit-", do: bareCommit},
					{name: "sync-", do: intercept(synced)}}
				interleave(b, ops)
				b.ReportMetric(p50(ops[2])-p50(ops[1]), "sync-minus-bare+commit-ns")
			})

			b.Run("c64", func(b *testing.B) {
				const callers = 64
				var cpu [2]time.Duration // batched, sync
				run := func(d *Dispatcher, n int) time.Duration {
					var wg sync.WaitGroup
					per := (n + callers - 1) / callers
					start, cpu0 := time.Now(), benchCPU(b)
					defer func() {
						if d == synced {
							cpu[1] += benchCPU(b) - cpu0
						} else {
							cpu[0] += benchCPU(b) - cpu0
						}
					}()
					for range callers {
						wg.Go(func() {
							for range per {
								if dec, err := d.Intercept(ctx, ev); err != nil || dec.Decision != Allow {
									b.Errorf("intercept: %+v %v", dec, err)
									return
								}
							}
						})
					}
					wg.Wait()
					return time.Since(start)
				}
				run(batched, callers) // warm both
				run(synced, callers)
				cpu = [2]time.Duration{}
				var tb, ts time.Duration
				b.ResetTimer()
				// Alternating rounds, so load from elsewhere falls on both alike.
				const rounds = 4
				for range rounds {
					tb += run(batched, b.N/rounds+1)
					ts += run(synced, b.N/rounds+1)
				}
				b.StopTimer()
				n := float64(rounds * ((b.N/rounds + 1 + callers - 1) / callers * callers))
				b.ReportMetric(n/tb.Seconds(), "batched-decisions/s")
				b.ReportMetric(n/ts.Seconds(), "sync-decisions/s")
				b.ReportMetric(tb.Seconds()/ts.Seconds(), "sync/batched")
				b.ReportMetric(float64(cpu[0].Microseconds())/n, "batched-cpu-µs/decision")
				b.ReportMetric(float64(cpu[1].Microseconds())/n, "sync-cpu-µs/decision")
				b.ReportMetric(cpu[0].Seconds()/tb.Seconds(), "batched-cores")
				b.ReportMetric(cpu[1].Seconds()/ts.Seconds(), "sync-cores")
			})
		})
	}
}

// BenchmarkSyncDecisionUnderDelivery is a sync decision's latency while 64 observers deliver
// through the same dispatcher (and so the same writer), against the same decision with no other
// load, in alternating rounds (docs/benchmarks.md, "One writer cycle"): idle-p50, loaded-p50
// and their ratio, with the observational events/s reached meanwhile.
func BenchmarkSyncDecisionUnderDelivery(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			if dialect == "postgres" {
				benchNeedPostgres(b)
			}
			db := benchOpen(b, dialect)
			srv := benchAllowReceiver(b)
			d := benchDispatcherWith(b, db, `{"hookName":"bench-intercept","hookType":"pre_tool_use","toolNameMatch":"transferFunds",
				"dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"bench-secret","failureMode":"DENY"}}`, DurabilitySync)
			if _, err := d.reg.Create(context.Background(), mustHook(b, `{"hookName":"bench-observe","hookType":"post_tool_use",
				"dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"bench-secret"}}`)); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			pre, post := benchPreToolUse(), benchPostToolUse()
			decide := func() (time.Duration, error) {
				t0 := time.Now()
				dec, err := d.Intercept(ctx, pre)
				if err == nil && dec.Decision != Allow {
					err = fmt.Errorf("decision %+v", dec)
				}
				return time.Since(t0), err
			}
			if _, err := decide(); err != nil { // warm the pools
				b.Fatal(err)
			}
			const observers, rounds = 64, 4
			per := b.N/rounds + 1
			var idle, loaded []time.Duration
			var observed atomic.Int64
			var loadTime time.Duration
			b.ResetTimer()
			for range rounds {
				for range per {
					t, err := decide()
					if err != nil {
						b.Fatal(err)
					}
					idle = append(idle, t)
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				for range observers {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							if ids, err := d.Observe(ctx, post); err != nil || len(ids) != 1 {
								b.Errorf("observe: %v %v", ids, err)
								return
							}
							observed.Add(1)
						}
					})
				}
				start := time.Now()
				for range per {
					t, err := decide()
					if err != nil {
						b.Fatal(err)
					}
					loaded = append(loaded, t)
				}
				close(stop)
				wg.Wait()
				loadTime += time.Since(start)
				// The next idle round starts once the deliveries queued meanwhile are all done.
				benchDrained(b, db)
			}
			b.StopTimer()
			slices.Sort(idle)
			slices.Sort(loaded)
			p50i, p50l := benchPercentile(idle, 0.5), benchPercentile(loaded, 0.5)
			b.ReportMetric(float64(p50i.Nanoseconds()), "idle-p50-ns")
			b.ReportMetric(float64(p50l.Nanoseconds()), "loaded-p50-ns")
			b.ReportMetric(float64(p50l)/float64(p50i), "loaded/idle-p50")
			b.ReportMetric(float64(observed.Load())/loadTime.Seconds(), "observe/s")
		})
	}
}

func mustHook(b *testing.B, js string) Hook {
	b.Helper()
	var h Hook
	if err := json.Unmarshal([]byte(js), &h); err != nil {
		b.Fatal(err)
	}
	return h
}
