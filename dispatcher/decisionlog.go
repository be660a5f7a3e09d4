package dispatcher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

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

// decisionReq is an empty decision log write for the rows of n hooks. The rows of the common
// chain of one hook, their subject and the request are one allocation, not three.
func decisionReq(n int) *writeReq {
	if n > 1 {
		return &writeReq{kind: writeDecision, decisions: make([]storage.Decision, 0, n), subjects: make([]subject, 0, n)}
	}
	one := new(struct {
		req  writeReq
		rec  [1]storage.Decision
		subj [1]subject
	})
	one.req = writeReq{kind: writeDecision, decisions: one.rec[:0], subjects: one.subj[:0]}
	return &one.req
}

// recordDecisions hands the rows of one chain (r, from decisionReq) to the decision log,
// r.subjects[i] the subject of r.decisions[i]; in sync mode it returns once they are committed,
// and an error means the decision must not be acted on. A subject's digest (the canonical
// arguments' SHA-256) is worked out before the rows are handed over in sync mode; in batched
// mode, where the caller has its answer first, the writer works it out in its cycle
// (commitCycle), off the caller's path.
func (d *Dispatcher) recordDecisions(ctx context.Context, r *writeReq) error {
	if len(r.decisions) == 0 {
		return nil
	}
	sync := d.set.DecisionDurability != DurabilityBatched
	// The hooks were asked: the record is written even if the caller has gone meanwhile.
	if sync {
		r.digestSubjects(d.set.RecordArguments)
		r.done = make(chan error, 1)
	}
	if err := d.route[writeDecision].submit(context.WithoutCancel(ctx), r); err != nil {
		if !sync {
			d.log.Error("decision log write dropped", "entries", len(r.decisions), "err", err)
			return nil
		}
		return fmt.Errorf("dispatcher: decision %s not recorded: %w", r.decisions[0].DecisionID, err)
	}
	return nil
}

// A PersonAnswer is a person's answer to an interceptive chain's ask, for the decision log.
type PersonAnswer struct {
	DecisionID string // the chain's, whose rows said ask
	Approved   bool
	Reason     string
	AnsweredBy string // who answered: "" for the run's own user, else a reviewer ("reviewer:rev-1")
	Expired    bool   // nobody answered in time: a deny, whose hook is "ask-timeout"
}

// RecordAnswer appends a person's answer to an ask to the decision log, beside the rows of chain
// a.DecisionID (the chain that asked, or let the call on to a permission rule's ask; a fresh id
// when no hook ran):
// the row of what took effect, the tool call (or other subject) of ev as it then stands — with
// the arguments the person approved, edited or not. Its hook is the person (id 0, hookName
// "person" or "person:<who>", "ask-timeout" when nobody answered); its outcome allow or deny.
// In sync durability it returns once the row is committed, and an error means the answer must
// not be acted on.
func (d *Dispatcher) RecordAnswer(ctx context.Context, ev Event, a PersonAnswer) error {
	var err error
	if ev.Context, err = normalizeContext(ev.HookType, ev.Context); err != nil {
		return err
	}
	rec := storage.Decision{DecisionID: a.DecisionID, HookName: "person", Outcome: Deny, Reason: a.Reason,
		AgentKind: codingAgentKind(ev.Context)}
	switch {
	case a.Expired:
		rec.HookName = "ask-timeout"
	case a.AnsweredBy != "":
		rec.HookName += ":" + a.AnsweredBy
	}
	if a.Approved {
		rec.Outcome = Allow
	}
	return d.recordHookless(ctx, ev, rec)
}

// RefusedBy is the hookName of the decision log rows of hookd's own refusals (RecordRefusal).
const RefusedBy = "hookd"

