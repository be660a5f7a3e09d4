//go:build commithold

package storage

import (
	"encoding/json"
	"os"
)

// This file is built only into the daemon of cmd/hookd's crash tests that stop a write half way
// (go build -tags commithold). With HOOKD_TEST_HOLD_COMMIT naming a kind of row (deliveries,
// decisions, runEvents, taskRunEnds), the first transaction that holds such rows stops once they
// are written and before its COMMIT; with asks, AddAsks stops before it writes them, with
// asksStored once it has. It says so on stderr ("commit held") and waits until the process is
// killed.
func init() {
	kind := os.Getenv("HOOKD_TEST_HOLD_COMMIT")
	if kind == "" {
		return
	}
	hold := func(n int) {
		line, _ := json.Marshal(struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Kind  string `json:"kind"`
			Rows  int    `json:"rows"`
		}{"WARN", "commit held", kind, n})
		os.Stderr.Write(append(line, '\n'))
		select {} // until SIGKILL
	}
	switch kind {
	case "asks":
		beforeAddAsks = hold
		return
	case "asksStored":
		afterAddAsks = hold
		return
	}
	beforeCommit = func(b *WriteBatch) {
		n := map[string]int{"deliveries": len(b.Deliveries), "decisions": len(b.Decisions), "runEvents": len(b.RunEvents),
			"taskRunEnds": len(b.TaskRunEnds)}[kind]
		if n > 0 {
			hold(n)
		}
	}
}
