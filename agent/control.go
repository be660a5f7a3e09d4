package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookd/hookd/storage"
)

// The control API: what clients ask of runs (answers, results, pause, resume, stop).

// Errors of the control API.
var (
	ErrNotWaiting       = errors.New("the run is not waiting for that")
	ErrArgumentsChanged = errors.New("the approval is for other arguments than the call asked about")
	ErrAlreadyAnswered  = storage.ErrAlreadyAnswered
	ErrNotLive          = errors.New("the run is not running")
	// ErrUnsettled is a request that would leave the run waiting: a Resume of a run that waits
	// for answers, or a whole Reply that leaves one of its asks or client-side calls open.
	ErrUnsettled = fmt.Errorf("%w: it waits for answers", ErrNotWaiting)
)

// Answer is a person's decision on one ask. AskID names it (or CallID, within the run).
// Arguments, when set, are what the person saw: they must be the arguments asked about. Input,
// when set, are edited arguments to run with instead. Rules are stored for later calls.
type Answer struct {
	AskID     string
	CallID    string
	Approved  bool
	Reason    string
	Arguments json.RawMessage `json:",omitempty"`
	Input     json.RawMessage `json:",omitempty"`
	Rules     []RuleSpec
	// RuleScope is session (default), user or global.
	RuleScope string
	// AnsweredBy is who answered when it is not the run's user (a reviewer), for the record.
	AnsweredBy string `json:",omitempty"`
}

// RunOfAsk returns the request id of the run an ask belongs to, if the ask is userID's.
func (rt *Runtime) RunOfAsk(ctx context.Context, userID, askID string) (string, error) {
	a, err := rt.db.GetAsk(ctx, askID)
	if err != nil {
		return "", err
	}
	if a.UserID != userID {
		return "", ErrNotFound
	}
	return rt.requestIDOf(ctx, a.RunID)
}

func (rt *Runtime) requestIDOf(ctx context.Context, runID int64) (string, error) {
	var id string
	runs, err := rt.db.RunsByID(ctx, runID)
	if err != nil {
		return "", err
	}
	id = runs.RequestID
	return id, nil
}

// A Reply is what one request hands a paused run: decisions on its asks, outputs of its
// client-side calls, and input said beside them (queued for the run's next step).
type Reply struct {
	Answers []Answer
	Results []ToolOutput
	Input   string // "": none
	// Whole says the request's response streams the run on from its pause, so the Reply must
	// settle everything the run waits for: one that leaves an ask or a client-side call open is
	// refused (ErrUnsettled, naming them) before anything is kept, where its response would
	// stream nothing until another request settled the rest.
	Whole bool
}

// A ReplyError is a Reply refused; Part names what was refused: "answers", "results" or
// "input". Refused by its checks, nothing of the Reply was kept; refused as it was kept (an ask
// another request answered meanwhile), what was kept before stands.
type ReplyError struct {
	Part string
	Err  error
}

func (e *ReplyError) Error() string { return e.Err.Error() }
func (e *ReplyError) Unwrap() error { return e.Err }

