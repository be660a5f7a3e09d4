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
