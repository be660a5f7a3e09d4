package agent

import (
	"context"
	"errors"
	"time"

	"github.com/hookd/hookd/storage"
)

// Replicas. Several daemons may share one PostgreSQL database; a run executes on the replica
// that started (or last resumed) it, its owner, and everything else is reachable from any
// replica:
//
//   - Following a run: its events are in the database. After each commit of the event log the
//     writer NOTIFYs the run ids (storage.ChannelRunEvents); one LISTEN connection per process
//     wakes the local readers of those runs (the hub, follow.go). One slow poll per process
//     (followPoll) covers a lost notification; a new listening connection wakes every reader.
//   - Stop and suspend of a running run owned elsewhere: the request is recorded on the run
//     (runs.control) and the owner is woken (storage.ChannelRunControl). The owner also reads the
//     request at every step boundary and with every lease renewal, so a lost notification
//     delays it by at most a few seconds.
//   - A dead owner: the owner renews runs.lease_until of its running runs every RunLease/5. A
//     running run whose lease ran out (and that nobody wrote for RunLease) is taken over by
//     whichever replica notices first, announced suspended (SHUTDOWN_INTERRUPT) like a run left
//     by a crash, and can then be resumed anywhere. An owner that finds one of its live runs
//     taken over (it was frozen longer than the lease) abandons it without writing more; the
//     events it emitted meanwhile are not stored (the event log writes only its owner's runs).
//
// On SQLite one process owns the database: there is no listener, no lease, and the wake-ups stay
// in-process.

// DefaultRunLease is Config.RunLease's default (the daemon sets it from agent.runLease).
const DefaultRunLease = 15 * time.Second

// errLostLease cancels a live run another replica took over: it must not write any more.
var errLostLease = errors.New("another replica took the run over")

