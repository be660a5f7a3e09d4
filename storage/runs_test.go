package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

func TestRunHeads(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		var ids []int64
		for i := range 3 {
			s, _, err := db.EnsureSession(ctx, storage.Session{UserID: "u1", Key: fmt.Sprintf("heads-%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			r := storage.Run{RequestID: fmt.Sprintf("req-heads-%d", i), SessionID: s.ID, UserID: "u1", Status: storage.RunRunning}
			if err := db.CreateRun(ctx, &r); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		// Run 0 has no events, run 1 three, run 2 one.
		evs := []storage.RunEvent{{RunID: ids[1], Seq: 1, Body: []byte(`{}`)}, {RunID: ids[1], Seq: 2, Body: []byte(`{}`)},
			{RunID: ids[1], Seq: 3, Body: []byte(`{}`)}, {RunID: ids[2], Seq: 1, Body: []byte(`{}`)}}
		if _, err := db.AppendRunEvents(ctx, "", evs); err != nil {
			t.Fatal(err)
		}
		r2, err := db.RunsByID(ctx, ids[2])
		if err != nil {
			t.Fatal(err)
		}
		r2.Status = storage.RunSuspended
		if err := db.UpdateRun(ctx, &r2); err != nil {
			t.Fatal(err)
		}
		// Many ids in one call, one of them unknown.
		ask := append([]int64{987654321}, ids...)
		for i := range 2500 {
			ask = append(ask, int64(-1-i))
		}
		heads, err := db.RunHeads(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]storage.RunHead{}
		for _, h := range heads {
			got[h.ID] = h
		}
		want := []storage.RunHead{{ID: ids[0], Status: storage.RunRunning}, {ID: ids[1], Status: storage.RunRunning, LastSeq: 3},
			{ID: ids[2], Status: storage.RunSuspended, LastSeq: 1, UpdatedAt: r2.UpdatedAt}}
		if len(got) != len(want) {
			t.Fatalf("heads: got %+v", heads)
		}
		for i, w := range want {
			w.RequestID, w.UserID = fmt.Sprintf("req-heads-%d", i), "u1"
			g := got[w.ID]
			if w.UpdatedAt.IsZero() {
				w.UpdatedAt = g.UpdatedAt
			}
			if g.ID != w.ID || g.RequestID != w.RequestID || g.UserID != w.UserID || g.Status != w.Status ||
				g.LastSeq != w.LastSeq || !g.UpdatedAt.Equal(w.UpdatedAt) || g.UpdatedAt.IsZero() {
				t.Errorf("head of run %d: got %+v, want %+v", w.ID, g, w)
			}
			one, err := db.RunHead(ctx, w.RequestID)
			if err != nil || one.ID != g.ID || one.LastSeq != g.LastSeq || one.Status != g.Status {
				t.Errorf("RunHead(%s) = %+v, %v; RunHeads said %+v", w.RequestID, one, err, g)
			}
		}
		if _, err := db.RunHead(ctx, "no-such-run"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("RunHead of an unknown run: %v, want ErrNotFound", err)
		}
	})
}

// A transition writes the status and the events that announce it, both or neither.
func TestTransitionRun(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		s, _, err := db.EnsureSession(ctx, storage.Session{UserID: "u1", Key: "transition"})
		if err != nil {
			t.Fatal(err)
		}
		r := storage.Run{RequestID: "req-transition", SessionID: s.ID, UserID: "u1", Status: storage.RunRunning, Owner: "a"}
		if err := db.CreateRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := db.AppendRunEvents(ctx, "a", []storage.RunEvent{{RunID: r.ID, Seq: 1, Body: []byte(`{"kind":"run.started"}`)}}); err != nil {
			t.Fatal(err)
		}
		check := func(status string, last int64) {
			t.Helper()
			h, err := db.RunHead(ctx, r.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != status || h.LastSeq != last {
				t.Fatalf("head: status %s, last seq %d; want %s, %d", h.Status, h.LastSeq, status, last)
			}
		}
		// Another replica's claim on a running run changes nothing.
		r.Status, r.State = storage.RunSuspended, []byte(`{"step":1}`)
		err = db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunRunning, Owner: "b"},
			[]storage.RunEvent{{Seq: 2, Body: []byte(`{"kind":"suspended"}`)}})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("foreign owner: %v, want ErrNotFound", err)
		}
		check(storage.RunRunning, 1)
		// The owner's pause lands with its events.
		err = db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunRunning, Owner: "a"},
			[]storage.RunEvent{{Seq: 2, Body: []byte(`{"kind":"custom"}`)}, {Seq: 3, Body: []byte(`{"kind":"suspended"}`)}})
		if err != nil {
			t.Fatal(err)
		}
		check(storage.RunSuspended, 3)
		// Of two resumes of one pause, one wins; the loser's event is not written.
		r.Status = storage.RunRunning
		if err := db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunSuspended},
			[]storage.RunEvent{{Seq: 4, Body: []byte(`{"kind":"resumed"}`)}}); err != nil {
			t.Fatal(err)
		}
		err = db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunSuspended},
			[]storage.RunEvent{{Seq: 5, Body: []byte(`{"kind":"resumed"}`)}})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("second resume: %v, want ErrNotFound", err)
		}
		check(storage.RunRunning, 4)
		// A transition with an event whose seq is taken writes neither.
		r.Status = storage.RunCompleted
		if err := db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunRunning},
			[]storage.RunEvent{{Seq: 4, Body: []byte(`{}`)}}); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("duplicate seq: %v, want a failure", err)
		}
		check(storage.RunRunning, 4)
		got, err := db.RunsByID(ctx, r.ID)
		if err != nil || string(got.State) != `{"step":1}` {
			t.Fatalf("state %s, %v", got.State, err)
		}
		// No events at all is a plain guarded update.
		if err := db.TransitionRun(ctx, &r, storage.Transition{From: storage.RunRunning}, nil); err != nil {
			t.Fatal(err)
		}
		check(storage.RunCompleted, 4)
	})
}
