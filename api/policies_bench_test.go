package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// BenchmarkPolicyDispatch is a policy decision through POST /api/hooks/dispatch (the transfer
// policy of three rules, its ask rule deciding) against a bare loopback round trip to a handler
// that answers the same bytes at once, one of each in turn over the same client, so load from
// elsewhere falls on both alike. It reports both medians and x-bare-p50. The sub-benchmarks are
// the decision log's two durabilities: batched (the record written within about 10 ms) and sync
// (committed to SQLite before the answer, the default).
func BenchmarkPolicyDispatch(b *testing.B) {
	for _, durability := range []string{dispatcher.DurabilityBatched, dispatcher.DurabilitySync} {
		b.Run(durability, func(b *testing.B) { benchPolicyDispatch(b, durability) })
	}
}

func benchPolicyDispatch(b *testing.B, durability string) {
	ctx := context.Background()
	db, err := storage.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "hookd.db"), storage.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := dispatcher.NewRegistry(ctx, db, log)
	if err != nil {
		b.Fatal(err)
	}
	d := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "bench", DecisionDurability: durability})
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop(context.Background()) })
	var h dispatcher.Hook
	if err := json.Unmarshal([]byte(transferPolicy), &h); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.Create(ctx, h); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: d, LoopbackOnly: true, Log: log}))
	b.Cleanup(srv.Close)
	body := []byte(transferEvent(`{"amount":5000,"currency":"CNY"}`))
	var answer []byte
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	post := func(url string) []byte {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d %s", url, resp.StatusCode, out)
		}
		return out
	}
	answer = post(srv.URL + "/api/hooks/dispatch")
	if !bytes.Contains(answer, []byte(`"decision":"ask"`)) {
		b.Fatalf("dispatch answered %s", answer)
	}
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	b.Cleanup(bare.Close)
	post(bare.URL)
	pol := make([]time.Duration, 0, b.N)
	base := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		post(srv.URL + "/api/hooks/dispatch")
		t1 := time.Now()
		post(bare.URL)
		pol, base = append(pol, t1.Sub(t0)), append(base, time.Since(t1))
	}
	b.StopTimer()
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	pp, bp := median(pol), median(base)
	b.ReportMetric(float64(pp.Microseconds()), "dispatch-p50-µs")
	b.ReportMetric(float64(bp.Microseconds()), "bare-p50-µs")
	b.ReportMetric(float64(pp)/float64(bp), "x-bare-p50")
}
