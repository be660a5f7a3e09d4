package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
)

// Notification channels between replicas on one PostgreSQL database. The payload of the run
// channels is a comma-separated list of run ids, or AllRuns. On the wire each channel is scoped by
// the schema ("hookd_run_events_<schema>"), so deployments (or tests) in different schemas of one
// database do not wake each other.
const (
	// ChannelRunEvents: events of these runs were committed.
	ChannelRunEvents = "run_events"
	// ChannelRunControl: a control request (RequestRunControl) waits on these runs.
	ChannelRunControl = "run_control"
	// ChannelHooks: a hook was created, changed or deleted (no payload).
	ChannelHooks = "hooks"
)

// channels are every channel the shared connection LISTENs on.
var channels = []string{ChannelRunEvents, ChannelRunControl, ChannelHooks}

// channelExpr is the SQL expression of a channel's wire name; notifier and listener evaluate it on
// their own connections, which share the DSN and so the search_path.
func channelExpr(name string) string {
	return "left('hookd_" + name + "_' || coalesce(current_schema(), ''), 63)"
}

// maxPayload keeps a NOTIFY payload below PostgreSQL's 8000-byte limit.
const maxPayload = 7000

// AllRuns is the payload that stands for every run (the ids would not fit in one notification).
const AllRuns = "*"

// payloadOf is the notification payload naming ids: comma-separated, or AllRuns.
func payloadOf(ids []int64) string {
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
		if b.Len() > maxPayload {
			return AllRuns
		}
	}
	return b.String()
}

// ParseIDs reads a notification payload (nil for AllRuns).
func ParseIDs(payload string) []int64 {
	var out []int64
	for _, f := range strings.Split(payload, ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// Listener receives what Listen hears.
type Listener struct {
	// OnConnect is called after each (re)connection is listening: notifications sent while there
	// was none are lost, so whoever waits on one should look again.
	OnConnect func()
	// OnNotify is called for each notification, on the listening goroutine: keep it short.
	OnNotify func(channel, payload string)
	// OnError is told why the connection was lost or could not be made; Listen retries.
	OnError func(error)
}

// listenCheckEvery is how long the listener waits for a notification before it checks its
// connection.
const listenCheckEvery = 30 * time.Second

// ErrNotPostgres is returned by Listen on SQLite, where one process owns the database.
var ErrNotPostgres = errors.New("storage: LISTEN needs PostgreSQL")

// Listen hands l every notification on the named channels until ctx ends, and returns then. Every
// Listen of a process shares one connection of its own (outside the pool), LISTENing on all of
// hookd's channels, opened by the first and closed after the last; a lost connection is made
// again (after 100 ms, doubling up to 5 s). l.OnConnect is called at once when the connection is
// already listening.
func (db *DB) Listen(ctx context.Context, names []string, l Listener) error {
	dial, ok := db.w.Dialector.(*postgres.Dialector)
	if db.dialect != Postgres || !ok {
		return ErrNotPostgres
	}
	for _, n := range names {
		if !slices.Contains(channels, n) {
			return fmt.Errorf("storage: listen: no channel %q", n)
		}
	}
	s := &subscription{names: names, l: l}
	h := &db.listen
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*subscription]struct{}{}
	}
	h.subs[s] = struct{}{}
	if h.stop == nil {
		lctx, cancel := context.WithCancel(context.Background())
		h.gen++
		h.stop = cancel
		go db.runListen(lctx, dial.DSN, h.gen)
	}
	connected := h.connected
	h.mu.Unlock()
	if connected && l.OnConnect != nil {
		l.OnConnect()
	}
	<-ctx.Done()
	h.mu.Lock()
	delete(h.subs, s)
	if len(h.subs) == 0 {
		h.stop()
		h.stop, h.connected = nil, false
		h.gen++ // the stopped loop's last words reach nobody
	}
	h.mu.Unlock()
	return nil
}

// listenHub is the shared LISTEN connection's state.
type listenHub struct {
	mu        sync.Mutex
	subs      map[*subscription]struct{}
	stop      context.CancelFunc // ends the running loop; nil when none runs
	gen       uint64             // the running loop's number: a stopped loop's is behind it
	connected bool               // the running loop's connection is listening
}

type subscription struct {
	names []string
	l     Listener
}

// each calls f for every subscriber, outside the lock, if loop gen is still the running one;
// state, when not nil, is its connection's new state.
func (h *listenHub) each(gen uint64, state *bool, f func(*subscription)) {
	h.mu.Lock()
	if h.gen != gen {
		h.mu.Unlock()
		return
	}
	if state != nil {
		h.connected = *state
	}
	subs := make([]*subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		f(s)
	}
}

func (db *DB) runListen(ctx context.Context, dsn string, gen uint64) {
	h := &db.listen
	up, down := true, false
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, dsn, func() {
			backoff = 100 * time.Millisecond
			h.each(gen, &up, func(s *subscription) {
				if s.l.OnConnect != nil {
					s.l.OnConnect()
				}
			})
		}, func(name, payload string) {
			h.each(gen, nil, func(s *subscription) {
				if s.l.OnNotify != nil && slices.Contains(s.names, name) {
					s.l.OnNotify(name, payload)
				}
			})
		})
		if ctx.Err() != nil {
			break
		}
		h.each(gen, &down, func(s *subscription) {
			if s.l.OnError != nil && err != nil {
				s.l.OnError(err)
			}
		})
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (db *DB) listenOnce(ctx context.Context, dsn string, connected func(), notify func(name, payload string)) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("listen: connect: %w", err)
	}
	defer conn.Close(context.Background())
	wire := map[string]string{} // wire name → channel
	for _, name := range channels {
		var w string
		if err := conn.QueryRow(ctx, `SELECT `+channelExpr(name)).Scan(&w); err != nil {
			return fmt.Errorf("listen: channel name: %w", err)
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{w}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", w, err)
		}
		wire[w] = name
	}
	connected()
	for {
		// A connection a network dropped silently would wait forever: now and then, check it.
		wctx, cancel := context.WithTimeout(ctx, listenCheckEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		if name, ok := wire[n.Channel]; ok {
			notify(name, n.Payload)
		}
	}
}