// Reply hands r to the run: every answer and result is checked before anything is kept, so a
// refused request leaves nothing behind (one kept before a later one was refused left the run
// with its answers half given and nobody to resume it, or input queued for a request the
// client was told failed). Then the input is queued, the answers and results kept, and once
// nothing is pending the run goes on (here, on its own goroutine). Each ask is answered once: an
// answer to an ask already answered the same way (the same decision, for an approval the same
// arguments to run with, the same rules) is a no-op, so a client resending its answers to every ask of the pause
// after a reviewer answered one goes on; a decision bound to other arguments, for an ask of
// another user, or for an ask already answered otherwise (or expired) is refused, and so is an
// output for a call the run does not wait for.
func (rt *Runtime) Reply(ctx context.Context, userID, requestID string, r Reply) error {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return err
	}
	all, err := rt.db.RunAsks(ctx, rec.ID, "")
	if err != nil {
		return err
	}
	asks := make([]*storage.Ask, len(r.Answers))
	for j, a := range r.Answers {
		asks[j] = findAsk(all, func(k *storage.Ask) bool {
			return (a.AskID != "" && k.AskID == a.AskID) || (a.AskID == "" && a.CallID != "" && k.CallID == a.CallID)
		})
		ask := asks[j]
		switch {
		case ask == nil || ask.Kind != storage.AskConfirm:
			return &ReplyError{"answers", fmt.Errorf("%w: no ask %s%s in run %s", ErrNotWaiting, a.AskID, a.CallID, requestID)}
		case slices.Contains(asks[:j], ask):
			return &ReplyError{"answers", fmt.Errorf("%w: ask %s is answered twice in one request", ErrAlreadyAnswered, ask.AskID)}
		case len(a.Arguments) > 0 && string(a.Arguments) != "null" && argsHash(string(a.Arguments)) != ask.ArgsHash:
			return &ReplyError{"answers", ErrArgumentsChanged}
		case ask.Status != storage.AskPending:
			// A client that resends its answers to every ask of the pause, one of which a
			// reviewer answered meanwhile the same way, has nothing to add: that one is a no-op.
			if err := answeredAlike(ask, a, rec.UserID); err != nil {
				return &ReplyError{"answers", err}
			}
		}
		if err := checkRules(a.Rules); err != nil {
			return &ReplyError{"answers", fmt.Errorf("the answer to ask %s: %w", ask.AskID, err)}
		}
	}
	calls := make([]*storage.Ask, len(r.Results))
	for j, res := range r.Results {
		calls[j] = findAsk(all, func(k *storage.Ask) bool {
			return k.CallID == res.CallID && k.Kind == storage.AskExternal && k.Status == storage.AskPending
		})
		switch {
		case calls[j] == nil:
			return &ReplyError{"results", fmt.Errorf("%w: no client-side call %s in run %s", ErrNotWaiting, res.CallID, requestID)}
		case slices.Contains(calls[:j], calls[j]):
			return &ReplyError{"results", fmt.Errorf("%w: the output of call %s is sent twice in one request", ErrAlreadyAnswered, res.CallID)}
		}
	}
	if r.Whole {
		if err := unsettled(all, asks, calls); err != nil {
			return err
		}
	}
	if r.Input != "" {
		if _, err := rt.appendInput(ctx, rec, r.Input); err != nil {
			return &ReplyError{"input", err}
		}
	}
	// What is kept is the run's to go on with, even if a later write fails.
	defer rt.tryResume(context.WithoutCancel(ctx), rec.ID)
	for j, a := range r.Answers {
		status := storage.AskDenied
		if a.Approved {
			status = storage.AskApproved
		}
		if asks[j].Status != storage.AskPending {
			continue // answered the same way before: nothing to keep
		}
		if err := rt.db.AnswerAsk(ctx, asks[j].AskID, status, mustJSON(a)); err != nil {
			// Answered meanwhile by another request: the same way, this one adds nothing.
			if !errors.Is(err, ErrAlreadyAnswered) {
				return &ReplyError{"answers", err}
			}
			now, gerr := rt.db.GetAsk(ctx, asks[j].AskID)
			if gerr == nil {
				gerr = answeredAlike(&now, a, rec.UserID)
			}
			if gerr != nil {
				return &ReplyError{"answers", gerr}
			}
			continue
		}
		if !a.Approved { // a refusal teaches only what to refuse next time
			a.Rules = denyRules(a.Rules)
		}
		if len(a.Rules) > 0 {
			if err := rt.remember(ctx, rec, a); err != nil {
				return err
			}
		}
	}
	for j, res := range r.Results {
		if res.State == "" {
			res.State = ToolSuccess
		}
		res.Name = calls[j].ToolName
		if err := rt.db.AnswerAsk(ctx, calls[j].AskID, storage.AskApproved, mustJSON(res)); err != nil {
			return &ReplyError{"results", err}
		}
	}
	return nil
}

