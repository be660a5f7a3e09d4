package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hookd/hookd/storage"
)

// The approvals inbox: every tool call waiting for a person, across runs, for the reviewers who
// answer them outside the chat (the console, an admin tool). An answer given here goes through
// Answer, so the run resumes exactly as it would after the chat dialect's own answer.

// Approval is a pending permission ask as an inbox shows it.
type Approval struct {
	AskID     string `json:"askId"`
	RequestID string `json:"requestId"`
	UserID    string `json:"userId"`
	SessionID int64  `json:"sessionId"`
	ToolName  string `json:"toolName"`
	CallID    string `json:"toolCallId"`
	// Arguments are those of the call asked about; an answer is bound to them (ArgsHash).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	ArgsHash  string          `json:"argumentsHash"`
	// AskedBy is who asked for a person: the permission rule, or the hook or policy that answered ask.
	AskedBy   string    `json:"askedBy,omitempty"`
	Since     time.Time `json:"since"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Approvals lists the pending asks, oldest first; users, when not nil, keeps those of the listed
// users only (a reviewer's inbox). It returns the cursor of the next page ("" on the last).
func (rt *Runtime) Approvals(ctx context.Context, users []string, cursor string, limit int) ([]Approval, string, error) {
	asks, next, err := rt.db.PendingAsks(ctx, storage.AskFilter{Users: users, After: cursor, Limit: limit})
	if err != nil {
		return nil, "", err
	}
	out := make([]Approval, 0, len(asks))
	for _, a := range asks {
		run, err := rt.db.RunsByID(ctx, a.RunID)
		if err != nil {
			return nil, "", err
		}
		ap := Approval{AskID: a.AskID, RequestID: run.RequestID, UserID: a.UserID, SessionID: run.SessionID,
			ToolName: a.ToolName, CallID: a.CallID, ArgsHash: a.ArgsHash, AskedBy: a.Reason, Since: a.CreatedAt, ExpiresAt: a.ExpiresAt}
		if a.Arguments != "" {
			if !json.Valid([]byte(a.Arguments)) {
				return nil, "", fmt.Errorf("agent: ask %s: stored arguments are not JSON", a.AskID)
			}
			ap.Arguments = json.RawMessage(a.Arguments)
		}
		out = append(out, ap)
	}
	return out, next, nil
}

// ApprovalsChanged returns a channel closed when the set of pending asks may have changed (an ask was
// made or answered in this process).
func (rt *Runtime) ApprovalsChanged() <-chan struct{} { return rt.db.Changed(storage.TopicAsks) }

// AnswerApproval answers one pending ask on behalf of its run's user. users, when not nil, are
// the users the answerer may review: an ask of anyone else does not exist for it. by names the
// answerer for the record.
func (rt *Runtime) AnswerApproval(ctx context.Context, askID string, approved bool, reason, by string, users []string) error {
	a, err := rt.db.GetAsk(ctx, askID)
	if err != nil {
		return err
	}
	if users != nil && !slices.Contains(users, a.UserID) {
		return ErrNotFound
	}
	if a.Kind != storage.AskConfirm {
		return ErrNotWaiting
	}
	if a.Status != storage.AskPending {
		return &storage.AskClosedError{AskID: a.AskID, Status: a.Status}
	}
	requestID, err := rt.requestIDOf(ctx, a.RunID)
	if err != nil {
		return err
	}
	return rt.Answer(ctx, a.UserID, requestID, []Answer{{AskID: a.AskID, Approved: approved, Reason: reason, AnsweredBy: by}})
}
