package dispatcher

// Benchmarks of the two hot paths against the raw baselines measured in the same run:
//
//	BenchmarkIntercept          one interceptive decision (one signed pre_tool_use hook)
//	BenchmarkBarePOST           a plain net/http POST of the same envelope to the same kind of receiver
//	BenchmarkInterceptVsBare    the two (and the sender alone) interleaved op by op, with the ratio
//	BenchmarkObserveDelivery    sustained Observe → outbox → receiver → outcome recorded, per database,
//	                            and bare-post: the same envelopes POSTed by as many goroutines, the
//	                            HTTP alone (the ceiling of any delivery on this machine)
//	BenchmarkBareOutbox         the storage layer alone: enqueue, claim, complete, no HTTP
//
// Figures, the command and the analysis are in docs/benchmarks.md. Nothing here asserts a speed:
// the benchmarks report figures and fail only when a call fails or an event is lost.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// benchObserverCounts are the numbers of goroutines calling Observe at once in
// BenchmarkObserveDelivery. Each waits for its commit before calling again, so the count is the
// offered concurrency; 64 is the headline figure.
var benchObserverCounts = []int{16, 64, 256}

// benchOutboxBatch is the batch size of BenchmarkBareOutbox: one enqueue, one claim and one
// completion per batch, as the dispatcher's writers do under load.
const benchOutboxBatch = 256

// benchTransport is the transport both sides of the Intercept / bare POST comparison use, and the
// dispatcher in the delivery benchmarks: http.DefaultTransport with keep-alive and an idle pool
// the size of the daemon's (netguard.Transport), without the SSRF guard's dial check (which only
// runs when a connection is opened).
func benchTransport(b *testing.B) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	b.Cleanup(t.CloseIdleConnections)
	return t
}

// benchAllowReceiver answers every request with an allow decision after reading the body.
func benchAllowReceiver(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchDispatcher starts a dispatcher over db with one hook, stopped when the benchmark ends.
func benchDispatcher(b *testing.B, db *storage.DB, hook string) *Dispatcher {
	b.Helper()
	return benchDispatcherWith(b, db, hook, DurabilitySync)
}

// benchDispatcherWith is benchDispatcher with the decision log's durability.
func benchDispatcherWith(b *testing.B, db *storage.DB, hook, durability string) *Dispatcher {
	b.Helper()
	ctx := context.Background()
	reg, err := NewRegistry(ctx, db, quietLog())
	if err != nil {
		b.Fatal(err)
	}
	var hk Hook
	if err := json.Unmarshal([]byte(hook), &hk); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.Create(ctx, hk); err != nil {
		b.Fatal(err)
	}
	// With metrics, as the daemon runs it.
	d := New(db, reg, quietLog(), Settings{Transport: benchTransport(b), Version: "bench", Metrics: prometheus.NewRegistry(),
		DecisionDurability: durability})
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

func benchPreToolUse() Event {
	return Event{HookType: PreToolUse, TraceID: "req-7a8b9c0d1e2f3g4h", SessionID: ptr[int64](10001),
		PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001),
		Context: &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_abc123",
			Arguments: `{"amount":50000,"target":"ACC-002","memo":"quarterly settlement"}`}}
}

func benchPostToolUse() Event {
	return Event{HookType: PostToolUse, TraceID: "req-7a8b9c0d1e2f3g4h", SessionID: ptr[int64](10001),
		PrincipalID: ptr[int64](1001), AgentID: ptr[int64](5001),
		Context: &PostToolUseContext{ToolName: "queryOrder", ToolCallID: "call_abc123",
			Arguments: `{"orderId":"ORD-2026001"}`, Output: `{"status":"shipped","items":3}`, Succeeded: true, DurationMs: 320}}
}

// benchReportLatency sorts per-operation durations and reports their p50 and p99.
func benchReportLatency(b *testing.B, prefix string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(benchPercentile(ds, 0.50).Nanoseconds()), prefix+"p50-ns")
	b.ReportMetric(float64(benchPercentile(ds, 0.99).Nanoseconds()), prefix+"p99-ns")
}

