package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// isReady reports whether a follower's Ready has fired.
func isReady(f *Follower) bool {
	select {
	case <-f.Ready():
		return true
	default:
		return false
	}
}

// readAll reads a follower until io.EOF (or the deadline), waiting on Ready between reads.
func readAll(t *testing.T, f *Follower) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []Event
	for {
		select {
		case <-f.Ready():
		case <-ctx.Done():
			t.Fatalf("the run did not end; got %s", kinds(out))
		}
		evs, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
}

// pausedRun starts alice's run that waits for her permission to write a file, and returns its
// events up to the pause.
func pausedRun(t *testing.T, db *storage.DB) (*env, RunInfo, []Event) {
	e := newEnv(t, db, hitlScript, Config{DefaultBehavior: BehaviorAsk})
	info := e.start("alice", "s1", "write")
	evs := e.until(info.RequestID, 0, KindSuspended)
	isStatus(t, e.rt, "alice", info.RequestID, storage.RunSuspended)
	return e, info, evs
}

func (h *hub) readers(runID int64) (watched, readers int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.runs[runID]; w != nil {
		readers = w.readers
	}
	return len(h.runs), readers
}

// Many readers of a paused run share one wake channel: while the run waits they hold nothing of
// their own, and when it goes on every one of them reads the rest, in order, to the end.
func TestFollowersOfAPausedRun(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, info, evs := pausedRun(t, db)
		paused := evs[len(evs)-1].Seq
		ask := find(evs, KindAsk).Ask.Calls[0]

		if _, err := e.rt.Follow(context.Background(), "mallory", info.RequestID, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another user's run: %v, want ErrNotFound", err)
		}
		const n = 200
		followers := make([]*Follower, n)
		for i := range followers {
			f, err := e.rt.Follow(context.Background(), "alice", info.RequestID, paused)
			if err != nil {
				t.Fatal(err)
			}
			followers[i] = f
			if !isReady(f) {
				t.Fatal("a new follower is not ready to read")
			}
			if got, err := f.Next(context.Background()); err != nil || len(got) != 0 {
				t.Fatalf("paused run: Next = %s, %v; want nothing", kinds(got), err)
			}
			// (On PostgreSQL a late notification of the pause's own commit may still wake it.)
			if db.Dialect() == storage.SQLite && isReady(f) {
				t.Fatal("a follower that has read everything of a paused run is ready")
			}
		}
		rec, _ := e.rt.ownRun(context.Background(), "alice", info.RequestID)
		if watched, readers := e.rt.hub.readers(rec.ID); watched != 1 || readers != n {
			t.Fatalf("hub: %d runs, %d readers; want 1 run with %d", watched, readers, n)
		}
		// The poller, looking at the paused run, wakes it once (its first look) and then not again.
		e.rt.poll(context.Background())
		for _, f := range followers {
			if !isReady(f) {
				t.Fatal("the poller's first look did not wake a follower")
			}
			if got, _ := f.Next(context.Background()); len(got) != 0 {
				t.Fatalf("woken for nothing, Next returned %s", kinds(got))
			}
		}
		e.rt.poll(context.Background())
		if db.Dialect() == storage.SQLite && isReady(followers[0]) {
			t.Fatal("the poller woke a run that did not change")
		}

		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{{AskID: ask.AskID, Approved: true}}); err != nil {
			t.Fatal(err)
		}
		var first []Event
		for i, f := range followers {
			got := readAll(t, f)
			checkSeqs(t, got, paused)
			if got[len(got)-1].Kind != KindRunEnded {
				t.Fatalf("follower %d ended without run.ended: %s", i, kinds(got))
			}
			if i == 0 {
				first = got
			} else if a, b := string(mustJSON(got)), string(mustJSON(first)); a != b {
				t.Fatalf("follower %d read other events than follower 0", i)
			}
			f.Close()
			f.Close() // twice is harmless
			if _, err := f.Next(context.Background()); !errors.Is(err, io.EOF) {
				t.Fatalf("Next after Close: %v, want io.EOF", err)
			}
		}
		if watched, _ := e.rt.hub.readers(rec.ID); watched != 0 {
			t.Fatalf("hub still watches %d runs after every follower closed", watched)
		}
	})
}

// A change no wake announced (a lost notification from another replica) reaches the readers at
// the poller's next look.
func TestPollerCoversALostWake(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, info, evs := pausedRun(t, db)
		last := evs[len(evs)-1].Seq
		rec, _ := e.rt.ownRun(context.Background(), "alice", info.RequestID)

		f, err := e.rt.Follow(context.Background(), "alice", info.RequestID, last)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		e.rt.poll(context.Background()) // the first look wakes it; read that away
		if got, _ := f.Next(context.Background()); len(got) != 0 {
			t.Fatalf("Next = %s", kinds(got))
		}

		// Written behind the runtime's back: no wake.
		ev := Event{ID: "evt_lost", RunID: info.RequestID, Seq: last + 1, Kind: KindCustom, At: time.Now().UTC(),
			Custom: &CustomInfo{Name: "note", Value: json.RawMessage(`{"lost":true}`)}}
		body, _ := json.Marshal(ev)
		if _, err := db.AppendRunEvents(context.Background(), rec.Owner, []storage.RunEvent{{RunID: rec.ID, Seq: ev.Seq, Body: body}}); err != nil {
			t.Fatal(err)
		}
		if db.Dialect() == storage.SQLite && isReady(f) {
			t.Fatal("woken without a wake") // on PostgreSQL the insert's NOTIFY may wake it already
		}
		e.rt.poll(context.Background())
		if !isReady(f) {
			t.Fatal("the poller did not wake the follower of a run that changed")
		}
		got, err := f.Next(context.Background())
		if err != nil || len(got) != 1 || got[0].ID != "evt_lost" {
			t.Fatalf("Next = %s, %v; want the event written behind the runtime's back", kinds(got), err)
		}
	})
}
