package agent

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hookd/hookd/storage"
)

// Following a run. Any number of readers follow runs: chat clients' streams, a scheduled task
// waiting for its run, a parent run waiting for a subagent. A Follower has no goroutine and no
// buffer of its own. It waits on its run's wake channel in the hub, which all readers of that
// run in this process share, and when that fires it reads what is new: from the live run's
// in-memory tail (log.go) or from the database. Ten thousand idle streams on a paused run
// therefore cost ten thousand entries in one channel's wait queue, and no queries.
//
// What wakes a run's readers:
//   - this process's event log, after it committed events of the run, and when the run became
//     live here or stopped being live here (log.go);
//   - on PostgreSQL, a notification that another replica committed events of the run
//     (replicas.go); a new listening connection wakes every run;
//   - the poller (poll), every followPoll, for the followed runs that are not live here: it reads their
//     heads (status and last seq) in one query and wakes those that changed since it last
//     looked. That covers a lost notification from another replica; it is the one place a
//     reader of a run looks again on a timer.

// followPoll is how often the poller looks at the followed runs that are not live here.
const followPoll = 5 * time.Second

// hub holds the wake channels of the runs followed in this process.
type hub struct {
	mu   sync.Mutex
	runs map[int64]*watch
}

type watch struct {
	readers int
	wake    chan struct{} // closed and replaced at every wake
	// What the poller saw last; empty status before it looked.
	seenStatus string
	seenSeq    int64
}

func newHub() *hub { return &hub{runs: map[int64]*watch{}} }

func (h *hub) join(runID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.runs[runID]
	if w == nil {
		w = &watch{wake: make(chan struct{})}
		h.runs[runID] = w
	}
	w.readers++
}

func (h *hub) leave(runID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.runs[runID]; w != nil {
		if w.readers--; w.readers == 0 {
			delete(h.runs, runID)
		}
	}
}

// ready returns the channel the run's next wake closes (the run must be joined).
func (h *hub) ready(runID int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs[runID].wake
}

func (h *hub) wake(runID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.runs[runID]; w != nil {
		w.signal()
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.runs {
		w.signal()
	}
}

func (w *watch) signal() {
	close(w.wake)
	w.wake = make(chan struct{})
}

// followed lists the runs that have readers.
func (h *hub) followed() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]int64, 0, len(h.runs))
	for id := range h.runs {
		ids = append(ids, id)
	}
	return ids
}

// observe records what the poller read and wakes the runs that changed.
func (h *hub) observe(heads []storage.RunHead) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range heads {
		if w := h.runs[hd.ID]; w != nil && (w.seenStatus != hd.Status || w.seenSeq != hd.LastSeq) {
			w.seenStatus, w.seenSeq = hd.Status, hd.LastSeq
			w.signal()
		}
	}
}

// poll reads the heads of the followed runs that are not live here and wakes those that
// changed.
func (rt *Runtime) poll(ctx context.Context) {
	ids := rt.hub.followed()
	n := 0
	for _, id := range ids {
		if !rt.elog.isLive(id) { // a live run's readers are woken by its commits
			ids[n] = id
			n++
		}
	}
	if n == 0 {
		return
	}
	heads, err := rt.db.RunHeads(ctx, ids[:n])
	if err != nil {
		if ctx.Err() == nil {
			rt.log.Warn("looking at followed runs failed; trying again later", "runs", n, "err", err)
		}
		return
	}
	rt.hub.observe(heads)
}

// Follower reads one run's events in order: those stored first, then live ones as they become
// durable, with no gap and no duplicate. Wait for Ready, then call Next; Close when done. It is
// not safe for concurrent use.
type Follower struct {
	rt        *Runtime
	start     storage.RunHead // the run when following began
	runID     int64
	requestID string
	cursor    int64 // the seq of the last event returned
	ready     <-chan struct{}
	ended     bool
	closed    bool
}

// closedChan is the Ready of a Follower that has something to read now.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Follow starts reading the events with seq > after of one of userID's runs; ErrNotFound when
// the user has no run by that id.
func (rt *Runtime) Follow(ctx context.Context, userID, requestID string, after int64) (*Follower, error) {
	head, err := aside(func() (storage.RunHead, error) { return rt.db.RunHead(ctx, requestID) })
	if err == nil && head.UserID != userID {
		err = ErrNotFound // another user's run does not exist for this one
	}
	if err != nil {
		return nil, err
	}
	f := rt.follow(head.ID, requestID, after)
	f.start = head
	return f, nil
}

