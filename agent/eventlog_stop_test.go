package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestEventLogStopEndsWhileWritesFail: when the database refuses writes (a full disk, PostgreSQL
// read-only after a failover) as the daemon stops, the event log keeps trying until the stop's
// deadline and then gives the events up, so that the shutdown ends; a barrier behind them is
// released too.
func TestEventLogStopEndsWhileWritesFail(t *testing.T) {
	l := newEventLog(storagetest.SQLite(t), nil, slog.New(slog.NewTextHandler(io.Discard, nil)), "", func(int64) {})
	tries := make(chan struct{}, 100)
	l.write = func(context.Context, string, []storage.RunEvent) (int, error) {
		select {
		case tries <- struct{}{}:
		default:
		}
		return 0, errors.New("disk full")
	}
	l.open(1, 0)
	l.append(1, Event{Seq: 1, Kind: "delta"})
	<-tries // the writer is retrying
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { l.stop(ctx); close(stopped) }()
	cancel() // the deadline passes
	<-stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.feeds[1]; f.durable != 0 || len(f.recent) != 0 {
		t.Fatalf("an event that was never written counts as durable: %+v", f)
	}
}
