package dispatcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Durability of the decision log (decisions.durability).
const (
	// DurabilitySync commits a decision's rows before Intercept returns it: a decision that was
	// acted on is on the record, even across a crash. Concurrent decisions share one commit.
	DurabilitySync = "sync"
	// DurabilityBatched returns the decision first and writes the rows in the writer's next
	// cycle, within about WriterLimits.MaxDelay: a crash loses the decisions of that window.
	DurabilityBatched = "batched"
)

// recordDecisions hands the rows of one chain to the decision log; in sync mode it returns once
// they are committed, and an error means the decision must not be acted on.
func (d *Dispatcher) recordDecisions(ctx context.Context, recs []storage.Decision) error {
	if len(recs) == 0 {
		return nil
	}
	sync := d.set.DecisionDurability != DurabilityBatched
	// The hooks were asked: the record is written even if the caller has gone meanwhile.
	r := &writeReq{kind: writeDecision, decisions: recs}
	if sync {
		r.done = make(chan error, 1)
	}
	if err := d.route[writeDecision].submit(context.WithoutCancel(ctx), r); err != nil {
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

// canonicalJSON is b with object keys sorted and no insignificant whitespace, strings and numbers
// as written, so equal arguments hash alike however a caller ordered and spaced them; b itself
// when it is not JSON.
func canonicalJSON(b []byte) []byte {
	if !json.Valid(b) {
		return b
	}
	out, _ := canonicalValue(make([]byte, 0, len(b)), b, 0)
	return out
}

// canonicalValue appends the canonical form of the valid JSON value at in[i:] to out and returns
// the index after it.
func canonicalValue(out, in []byte, i int) ([]byte, int) {
	i = hookdtype.SkipSpace(in, i)
	switch in[i] {
	case '{':
		return canonicalObject(out, in, i)
	case '[':
		out = append(out, '[')
		i = hookdtype.SkipSpace(in, i+1)
		for in[i] != ']' {
			out, i = canonicalValue(out, in, i)
			if i = hookdtype.SkipSpace(in, i); in[i] == ',' {
				out, i = append(out, ','), i+1
			}
		}
		return append(out, ']'), i + 1
	case '"':
		j, _ := hookdtype.StringEnd(in, i)
		return append(out, in[i:j]...), j
	default: // a number or a literal
		j := hookdtype.ValueEnd(in, i)
		return append(out, in[i:j]...), j
	}
}

// canonicalObject writes the members as they come, then puts them in key order if they were not.
func canonicalObject(out, in []byte, i int) ([]byte, int) {
	// Offsets in out: the key's end, the member's bounds. Most tool arguments have few members,
	// which small holds without an allocation.
	type member struct{ key, start, end int }
	var small [16]member
	ms := small[:0]
	sorted := true
	out = append(out, '{')
	base := len(out)
	i = hookdtype.SkipSpace(in, i+1)
	for in[i] != '}' {
		if len(ms) > 0 {
			out = append(out, ',')
		}
		start := len(out)
		j, _ := hookdtype.StringEnd(in, i)
		out = append(out, in[i:j]...)
		m := member{key: len(out), start: start}
		i = hookdtype.SkipSpace(in, j) + 1 // the colon
		out = append(out, ':')
		out, i = canonicalValue(out, in, i)
		m.end = len(out)
		if n := len(ms); n > 0 && string(out[ms[n-1].start:ms[n-1].key]) >= string(out[m.start:m.key]) {
			sorted = false
		}
		ms = append(ms, m)
		if i = hookdtype.SkipSpace(in, i); in[i] == ',' {
			i = hookdtype.SkipSpace(in, i+1)
		}
	}
	if !sorted {
		region := append([]byte(nil), out[base:]...)
		slices.SortStableFunc(ms, func(a, b member) int {
			return bytes.Compare(region[a.start-base:a.key-base], region[b.start-base:b.key-base])
		})
		out = out[:base]
		for k, m := range ms {
			if k > 0 {
				out = append(out, ',')
			}
			out = append(out, region[m.start-base:m.end-base]...)
		}
	}
	return append(out, '}'), i + 1
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
