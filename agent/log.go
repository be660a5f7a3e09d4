package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hookd/hookd/storage"
)

// eventLog makes run events durable and tells readers about them. Runs hand events to one writer
// goroutine, which commits whatever queued up in one transaction (a fast stream of deltas is not
// a commit each); only then are the events visible to readers, so what a client saw is always
// what a later replay shows.
//
// Ownership: the writer goroutine is the only one that appends to a feed's recent events and
// raises its durable mark; readers take the lock to copy them.
type eventLog struct {
	db *storage.DB
	// write makes a batch durable: the dispatcher's shared writer when it has one (one commit a
	// cycle with the outbox and the decision log on SQLite), else the database directly.
	write func(ctx context.Context, owner string, evs []storage.RunEvent) (dropped int, err error)
	log   *slog.Logger
	owner string // the runtime's Owner: only its runs' events are written (PostgreSQL)
	in    chan logItem

	// wake tells a run's readers (the hub) that it changed: its events were committed, or it
	// became live here or stopped being live. It is called without mu held.
	wake func(runID int64)

	mu    sync.Mutex
	feeds map[int64]*feed // live runs of this process

	done chan struct{}
	// stopMu lets senders share the input channel while stop closes it; the writer never takes
	// it, so a full channel cannot deadlock against a flush.
	stopMu  sync.RWMutex
	stopped bool
	// giveUp is closed when a stop's deadline passes while the database still refuses writes:
	// the events then waiting are given up, loudly, so that shutdown ends.
	giveUp chan struct{}
}

type logItem struct {
	runID int64
	ev    Event
	body  []byte
	sync  chan struct{} // a barrier: closed once everything before it is durable
}

// feed is the in-memory tail of one live run.
type feed struct {
	durable int64   // highest durable seq
	recent  []Event // the newest durable events, contiguous up to durable
}

// recentCap bounds the events a feed keeps in memory; older ones are read from the database.
const recentCap = 4096

// runEventWriter is the dispatcher's shared writer, as the event log uses it.
type runEventWriter interface {
	AppendRunEvents(ctx context.Context, owner string, evs []storage.RunEvent) (dropped int, err error)
}

func newEventLog(db *storage.DB, hooks Hooks, log *slog.Logger, owner string, wake func(runID int64)) *eventLog {
	l := &eventLog{db: db, write: db.AppendRunEvents, log: log, owner: owner, wake: wake, in: make(chan logItem, 8192), feeds: map[int64]*feed{},
		done: make(chan struct{}), giveUp: make(chan struct{})}
	if w, ok := hooks.(runEventWriter); ok {
		l.write = w.AppendRunEvents
	}
	go l.writer()
	return l
}

// open registers a live run whose events up to durable are already stored.
func (l *eventLog) open(runID, durable int64) {
	l.mu.Lock()
	_, ok := l.feeds[runID]
	if !ok {
		l.feeds[runID] = &feed{durable: durable}
	}
	l.mu.Unlock()
	if !ok {
		l.wake(runID)
	}
}

// close forgets a run's feed once everything queued for it is durable; its readers then find
// its end in the database.
func (l *eventLog) close(runID int64) {
	l.barrier()
	l.mu.Lock()
	delete(l.feeds, runID)
	l.mu.Unlock()
	l.wake(runID)
}

// append queues an event; it becomes visible once committed.
func (l *eventLog) append(runID int64, ev Event) {
	body, err := json.Marshal(ev)
	if err != nil { // every field is a plain value; this would be a programming error
		panic(fmt.Sprintf("agent: encode event: %v", err))
	}
	l.stopMu.RLock()
	defer l.stopMu.RUnlock()
	if l.stopped {
		l.log.Warn("event after shutdown dropped", "runId", runID, "kind", ev.Kind)
		return
	}
	l.in <- logItem{runID: runID, ev: ev, body: body}
}

// barrier waits until everything queued so far is durable.
func (l *eventLog) barrier() {
	c := make(chan struct{})
	l.stopMu.RLock()
	if l.stopped {
		l.stopMu.RUnlock()
		return
	}
	l.in <- logItem{sync: c}
	l.stopMu.RUnlock()
	<-c
}

