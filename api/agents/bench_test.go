package agents_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/apibench"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
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
// the adapter, against a bare loopback HTTP round trip to a trivial handler (same client, same
// keep-alive, same body, same 204), one after the other in each iteration so that load from
// elsewhere falls on both alike. Per decision log durability:
//
//	batched  bare, batched: x-bare-p50 is batched over bare
//	sync     bare, a bare commit of one decision row on the daemon's database, sync:
//	         sync-over-bare+commit-µs is what a sync decision costs beyond the round trip and the
//	         commit it waits for
//
// The two are apart because an op that waits for an fsync leaves the process idle, and whatever
// runs right after it pays for waking up: in one loop the op after the commit would carry that.
func BenchmarkClaudeCodePolicy(b *testing.B) {
	body := []byte(benchInput)
	// baselines are the ops measured beside the bare round trip, given the daemon's database and the
	// poster of the hook's body.
	run := func(b *testing.B, durability string, baselines func(*storage.DB, func(string) func() error) []*apibench.Op) []*apibench.Op {
		client := apibench.Client()
		hookd, db := claudeDaemon(b, durability)
		post := func(url string) func() error {
			return apibench.Post(client, url, body, http.StatusNoContent, "Authorization", "Bearer key-bench")
		}
		bare := apibench.Bare(b, http.StatusNoContent, nil)
		ops := append([]*apibench.Op{{Name: "bare", Do: post(bare.URL)}}, baselines(db, post)...)
		ops = append(ops, &apibench.Op{Name: durability, Do: post(hookd.URL + "/v1/agents/claude-code/hooks")})
		apibench.Run(b, ops)
		apibench.ReportRatio(b, ops[len(ops)-1], ops[0], "x-bare-p50")
		return ops
	}
	b.Run(dispatcher.DurabilityBatched, func(b *testing.B) {
		run(b, dispatcher.DurabilityBatched, func(*storage.DB, func(string) func() error) []*apibench.Op { return nil })
	})
	b.Run(dispatcher.DurabilitySync, func(b *testing.B) {
		ops := run(b, dispatcher.DurabilitySync, func(db *storage.DB, post func(string) func() error) []*apibench.Op {
			commit := apibench.Commit(db, "shell rules", "Bash")
			bareCommit := apibench.BareDoing(b, http.StatusNoContent, nil, commit)
			return []*apibench.Op{{Name: "commit", Do: commit},
				{Name: "bare-commit", Do: post(bareCommit.URL)}}
		})
		apibench.ReportOver(b, ops[3], "sync-over-bare+commit-µs", ops[0], ops[1])
		apibench.ReportOver(b, ops[3], "sync-over-bare-commit-µs", ops[2])
	})
}

// claudeDaemon serves the HTTP API with the shell policy hook and an API key, its decision log on
// a SQLite database of its own.
func claudeDaemon(b *testing.B, durability string) (*httptest.Server, *storage.DB) {
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
	srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: d, Log: log, AdminTokens: []string{"adm"},
		Keys: wire.NewKeys([]wire.APIKey{{Key: "key-bench", UserID: "dev-1", PrincipalID: 1001}}), Metrics: prometheus.NewRegistry()}))
	b.Cleanup(srv.Close)
	return srv, db
}
