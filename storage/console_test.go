package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

func TestConsoleSessions(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		now := time.Now()
		old := storage.ConsoleSession{TokenHash: []byte("old-hash"), Role: "admin", Subject: "admin",
			ExpiresAt: now.Add(-time.Minute), CreatedAt: now.Add(-time.Hour)}
		if err := db.AddConsoleSession(ctx, old); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ConsoleSession(ctx, old.TokenHash, now); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("an expired session: %v", err)
		}
		s := storage.ConsoleSession{TokenHash: []byte("new-hash"), Role: "reviewer", Subject: "rev",
			Reviews: []string{"alice", "bob"}, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
		if err := db.AddConsoleSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		got, err := db.ConsoleSession(ctx, s.TokenHash, now)
		if err != nil || got.Role != "reviewer" || len(got.Reviews) != 2 || got.Reviews[1] != "bob" {
			t.Fatalf("read back: %+v %v", got, err)
		}
		if err := db.DeleteConsoleSession(ctx, s.TokenHash); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ConsoleSession(ctx, s.TokenHash, now); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a deleted session: %v", err)
		}
	})
}

func TestOverviewAndPendingAsks(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		now := time.Now()
		changed := db.Changed(storage.TopicDecisions)
		ds := []storage.Decision{
			{DecisionID: "d1", EventID: "e1", HookID: 1, HookType: "pre_tool_use", Outcome: "allow", CreatedAt: now.Add(-30 * time.Minute)},
			{DecisionID: "d2", EventID: "e2", HookID: 1, HookType: "pre_tool_use", Outcome: "deny", FromFailureMode: true, CreatedAt: now.Add(-30 * time.Minute)},
			{DecisionID: "d3", EventID: "e3", HookID: 1, HookType: "user_message", Outcome: "modify", CreatedAt: now.Add(-time.Minute)},
			{DecisionID: "d4", EventID: "e4", HookID: 1, HookType: "user_message", Outcome: "allow", CreatedAt: now.Add(-2 * time.Hour)},
		}
		if err := db.InsertDecisions(ctx, ds); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		default:
			t.Fatal("a decision commit was not announced")
		}
		o, err := db.ReadOverview(ctx, now.Add(-time.Hour), now)
		if err != nil {
			t.Fatal(err)
		}
		if o.Decisions.Total != 3 || o.Decisions.Deny != 1 || o.Decisions.FromFailureMode != 1 || len(o.PerMinute) != 61 {
			t.Fatalf("overview: %+v (%d minutes)", o.Decisions, len(o.PerMinute))
		}
		var allow, modify int64
		for _, m := range o.PerMinute {
			allow, modify = allow+m.Allow, modify+m.Modify
		}
		if allow != 1 || modify != 1 {
			t.Fatalf("per minute: allow %d modify %d", allow, modify)
		}
		tail, err := db.DecisionsAfter(ctx, 0, "pre_tool_use", "", 10)
		if err != nil || len(tail) != 2 || tail[0].DecisionID != "d1" {
			t.Fatalf("tail: %+v %v", tail, err)
		}

		sess, _, err := db.EnsureSession(ctx, storage.Session{UserID: "alice", Key: "inbox"})
		if err != nil {
			t.Fatal(err)
		}
		run := storage.Run{RequestID: "req-inbox", SessionID: sess.ID, UserID: "alice", Status: storage.RunRunning}
		if err := db.CreateRun(ctx, &run); err != nil {
			t.Fatal(err)
		}
		asksChanged := db.Changed(storage.TopicAsks)
		var asks []storage.Ask
		for i, user := range []string{"alice", "bob", "alice"} {
			asks = append(asks, storage.Ask{AskID: fmt.Sprintf("ask-%d", i), Kind: storage.AskConfirm, RunID: run.ID,
				UserID: user, CallID: fmt.Sprintf("call-%d", i), ToolName: "shell"})
		}
		if err := db.AddAsks(ctx, asks); err != nil {
			t.Fatal(err)
		}
		<-asksChanged
		all, next, err := db.PendingAsks(ctx, storage.AskFilter{Limit: 2})
		if err != nil || len(all) != 2 || next == "" {
			t.Fatalf("first page: %+v %q %v", all, next, err)
		}
		rest, next, err := db.PendingAsks(ctx, storage.AskFilter{After: next, Limit: 2})
		if err != nil || len(rest) != 1 || next != "" {
			t.Fatalf("second page: %+v %q %v", rest, next, err)
		}
		bobs, _, err := db.PendingAsks(ctx, storage.AskFilter{Users: []string{"bob"}})
		if err != nil || len(bobs) != 1 || bobs[0].UserID != "bob" {
			t.Fatalf("bob's inbox: %+v %v", bobs, err)
		}
		if none, _, err := db.PendingAsks(ctx, storage.AskFilter{Users: []string{}}); err != nil || len(none) != 0 {
			t.Fatalf("a reviewer of nobody: %+v %v", none, err)
		}
		asksChanged = db.Changed(storage.TopicAsks)
		if err := db.AnswerAsk(ctx, "ask-1", storage.AskApproved, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		<-asksChanged
		// An ask no longer pending is closed, and says how: answered, or expired.
		if err := db.AnswerAsk(ctx, "ask-1", storage.AskDenied, nil); !errors.Is(err, storage.ErrAlreadyAnswered) || err.Error() != "already answered" {
			t.Fatalf("answered twice: %v", err)
		}
		if err := db.AnswerAsk(ctx, "ask-2", storage.AskExpired, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.AnswerAsk(ctx, "ask-2", storage.AskApproved, nil); !errors.Is(err, storage.ErrAlreadyAnswered) ||
			err.Error() != "expired: its time ran out, or its run ended, before an answer came" {
			t.Fatalf("answered after it expired: %v", err)
		}
		if o, err = db.ReadOverview(ctx, now.Add(-time.Hour), now); err != nil || o.PendingApprovals != 1 {
			t.Fatalf("pending approvals: %d %v", o.PendingApprovals, err)
		}
		if _, _, err := db.PendingAsks(ctx, storage.AskFilter{After: "garbage"}); err == nil {
			t.Fatal("a cursor no list gave was accepted")
		}
	})
}