// stop flushes and ends the writer; later events are dropped (the process is exiting).
// stop writes what is queued and ends the writer; past ctx's deadline it gives up events the
// database still refuses (flush), so that a shutdown ends within its timeout.
func (l *eventLog) stop(ctx context.Context) {
	l.stopMu.Lock()
	if l.stopped {
		l.stopMu.Unlock()
		return
	}
	l.stopped = true
	close(l.in)
	l.stopMu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		close(l.giveUp)
		<-l.done
	}
}

func (l *eventLog) writer() {
	defer close(l.done)
	const maxBatch = 1024
	batch := make([]logItem, 0, maxBatch)
	for item := range l.in {
		batch = append(batch[:0], item)
	drain:
		for len(batch) < maxBatch {
			select {
			case it, ok := <-l.in:
				if !ok {
					break drain
				}
				batch = append(batch, it)
			default:
				break drain
			}
		}
		l.flush(batch)
	}
}

func (l *eventLog) flush(batch []logItem) {
	rows := make([]storage.RunEvent, 0, len(batch))
	for _, it := range batch {
		if it.sync == nil {
			rows = append(rows, storage.RunEvent{RunID: it.runID, Seq: it.ev.Seq, Body: it.body})
		}
	}
	written := true
	for attempt := 0; len(rows) > 0; attempt++ {
		dropped, err := l.write(context.Background(), l.owner, rows)
		if err == nil {
			if dropped > 0 { // another replica took a run over (replicas.go); the run is abandoned
				l.log.Warn("run events not written: already stored, or of a run another replica took over", "events", dropped)
			}
			break
		}
		// The database is the source of truth for replays: keep trying rather than drop events,
		// until a shutdown's deadline says to give up.
		l.log.Error("persisting run events failed; retrying", "events", len(rows), "attempt", attempt+1, "err", err)
		select {
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
			continue
		case <-l.giveUp:
		}
		l.log.Error("run events lost: the database refused them until the shutdown's deadline",
			"events", len(rows), "err", err)
		written = false
		break
	}
	l.mu.Lock()
	woken := map[int64]bool{}
	for _, it := range batch {
		if it.sync != nil {
			continue
		}
		woken[it.runID] = true
		f := l.feeds[it.runID]
		if !written || f == nil || it.ev.Seq <= f.durable {
			continue
		}
		f.durable = it.ev.Seq
		f.recent = append(f.recent, it.ev)
		if len(f.recent) > recentCap {
			f.recent = append(f.recent[:0:0], f.recent[len(f.recent)-recentCap/2:]...)
		}
	}
	l.mu.Unlock()
	// Readers look at the feeds (or the database) after they took the run's wake channel, so a
	// wake after both are updated reaches every reader that could have missed the events.
	for id := range woken {
		l.wake(id)
	}
	for _, it := range batch {
		if it.sync != nil {
			close(it.sync)
		}
	}
}

// committed takes note of events a transition wrote itself (transition.go): a feed of the run
// that is open here takes them as durable, and the run's readers are woken.
func (l *eventLog) committed(runID int64, evs []Event) {
	l.mu.Lock()
	if f := l.feeds[runID]; f != nil {
		for _, e := range evs {
			if e.Seq == f.durable+1 {
				f.durable = e.Seq
				f.recent = append(f.recent, e)
			}
		}
	}
	l.mu.Unlock()
	l.wake(runID)
}

// tail returns the durable events after seq `after` that the feed still holds in memory. ok is
// false when the run has no feed here or the feed no longer reaches back that far; live says
// whether the run is live here.
func (l *eventLog) tail(runID, after int64) (evs []Event, ok, live bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.feeds[runID]
	if f == nil {
		return nil, false, false
	}
	if after >= f.durable {
		return nil, true, true
	}
	if len(f.recent) == 0 || f.recent[0].Seq > after+1 {
		return nil, false, true
	}
	i := int(after + 1 - f.recent[0].Seq)
	return append([]Event(nil), f.recent[i:]...), true, true
}

// isLive reports whether the run is live in this process.
func (l *eventLog) isLive(runID int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.feeds[runID] != nil
}

// readStored reads events after seq from the database.
func (l *eventLog) readStored(ctx context.Context, runID, after int64, limit int) ([]Event, error) {
	rows, err := l.db.RunEvents(ctx, runID, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal(r.Body, &out[i]); err != nil {
			return nil, fmt.Errorf("run %d event %d: %w", runID, r.Seq, err)
		}
	}
	return out, nil
}
