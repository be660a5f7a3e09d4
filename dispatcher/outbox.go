package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// How much of a response an attempt record keeps.
const keptResponseBody = 2 << 10

// ErrStopped is returned by Observe once the dispatcher is shutting down.
var ErrStopped = errors.New("dispatcher: stopped")

// ErrShutdown is the cause a daemon's shutdown ends its open requests' contexts with: a chain it
// cuts short ends in a StoppedError (its caller is still there), and to everything else it is
// the context.Canceled it always was (a breaker ignores a call it cut short).
var ErrShutdown = fmt.Errorf("%w: %w", ErrStopped, context.Canceled)

// Observe queues an observational event for every matching hook and returns their eventIds once
// the rows are committed. Concurrent calls share one commit.
func (d *Dispatcher) Observe(ctx context.Context, ev Event) ([]string, error) {
	return d.observe(ctx, ev, nil)
}

// ObserveEnding is Observe of the event that reports a firing's end, with end written in the
// commit that holds the event's deliveries (alone when no hook takes the event): a crash leaves
// both or neither, so no firing is recorded ended and never reported. The error wraps
// storage.ErrTaskRunChanged, and nothing is written, when the firing was no longer in end.From.
func (d *Dispatcher) ObserveEnding(ctx context.Context, ev Event, end storage.TaskRunEnd) error {
	_, err := d.observe(ctx, ev, &end)
	return err
}

func (d *Dispatcher) observe(ctx context.Context, ev Event, end *storage.TaskRunEnd) ([]string, error) {
	if ev.HookType.Interceptive() || !ev.HookType.Valid() {
		return nil, fmt.Errorf("dispatcher: %s is not observational", ev.HookType)
	}
	start := time.Now()
	var err error
	if ev.Context, err = normalizeContext(ev.HookType, ev.Context); err != nil {
		return nil, err
	}
	hooks := d.reg.Match(ev.HookType, ev.AgentID, ev.toolName())
	if len(hooks) == 0 {
		if end != nil {
			return nil, d.route[writeOutbox].submit(ctx, &writeReq{kind: writeOutbox, taskRunEnd: end, done: make(chan error, 1)})
		}
		return nil, nil
	}
	body, err := marshalContext(ev.Context)
	if err != nil {
		return nil, err
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = start
	}
	rows := make([]storage.Delivery, len(hooks))
	ids := make([]string, len(hooks))
	for i, h := range hooks {
		ids[i] = storage.NewTSIDString()
		rows[i] = storage.Delivery{EventID: ids[i], HookID: h.ID, HookType: string(h.HookType), HookName: h.HookName,
			OccurredAt: ev.OccurredAt, TraceID: strPtr(ev.TraceID), TraceParent: tracing.Parent(ctx), SessionID: ev.SessionID,
			PrincipalID: ev.PrincipalID, AgentID: ev.AgentID, Context: body}
	}
	if err := d.route[writeOutbox].submit(ctx, &writeReq{kind: writeOutbox, deliveries: rows, taskRunEnd: end, done: make(chan error, 1)}); err != nil {
		return nil, err
	}
	d.metrics.observed(time.Since(start))
	return ids, nil
}

