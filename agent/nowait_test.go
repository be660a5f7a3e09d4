package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Nothing in the runtime or the chat APIs sleeps or polls to wait for a run's state: a state
// change is written with the events that announce it (transition.go) and followers are woken.
// Every timer in that code is listed here with what it is for; a new one fails this test until
// it is listed — and a wait for a run state is not a reason to list it.
var timers = map[string]string{
	// The one wait for run state: readers of runs that are live on another replica, in case a
	// notification was lost (follow.go).
	// The same ticker (every) also drives the sweep of asks nobody answered in time.
	"agent/runtime.go:every": "the replica fallback poll (followPoll) and the sweep of expired asks",

	// Timers that wait for time itself, not for a state.
	"agent/replicas.go:keepLeases":       "renews this replica's leases every RunLease/5",
	"agent/log.go:flush":                 "backs off between retries of a failed database write",
	"agent/loop.go:modelCall":            "backs off between retries of a model call",
	"agent/model/openai.go:newIdleTimer": "ends a model stream that went silent",
	"agent/model/scripted.go:Stream":     "a scripted step's delay",
	"api/agui/agui.go:stream":            "SSE heartbeat",
	"api/approvals.go:stream":            "SSE heartbeat of the approvals inbox; a beat also re-reads for asks other replicas made",
	"api/decisionlog.go:stream":          "SSE heartbeat of the decision tail; a beat also re-reads for rows other replicas wrote",
	"api/aisdk/aisdk.go:stream":          "SSE heartbeat",
	"api/platform/platform.go:stream":    "SSE heartbeat",
	"api/volo/volo.go:stream":            "SSE heartbeat",
}

func TestNoWaitingForRunState(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, root := range []string{".", "../api"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(filepath.Join("agent", path))
			if strings.HasPrefix(path, "..") {
				rel = filepath.ToSlash(strings.TrimPrefix(path, "../"))
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "time" {
						return true
					}
					switch sel.Sel.Name {
					case "Sleep", "After", "Tick", "NewTicker", "NewTimer", "AfterFunc":
					default:
						return true
					}
					key := rel + ":" + fn.Name.Name
					seen[key] = true
					if timers[key] == "" {
						t.Errorf("%s: time.%s in %s: nothing in agent or api may wait on a timer for a run's state; "+
							"if it waits for time itself, list it in timers with why", fset.Position(call.Pos()), sel.Sel.Name, fn.Name.Name)
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for key := range timers {
		if !seen[key] {
			t.Errorf("timers lists %s, which has no timer any more: drop it", key)
		}
	}
}