// benchPercentile is the nearest-rank q-quantile of sorted durations.
func benchPercentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// BenchmarkIntercept is one interceptive decision end to end: match, TSIDs, envelope JSON, HMAC
// signature, the POST, the answer parsed, the decision log entry handed to its writer.
func BenchmarkIntercept(b *testing.B) {
	srv := benchAllowReceiver(b)
	db := storagetest.SQLite(b)
	d := benchDispatcher(b, db, `{"hookName":"bench-intercept","hookType":"pre_tool_use","toolNameMatch":"transferFunds",
		"dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"bench-secret","failureMode":"DENY"}}`)
	ev := benchPreToolUse()
	ctx := context.Background()
	// Warm the connection pool so neither benchmark pays a dial inside the timed loop.
	if dec, err := d.Intercept(ctx, ev); err != nil || dec.Decision != Allow {
		b.Fatalf("intercept: %+v %v", dec, err)
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		dec, err := d.Intercept(ctx, ev)
		lat[i] = time.Since(start)
		if err != nil || dec.Decision != Allow {
			b.Fatalf("intercept: %+v %v", dec, err)
		}
	}
	b.StopTimer()
	benchReportLatency(b, "", lat)
}

// benchBarePoster returns a plain POST of a prebuilt envelope the size of BenchmarkIntercept's to
// url, reading the answer, and the body's size.
func benchBarePoster(b *testing.B, client *http.Client, url string) (func() error, int) {
	b.Helper()
	return benchBarePosterOf(b, client, url, benchPreToolUse(), "bench-intercept")
}

// benchBarePosterOf is benchBarePoster with ev's envelope, for hook hookName.
func benchBarePosterOf(b *testing.B, client *http.Client, url string, ev Event, hookName string) (func() error, int) {
	b.Helper()
	ctxBody, err := marshalContext(ev.Context)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(&Envelope{SchemaVersion: SchemaVersion, EventID: storage.NewTSIDString(),
		HookType: ev.HookType, HookName: hookName, OccurredAt: time.Now().UnixMilli(),
		DispatchedAt: time.Now().UnixMilli(), DeliveryAttempt: 1, TraceID: strPtr(ev.TraceID),
		SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: ctxBody})
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || len(out) == 0 {
			return fmt.Errorf("answer %d %q %v", resp.StatusCode, out, err)
		}
		return nil
	}, len(body)
}

// BenchmarkBarePOST is the floor under BenchmarkIntercept: the same transport posting a prebuilt
// envelope of the same size to the same kind of receiver and reading the answer.
func BenchmarkBarePOST(b *testing.B) {
	srv := benchAllowReceiver(b)
	post, size := benchBarePoster(b, &http.Client{Transport: benchTransport(b)}, srv.URL)
	if err := post(); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		err := post()
		lat[i] = time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	benchReportLatency(b, "", lat)
}

// BenchmarkInterceptVsBare runs, op after op against one receiver, a bare POST, the dispatcher's
// sender alone (envelope JSON, HMAC signature, headers, bounded read: the wire work of a decision)
// and a whole Intercept, so that load from anything else on the machine falls on all three alike.
// It reports each one's p50 and p99 and the ratio of the Intercept p50 to the bare p50. ns/op is
// the time of the three together.
func BenchmarkInterceptVsBare(b *testing.B) {
	srv := benchAllowReceiver(b)
	db := storagetest.SQLite(b)
	d := benchDispatcher(b, db, `{"hookName":"bench-intercept","hookType":"pre_tool_use","toolNameMatch":"transferFunds",
		"dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"bench-secret","failureMode":"DENY"}}`)
	post, _ := benchBarePoster(b, &http.Client{Transport: benchTransport(b)}, srv.URL)
	ev := benchPreToolUse()
	ctx := context.Background()
	h := d.reg.Match(ev.HookType, ev.AgentID, ev.toolName())[0]
	ctxBody, err := marshalContext(ev.Context)
	if err != nil {
		b.Fatal(err)
	}
	send := func() error {
		env := &Envelope{SchemaVersion: SchemaVersion, EventID: storage.NewTSIDString(), HookType: h.HookType,
			HookName: h.HookName, OccurredAt: time.Now().UnixMilli(), DeliveryAttempt: 1, TraceID: strPtr(ev.TraceID),
			SessionID: ev.SessionID, PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: ctxBody}
		if a := d.send.send(ctx, &h.Hook, h.wire, env, time.Now()); a.err != nil || a.status != 200 {
			return fmt.Errorf("send: %d %v", a.status, a.err)
		}
		return nil
	}
	intercept := func() error {
		if dec, err := d.Intercept(ctx, ev); err != nil || dec.Decision != Allow {
			return fmt.Errorf("intercept: %+v %v", dec, err)
		}
		return nil
	}
	ops := []benchOp{{name: "bare-", do: post}, {name: "send-", do: send}, {name: "intercept-", do: intercept}}
	interleave(b, ops)
	b.ReportMetric(float64(benchPercentile(ops[2].lat, 0.5))/float64(benchPercentile(ops[0].lat, 0.5)), "x-bare-p50")
}