// claimLoop claims the due rows that no worker has been handed (Observe's rows go to free slots
// in the writer's cycle, see commitCycle): only as many as there are free slots, each to a
// goroutine, and only while some may be due (mayBeDue); it sleeps until woken, or the next due
// time.
func (d *Dispatcher) claimLoop() {
	defer d.claimers.Done()
	const batch = 256
	for {
		free := cap(d.deliverySlots) - len(d.deliverySlots)
		n := min(free, batch)
		if free == 0 {
			d.metrics.bulkheadRejected(false) // due rows, if any, wait in the outbox
		}
		var claimed []storage.Delivery
		if n > 0 && d.mayBeDue.Swap(false) {
			var err error
			claimed, err = d.db.ClaimDeliveries(d.runCtx, time.Now(), n, d.set.Lease)
			if err != nil && d.runCtx.Err() == nil {
				d.log.Error("claim failed", "err", err)
			}
			for _, row := range claimed {
				d.deliverySlots <- struct{}{}
				d.inflight.Add(1)
				go d.deliver(row)
			}
		}
		if n > 0 && len(claimed) == n {
			d.mayBeDue.Store(true)
			continue // more may be due right now
		}
		wait := time.Second
		if n > 0 {
			if next, ok, err := d.db.NextDue(d.runCtx); err == nil && ok {
				wait = min(max(time.Until(next), time.Millisecond), time.Second)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-d.runCtx.Done():
			t.Stop()
			return
		case <-d.wake:
		case <-t.C:
			d.mayBeDue.Store(true)
		}
		t.Stop()
	}
}

// rescueLoop returns rows whose claimer died (its lease ran out) to the queue.
func (d *Dispatcher) rescueLoop() {
	defer d.claimers.Done()
	t := time.NewTicker(max(d.set.Lease/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-d.runCtx.Done():
			return
		case <-t.C:
			n, err := d.db.RescueDeliveries(d.runCtx, time.Now())
			if err != nil && d.runCtx.Err() == nil {
				d.log.Error("rescue failed", "err", err)
			}
			if n > 0 {
				d.log.Warn("rescued deliveries left in flight", "count", n)
				d.mayBeDue.Store(true)
				d.poke()
			}
		}
	}
}

func (d *Dispatcher) deliver(row storage.Delivery) {
	out := d.attempt(d.sendCtx, row)
	// An attempt that got an answer before the shutdown's deadline is recorded as any other.
	cut := d.sendCtx.Err() != nil && out.Attempt != nil && out.Attempt.StatusCode == 0
	if cut {
		// Shutdown cut the request short: the row is given back, due now and its attempt unspent,
		// so that another replica sends it at once rather than once the claim lease has run out.
		// The writer is still taking outcomes (Stop closes it after the deliveries in flight).
		out = unspent(out.Delivery, time.Now(), "")
	}
	// Nobody waits for an outcome: a crash before its commit sends the row again (at least once).
	if err := d.route[writeOutcome].submit(context.Background(), &writeReq{kind: writeOutcome,
		outcomes: []storage.Outcome{out}}); err != nil {
		d.log.Error("recording a delivery outcome failed", "eventId", row.EventID, "err", err)
	}
	if !cut {
		d.metrics.delivered(row.HookType, deliveryOutcome(out))
	}
	<-d.deliverySlots
	d.inflight.Done()
	if d.mayBeDue.Load() {
		d.poke() // a slot is free for a row that waits
	}
}

// attempt makes one delivery attempt of a claimed row and decides what becomes of it.
func (d *Dispatcher) attempt(ctx context.Context, row storage.Delivery) storage.Outcome {
	out := storage.Outcome{Delivery: row, Attempts: row.Attempts}
	h := d.reg.byID(row.HookID)
	if h == nil {
		if _, err := d.reg.Get(ctx, row.HookID); errors.Is(err, storage.ErrNotFound) {
			out.Status, out.Error = storage.StatusDead, "hook deleted"
			return out
		}
		// Not loaded here yet (another replica made it; its change arrives within the registry's
		// refresh), or the database could not say: no attempt, none spent, and it comes round again.
		return unspent(row, time.Now().Add(time.Second), "")
	}
	if h.Enabled != nil && !*h.Enabled {
		// Disabled since the claim (or on another replica first): no attempt; the completion
		// pauses the row if the database agrees, and otherwise it comes round again shortly.
		return unspent(row, time.Now().Add(time.Second), "")
	}
	if h.SecretUnreadable {
		// Never sent without its secret: the row waits, its attempts unspent, until a PUT heals it.
		return unspent(row, time.Now().Add(30*time.Second), ErrSecretUnreadable.Error())
	}
	if h.deselected(row) {
		// Changed since the event was queued so that it no longer selects it (another hook type,
		// agent, or toolNameMatch): what its receiver gets is what the hook says now, as a
		// disabled hook's deliveries pause and a deleted one's end.
		out.Status, out.Error = storage.StatusDead, "the hook was changed since the event was queued and no longer selects it"
		out.StatusCode = row.LastStatusCode
		return out
	}
	if held, err := d.holdClaim(ctx, &row, &h.Hook); !held {
		// The claim was lost (another worker has the row and sends it) or could not be made to
		// last the request: nothing is sent, none spent.
		if err != nil {
			d.log.Error("extending a delivery's claim failed", "eventId", row.EventID, "err", err)
		}
		return unspent(row, time.Now().Add(time.Second), "")
	}
	out.Delivery = row
	url := h.DispatchConfig.URL
	done, err := d.breakers.Acquire(url)
	if err != nil {
		// The endpoint is known to be down: wait for the breaker without spending an attempt.
		until := d.breakers.OpenUntil(url)
		if until.IsZero() {
			until = time.Now().Add(time.Second)
		}
		return unspent(row, until, "breaker open")
	}
	out.Attempts = row.Attempts + 1
	env := &Envelope{SchemaVersion: SchemaVersion, EventID: row.EventID, HookType: HookType(row.HookType),
		HookName: row.HookName, OccurredAt: row.OccurredAt.UnixMilli(), DeliveryAttempt: out.Attempts,
		TraceID: row.TraceID, SessionID: row.SessionID, PrincipalID: row.PrincipalID, AgentID: row.AgentID,
		Context: row.Context}
	now := time.Now()
	ctx, endSpan := tracing.StartDelivery(ctx, row.TraceParent, row.EventID, row.HookType, h.ID, out.Attempts)
	actx := d.deadlines.start(ctx, &h.Hook, now)
	a := d.send.send(actx, &h.Hook, h.wire, env, now)
	d.deadlines.end(actx)
	endSpan(a.status, a.err)
	d.metrics.attempted(row.HookType, time.Since(now))
	done(breakerOutcome(a))

	rec := &storage.Attempt{Attempt: out.Attempts, DispatchedAt: time.UnixMilli(env.DispatchedAt),
		StatusCode: a.status, LatencyMs: a.latency.Milliseconds(), ResponseBody: truncateUTF8(scrubEcho(a.respBody, a.sent), keptResponseBody)}
	out.Attempt, out.StatusCode = rec, a.status
	verdict, reason := classify(a)
	rec.ErrorClass = string(reason)
	if a.err != nil {
		rec.Error = a.err.Error()
	} else if verdict != delivered {
		rec.Error = "HTTP " + fmt.Sprint(a.status)
	}
	out.Error = rec.Error
	switch verdict {
	case delivered:
		out.Status = storage.StatusDelivered
	case final:
		out.Status = storage.StatusFailed
	case retry:
		wait, ok := d.set.Retry.delay(out.Attempts, *h.DispatchConfig.MaxRetries)
		if !ok {
			out.Status = storage.StatusDead
			d.log.WarnContext(ctx, "delivery dead: retries spent", "eventId", row.EventID, "hookId", h.ID, "hookName", h.HookName,
				"attempts", out.Attempts, "err", out.Error)
			break
		}
		if a.status == 429 || a.status == 503 {
			wait = max(wait, min(a.retryAfter, maxRetryAfter)) // never earlier than the receiver asked
		}
		out.Status, out.NextAttemptAt = storage.StatusPending, time.Now().Add(wait)
	}
	return out
}

// unspent is the outcome of the claimed row given back to the queue without an attempt: due at,
// its attempts, last status and error (or why) as they were.
func unspent(row storage.Delivery, at time.Time, why string) storage.Outcome {
	if why == "" {
		why = row.LastError
	}
	return storage.Outcome{Delivery: row, Status: storage.StatusPending, Attempts: row.Attempts, NextAttemptAt: at,
		StatusCode: row.LastStatusCode, Error: why}
}

// claimMargin is what a claim must have left beyond a request's timeout when the request starts:
// the time to record its outcome.
const claimMargin = time.Second

// holdClaim makes row's claim last until a request to h started now has ended and its outcome is
// recorded. webhooks.claimLease may be shorter than a hook's timeoutMs; then, mid-request, the
// rescuer (this process's or another replica's) would hand the row out again, and a slow
// receiver would get the event once more every lease. The claim is moved on, in the database,
// to twice the timeout; false when it was lost meanwhile.
func (d *Dispatcher) holdClaim(ctx context.Context, row *storage.Delivery, h *Hook) (bool, error) {
	timeout := time.Duration(h.DispatchConfig.TimeoutMs) * time.Millisecond
	now := time.Now()
	if row.ClaimedUntil().Sub(now) >= timeout+claimMargin {
		return true, nil
	}
	return d.db.ExtendClaim(ctx, row, now.Add(max(2*timeout, timeout+claimMargin)))
}

type verdict int

const (
	delivered verdict = iota
	retry
	final
)

// Reason says why an attempt ended as it did: a closed set that the attempts log (errorClass)
// and alerts can rely on, decided from the status and the error's type, never from its text.
type Reason string

const (
	ReasonNone        Reason = ""
	ReasonHTTP429     Reason = "http_429"
	ReasonHTTP5xx     Reason = "http_5xx"
	ReasonHTTP4xx     Reason = "http_4xx"
	ReasonHTTP3xx     Reason = "http_3xx"
	ReasonBlocked     Reason = "blocked" // refused by the SSRF guard
	ReasonTimeout     Reason = "timeout"
	ReasonDNS         Reason = "dns"
	ReasonConnRefused Reason = "connection_refused"
	ReasonConnReset   Reason = "connection_reset" // closed or reset before an answer
	ReasonTLS         Reason = "tls"
	ReasonTokenFetch  Reason = "token_fetch" // the OAuth2 token for the request could not be had
	ReasonNetwork     Reason = "network"     // another failure to get an answer
	ReasonRequest     Reason = "request"     // the request could not be made
)

// classify decides what an attempt means for its delivery: 2xx delivered; 429, 5xx and network
// failures retry; any other status (3xx, 4xx) is the receiver's final word; a request refused by
// the SSRF guard will be refused again, so it is final too.
func classify(a attempt) (verdict, Reason) {
	switch {
	case a.err != nil && a.status == 0:
		if errors.Is(a.err, netguard.ErrBlocked) {
			return final, ReasonBlocked
		}
		return retry, transportReason(a.err)
	case a.status/100 == 2:
		return delivered, ReasonNone
	case a.status == 429:
		return retry, ReasonHTTP429
	case a.status/100 == 5:
		return retry, ReasonHTTP5xx
	case a.status/100 == 3:
		return final, ReasonHTTP3xx
	default:
		return final, ReasonHTTP4xx
	}
}

// transportReason names a failure to get an answer by the error's type.
func transportReason(err error) Reason {
	var dnsErr *net.DNSError
	var tf *TokenFetchError
	switch {
	case errors.As(err, &tf):
		return ReasonTokenFetch
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return ReasonTimeout
	case errors.As(err, &dnsErr):
		return ReasonDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonConnReset
	case breaker.IsTLSHandshake(err):
		return ReasonTLS
	case breaker.IsNoResponse(err):
		return ReasonNetwork
	default:
		return ReasonRequest
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func truncateUTF8(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Redeliver makes one more attempt of a delivery now, whatever its state (unless a worker holds
// it), with the same eventId and the next attempt number, and returns the delivery afterwards. It
// is a *RedeliverError, with no attempt made, when the delivery's hook was deleted (the delivery
// ends dead) or is disabled: a disabled hook's deliveries are paused and nothing is sent to it, so
// a success would report an attempt never made. The claim refuses a disabled hook's delivery and
// leaves it as it was; here, beside the deleted-hook check, is what the operator is told.
func (d *Dispatcher) Redeliver(ctx context.Context, id int64) (storage.Delivery, error) {
	// An open breaker sends nothing: the attempt would only snooze the row (a failed or dead one
	// back to pending), and the answer would report an attempt never made.
	if cur, err := d.db.GetDelivery(ctx, id); err == nil {
		if err := d.deletedRefusal(ctx, id, cur.HookID); err != nil {
			return storage.Delivery{}, err
		}
		if h := d.reg.byID(cur.HookID); h != nil && h.deselected(cur) {
			// The attempt would end the row, rewriting the record of one delivered or failed.
			return storage.Delivery{}, &RedeliverError{Msg: fmt.Sprintf("delivery %d: its hook %d was changed since the event was "+
				"queued and no longer selects it (its hookType, agentId or toolNameMatch); no attempt was made", id, cur.HookID)}
		}
		if err := d.breakerRefusal(id, cur.HookID); err != nil {
			return storage.Delivery{}, err
		}
	}
	row, err := d.db.ClaimDelivery(ctx, id, time.Now(), d.set.Lease)
	var off *storage.HookDisabledError
	if errors.As(err, &off) {
		return storage.Delivery{}, d.pausedError(id, off.HookID)
	}
	if err != nil {
		return storage.Delivery{}, err
	}
	out := d.attempt(ctx, row)
	if err := d.db.CompleteDeliveries(ctx, []storage.Outcome{out}); err != nil {
		return storage.Delivery{}, err
	}
	d.metrics.delivered(row.HookType, deliveryOutcome(out))
	if out.Status == storage.StatusPending {
		d.mayBeDue.Store(true)
		d.poke()
	}
	h := d.reg.byID(row.HookID)
	switch {
	case h == nil && out.Status == storage.StatusDead: // deleted between the check and the claim
		return storage.Delivery{}, deletedError(id, row.HookID)
	case h == nil:
		return storage.Delivery{}, &RedeliverError{Msg: fmt.Sprintf("delivery %d: its hook %d is not loaded here yet "+
			"(it was just made on another replica); no attempt was made; try again in a moment", id, row.HookID)}
	}
	if out.Attempt == nil && !*h.Enabled {
		// Disabled between the claim and the attempt: the row went back to pending, paused like
		// any delivery in flight when its hook is disabled.
		return storage.Delivery{}, d.pausedError(id, h.ID)
	}
	if out.Attempt == nil {
		// The breaker opened between the check and the attempt: the row waits for it, pending.
		if err := d.breakerRefusal(id, h.ID); err != nil {
			return storage.Delivery{}, &RedeliverError{Msg: err.Error() + "; the delivery is pending until the breaker lets it through"}
		}
	}
	return d.db.GetDelivery(ctx, id)
}

// deletedRefusal refuses the redelivery of delivery id, whose hook hookID was deleted, before
// anything is claimed: the attempt would end the row as dead, rewriting the record of a delivery
// that was delivered or failed, for a 409 that says nothing was tried. The registry may not have
// loaded a hook another replica just made; the database says whether it is gone.
func (d *Dispatcher) deletedRefusal(ctx context.Context, id, hookID int64) error {
	if d.reg.byID(hookID) != nil {
		return nil
	}
	if _, err := d.reg.Get(ctx, hookID); !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return deletedError(id, hookID)
}

func deletedError(id, hookID int64) *RedeliverError {
	return &RedeliverError{Msg: fmt.Sprintf("delivery %d: its hook %d was deleted; there is no receiver to deliver it to", id, hookID)}
}

// deselected reports whether h was changed since the queued row's event was queued so that, as it
// is now, it would not be handed the event: another type, agent, or on the tool points tool.
func (h *boundHook) deselected(row storage.Delivery) bool {
	if h.UpdatedAt == nil || !h.UpdatedAt.After(row.CreatedAt) {
		return false
	}
	if HookType(row.HookType) != h.HookType || !forAgent(h.AgentID, row.AgentID) {
		return true
	}
	return h.HookType.ToolScoped() && !h.match.Match(stringMember(row.Context, "toolName"))
}

// breakerRefusal refuses the redelivery of delivery id while its hook's URL's breaker is open;
// nil when it is not (or the hook is gone: Redeliver says so).
func (d *Dispatcher) breakerRefusal(id, hookID int64) *RedeliverError {
	h := d.reg.byID(hookID)
	if h == nil || d.breakers.State(h.DispatchConfig.URL) != breaker.StateOpen {
		return nil
	}
	return &RedeliverError{Msg: fmt.Sprintf("delivery %d: the breaker of its receiver is open (GET /api/breakers), so nothing is sent "+
		"there until it lets a probe through; no attempt was made", id)}
}

// pausedError refuses the redelivery of delivery id, whose hook hookID is disabled.
func (d *Dispatcher) pausedError(id, hookID int64) *RedeliverError {
	hook := fmt.Sprintf("hook %d", hookID)
	if h := d.reg.byID(hookID); h != nil {
		hook = fmt.Sprintf("hook %d (%q)", hookID, h.HookName)
	}
	return &RedeliverError{Msg: fmt.Sprintf("delivery %d: its %s is disabled, so its deliveries are paused until it is "+
		"enabled (PUT /api/hooks/%d with \"enabled\": true); no attempt was made", id, hook, hookID)}
}

// RedeliverError is a redelivery that cannot be made: no attempt was.
type RedeliverError struct{ Msg string }

func (e *RedeliverError) Error() string { return e.Msg }
