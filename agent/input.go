package agent

import (
	"cmp"
	"context"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// consumeInputs turns supplementary input appended since the last step into user messages; the
// answer from here on goes to a new assistant message. It returns how many the hooks let in.
func (r *run) consumeInputs() (admittedN int) {
	if r.state.Step == 0 {
		return 0 // the first model call sees the input anyway
	}
	ctx := context.WithoutCancel(r.ctx)
	inputs, err := r.rt.db.TakeRunInputs(ctx, r.rec.ID)
	if err != nil {
		r.rt.log.ErrorContext(r.ctx, "reading supplementary input failed", "requestId", r.rec.RequestID, "err", err)
		return 0
	}
	for _, in := range inputs {
		content, admitted := r.admitInput(in)
		if !admitted {
			continue
		}
		admittedN++
		in.Content = content
		// The answer so far stays with the current assistant message.
		so := assistantBody{Text: r.answer(), Thinking: r.state.Thinking}
		if err := r.rt.db.UpdateMessage(ctx, r.assistantID(), mustJSON(so)); err != nil {
			r.rt.log.ErrorContext(r.ctx, "saving the answer so far failed", "requestId", r.rec.RequestID, "err", err)
		}
		user := &storage.Message{SessionID: r.spec.SessionID, RunID: &r.rec.ID, Role: model.RoleUser}
		user.Body = mustJSON(userBody{Text: in.Content, Supplementary: true})
		asst := &storage.Message{SessionID: r.spec.SessionID, RunID: &r.rec.ID, Role: model.RoleAssistant, Body: []byte(`{}`)}
		if err := r.rt.db.AddMessages(ctx, []*storage.Message{user, asst}); err != nil {
			r.rt.log.ErrorContext(r.ctx, "recording supplementary input failed", "requestId", r.rec.RequestID, "err", err)
			return admittedN - 1
		}
		r.state.AssistantMessageID = asst.ID
		r.state.Answer, r.state.Text = "", "" // the answer from here on is the new message's
		r.state.Transcript = append(r.state.Transcript, model.Message{Role: model.RoleUser, Text: in.Content})
		r.emit(Event{Kind: KindInputConsumed, Input: &InputInfo{InputID: in.InputID, Content: in.Content,
			UserMessageID: user.ID, AssistantMessageID: asst.ID}})
		// The input interrupts the turn: it is shown as a hint from the user (the model has it
		// as a user message already).
		h := hintEvent(r.spec.UserID, in.Content)
		h.Block.InputID = in.InputID
		r.emit(h)
	}
	return admittedN
}

// admitInput asks the user_message hooks about a supplementary input, as about the run's first
// input: what the model gets is what they allow (a modify's text). A deny or an ask (nobody can
// be asked in the middle of a step) keeps the input from the model, and a hint tied to it says
// why; so does a hook that could not be asked at all.
func (r *run) admitInput(in storage.RunInput) (string, bool) {
	// Taken from the queue already: asked to the end even if the run is being stopped, so that a
	// stop's cancellation does not decide it (the hooks' own timeouts bound the call).
	dec, err := r.rt.hooks.Intercept(context.WithoutCancel(r.ctx), r.userMessage(in.Content))
	refused := func(reason string) (string, bool) {
		h := hintEvent("hookd", "this input was not given to the agent: "+reason)
		h.Block.InputID, h.Block.Refused = in.InputID, true
		r.emit(h)
		return "", false
	}
	if err != nil {
		r.rt.log.ErrorContext(r.ctx, "user_message hook on supplementary input failed", "requestId", r.rec.RequestID, "err", err)
		return refused("its user_message hooks could not be asked")
	}
	r.showExtras(dec.Extras, nil)
	switch dec.Decision {
	case dispatcher.Deny: // an ask too (userMessage)
		return refused(cmp.Or(dec.Reason, "the input was refused by policy"))
	case dispatcher.Modify:
		return *dec.ModifiedValue, true
	}
	return in.Content, true
}

// AppendInput queues supplementary input for a live (running or suspended) run; it becomes a
// user message at the next step boundary.
func (rt *Runtime) AppendInput(ctx context.Context, userID, requestID, content string) (string, error) {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return "", err
	}
	return rt.appendInput(ctx, rec, content)
}

// appendInput queues content for rec, a run of the caller's.
func (rt *Runtime) appendInput(ctx context.Context, rec storage.Run, content string) (string, error) {
	if isFinal(rec.Status) {
		return "", ErrNotLive
	}
	in := storage.RunInput{RunID: rec.ID, InputID: "input_" + newEventID()[:16], Content: content}
	if err := rt.db.AddRunInput(ctx, &in); err != nil {
		return "", err
	}
	return in.InputID, nil
}