// RecordRefusal appends to the decision log a block hookd itself told a caller at an
// interceptive point, where no hook decided because hookd could not ask them: an input it cannot
// read, a header it refuses, an error of its own. The row has no hook (id 0, hookName RefusedBy),
// outcome deny with reason, what the caller was told; cause, the error behind it. ev.Context
// may be nil or partial (the row then names no subject); kind is the coding agent's, if any. It
// returns the row's decisionId; in sync durability it returns once the row is committed.
func (d *Dispatcher) RecordRefusal(ctx context.Context, ev Event, kind, reason string, cause error) (string, error) {
	if !ev.HookType.Interceptive() {
		return "", fmt.Errorf("dispatcher: %s is not interceptive", ev.HookType)
	}
	rec := storage.Decision{DecisionID: storage.NewTSIDString(), HookName: RefusedBy, Outcome: Deny, Reason: reason, AgentKind: kind}
	if cause != nil {
		rec.Error = cause.Error()
	}
	return rec.DecisionID, d.recordHookless(ctx, ev, rec)
}

// recordHookless records rec, a row no hook wrote (a person's answer, hookd's own refusal),
// completed from ev: its point, whom it was for, and its subject.
func (d *Dispatcher) recordHookless(ctx context.Context, ev Event, rec storage.Decision) error {
	rec.EventID, rec.HookType, rec.CreatedAt = storage.NewTSIDString(), string(ev.HookType), time.Now()
	rec.SessionID, rec.PrincipalID, rec.AgentID, rec.TraceID = ev.SessionID, ev.PrincipalID, ev.AgentID, strPtr(ev.TraceID)
	subj := subjectOf(ev.Context)
	rec.ToolName, rec.ToolCallID, rec.TaskID = subj.toolName, subj.toolCallID, subj.taskID
	r := decisionReq(1)
	r.decisions, r.subjects = append(r.decisions, rec), append(r.subjects, subj)
	return d.recordDecisions(ctx, r)
}

// digestSubjects fills each decision row's subject hash (and, with record, decisions.recordArguments,
// the subject itself) from r.subjects, once; rows of one chain share their subject up to a modify.
func (r *writeReq) digestSubjects(record bool) {
	for i := range r.subjects {
		rec, s := &r.decisions[i], &r.subjects[i]
		if i > 0 && *s == r.subjects[i-1] {
			rec.SubjectHash, rec.Subject = r.decisions[i-1].SubjectHash, r.decisions[i-1].Subject
			continue
		}
		rec.SubjectHash, rec.Subject = s.digest(record)
	}
	r.subjects = nil
}

// subject is what a decision is about, as the decision log names it: the tool call or task, and
// what the row's hash is of.
type subject struct {
	toolName, toolCallID string
	taskID               *int64
	of                   string // the arguments, the user input or the task name; "" with none
	arguments            bool   // of is a tool call's arguments: hashed in canonical form
	present              bool   // the context has a subject (the interceptive ones do)
}

func subjectOf(c any) subject {
	switch c := c.(type) {
	case *PreToolUseContext:
		return subject{toolName: c.ToolName, toolCallID: c.ToolCallID, of: string(c.Arguments), arguments: true, present: true}
	case *UserMessageContext:
		return subject{of: c.UserInput, present: true}
	case *PreScheduledTaskContext:
		s := subject{of: c.TaskName, present: true}
		if c.TaskID != 0 { // a dispatch may name the task by its name alone: no id, not task 0
			id := c.TaskID
			s.taskID = &id
		}
		return s
	}
	return subject{}
}

// digest is the subject's SHA-256 (of the canonical arguments, the user input or the task name)
// and, when record is set, what was hashed; nothing for a context without a subject.
func (s *subject) digest(record bool) (hash string, recorded *string) {
	if !s.present {
		return "", nil
	}
	raw := []byte(s.of)
	if s.arguments {
		raw = canonicalJSON(raw)
	}
	hash = sha256Hex(raw)
	if record {
		v := string(raw)
		recorded = &v
	}
	return hash, recorded
}

// canonicalJSON is b with object keys sorted and no insignificant whitespace, strings and numbers
// as written, so equal arguments hash alike however a caller ordered and spaced them; b itself
// when it is not JSON.
func canonicalJSON(b []byte) []byte {
	if !hookdtype.Valid(b) {
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
	var out [2 * sha256.Size]byte // the string's one allocation, not a slice's besides
	hex.Encode(out[:], sum[:])
	return string(out[:])
}