// BenchmarkObserveDelivery measures sustained observational delivery: a number of goroutines call
// Observe (one matching post_tool_use hook) b.N times in all, and the clock stops when the local
// receiver has received all b.N events and every row is recorded delivered. It reports end-to-end
// events/s and the latency of Observe itself (the group commit) under that load.
func BenchmarkObserveDelivery(b *testing.B) {
	b.Run("bare-post", func(b *testing.B) {
		for _, n := range benchObserverCounts {
			b.Run(fmt.Sprintf("posters=%d", n), func(b *testing.B) { benchBarePosts(b, n) })
		}
	})
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			if dialect == "postgres" {
				benchNeedPostgres(b)
			}
			for _, n := range benchObserverCounts {
				b.Run(fmt.Sprintf("observers=%d", n), func(b *testing.B) {
					benchObserveDelivery(b, benchOpen(b, dialect), n)
				})
			}
		})
	}
}

// benchNeedPostgres skips when no PostgreSQL server is configured. The testing package shows a
// skipped benchmark's reason only under -v, so the reason is printed too.
func benchNeedPostgres(b *testing.B) {
	b.Helper()
	if os.Getenv(storagetest.PostgresEnv) == "" {
		fmt.Printf("%s: skipped: %s is not set, so there is no PostgreSQL server to measure\n", b.Name(), storagetest.PostgresEnv)
		b.SkipNow()
	}
}

// benchOpen opens a fresh database of the dialect, removed when the benchmark run ends.
func benchOpen(b *testing.B, dialect string) *storage.DB {
	b.Helper()
	if dialect == "postgres" {
		return storagetest.Postgres(b)
	}
	return storagetest.SQLite(b)
}

func benchObserveDelivery(b *testing.B, db *storage.DB, observers int) {
	target := int64(b.N)
	var received atomic.Int64
	allReceived := make(chan struct{})
	var closeOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if received.Add(1) >= target {
			closeOnce.Do(func() { close(allReceived) })
		}
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	d := benchDispatcher(b, db, `{"hookName":"bench-observe","hookType":"post_tool_use",
		"dispatchConfig":{"url":"`+srv.URL+`","signingSecret":"bench-secret"}}`)
	ev := benchPostToolUse()
	ctx := context.Background()

	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	errs := make(chan error, observers)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), benchCPU(b)
	for range min(observers, b.N) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= target {
					return
				}
				t0 := time.Now()
				ids, err := d.Observe(ctx, ev)
				lat[i] = time.Since(t0)
				if err != nil || len(ids) != 1 {
					errs <- fmt.Errorf("observe: %v %v", ids, err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	select {
	case <-allReceived:
	case <-time.After(2 * time.Minute):
		b.Fatalf("receiver got %d of %d events", received.Load(), b.N)
	}
	// The receiver has them all; the clock runs until the outcomes are recorded too.
	benchDrained(b, db)
	elapsed, cpu := time.Since(start), benchCPU(b)-cpu
	b.StopTimer()
	for _, st := range []string{storage.StatusFailed, storage.StatusDead} {
		if ds, err := db.ListDeliveries(ctx, storage.DeliveryFilter{Status: st, Limit: 1}); err != nil || len(ds) > 0 {
			b.Fatalf("deliveries %s: %v %v", st, ds, err)
		}
	}
	if got := received.Load(); got != target {
		b.Fatalf("receiver got %d requests for %d events", got, target)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
	benchReportLatency(b, "observe-", lat)
}

// benchBarePosts is the HTTP of benchObserveDelivery alone: posters goroutines POSTing the
// post_tool_use envelope, b.N in all, to a receiver like its, over the dispatcher's transport.
func benchBarePosts(b *testing.B, posters int) {
	srv := benchAllowReceiver(b)
	post, _ := benchBarePosterOf(b, &http.Client{Transport: benchTransport(b)}, srv.URL, benchPostToolUse(), "bench-observe")
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu := time.Now(), benchCPU(b)
	for range min(posters, b.N) {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := post(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), benchCPU(b)-cpu
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "posts/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/post")
}

// benchCPU is the CPU time this process has used so far, user and system, its threads in C
// (SQLite) included.
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBareOutbox is the storage layer's ceiling for the same work without HTTP or the
// dispatcher's goroutines: batches of benchOutboxBatch rows enqueued in one transaction, claimed in
// one statement and completed (with an attempt record each) in one transaction.
func BenchmarkBareOutbox(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchBareOutbox(b, storagetest.SQLite(b)) })
	b.Run("postgres", func(b *testing.B) {
		benchNeedPostgres(b)
		benchBareOutbox(b, storagetest.Postgres(b))
	})
}

