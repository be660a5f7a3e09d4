package dispatcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookd/hookd/storage"
)

// Durability of the decision log (decisions.durability).
const (
	// DurabilitySync commits a decision's rows before Intercept returns it: a decision that was
	// acted on is on the record, even across a crash. Concurrent decisions share one commit.
	DurabilitySync = "sync"
	// DurabilityBatched returns the decision first and writes the rows within about
	// decisionLinger: a crash loses the decisions of that window.
	DurabilityBatched = "batched"
)

// decisionLinger is how long the batched decision log writer waits for more rows after the first
// one of a write. Without it, a steady trickle of decisions costs one transaction and one fsync
// each, which on SQLite took a fifth of the CPU from the calls being decided. The sync writer
// does not wait: its callers are blocked, and what queued during one commit goes into the next.
const decisionLinger = 10 * time.Millisecond

// decisionBatch is the most rows one decision log write takes.
const decisionBatch = 256

func (d *Dispatcher) newDecisionLog() *groupCommit[storage.Decision] {
	linger := time.Duration(0)
	if d.set.DecisionDurability == DurabilityBatched {
		linger = decisionLinger
	}
	return newGroupCommit(decisionBatch, 8192, linger, d.db.InsertDecisions, func(n int, err error) {
		if err != nil {
			d.log.Error("decision log write failed", "entries", n, "err", err)
		}
	})
}

// recordDecisions hands the rows of one chain to the decision log; in sync mode it returns once
// they are committed, and an error means the decision must not be acted on.
func (d *Dispatcher) recordDecisions(ctx context.Context, recs []storage.Decision) error {
	if len(recs) == 0 {
		return nil
	}
	sync := d.set.DecisionDurability != DurabilityBatched
	// The hooks were asked: the record is written even if the caller has gone meanwhile.
	if err := d.decisionLog.submit(context.WithoutCancel(ctx), recs, sync); err != nil {
		if !sync {
			d.log.Error("decision log write dropped", "entries", len(recs), "err", err)
			return nil
		}
		return fmt.Errorf("dispatcher: decision %s not recorded: %w", recs[0].DecisionID, err)
	}
	return nil
}

// subject is what a decision is about, as the decision log names it.
type subject struct {
	toolName, toolCallID string
	taskID               *int64
	hash                 string  // SHA-256 of the canonical arguments, of the user input, or of the task name
	recorded             *string // the arguments or input themselves, with decisions.recordArguments
}

func subjectOf(c any, record bool) subject {
	var s subject
	var raw []byte
	switch c := c.(type) {
	case *PreToolUseContext:
		s.toolName, s.toolCallID = c.ToolName, c.ToolCallID
		raw = canonicalJSON([]byte(c.Arguments))
	case *UserMessageContext:
		raw = []byte(c.UserInput)
	case *PreScheduledTaskContext:
		id := c.TaskID
		s.taskID = &id
		raw = []byte(c.TaskName)
	default:
		return s
	}
	s.hash = sha256Hex(raw)
	if record {
		v := string(raw)
		s.recorded = &v
	}
	return s
}

// canonicalJSON is b with object keys sorted and no insignificant whitespace, numbers as
// written, so equal arguments hash alike however a caller spaced them; b itself when it is not
// JSON.
func canonicalJSON(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return b
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return b
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