// startReplicas starts, on PostgreSQL, the listener and the lease keeper.
func (rt *Runtime) startReplicas() {
	if rt.db.Dialect() != storage.Postgres {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt.stopReplicas = cancel
	rt.replicas.Add(2)
	go func() {
		defer rt.replicas.Done()
		_ = rt.db.Listen(ctx, []string{storage.ChannelRunEvents, storage.ChannelRunControl}, storage.Listener{
			OnConnect: rt.hub.wakeAll,
			OnNotify:  rt.notified,
			OnError: func(err error) {
				rt.log.Warn("run notifications: listener lost; subscribers fall back to polling until it is back", "err", err)
			},
		})
	}()
	go func() {
		defer rt.replicas.Done()
		rt.keepLeases(ctx)
	}()
}

func (rt *Runtime) notified(channel, payload string) {
	if payload == storage.AllRuns {
		if channel == storage.ChannelRunEvents {
			rt.hub.wakeAll()
		} else {
			rt.mu.Lock()
			for _, r := range rt.live {
				go rt.readControl(r)
			}
			rt.mu.Unlock()
		}
		return
	}
	for _, id := range storage.ParseIDs(payload) {
		switch channel {
		case storage.ChannelRunEvents:
			rt.hub.wake(id)
		case storage.ChannelRunControl:
			if r := rt.liveByID(id); r != nil {
				go rt.readControl(r) // not on the listener's goroutine: it reads the database
			}
		}
	}
}

func (rt *Runtime) liveByID(id int64) *run {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.live[id]
}

// readControl applies the control request pending on a live run.
func (rt *Runtime) readControl(r *run) {
	ctl, err := rt.db.RunControl(context.Background(), r.rec.ID)
	if err != nil {
		rt.log.WarnContext(r.ctx, "reading a run's control request failed", "requestId", r.rec.RequestID, "err", err)
		return
	}
	r.apply(ctl)
}

// apply acts on a control request: a stop ends the current step and the run ends INTERRUPTED;
// a suspend pauses it at the next step boundary.
func (r *run) apply(control string) {
	switch control {
	case storage.RunControlStop:
		r.cancel(errStopped)
	case storage.RunControlSuspend:
		r.pauseRequested.Store(true)
	}
}

// pollControl reads a control request at a step boundary (a notification may have been lost).
func (r *run) pollControl() {
	ctl, err := r.rt.db.RunControl(context.WithoutCancel(r.ctx), r.rec.ID)
	if err == nil {
		r.apply(ctl)
	}
}

// requestControl asks the owner of a running run, wherever it is, to stop or suspend it. It
// reports false when the run is not running.
func (rt *Runtime) requestControl(ctx context.Context, rec storage.Run, control string) (bool, error) {
	ok, err := rt.db.RequestRunControl(ctx, rec.ID, control)
	if err != nil || !ok {
		return false, err
	}
	if r := rt.liveByID(rec.ID); r != nil { // it started here meanwhile
		r.apply(control)
	}
	return true, nil
}

// keepLeases renews this replica's running runs every RunLease/5, applies the control requests
// found on them, abandons those another replica took over, and suspends the runs of replicas
// that went silent.
func (rt *Runtime) keepLeases(ctx context.Context) {
	t := time.NewTicker(rt.cfg.RunLease / 5)
	defer t.Stop()
	for {
		rt.renewLeases(ctx)
		rt.reapExpired(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (rt *Runtime) renewLeases(ctx context.Context) {
	rt.mu.Lock()
	before := make(map[int64]*run, len(rt.live))
	for id, r := range rt.live {
		before[id] = r
	}
	rt.mu.Unlock()
	held, err := rt.db.RenewRunLeases(ctx, rt.cfg.Owner, time.Now().Add(rt.cfg.RunLease))
	if err != nil {
		if ctx.Err() == nil {
			rt.log.Warn("renewing run leases failed", "err", err)
		}
		return
	}
	renewed := make(map[int64]bool, len(held))
	for _, l := range held {
		renewed[l.ID] = true
		if r := before[l.ID]; r != nil && l.Control != "" {
			r.apply(l.Control)
		}
	}
	// Every run live before the renewal was claimed before it: if the renewal did not find it
	// running under this owner, it ended meanwhile (and is no longer live) or was taken over.
	for id, r := range before {
		if !renewed[id] && rt.liveByID(id) == r {
			if cur, err := rt.db.RunsByID(ctx, id); err == nil && (cur.Status != storage.RunRunning || cur.Owner != rt.cfg.Owner) &&
				rt.liveByID(id) == r && !isFinal(cur.Status) {
				rt.log.WarnContext(r.ctx, "a live run was taken over by another replica; abandoning it", "requestId", r.rec.RequestID,
					"owner", cur.Owner, "status", cur.Status)
				r.cancel(errLostLease)
			}
		}
	}
}

// reapExpired suspends the running runs of replicas that stopped renewing their leases.
func (rt *Runtime) reapExpired(ctx context.Context) {
	now := time.Now()
	runs, err := rt.db.ExpiredRuns(ctx, now, rt.cfg.RunLease)
	if err != nil {
		if ctx.Err() == nil {
			rt.log.Warn("looking for runs of silent replicas failed", "err", err)
		}
		return
	}
	for _, r := range runs {
		if rt.liveByID(r.ID) != nil {
			continue // ours and alive: the renewal is late, not the run
		}
		if err := rt.db.TakeOverRun(ctx, r.ID, rt.cfg.Owner, now, rt.cfg.RunLease, now.Add(rt.cfg.RunLease)); err != nil {
			continue // renewed meanwhile, or another replica was first
		}
		rt.log.Warn("the owner of a running run went silent; suspending it so it can be resumed", "requestId", r.RequestID,
			"owner", r.Owner)
		r.Owner = rt.cfg.Owner
		if err := rt.recoverRun(ctx, r); err != nil {
			rt.log.Error("suspending a run of a silent replica failed", "requestId", r.RequestID, "err", err)
		}
	}
}

// recoverRun suspends a running run whose goroutine is gone — left by a crash, or by a replica
// that went silent — so a client can resume it; nothing it emitted is lost. A run that was not
// waiting pauses as a shutdown would have paused it (SHUTDOWN_INTERRUPT), one that was waiting
// for answers or results as its wait would have (rewait). A stop asked of it meanwhile ends it
// instead.
func (rt *Runtime) recoverRun(ctx context.Context, r storage.Run) error {
	spec, st, err := decodeRun(r)
	if err != nil {
		return err
	}
	last, err := rt.db.LastRunSeq(ctx, r.ID)
	if err != nil {
		return err
	}
	pr := &run{rt: rt, ctx: ctx, rec: r, spec: spec, state: st, seq: last}
	evs, pause, err := pr.rewait(ctx)
	if err != nil {
		return err
	}
	crashed := pause == nil
	if crashed {
		pause = &SuspendInfo{Reason: SuspendShutdown, Message: "the daemon stopped while the run was executing"}
	}
	pes := pr.pauseEvents(pause)
	if crashed {
		// Where the run was when the daemon died is not known (the checkpoint may be a step
		// behind): the source document's -1.
		pause.Step = -1
	}
	for _, e := range pes {
		evs = append(evs, pr.stamp(e))
	}
	r.Status = storage.RunSuspended
	if err := rt.transition(ctx, &r, storage.Transition{From: storage.RunRunning}, evs); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil // it moved on meanwhile
		}
		return err
	}
	rt.afterSuspend(ctx, r)
	if st.waiting() {
		rt.tryResume(ctx, r.ID) // answered before the crash: it goes on
	}
	return nil
}

// afterSuspend settles the control request left on a run that was just suspended: a suspend is
// spent; a stop (asked while it was still running) ends it now.
func (rt *Runtime) afterSuspend(ctx context.Context, rec storage.Run) {
	ctl, err := rt.db.RunControl(ctx, rec.ID)
	if err != nil {
		return
	}
	switch ctl {
	case storage.RunControlSuspend:
		_ = rt.db.ClearRunControl(ctx, rec.ID, ctl)
	case storage.RunControlStop:
		if cur, err := rt.db.RunsByID(ctx, rec.ID); err == nil && cur.Status == storage.RunSuspended {
			if err := rt.stopSuspended(ctx, cur); err != nil && !errors.Is(err, ErrNotLive) {
				rt.log.WarnContext(ctx, "stopping a suspended run failed", "requestId", rec.RequestID, "err", err)
			}
		}
	}
}
