package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// Hints and custom events: one-shot information for a live run from outside its loop — a team
// message, a background result, a hook's extras (docs/receivers.md), a business middleware's
// push through the admin API. A hint is streamed whole (KindHint) and shown to the model at its
// next step; a custom event is only streamed.

// Hint delivers a one-shot hint to a live run of this process: it is announced at once and the
// model sees it at its next step (after a pause, at the first step after the resume).
// ErrNotLive when the run is not running here.
func (rt *Runtime) Hint(ctx context.Context, userID, requestID, source, text string) (Event, error) {
	if _, err := rt.Run(ctx, userID, requestID); err != nil {
		return Event{}, err
	}
	return rt.push(requestID, hintEvent(source, text), hintNote(source, text))
}

func hintEvent(source, text string) Event {
	return Event{Kind: KindHint, Block: &Block{ID: "blk-hint-" + newEventID()[:12], Type: BlockHint, Text: text, HintSource: optional(source)}}
}

func hintNote(source, text string) string {
	if source == "" {
		source = "system"
	}
	return "[hint from " + source + "] " + text
}

// Custom emits a named extension event on a live run of this process (team_updated, ...); the
// value is a JSON object. ErrNotLive when the run is not running here.
func (rt *Runtime) Custom(ctx context.Context, userID, requestID, name string, value json.RawMessage) (Event, error) {
	if _, err := rt.Run(ctx, userID, requestID); err != nil {
		return Event{}, err
	}
	if len(bytes.TrimSpace(value)) == 0 || bytes.TrimSpace(value)[0] != '{' || !json.Valid(value) {
		return Event{}, hookdtype.Invalid("value", "must be a JSON object")
	}
	return rt.push(requestID, Event{Kind: KindCustom, Custom: &CustomInfo{Name: name, Value: value}}, "")
}

// push emits ev on the run, with the hint note for the model if any, and returns ev once it is
// durable (persist, then answer).
func (rt *Runtime) push(requestID string, ev Event, note string) (Event, error) {
	r := rt.liveRun(requestID)
	if r == nil {
		return Event{}, fmt.Errorf("%w: run %s", ErrNotLive, requestID)
	}
	r.emitMu.Lock()
	ev, ok := r.emitLocked(ev)
	if ok && note != "" {
		r.hints = append(r.hints, note)
	}
	r.emitMu.Unlock()
	if !ok {
		return Event{}, fmt.Errorf("%w: run %s", ErrNotLive, requestID)
	}
	rt.elog.barrier()
	return ev, nil
}

// Push is what business middleware pushes into a user's session: a hint (Hint, from
// HintSource) or a custom event (Name, Value).
type Push struct {
	Hint       string
	HintSource string
	Name       string
	Value      json.RawMessage
}

// PushToSession delivers p to the run in progress in userID's session key and returns its event
// once durable. ErrNotFound when the user has no such session; ErrNotLive when the session has
// no run running in this process (none, or suspended: a paused run shows nothing until it goes
// on, or another daemon's).
func (rt *Runtime) PushToSession(ctx context.Context, userID, key string, p Push) (Event, error) {
	if p.Name == "" && strings.TrimSpace(p.Hint) == "" {
		return Event{}, hookdtype.Invalid("hint", "is required when no custom event is named")
	}
	s, err := rt.Session(ctx, userID, key)
	if err != nil {
		return Event{}, err
	}
	v, err := rt.LiveRun(ctx, s.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return Event{}, fmt.Errorf("%w: session %s has no run in progress", ErrNotLive, key)
	case err != nil:
		return Event{}, err
	case v.Status != StatusRunning:
		return Event{}, fmt.Errorf("%w: the run %s of session %s is %s", ErrNotLive, v.RequestID, key, v.Status)
	}
	if p.Name != "" {
		return rt.Custom(ctx, userID, v.RequestID, p.Name, p.Value)
	}
	return rt.Hint(ctx, userID, v.RequestID, p.HintSource, p.Hint)
}

// showExtras streams what the hooks sent with their verdict, hook by hook: the hint (its source
// the hook's name, kept for the model's next step), the custom events, and — for the tool call
// p a pre_tool_use hook decided about — the tool event.
func (r *run) showExtras(xs []dispatcher.Extra, p *pendingCall) {
	for _, x := range xs {
		if x.Hint != "" {
			r.emit(hintEvent(x.HookName, x.Hint))
			r.state.Hints = append(r.state.Hints, hintNote(x.HookName, x.Hint))
		}
		for _, e := range x.Events {
			r.emit(Event{Kind: KindCustom, Custom: &CustomInfo{Name: e.Name, Value: e.Value}})
		}
		if x.ToolEvent != nil && p != nil {
			r.emit(Event{Kind: KindToolEvent, ToolEvent: &ToolSideEvent{CallID: p.ID, Name: p.Name,
				Category: x.ToolEvent.Category, Payload: x.ToolEvent.Payload, UserMessage: x.ToolEvent.UserMessage}})
		}
	}
}

// keepHints moves the hints other goroutines delivered into the run's state (the run goroutine
// calls it before persisting the state).
func (r *run) keepHints() {
	r.emitMu.Lock()
	r.state.Hints, r.hints = append(r.state.Hints, r.hints...), nil
	r.emitMu.Unlock()
}

// takeHints moves the hints delivered since the last step into the conversation.
func (r *run) takeHints() {
	r.keepHints()
	for _, h := range r.state.Hints {
		r.state.Transcript = append(r.state.Transcript, model.Message{Role: model.RoleUser, Text: h})
	}
	r.state.Hints = nil
}
