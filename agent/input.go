package agent

import (
	"context"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/storage"
)

// consumeInputs turns supplementary input appended since the last step into user messages; the
// answer from here on goes to a new assistant message.
func (r *run) consumeInputs() {
	if r.state.Step == 0 {
		return // the first model call sees the input anyway
	}
	ctx := context.WithoutCancel(r.ctx)
	inputs, err := r.rt.db.TakeRunInputs(ctx, r.rec.ID)
	if err != nil {
		r.rt.log.ErrorContext(r.ctx, "reading supplementary input failed", "requestId", r.rec.RequestID, "err", err)
		return
	}
	for _, in := range inputs {
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
			return
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
}

// AppendInput queues supplementary input for a live (running or suspended) run; it becomes a
// user message at the next step boundary.
func (rt *Runtime) AppendInput(ctx context.Context, userID, requestID, content string) (string, error) {
	rec, err := rt.ownRun(ctx, userID, requestID)
	if err != nil {
		return "", err
	}
	if isFinal(rec.Status) {
		return "", ErrNotLive
	}
	in := storage.RunInput{RunID: rec.ID, InputID: "input_" + newEventID()[:16], Content: content}
	if err := rt.db.AddRunInput(ctx, &in); err != nil {
		return "", err
	}
	return in.InputID, nil
}