// TestAskPastItsTime: an ask whose expiresAt has passed is no longer waiting, whether or not the
// sweep has marked it expired yet: it is not listed or counted as pending, an answer to it is
// refused as expired, and the sweep can still close it.
func TestAskPastItsTime(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		now := time.Now()
		sess, _, err := db.EnsureSession(ctx, storage.Session{UserID: "alice", Key: "late"})
		if err != nil {
			t.Fatal(err)
		}
		run := storage.Run{RequestID: "req-late", SessionID: sess.ID, UserID: "alice", Status: storage.RunRunning}
		if err := db.CreateRun(ctx, &run); err != nil {
			t.Fatal(err)
		}
		asks := []storage.Ask{
			{AskID: "ask-late", Kind: storage.AskConfirm, RunID: run.ID, UserID: "alice", CallID: "c1", ToolName: "shell",
				ExpiresAt: now.Add(-time.Second)},
			{AskID: "ask-open", Kind: storage.AskConfirm, RunID: run.ID, UserID: "alice", CallID: "c2", ToolName: "shell",
				ExpiresAt: now.Add(time.Hour)},
			{AskID: "ask-forever", Kind: storage.AskConfirm, RunID: run.ID, UserID: "alice", CallID: "c3", ToolName: "shell"},
		}
		if err := db.AddAsks(ctx, asks); err != nil {
			t.Fatal(err)
		}
		pending, _, err := db.PendingAsks(ctx, storage.AskFilter{})
		if err != nil || len(pending) != 2 || pending[0].AskID == "ask-late" || pending[1].AskID == "ask-late" {
			t.Fatalf("pending asks: %+v %v", pending, err)
		}
		if o, err := db.ReadOverview(ctx, now.Add(-time.Hour), now); err != nil || o.PendingApprovals != 2 {
			t.Fatalf("pending approvals: %d %v", o.PendingApprovals, err)
		}
		for _, status := range []string{storage.AskApproved, storage.AskDenied} {
			var closed *storage.AskClosedError
			if err := db.AnswerAsk(ctx, "ask-late", status, []byte(`{}`)); !errors.As(err, &closed) || closed.Status != storage.AskExpired {
				t.Fatalf("%s after its time: %v, want refused as expired", status, err)
			}
		}
		if a, _ := db.GetAsk(ctx, "ask-late"); a.Status != storage.AskPending || len(a.Answer) != 0 {
			t.Fatalf("the late answer was kept: %s %s", a.Status, a.Answer)
		}
		if err := db.AnswerAsk(ctx, "ask-late", storage.AskExpired, nil); err != nil {
			t.Fatalf("the sweep: %v", err)
		}
		for _, id := range []string{"ask-open", "ask-forever"} {
			if err := db.AnswerAsk(ctx, id, storage.AskApproved, []byte(`{}`)); err != nil {
				t.Fatalf("%s in time: %v", id, err)
			}
		}
	})
}