func benchBareOutbox(b *testing.B, db *storage.DB) {
	ctx := context.Background()
	ev := benchPostToolUse()
	body, err := marshalContext(ev.Context)
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]storage.Delivery, 0, benchOutboxBatch)
	outs := make([]storage.Outcome, 0, benchOutboxBatch)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), benchCPU(b)
	for done := 0; done < b.N; {
		n := min(benchOutboxBatch, b.N-done)
		rows = rows[:0]
		now := time.Now()
		for range n {
			rows = append(rows, storage.Delivery{EventID: storage.NewTSIDString(), HookID: 1, HookType: string(PostToolUse),
				HookName: "bench-observe", OccurredAt: now, TraceID: strPtr(ev.TraceID), SessionID: ev.SessionID,
				PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: body})
		}
		if err := db.EnqueueDeliveries(ctx, rows); err != nil {
			b.Fatal(err)
		}
		claimed, err := db.ClaimDeliveries(ctx, time.Now(), n, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if len(claimed) != n {
			b.Fatalf("claimed %d of %d", len(claimed), n)
		}
		outs = outs[:0]
		for _, c := range claimed {
			outs = append(outs, storage.Outcome{Delivery: c, Status: storage.StatusDelivered, Attempts: 1, StatusCode: 200,
				Attempt: &storage.Attempt{Attempt: 1, DispatchedAt: time.Now(), StatusCode: 200}})
		}
		if err := db.CompleteDeliveries(ctx, outs); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	elapsed, cpu := time.Since(start), benchCPU(b)-cpu
	b.StopTimer()
	if depth, _, err := db.OutboxStats(ctx); err != nil || depth != 0 {
		b.Fatalf("outbox depth %d after completing every batch: %v", depth, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
}

// benchOp is one operation of an interleaved latency benchmark.
type benchOp struct {
	name string
	do   func() error
	lat  []time.Duration
}

// interleave runs each op once per iteration, in turn, so load from elsewhere falls on all of them
// alike, and reports each one's latencies (sorted afterwards, for benchPercentile).
func interleave(b *testing.B, ops []benchOp) {
	b.Helper()
	for i := range ops {
		if err := ops[i].do(); err != nil { // warm the pools
			b.Fatal(err)
		}
		ops[i].lat = make([]time.Duration, b.N)
	}
	b.ResetTimer()
	for n := range b.N {
		for i := range ops {
			start := time.Now()
			err := ops[i].do()
			ops[i].lat[n] = time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	for i := range ops {
		benchReportLatency(b, ops[i].name, ops[i].lat) // sorts
	}
}

// benchDrained returns once no delivery is pending or in flight, and fails the benchmark after
// 2 minutes. It reads the outbox every millisecond: the outcomes' commits announce nothing, and a
// benchmark's end is the one place that needs to know.
func benchDrained(b *testing.B, db *storage.DB) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		depth, _, err := db.OutboxStats(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if depth == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d deliveries still pending or in flight", depth)
		}
		time.Sleep(time.Millisecond)
	}
}
