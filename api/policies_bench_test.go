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
	"testing"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/apibench"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// BenchmarkPolicyDispatch is a policy decision through POST /api/hooks/dispatch (the transfer
// policy of three rules, its ask rule deciding) on the whole admin API, against a bare loopback
// round trip to a trivial handler that answers the same bytes, over the same client, one after
// the other in each iteration so that load from elsewhere falls on both alike. Per decision log
// durability:
//
//	batched  bare, batched: x-bare-p50 is batched over bare; and the floor under it, GET
//	         /healthz on the daemon against a bare GET that answers the same bytes: x-floor-p50 is
//	         what the HTTP framework and the middleware every route passes cost alone
//	sync     bare, a bare commit of one decision row on the daemon's database, sync:
//	         sync-over-bare+commit-µs is what a sync decision costs beyond the round trip and the
//	         commit it waits for
//
// The two are apart because an op that waits for an fsync leaves the process idle, and whatever
// runs right after it pays for waking up: in one loop the op after the commit would carry that.
func BenchmarkPolicyDispatch(b *testing.B) {
	body := []byte(transferEvent(`{"amount":5000,"currency":"CNY"}`))
	b.Run(dispatcher.DurabilityBatched, func(b *testing.B) {
		client := apibench.Client()
		hookd, _ := policyDaemon(b, dispatcher.DurabilityBatched)
		// The bare handler answers what the daemon answers: the same bytes (every decisionId has
		// the same length).
		bare := apibench.Bare(b, 200, dispatchAnswerOf(b, client, hookd.URL, body))
		bareGet := apibench.Bare(b, 200, answerOf(b, client, hookd.URL+"/healthz"))
		ops := []*apibench.Op{{Name: "bare", Do: apibench.Post(client, bare.URL, body, 200)},
			{Name: "batched", Do: apibench.Post(client, hookd.URL+"/api/hooks/dispatch", body, 200)},
			{Name: "bare-get", Do: apibench.Get(client, bareGet.URL, 200)},
			{Name: "healthz", Do: apibench.Get(client, hookd.URL+"/healthz", 200)}}
		apibench.Run(b, ops)
		apibench.ReportRatio(b, ops[1], ops[0], "x-bare-p50")
		apibench.ReportRatio(b, ops[3], ops[2], "x-floor-p50")
	})
	b.Run(dispatcher.DurabilitySync, func(b *testing.B) {
		client := apibench.Client()
		hookd, db := policyDaemon(b, dispatcher.DurabilitySync)
		answer := dispatchAnswerOf(b, client, hookd.URL, body)
		bare := apibench.Bare(b, 200, answer)
		commit := apibench.Commit(db, "转账限额", "transferFunds")
		bareCommit := apibench.BareDoing(b, 200, answer, commit)
		ops := []*apibench.Op{{Name: "bare", Do: apibench.Post(client, bare.URL, body, 200)},
			{Name: "commit", Do: commit},
			{Name: "bare-commit", Do: apibench.Post(client, bareCommit.URL, body, 200)},
			{Name: "sync", Do: apibench.Post(client, hookd.URL+"/api/hooks/dispatch", body, 200)}}
		apibench.Run(b, ops)
		apibench.ReportRatio(b, ops[3], ops[0], "x-bare-p50")
		apibench.ReportOver(b, ops[3], "sync-over-bare+commit-µs", ops[0], ops[1])
		apibench.ReportOver(b, ops[3], "sync-over-bare-commit-µs", ops[2])
	})
}

// policyDaemon serves the admin API (development mode on loopback) with the transfer policy hook,
// its decision log on a SQLite file of its own.
func policyDaemon(b *testing.B, durability string) (*httptest.Server, *storage.DB) {
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
	return srv, db
}

// answerOf is the daemon's answer to a GET of url.
func answerOf(b *testing.B, client *http.Client, url string) []byte {
	resp, err := client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s answered %d %s", url, resp.StatusCode, out)
	}
	return out
}

// dispatchAnswerOf is the daemon's answer to body, which must be the policy's ask.
func dispatchAnswerOf(b *testing.B, client *http.Client, url string, body []byte) []byte {
	resp, err := client.Post(url+"/api/hooks/dispatch", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(out, []byte(`"decision":"ask"`)) {
		b.Fatalf("dispatch answered %d %s", resp.StatusCode, out)
	}
	return out
}