// answeredAlike is nil when ask, no longer pending, was answered as a answers it: the same
// decision, for an approval the same arguments to run with, and the same rules to remember; else ErrAlreadyAnswered naming
// the ask and who answered it (userID, the run's, unless the answer says another).
func answeredAlike(ask *storage.Ask, a Answer, userID string) error {
	if ask.Status != storage.AskApproved && ask.Status != storage.AskDenied {
		return fmt.Errorf("ask %s (call %s): %w", ask.AskID, ask.CallID, &storage.AskClosedError{AskID: ask.AskID, Status: ask.Status})
	}
	var before Answer
	if len(ask.Answer) > 0 {
		if err := json.Unmarshal(ask.Answer, &before); err != nil {
			return fmt.Errorf("%w: the answer to ask %s: %v", ErrBadState, ask.AskID, err)
		}
	}
	by := before.AnsweredBy
	if by == "" {
		by = userID
	}
	verdict := map[bool]string{true: "approved", false: "denied"}[ask.Status == storage.AskApproved]
	switch {
	case a.Approved != (ask.Status == storage.AskApproved):
		return fmt.Errorf("%w: ask %s (call %s) was %s by %s", ErrAlreadyAnswered, ask.AskID, ask.CallID, verdict, by)
	case a.Approved && runArgs(a.Input, ask) != runArgs(before.Input, ask):
		return fmt.Errorf("%w: ask %s (call %s) was approved by %s with other arguments", ErrAlreadyAnswered, ask.AskID, ask.CallID, by)
	case !slices.Equal(a.Rules, before.Rules) || (len(a.Rules) > 0 && a.RuleScope != before.RuleScope):
		// Kept as a no-op, the rules would be dropped unsaid.
		return fmt.Errorf("%w: ask %s (call %s) was %s by %s with other rules to remember", ErrAlreadyAnswered, ask.AskID, ask.CallID, verdict, by)
	}
	return nil
}

// runArgs is the hash of the arguments an approval runs ask's call with: input when it edits
// them, else those asked about.
func runArgs(input json.RawMessage, ask *storage.Ask) string {
	if len(input) > 0 && string(input) != "null" {
		return argsHash(string(input))
	}
	return ask.ArgsHash
}

// unsettled refuses a whole Reply that leaves one of the run's pending asks (answered) or
// client-side calls (given) open, naming each.
func unsettled(all []storage.Ask, answered, given []*storage.Ask) error {
	var asks, calls []string
	for i := range all {
		k := &all[i]
		switch {
		case k.Status != storage.AskPending || slices.Contains(answered, k) || slices.Contains(given, k):
		case k.Kind == storage.AskConfirm:
			asks = append(asks, k.AskID+" (call "+k.CallID+")")
		case k.Kind == storage.AskExternal:
			calls = append(calls, k.CallID)
		}
	}
	switch {
	case len(asks) > 0:
		return &ReplyError{"answers", fmt.Errorf("%w; unanswered: %s", ErrUnsettled, strings.Join(asks, ", "))}
	case len(calls) > 0:
		return &ReplyError{"results", fmt.Errorf("%w; client-side calls without an output: %s", ErrUnsettled, strings.Join(calls, ", "))}
	}
	return nil
}

// findAsk is the last of asks that match says is it, or nil.
func findAsk(asks []storage.Ask, match func(*storage.Ask) bool) *storage.Ask {
	var found *storage.Ask
	for i := range asks {
		if match(&asks[i]) {
			found = &asks[i]
		}
	}
	return found
}

// Answer records decisions on a run's asks: Reply with answers alone.
func (rt *Runtime) Answer(ctx context.Context, userID, requestID string, answers []Answer) error {
	return rt.Reply(ctx, userID, requestID, Reply{Answers: answers})
}

// SubmitToolResults delivers the results of client-side tools the run waits for: Reply with
// results alone.
func (rt *Runtime) SubmitToolResults(ctx context.Context, userID, requestID string, results []ToolOutput) error {
	return rt.Reply(ctx, userID, requestID, Reply{Results: results})
}

// Pause returns the event a suspended run paused with (its last event), so a client resuming it
// can read on from there.
func (rt *Runtime) Pause(ctx context.Context, userID, requestID string) (Event, error) {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return Event{}, err
	}
	if rec.Status != storage.RunSuspended {
		return Event{}, ErrNotWaiting
	}
	last, err := rt.db.LastRunSeq(ctx, rec.ID)
	if err != nil {
		return Event{}, err
	}
	evs, err := rt.elog.readStored(ctx, rec.ID, last-1, 1)
	if err != nil || len(evs) == 0 || evs[0].Kind != KindSuspended {
		return Event{}, ErrNotWaiting
	}
	return evs[0], nil
}

