package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage/storagetest"
)

// benchPolicy is ten rules a team might keep for a coding agent's shell; "make test" passes them
// all, so every rule's when runs: the worst case of a first-match policy.
const benchPolicy = `{"hookName":"shell rules","hookType":"pre_tool_use","toolNameMatch":"Bash","dispatchType":"policy",
 "dispatchConfig":{"failureMode":"DENY"},
 "policyConfig":{"rules":[
  {"name":"root","when":"args.command.contains('rm -rf /')","decision":"deny","reason":"'no rm -rf /'"},
  {"name":"pipe-sh","when":"args.command.matches('curl .*[|] *sh')","decision":"deny","reason":"'no curl | sh'"},
  {"name":"sudo","when":"args.command.startsWith('sudo ')","decision":"deny","reason":"'no sudo'"},
  {"name":"etc","when":"args.command.contains('/etc/')","decision":"ask","reason":"'touches /etc'"},
  {"name":"force-push","when":"args.command.contains('git push --force')","decision":"deny","reason":"'no force push'"},
  {"name":"bypass","when":"event.context.permissionMode == 'bypassPermissions'","decision":"ask","reason":"'bypass mode'"},
  {"name":"long","when":"size(args.command) > 10000","decision":"deny","reason":"'command too long'"},
  {"name":"background","when":"has(args.run_in_background) && args.run_in_background == true","decision":"ask","reason":"'background job'"},
  {"name":"ssh","when":"args.command.contains('.ssh')","decision":"deny","reason":"'no ssh keys'"},
  {"name":"sql","when":"tool == 'Bash' && args.command.contains('DROP TABLE')","decision":"deny","reason":"'no DROP TABLE'"}],
  "default":"allow"}}`

const benchInput = `{"session_id":"8f3c2a1e-5b7d-4c9e-a1f2-3d4e5f6a7b8c","transcript_path":"/home/dev/.claude/projects/pay/8f3c2a1e.jsonl",
 "cwd":"/home/dev/pay","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash",
 "tool_input":{"command":"make test","description":"Run the tests","timeout":120000},"tool_use_id":"toolu_01ABCdef234"}`

// BenchmarkClaudeCodePolicy is a Claude Code PreToolUse decided by a 10-rule CEL policy through
// the adapter, against a bare loopback HTTP round trip to a trivial handler, op after op in the
// same run over the same client, so that load from elsewhere falls on both alike. It reports the
// p50 and p99 of each and the ratio of the p50s; per decision durability of the decision log.
func BenchmarkClaudeCodePolicy(b *testing.B) {
	for _, durability := range []string{dispatcher.DurabilityBatched, dispatcher.DurabilitySync} {
		b.Run(durability, func(b *testing.B) { benchClaudeCodePolicy(b, durability) })
	}
}

func benchClaudeCodePolicy(b *testing.B, durability string) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := storagetest.SQLite(b)
	reg, err := dispatcher.NewRegistry(ctx, db, log)
	if err != nil {
		b.Fatal(err)
	}
	var hk dispatcher.Hook
	if err := json.Unmarshal([]byte(benchPolicy), &hk); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.Create(ctx, hk); err != nil {
		b.Fatal(err)
	}
	d := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "bench", DecisionDurability: durability,
		Metrics: prometheus.NewRegistry()})
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop(ctx) })
	hookd := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: d, Log: log, AdminTokens: []string{"adm"},
		Keys: wire.NewKeys([]wire.APIKey{{Key: "key-bench", UserID: "dev-1", PrincipalID: 1001}}), Metrics: prometheus.NewRegistry()}))
	b.Cleanup(hookd.Close)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(bare.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	body := []byte(benchInput)
	post := func(url string) func() error {
		return func() error {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer key-bench")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Fatalf("%s: %d", url, resp.StatusCode)
			}
			return nil
		}
	}
	ops := []struct {
		name string
		do   func() error
		lat  []time.Duration
	}{{name: "bare-", do: post(bare.URL)}, {name: "adapter-", do: post(hookd.URL + "/v1/agents/claude-code/hooks")}}
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
		slices.Sort(ops[i].lat)
		b.ReportMetric(float64(percentile(ops[i].lat, 0.50).Microseconds()), ops[i].name+"p50-µs")
		b.ReportMetric(float64(percentile(ops[i].lat, 0.99).Microseconds()), ops[i].name+"p99-µs")
	}
	b.ReportMetric(float64(percentile(ops[1].lat, 0.5))/float64(percentile(ops[0].lat, 0.5)), "x-bare-p50")
}

// percentile is the nearest-rank q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