// Start is the run's status and the seq of its last stored event when following began: a
// reader tells from it whether a cursor is at the end of a finished run, or beyond the run.
func (f *Follower) Start() (status string, lastSeq int64) { return f.start.Status, f.start.LastSeq }

func (rt *Runtime) follow(runID int64, requestID string, after int64) *Follower {
	rt.hub.join(runID)
	return &Follower{rt: rt, runID: runID, requestID: requestID, cursor: after, ready: closedChan}
}

// Ready is closed when Next may have something new: at first, after Next returned events, and
// when the run changed since.
func (f *Follower) Ready() <-chan struct{} { return f.ready }

// Next returns the events after the last one returned that are durable now; none when there
// are none yet. It does not block. It returns io.EOF once the run has ended and every event was
// returned (a suspended run has not ended: its readers wait for it to go on). Another error is
// a failed read, already logged; the reader may try again or give up.
func (f *Follower) Next(ctx context.Context) ([]Event, error) {
	if f.ended || f.closed {
		return nil, io.EOF
	}
	// The wake channel is taken before looking, so a change after the look closes it.
	f.ready = f.rt.hub.ready(f.runID)
	evs, ok, live := f.rt.elog.tail(f.runID, f.cursor)
	if !ok {
		var err error
		if evs, err = aside(func() ([]Event, error) { return f.readStored(ctx, live) }); err != nil {
			return nil, f.fail(ctx, err)
		}
	}
	if len(evs) > 0 {
		f.cursor = evs[len(evs)-1].Seq
		f.ready = closedChan // there may be more
	}
	return evs, nil
}

// readStored reads what is new from the database: the run is not live here (suspended,
// executing on another replica, or over), or its feed no longer reaches back to the cursor.
// When it is not live, its head says first whether there is anything to read; an idle reader's
// look is then one small query.
func (f *Follower) readStored(ctx context.Context, live bool) ([]Event, error) {
	if live {
		return f.rt.elog.readStored(ctx, f.runID, f.cursor, 1000)
	}
	heads, err := f.rt.db.RunHeads(ctx, []int64{f.runID})
	if err != nil {
		return nil, err
	}
	if len(heads) == 0 {
		return nil, ErrNotFound
	}
	head := heads[0]
	if head.LastSeq > f.cursor {
		return f.rt.elog.readStored(ctx, f.runID, f.cursor, 1000)
	}
	// A final status is written with the events that announce it (transition.go): once it is
	// read and every event was returned, the run is over.
	if isFinal(head.Status) {
		f.ended = true
		return nil, io.EOF
	}
	return nil, nil
}

// aside runs a read on a goroutine of its own and waits for it. The goroutine of a stream waits
// for as long as the run is paused, with its stack as large as the deepest call it ever made
// until a GC shrinks it, and the memory it grew into stays with the process. Database calls are
// the deepest by far: made on the stream's goroutine, they doubled every idle stream's stack to
// 16 KB, about 7 KB of RSS per stream at 10,000 streams (docs/benchmarks.md, "Load").
func aside[T any](read func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	c := make(chan result, 1)
	go func() {
		v, err := read()
		c <- result{v, err}
	}()
	r := <-c
	return r.v, r.err
}

// fail logs a failed read (unless the reader left, or it is the end) and returns it.
func (f *Follower) fail(ctx context.Context, err error) error {
	if errors.Is(err, io.EOF) {
		return err
	}
	if ctx.Err() == nil {
		f.rt.log.ErrorContext(ctx, "reading run events failed", "requestId", f.requestID, "err", err)
	}
	f.ready = closedChan
	return err
}

// Close stops following; Next then returns io.EOF.
func (f *Follower) Close() {
	if !f.closed {
		f.closed = true
		f.rt.hub.leave(f.runID)
	}
}

// Subscribe is Follow as a channel, fed by a goroutine of its own, for the runtime's own readers
// (a scheduled task, a parent run), which follow few runs at a time and would rather range over
// events. It is not scoped to a user. The channel closes when the run has ended and everything
// was sent, or when ctx ends.
func (rt *Runtime) Subscribe(ctx context.Context, requestID string, after int64) (<-chan Event, error) {
	head, err := rt.db.RunHead(ctx, requestID)
	if err != nil {
		return nil, err
	}
	f := rt.follow(head.ID, requestID, after)
	ch := make(chan Event, 16)
	go func() {
		defer close(ch)
		defer f.Close()
		for {
			select {
			case <-f.Ready():
			case <-ctx.Done():
				return
			}
			evs, err := f.Next(ctx)
			if err != nil {
				return // the end, or a failed read (logged)
			}
			for _, e := range evs {
				select {
				case ch <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}
