package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/dispatcher"
)

// Hints and custom events: one-shot information for a live run from outside its loop — a team
// message, a background result, a hook's extras (docs/receivers.md), a business middleware's
// push through the admin API. A hint is streamed whole (KindHint) and shown to the model at its
// next step; a custom event is only streamed.

// Hint delivers a one-shot hint to a live run of this process: it is announced at once and the
// model sees it at its next step (after a pause, at the first step after the resume).
// ErrNotLive when the run is not running here.
func (rt *Runtime) Hint(ctx context.Context, userID, requestID, source, text string) error {
	if _, err := rt.Run(ctx, userID, requestID); err != nil {
		return err
	}
	r := rt.liveRun(requestID)
	if r == nil {
		return ErrNotLive
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	if !r.emitLocked(hintEvent(source, text)) {
		return ErrNotLive
	}
	r.hints = append(r.hints, hintNote(source, text))
	return nil
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

// Custom emits a named extension event on a live run of this process (team_updated, ...).
func (rt *Runtime) Custom(ctx context.Context, userID, requestID, name string, value json.RawMessage) error {
	if _, err := rt.Run(ctx, userID, requestID); err != nil {
		return err
	}
	r := rt.liveRun(requestID)
	if r == nil {
		return ErrNotLive
	}
	if len(value) == 0 {
		value = json.RawMessage(`{}`)
	}
	if !json.Valid(value) {
		return fmt.Errorf("custom event value is not JSON")
	}
	if !r.emit(Event{Kind: KindCustom, Custom: &CustomInfo{Name: name, Value: value}}) {
		return ErrNotLive
	}
	return nil
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
