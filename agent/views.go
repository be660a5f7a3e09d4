package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hookd/hookd/storage"
)

// What the chat dialects may know of runs, asks and sessions. They read a run through these
// views and the follower API (Follow, Replay) only: the storage behind them is the runtime's.

// Run statuses, as RunView.Status has them. running and suspended are live (one per session).
const (
	StatusRunning     = storage.RunRunning
	StatusSuspended   = storage.RunSuspended
	StatusCompleted   = storage.RunCompleted
	StatusFailed      = storage.RunFailed
	StatusInterrupted = storage.RunInterrupted
)

// RunView is a run as clients see it.
type RunView struct {
	RequestID string
	ReplyID   string // the turn id some dialects know the run by
	SessionID int64
	UserID    string
	Status    string
	// Request is what the run was asked to do.
	Request      StartRequest
	ErrorCode    string
	ErrorMessage string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Live reports whether the run is running or suspended.
func (v RunView) Live() bool { return v.Status == StatusRunning || v.Status == StatusSuspended }

func viewRun(rec storage.Run) (RunView, error) {
	var spec runSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return RunView{}, fmt.Errorf("%w: run %s: spec: %v", ErrBadState, rec.RequestID, err)
	}
	return RunView{RequestID: rec.RequestID, ReplyID: rec.ReplyID, SessionID: rec.SessionID, UserID: rec.UserID,
		Status: rec.Status, Request: spec.StartRequest, ErrorCode: rec.ErrorCode, ErrorMessage: rec.ErrorMessage,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}, nil
}

// Run returns one of userID's runs; ErrNotFound when the user has none by that id.
func (rt *Runtime) Run(ctx context.Context, userID, requestID string) (RunView, error) {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return RunView{}, err
	}
	return viewRun(rec)
}

// RunByReply returns the run of a reply (turn) id if it belongs to userID.
func (rt *Runtime) RunByReply(ctx context.Context, userID, replyID string) (RunView, error) {
	rec, err := rt.db.RunByReply(ctx, replyID)
	if err != nil {
		return RunView{}, err
	}
	if rec.UserID != userID {
		return RunView{}, ErrNotFound
	}
	return viewRun(rec)
}

// LiveRun returns the session's running or suspended run; ErrNotFound when it has none.
func (rt *Runtime) LiveRun(ctx context.Context, sessionID int64) (RunView, error) {
	rec, err := rt.db.LiveRun(ctx, sessionID)
	if err != nil {
		return RunView{}, err
	}
	return viewRun(rec)
}

// SessionRuns lists a session's runs, newest first (at most limit).
func (rt *Runtime) SessionRuns(ctx context.Context, sessionID int64, limit int) ([]RunView, error) {
	recs, err := rt.db.SessionRuns(ctx, sessionID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]RunView, 0, len(recs))
	for _, rec := range recs {
		v, err := viewRun(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Ask kinds and states, as AskView has them.
const (
	AskConfirm  = storage.AskConfirm  // a person's decision on a tool call
	AskExternal = storage.AskExternal // the result of a tool the client (or a task elsewhere) runs

	AskPending  = storage.AskPending
	AskApproved = storage.AskApproved
	AskDenied   = storage.AskDenied
	AskExpired  = storage.AskExpired
)

// AskView is something a suspended run waits for, with the tool call it is about.
type AskView struct {
	AskID     string
	Kind      string
	RequestID string // the run's
	UserID    string // the run's user
	CallID    string
	ToolName  string
	Arguments string // the arguments asked about, as the run would run them
	ArgsHash  string // their canonical hash, which an approval is bound to
	Status    string
	ExpiresAt time.Time
}

func (rt *Runtime) viewAsk(a storage.Ask, requestID string) AskView {
	return AskView{AskID: a.AskID, Kind: a.Kind, RequestID: requestID, UserID: a.UserID, CallID: a.CallID,
		ToolName: a.ToolName, Arguments: a.Arguments, ArgsHash: a.ArgsHash, Status: a.Status, ExpiresAt: a.ExpiresAt}
}

// Asks lists the asks of one of userID's runs in a state ("" for all).
func (rt *Runtime) Asks(ctx context.Context, userID, requestID, status string) ([]AskView, error) {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return nil, err
	}
	asks, err := rt.db.RunAsks(ctx, rec.ID, status)
	if err != nil {
		return nil, err
	}
	out := make([]AskView, len(asks))
	for i, a := range asks {
		out[i] = rt.viewAsk(a, rec.RequestID)
	}
	return out, nil
}

// Ask returns an ask by its id, whoever's run it belongs to: the caller decides whether it may
// see it (its user, or a reviewer answering for them).
func (rt *Runtime) Ask(ctx context.Context, askID string) (AskView, error) {
	a, err := rt.db.GetAsk(ctx, askID)
	if err != nil {
		return AskView{}, err
	}
	requestID, err := rt.requestIDOf(ctx, a.RunID)
	if err != nil {
		return AskView{}, err
	}
	return rt.viewAsk(a, requestID), nil
}

// SessionView is a conversation of one user, known to clients by its key.
type SessionView struct {
	ID     int64
	UserID string
	Key    string
	// PrincipalID and AgentID are those of the run that opened the session.
	PrincipalID *int64
	AgentID     *int64
	ParentID    *int64 // the session a subagent was spawned from
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func viewSession(s storage.Session) SessionView {
	return SessionView{ID: s.ID, UserID: s.UserID, Key: s.Key, PrincipalID: s.PrincipalID, AgentID: s.AgentID, ParentID: s.ParentID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// Session returns the session (userID, key); ErrNotFound if the user has none by that key.
func (rt *Runtime) Session(ctx context.Context, userID, key string) (SessionView, error) {
	s, err := rt.db.FindSession(ctx, userID, key)
	if err != nil {
		return SessionView{}, err
	}
	return viewSession(s), nil
}

// SessionByID returns one of userID's sessions by its id; ErrNotFound when it is another user's.
func (rt *Runtime) SessionByID(ctx context.Context, userID string, id int64) (SessionView, error) {
	s, err := rt.db.GetSession(ctx, id)
	if err != nil {
		return SessionView{}, err
	}
	if s.UserID != userID {
		return SessionView{}, ErrNotFound
	}
	return viewSession(s), nil
}

// Attachment is a file of a session: uploaded by the user or produced by the agent.
type Attachment = storage.Attachment

// Attachments lists a session's attachments.
func (rt *Runtime) Attachments(ctx context.Context, sessionID int64) ([]Attachment, error) {
	return rt.db.Attachments(ctx, sessionID)
}

// Replay returns the events of one of userID's runs after seq `after` that are stored now,
// through the follower API (the same read a stream makes before it goes live).
func (rt *Runtime) Replay(ctx context.Context, userID, requestID string, after int64) ([]Event, error) {
	f, err := rt.Follow(ctx, userID, requestID, after)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	for {
		evs, err := f.Next(ctx)
		if len(evs) == 0 || err != nil {
			if err != nil && !isEOF(err) {
				return nil, err
			}
			return out, nil
		}
		out = append(out, evs...)
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// MessageSession returns the session of one of userID's messages; ErrNotFound when the message
// is another user's.
func (rt *Runtime) MessageSession(ctx context.Context, userID string, messageID int64) (SessionView, error) {
	m, err := rt.db.GetMessage(ctx, messageID)
	if err != nil {
		return SessionView{}, err
	}
	return rt.SessionByID(ctx, userID, m.SessionID)
}