// Resume continues a run paused by the user, the token budget or a shutdown.
func (rt *Runtime) Resume(ctx context.Context, userID, requestID string) error {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return err
	}
	if rec.Status != storage.RunSuspended {
		return ErrNotWaiting
	}
	spec, st, err := decodeRun(rec)
	if err != nil {
		return err
	}
	if st.waiting() {
		return ErrUnsettled
	}
	return rt.resumeRun(ctx, rec, spec, st)
}

// Suspend asks a running run to pause at its next step boundary, whichever replica executes it.
func (rt *Runtime) Suspend(ctx context.Context, userID, requestID string) error {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return err
	}
	if r := rt.liveRun(requestID); r != nil {
		r.pauseRequested.Store(true)
		return nil
	}
	// Executing on another replica: its owner acts on the request (replicas.go).
	ok, err := rt.requestControl(ctx, rec, storage.RunControlSuspend)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotLive
	}
	return nil
}

// Stop ends a run: a running one ends its current step and ends INTERRUPTED (whichever replica
// executes it); a suspended one ends INTERRUPTED at once, its pending asks void.
func (rt *Runtime) Stop(ctx context.Context, userID, requestID string) error {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return err
	}
	if rt.Cancel(requestID) {
		return nil
	}
	// The run may change state between the reads and the writes below; look again a few times.
	for range 3 {
		switch rec.Status {
		case storage.RunSuspended:
			if err := rt.stopSuspended(ctx, rec); !errors.Is(err, ErrNotLive) {
				return err
			}
		case storage.RunRunning:
			// Executing on another replica: its owner acts on the request (replicas.go).
			if ok, err := rt.requestControl(ctx, rec, storage.RunControlStop); err != nil || ok {
				return err
			}
		default:
			return ErrNotLive
		}
		if rec, err = rt.db.RunsByID(ctx, rec.ID); err != nil {
			return err
		}
	}
	return ErrNotLive
}

// stopSuspended ends a suspended run INTERRUPTED; ErrNotLive when it is no longer suspended.
// It claims the run (suspended → running, announced by nothing: it ends at once), voids its
// asks and ends it like its own goroutine would.
func (rt *Runtime) stopSuspended(ctx context.Context, rec storage.Run) error {
	spec, st, err := decodeRun(rec)
	if err != nil {
		return err
	}
	rec.Status, rec.Owner = storage.RunRunning, rt.cfg.Owner
	if err := rt.transition(ctx, &rec, storage.Transition{From: storage.RunSuspended}, nil); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return ErrNotLive
		}
		return err
	}
	asks, err := rt.db.RunAsks(ctx, rec.ID, storage.AskPending)
	if err != nil {
		rt.log.ErrorContext(ctx, "voiding the asks of a stopped run failed", "requestId", rec.RequestID, "err", err)
	}
	for _, a := range asks {
		if err := rt.db.AnswerAsk(ctx, a.AskID, storage.AskExpired, nil); err != nil && !errors.Is(err, storage.ErrAlreadyAnswered) {
			rt.log.ErrorContext(ctx, "voiding an ask of a stopped run failed", "requestId", rec.RequestID, "askId", a.AskID, "err", err)
		}
	}
	last, err := rt.db.LastRunSeq(ctx, rec.ID)
	if err != nil {
		return err
	}
	r := rt.newRun(rec, spec, st)
	r.seq = last
	r.end(OutcomeInterrupted, ReasonInterrupted, "", "")
	return nil
}

func (rt *Runtime) liveRun(requestID string) *run {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, r := range rt.live {
		if r.rec.RequestID == requestID {
			return r
		}
	}
	return nil
}

// denyRules keeps the rules that deny.
func denyRules(rules []RuleSpec) []RuleSpec {
	var out []RuleSpec
	for _, r := range rules {
		if r.Behavior == BehaviorDeny {
			out = append(out, r)
		}
	}
	return out
}
