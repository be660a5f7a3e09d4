package agent

import (
	"strings"

	"github.com/hookd/hookd/agent/model"
)

// Context compaction: with Config.ContextTokens set, a model request that would be larger than
// that is preceded by a summarising call. The model is asked to summarise the older part of the
// conversation; the run's transcript becomes that summary plus the newest step, and the model
// sees the transcript alone from then on (runState.Compacted). Later runs of the session start
// their history at the summary too (assistantBody.Compacted).

// summaryPrefix opens the user message that stands for the summarised conversation.
const summaryPrefix = "[Summary of the earlier conversation]\n"

// compactPrompt is the request of the summarising call, after the messages to summarise.
const compactPrompt = "The conversation above is about to be replaced by your summary of it, to save context. " +
	"Summarise it: the user's requests in their words, what was done (tool calls and their results), the facts, " +
	"decisions and open questions that still matter, and where the work stands. Answer with the summary only."

// estimateTokens is a rough count of a request's tokens: a quarter of the UTF-8 bytes of every
// text, tool call, image reference and tool definition, plus 4 per message. It is deliberately
// simple (no tokenizer depends on the model); for CJK text, whose characters are three bytes, it
// gives 0.75 tokens per character, about what common tokenizers give.
func estimateTokens(msgs []model.Message, specs []model.ToolSpec) int64 {
	var n int64
	for _, m := range msgs {
		b := len(m.Text) + len(m.ToolCallID) + len(m.Name)
		for _, c := range m.ToolCalls {
			b += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		for _, img := range m.Images {
			b += len(img)
		}
		n += int64(b+3)/4 + 4
	}
	for _, s := range specs {
		n += int64(len(s.Name)+len(s.Description)+len(s.Parameters)+3) / 4
	}
	return n
}

// compactionSplit is where the kept part of msgs begins: at its last assistant message (the
// newest step, with the tool results that follow it, which must stay with their call), or at its
// last message when no assistant message follows the first. It returns 0 when summarising is not
// worth a model call: the older part is only the summary of an earlier compaction, or holds
// less than half of the messages' tokens (the newest step alone is most of the request).
func compactionSplit(msgs []model.Message, compacted bool) int {
	split := len(msgs) - 1
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Role == model.RoleAssistant {
			split = i
			break
		}
	}
	if split < 1 || compacted && split < 2 || 2*estimateTokens(msgs[:split], nil) < estimateTokens(msgs, nil) {
		return 0
	}
	return split
}

// compactIfOver compacts the conversation when the next request (its messages and specs) would
// be larger than the configured budget. It reports false when the run ended (the summarising
// call failed or the run was stopped).
func (r *run) compactIfOver(specs []model.ToolSpec) bool {
	budget := r.rt.cfg.ContextTokens
	if budget <= 0 {
		return true
	}
	msgs := r.view()
	est := estimateTokens(msgs, specs)
	if est <= budget {
		return true
	}
	split := compactionSplit(msgs, r.state.Compacted)
	if split == 0 {
		return true // nothing worth summarising: the request goes as it is
	}
	r.emit(Event{Kind: KindStatus, Status: &StatusInfo{Code: StatusCompacting, Level: "INFO", Message: "正在对历史上下文做语义压缩",
		Attributes: map[string]any{"estimatedTokens": est, "contextTokens": budget, "messages": split}}})
	older := append(append([]model.Message(nil), msgs[:split]...), model.Message{Role: model.RoleUser, Text: compactPrompt})
	// A model call like any other (a scripted model answers it with the step it is at).
	resp, err := r.modelCall(model.Request{Model: r.spec.Model, Temperature: r.spec.Temperature, Messages: older,
		RunInput: r.state.Input, Step: r.state.Step}, true)
	if err != nil {
		r.modelFailed(err)
		return false
	}
	summary := strings.TrimSpace(resp.Text)
	if summary == "" {
		r.fail(CodeLLMError, "context compaction: the model's summary is empty", true, false)
		return false
	}
	r.state.Step++
	r.state.Compactions++
	own := len(r.base) // the run's own messages begin after base, or at once in a compacted view
	if r.state.Compacted {
		own = 0
	}
	for _, m := range msgs[min(own, split):split] {
		for _, c := range m.ToolCalls { // their arguments are in the event log, not kept twice
			r.state.SummarisedCalls = append(r.state.SummarisedCalls, model.ToolCall{ID: c.ID, Name: c.Name})
		}
	}
	r.state.Transcript = append([]model.Message{{Role: model.RoleUser, Text: summaryPrefix + summary}}, msgs[split:]...)
	r.state.Compacted = true
	r.checkpoint() // persist, then go on: a resume starts from the summary
	return true
}
