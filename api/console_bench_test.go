package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// BenchmarkConsolePages measures what the console's pages ask of the admin API on a database
// holding 100,000 decisions (all within the overview's hour: its worst case) and 100,000
// deliveries, over real HTTP, against GET /healthz in the same run. The target is under 200 ms a
// page; p99 is reported beside ns/op.
//
//	go test -run '^$' -bench ConsolePages -benchtime 200x ./api/
func BenchmarkConsolePages(b *testing.B) {
	for _, database := range []string{"sqlite", "postgres"} {
		b.Run(database, func(b *testing.B) {
			var db *storage.DB
			if database == "sqlite" {
				db = storagetest.SQLite(b)
			} else {
				db = storagetest.Postgres(b)
			}
			seedConsole(b, db, 100_000)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			env := agenttest.New(b, db, agenttest.Options{Script: `{"scripts":[{"match":"*","steps":[{"text":"ok"}]}]}`})
			srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: env.Hooks, Dispatcher: env.Dispatcher,
				Runtime: env.Runtime, AdminTokens: []string{"adm"}, Log: log}))
			b.Cleanup(srv.Close)
			for _, page := range []struct{ name, path string }{
				{"bare-healthz", "/healthz"},
				{"overview", "/api/stats/overview"},
				{"decisions", "/api/decisions?limit=50"},
				{"decisions-deny", "/api/decisions?outcome=deny&limit=50"},
				{"decisions-session", "/api/decisions?sessionId=42&limit=50"},
				{"decisions-deep-page", "/api/decisions?limit=50&cursor=" + wire.Cursor(wire.IDKey(50_000))},
				{"deliveries", "/api/deliveries?limit=50"},
				{"deliveries-by-hook", "/api/deliveries?hookId=3&limit=50"},
				{"approvals", "/api/approvals"},
				{"hooks", "/api/hooks"},
				{"console-page", "/console/"},
			} {
				b.Run(page.name, func(b *testing.B) {
					took := make([]time.Duration, 0, b.N)
					for b.Loop() {
						start := time.Now()
						req, _ := http.NewRequest("GET", srv.URL+page.path, nil)
						req.Header.Set("Authorization", "Bearer adm")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("%s: %d", page.path, resp.StatusCode)
						}
						took = append(took, time.Since(start))
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}

// seedConsole writes n decisions (the last hour, a tenth of them denies) and n deliveries.
func seedConsole(b *testing.B, db *storage.DB, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	const batch = 2000
	for i := 0; i < n; i += batch {
		ds := make([]storage.Decision, 0, batch)
		dl := make([]storage.Delivery, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			outcome := "allow"
			if j%10 == 0 {
				outcome = "deny"
			}
			session := int64(j % 1000)
			ds = append(ds, storage.Decision{DecisionID: fmt.Sprintf("d%d", j), EventID: fmt.Sprintf("e%d", j),
				HookID: int64(j%7 + 1), HookName: "gate", HookType: "pre_tool_use", SessionID: &session,
				ToolName: "transferFunds", SubjectHash: "h", Outcome: outcome,
				CreatedAt: now.Add(-time.Duration(n-j) * 30 * time.Millisecond)})
			dl = append(dl, storage.Delivery{EventID: fmt.Sprintf("ev%d", j), HookID: int64(j%7 + 1), HookType: "post_tool_use",
				HookName: "audit", OccurredAt: now, Context: []byte(`{"toolName":"transferFunds"}`)})
		}
		if err := db.InsertDecisions(ctx, ds); err != nil {
			b.Fatal(err)
		}
		if err := db.EnqueueDeliveries(ctx, dl); err != nil {
			b.Fatal(err)
		}
	}
}
