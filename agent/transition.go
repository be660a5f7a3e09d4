package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookd/hookd/storage"
)

// A run's status changes in one place, transition, and always the same way: the new status (with
// the state it resumes from) and the events that announce it are written in one transaction,
// and only then are the events visible to followers and are they woken. A client that saw a run
// pause therefore finds it paused when it answers; nothing waits for a status to catch up.
//
// The state machine (docs/architecture.md, "Run states"):
//
//	(new)     → running      StartRun
//	running   → suspended    the run's goroutine (ask, client-side tool, async tool, budget, user,
//	                         shutdown); recoverRun for a run whose goroutine is gone
//	suspended → running      resumeRun (an answer, a result, Resume, a sweep of expired asks)
//	running   → completed | failed | interrupted   the run's goroutine (endWith)
//
// Only the run's goroutine moves a running run, guarded by its ownership (another replica may
// have taken it over); any caller may move a suspended one, and the first wins.

// transition writes rec and the events announcing its new status if the run still matches t;
// storage.ErrNotFound when it does not. The events must be stamped (their seqs follow the run's
// last stored event).
func (rt *Runtime) transition(ctx context.Context, rec *storage.Run, t storage.Transition, evs []Event) error {
	rows := make([]storage.RunEvent, len(evs))
	for i, e := range evs {
		body, err := json.Marshal(e)
		if err != nil { // every field is a plain value; this would be a programming error
			panic(fmt.Sprintf("agent: encode event: %v", err))
		}
		rows[i] = storage.RunEvent{RunID: rec.ID, Seq: e.Seq, Body: body}
	}
	if err := rt.db.TransitionRun(ctx, rec, t, rows); err != nil {
		return err
	}
	rt.elog.committed(rec.ID, evs)
	return nil
}

// leave moves a live run out of running, to suspended or to a final status, announced by evs.
// What the run emitted before is made durable and its feed closed first, so its followers read
// the rest from the database; the run is no longer live here before anyone can resume it, so two
// goroutines never act for one run. It reports false when another replica took the run over (the
// goroutine must write nothing more).
func (r *run) leave(status string, evs ...Event) bool {
	r.rt.elog.close(r.rec.ID)
	r.rt.forget(r)
	r.emitMu.Lock()
	for i := range evs {
		evs[i] = r.stamp(evs[i])
	}
	r.left = true
	r.state.Hints, r.hints = append(r.state.Hints, r.hints...), nil // a resume shows them to the model
	r.emitMu.Unlock()
	from := r.rec.Status
	r.rec.Status = status
	r.rec.State = mustJSON(r.state)
	err := r.rt.transition(context.WithoutCancel(r.ctx), &r.rec, storage.Transition{From: from, Owner: r.rec.Owner}, evs)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		r.abandon()
		return false
	case err != nil:
		r.rt.log.ErrorContext(r.ctx, "recording the run's new status failed", "requestId", r.rec.RequestID, "status", status, "err", err)
		return false
	}
	return true
}

// mustJSON encodes a value of the runtime's own types, which always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("agent: encode %T: %v", v, err))
	}
	return b
}
