package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// run is one executing run. Its goroutine owns state; emit may be called from tool goroutines.
type run struct {
	rt     *Runtime
	rec    storage.Run
	spec   runSpec
	state  runState
	ctx    context.Context
	cancel context.CancelCauseFunc
	// base is the conversation before this run plus its user message; the model sees base and
	// then state.Transcript.
	base []model.Message
	// inModel is set while a model call is in flight (owned by the run goroutine).
	inModel bool
	// pauseRequested asks the loop to suspend at the next step boundary.
	pauseRequested atomic.Bool
	emitMu         sync.Mutex
	seq            int64 // the last seq emitted (or stored, for a resumed run)
	opened         bool  // this process registered the run's feed
	left           bool  // the run left running (leave): it emits nothing more
	// hints delivered to the live run by other goroutines (Runtime.Hint), for the model's next
	// step; guarded by emitMu, so a hint is either announced and kept or refused (hints.go).
	hints []string
}

// runState is the run's resume point, persisted at every step boundary and pause.
type runState struct {
	Input      string          `json:"input"` // the input after the user_message hooks
	Step       int             `json:"step"`  // model calls made
	Transcript []model.Message `json:"transcript"`
	Usage      Usage           `json:"usage"`
	Text       string          `json:"text"` // the text of the current step's model call
	// Answer is the text of the turn's earlier steps that goes to the current assistant
	// message: a turn's answer is all it said (answer), not its last step.
	Answer   string `json:"answer,omitempty"`
	Thinking string `json:"thinking"` // the last reasoning
	// Pending are the tool calls of the current step until they all have results.
	Pending []pendingCall `json:"pending,omitempty"`
	// AssistantMessageID is the message answers go to now (supplementary input starts a new one).
	AssistantMessageID int64 `json:"assistantMessageId,omitempty"`
	// BudgetBase is the token count when the budget last started counting (a resume restarts it).
	BudgetBase int64 `json:"budgetBase,omitempty"`
	// SubagentTokens are the tokens the run's subagents spent: they count against its budget.
	SubagentTokens int64 `json:"subagentTokens,omitempty"`
	// Sent are the files the turn sent to the user (send_attachment): data blocks of its answer.
	Sent []DataContent `json:"sent,omitempty"`
	// Hints were shown to the user and wait for the model's next step (hints.go).
	Hints []string `json:"hints,omitempty"`
	// Compacted says the transcript starts with a summary that stands for the conversation
	// before it, base included: the model sees the transcript alone (compact.go). Compactions
	// counts the summarising model calls among Step, which the step limit does not count.
	Compacted   bool `json:"compacted,omitempty"`
	Compactions int  `json:"compactions,omitempty"`
	// SummarisedCalls are the run's own tool calls a summary replaced (id and name), kept for the
	// answer's record (the session history lists them); the model no longer sees them.
	SummarisedCalls []model.ToolCall `json:"summarisedCalls,omitempty"`
}

type userBody struct {
	Text   string   `json:"text"`
	Images []string `json:"images,omitempty"`
	// Supplementary input is also in the run's transcript; the model history takes it from there.
	Supplementary bool `json:"supplementary,omitempty"`
	// Refused: the run ended without taking this input (a user_message hook denied it, or the run
	// ended before one decided), so no later run's model sees it either.
	Refused bool `json:"refused,omitempty"`
}

type assistantBody struct {
	Text           string          `json:"text"`
	Thinking       string          `json:"thinking,omitempty"`
	Transcript     []model.Message `json:"transcript,omitempty"`
	Usage          *Usage          `json:"usage,omitempty"`
	GenerateReason string          `json:"generateReason,omitempty"`
	MsgUUID        string          `json:"msgUuid,omitempty"`
	Error          string          `json:"error,omitempty"`
	// Compacted: Transcript begins with a summary of everything before it (later runs' history
	// starts there); SummarisedCalls are the run's tool calls the summary stands for.
	Compacted       bool             `json:"compacted,omitempty"`
	SummarisedCalls []model.ToolCall `json:"summarisedCalls,omitempty"`
}

func (rt *Runtime) newRun(rec storage.Run, spec runSpec, st runState) *run {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &run{rt: rt, rec: rec, spec: spec, state: st, ctx: ctx, cancel: cancel}
}

// emit stamps e with the run's next seq and queues it for the log. It reports false, emitting
// nothing, once the run left running: its status and last events are written, and an event
// after them would follow its end.
func (r *run) emit(e Event) bool {
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	_, ok := r.emitLocked(e)
	return ok
}

// emitLocked is emit for a caller holding emitMu; it returns the event as stamped.
func (r *run) emitLocked(e Event) (Event, bool) {
	if r.left {
		r.rt.log.WarnContext(r.ctx, "event of a run that left running dropped", "requestId", r.rec.RequestID, "kind", e.Kind)
		return Event{}, false
	}
	if !r.opened {
		r.rt.elog.open(r.rec.ID, r.seq)
		r.opened = true
	}
	e = r.stamp(e)
	r.rt.elog.append(r.rec.ID, e)
	return e, true
}

// stamp gives e the run's next seq and its ids; the caller holds emitMu.
func (r *run) stamp(e Event) Event {
	r.seq++
	e.Seq, e.RunID, e.ID, e.At = r.seq, r.rec.RequestID, newEventID(), time.Now().UTC()
	if e.ReplyID == "" {
		e.ReplyID = r.spec.ReplyID
	}
	if e.Step == 0 {
		e.Step = r.state.Step
	}
	e.TotalTokens = r.state.Usage.Total()
	return e
}

func (r *run) traceID() string {
	if r.spec.TraceID != "" {
		return r.spec.TraceID
	}
	return r.rec.RequestID
}

func (r *run) hookEvent(t dispatcher.HookType, c any) dispatcher.Event {
	sid := r.spec.SessionID
	return dispatcher.Event{HookType: t, TraceID: r.traceID(), SessionID: &sid, PrincipalID: r.spec.PrincipalID,
		AgentID: r.spec.AgentID, Context: c}
}

// observe queues an observational hook event; it never fails the run.
func (r *run) observe(t dispatcher.HookType, c any) {
	if _, err := r.rt.hooks.Observe(context.WithoutCancel(r.ctx), r.hookEvent(t, c)); err != nil {
		r.rt.log.ErrorContext(r.ctx, "observational hook event not queued", "hookType", t, "requestId", r.rec.RequestID, "err", err)
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// userMessage is the user_message event of a text the user gave this run: its first input or
// one sent while it runs.
func (r *run) userMessage(input string) dispatcher.Event {
	spec := &r.spec
	ts := dispatcher.TriggerSource{SourceType: spec.TriggerSource, ChannelType: optional(spec.ChannelType),
		ChannelProvider: optional(spec.ChannelProvider)}
	ev := r.hookEvent(dispatcher.UserMessage, &dispatcher.UserMessageContext{
		UserInput: input, ChatMode: "single_chat", TriggerSource: ts, BizKey: optional(spec.BizKey),
		UserNickname: optional(spec.UserNickname)})
	ev.Enforce = dispatcher.RefuseAsk("nobody can be asked before the run takes the input")
	return ev
}

// execute runs a new run from its user message to its end.
func (r *run) execute() {
	spec := &r.spec
	dec, err := r.rt.hooks.Intercept(r.ctx, r.userMessage(spec.Input))
	if err != nil {
		r.fail(CodeInternal, "user_message hook: "+err.Error(), false, false)
		return
	}
	r.showExtras(dec.Extras, nil)
	input := spec.Input
	switch dec.Decision {
	case dispatcher.Deny: // an ask too: nobody can be asked before the run starts (userMessage)
		reason := dec.Reason
		if reason == "" {
			reason = "the input was refused by policy"
		}
		r.fail(CodeHookDenied, reason, false, false)
		return
	case dispatcher.Modify:
		input = *dec.ModifiedValue
		body := mustJSON(userBody{Text: input, Images: spec.Images})
		if err := r.rt.db.UpdateMessage(r.ctx, spec.UserMessageID, body); err != nil {
			r.fail(CodeInternal, err.Error(), true, false)
			return
		}
	}
	r.state.Input = input
	r.observe(dispatcher.SessionStart, &dispatcher.SessionStartContext{NewSession: spec.NewSession})

	if err := r.loadBase(); err != nil {
		r.fail(CodeInternal, err.Error(), true, false)
		return
	}
	r.loop()
}

// loadBase reads the conversation before this run and the run's own user message.
func (r *run) loadBase() error {
	history, err := r.rt.history(r.ctx, r.spec.SessionID, r.rec.ID)
	if err != nil {
		return err
	}
	r.base = append(history, model.Message{Role: model.RoleUser, Text: r.state.Input, Images: r.spec.Images})
	return nil
}

// history is the conversation of the session's earlier runs, as the model sees it.
func (rt *Runtime) history(ctx context.Context, sessionID, excludeRun int64) ([]model.Message, error) {
	msgs, err := rt.db.Messages(ctx, sessionID, time.Time{})
	if err != nil {
		return nil, err
	}
	var out []model.Message
	for _, m := range msgs {
		if m.RunID != nil && *m.RunID == excludeRun {
			continue
		}
		switch m.Role {
		case model.RoleSystem: // a context reset: forget what came before
			out = out[:0]
		case model.RoleUser:
			var b userBody
			if err := json.Unmarshal(m.Body, &b); err != nil {
				return nil, fmt.Errorf("%w: message %d of session %d: %v", ErrBadState, m.ID, sessionID, err)
			}
			if !b.Supplementary && !b.Refused {
				out = append(out, model.Message{Role: model.RoleUser, Text: b.Text, Images: b.Images})
			}
		case model.RoleAssistant:
			var b assistantBody
			if err := json.Unmarshal(m.Body, &b); err != nil {
				return nil, fmt.Errorf("%w: message %d of session %d: %v", ErrBadState, m.ID, sessionID, err)
			}
			if b.Compacted {
				out = out[:0] // the transcript's summary stands for what came before
			}
			out = append(out, b.Transcript...)
		}
	}
	return out, nil
}

// loop is the ReAct loop: settle the tool calls still pending (after a resume), then call the
// model and run the tools it asks for, until it answers or the run pauses.
func (r *run) loop() {
	if len(r.state.Pending) > 0 && !r.settle() {
		return
	}
	for {
		r.pollControl() // a stop or suspend asked through another replica
		if r.ctx.Err() != nil {
			r.stopped()
			return
		}
		if r.pauseRequested.Load() {
			r.suspend(SuspendManual, "suspended by the user")
			return
		}
		if r.overBudget() {
			r.requestStop()
			return
		}
		r.consumeInputs()
		r.takeHints()
		if r.state.Step-r.state.Compactions >= r.maxIters() {
			r.emit(Event{Kind: KindMaxIters, MaxIters: &MaxItersInfo{MaxIters: r.maxIters(), CurrentIter: r.state.Step}})
			r.finish(ReasonMaxIterations)
			return
		}
		specs := r.toolSpecs()
		if !r.compactIfOver(specs) {
			return
		}
		r.checkpoint()
		r.state.Step++
		r.inModel = true
		resp, err := r.callModel(r.view(), specs)
		if err != nil {
			r.modelFailed(err)
			return
		}
		r.inModel = false
		if r.spec.NoTools {
			resp.ToolCalls = nil // a single-answer run takes the text and nothing else
		}
		r.state.Answer += r.state.Text // the previous step's text is part of the answer
		r.state.Text, r.state.Thinking = resp.Text, resp.Thinking
		r.state.Transcript = append(r.state.Transcript,
			model.Message{Role: model.RoleAssistant, Text: resp.Text, Thinking: resp.Thinking, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			// Input appended while the model answered is the user's next word, not to be dropped
			// with the run's end: the model answers it in a step of its own.
			if r.consumeInputs() > 0 {
				continue
			}
			r.finish(ReasonModelStop)
			return
		}
		r.state.Pending = make([]pendingCall, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			r.state.Pending[i] = pendingCall{ID: c.ID, Name: c.Name, Raw: c.Arguments, Stage: stageNew}
		}
		// The model's answer is saved before its calls are decided and run: a crash meanwhile
		// resumes with the calls, rather than asking the model again, which would stream the
		// step a second time and spend tokens the run's total no longer counted.
		r.checkpoint()
		if !r.settle() {
			return
		}
	}
}

// view is what the model sees next: the conversation before the run and the run's transcript,
// or the transcript alone once it was compacted.
func (r *run) view() []model.Message {
	if r.state.Compacted {
		return append([]model.Message(nil), r.state.Transcript...)
	}
	return append(append([]model.Message(nil), r.base...), r.state.Transcript...)
}

// toolSpecs are the tools the model is offered.
func (r *run) toolSpecs() []model.ToolSpec {
	specs := r.rt.tools.Specs()
	if r.spec.NoTools {
		specs = nil
	}
	tspecs := make([]model.ToolSpec, len(specs), len(specs)+len(r.spec.ExternalTools))
	for i, s := range specs {
		tspecs[i] = model.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
	}
	tspecs = append(tspecs, r.spec.ExternalTools...)
	if r.canSpawn() {
		tspecs = append(tspecs, spawnSpec)
	}
	return tspecs
}

// callModel makes one step's model call with the tools.
func (r *run) callModel(msgs []model.Message, tspecs []model.ToolSpec) (model.Response, error) {
	return r.modelCall(model.Request{Model: r.spec.Model, Temperature: r.spec.Temperature, Messages: msgs, Tools: tspecs,
		RunInput: r.state.Input, Step: r.state.Step - 1}, false)
}

// modelCall makes one model call, streaming its pieces as events (none of them when quiet: a
// summary is no part of the answer), and retries what is worth retrying with status events in
// between.
func (r *run) modelCall(req model.Request, quiet bool) (model.Response, error) {
	backoff := r.rt.cfg.ModelBackoff
	for attempt := 0; ; attempt++ {
		req.Attempt = attempt
		r.emit(Event{Kind: KindModelStarted})
		s := &streamer{r: r, quiet: quiet}
		start := time.Now()
		mctx, endSpan := tracing.StartModelCall(r.ctx, cmp.Or(req.Model, r.rt.cfg.ModelName), attempt)
		resp, err := r.rt.model.Stream(mctx, req, s.chunk)
		endSpan(err)
		s.closeBlock()
		if err == nil {
			if resp.Usage.Duration == 0 {
				resp.Usage.Duration = time.Since(start)
			}
			r.state.Usage.add(resp.Usage)
			u := usageOf(resp.Usage, resp.Model)
			r.rt.m.modelCall(resp.Model, resp.Usage.Duration.Seconds(), true, *u)
			r.emit(Event{Kind: KindModelEnded, Usage: u})
			r.observe(dispatcher.PostLLMCall, &dispatcher.PostLLMCallContext{Model: resp.Model, Step: r.state.Step,
				DurationMs: resp.Usage.Duration.Milliseconds(), PromptTokens: resp.Usage.InputTokens,
				CompletionTokens: resp.Usage.OutputTokens, TotalTokens: resp.Usage.Total(),
				CachedTokens: resp.Usage.CachedTokens, ReasoningTokens: resp.Usage.ReasoningTokens})
			for i := range resp.ToolCalls {
				if resp.ToolCalls[i].ID == "" {
					resp.ToolCalls[i].ID = "call_" + newEventID()[:12]
				}
			}
			return resp, nil
		}
		r.rt.m.modelCall(r.modelName(), time.Since(start).Seconds(), false, Usage{})
		r.emit(Event{Kind: KindModelEnded, Usage: &Usage{Seconds: time.Since(start).Seconds()}})
		if !quiet {
			r.state.Text = s.text // what streamed before the failure is kept if the run stops here
		}
		var me *model.Error
		if r.ctx.Err() != nil || !errors.As(err, &me) || !me.Retryable() || attempt >= r.rt.cfg.ModelRetries {
			return model.Response{}, err
		}
		wait := max(backoff, me.RetryAfter)
		wait = min(wait, 30*time.Second)
		code, msg := StatusNetworkRetrying, "模型网络抖动，正在重连中"
		switch me.Kind {
		case model.ErrRateLimited:
			code, msg = StatusRateLimited, "模型限流中，正在重试"
		case model.ErrEmpty:
			code, msg = StatusEmptyRetrying, "模型返回空回复，正在自动重试"
		}
		r.emit(Event{Kind: KindStatus, Status: &StatusInfo{Code: code, Level: "WARN", Message: msg,
			Attributes: map[string]any{"attempt": attempt + 1, "maxRetries": r.rt.cfg.ModelRetries, "backoffMs": wait.Milliseconds()}}})
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return model.Response{}, context.Cause(r.ctx)
		}
		backoff *= 2
	}
}

// streamer turns model chunks into block and tool-call events.
type streamer struct {
	r         *run
	open      *Block // the open thinking or text block
	calls     map[int]model.ToolCall
	text      string
	sawOutput bool
	quiet     bool // only recoveries are shown
}

func (s *streamer) chunk(c model.Chunk) {
	if s.quiet && c.Kind != model.ChunkRecovering {
		return
	}
	switch c.Kind {
	case model.ChunkThinking, model.ChunkText:
		typ := BlockText
		if c.Kind == model.ChunkThinking {
			typ = BlockThinking
		} else {
			s.text += c.Text
		}
		if s.open == nil || s.open.Type != typ {
			s.closeBlock()
			s.open = &Block{ID: "blk-" + newEventID()[:12], Type: typ}
			s.r.emit(Event{Kind: KindBlockStarted, Block: &Block{ID: s.open.ID, Type: typ}})
		}
		s.r.emit(Event{Kind: KindBlockDelta, Block: &Block{ID: s.open.ID, Type: typ, Delta: c.Text}})
	case model.ChunkToolCallStart:
		if s.r.spec.NoTools {
			return // a single-answer run drops the model's tool calls
		}
		s.closeBlock()
		if s.calls == nil {
			s.calls = map[int]model.ToolCall{}
		}
		s.calls[c.Index] = model.ToolCall{ID: c.ToolCallID, Name: c.ToolName}
		s.r.emit(Event{Kind: KindToolCallStarted, Tool: &ToolInfo{CallID: c.ToolCallID, Name: c.ToolName}})
	case model.ChunkRecovering:
		// The provider goes on from where its stream broke: the open block stays open, as the
		// text that follows continues it.
		s.r.emit(Event{Kind: KindStatus, Status: &StatusInfo{Code: StatusAutoRecovering, Level: "WARN",
			Message: "网络类失败已被拦截，正在从失败点自动恢复", Attributes: map[string]any{"attempt": c.Attempt,
				"maxRetries": c.MaxAttempts, "error": c.Text}}})
	case model.ChunkToolCallDelta:
		if s.r.spec.NoTools {
			return
		}
		tc := s.calls[c.Index]
		s.r.emit(Event{Kind: KindToolCallDelta, Tool: &ToolInfo{CallID: tc.ID, Name: tc.Name, ArgsDelta: c.ArgsDelta}})
	}
}

func (s *streamer) closeBlock() {
	if s.open != nil {
		s.r.emit(Event{Kind: KindBlockEnded, Block: &Block{ID: s.open.ID, Type: s.open.Type}})
		s.open = nil
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// attach records a file a tool wrote as a session attachment and announces it.
func (r *run) attach(f tools.File) (AttachmentInfo, bool) {
	name := path.Base(f.Path)
	ext := strings.TrimPrefix(path.Ext(name), ".")
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	msgID := r.assistantID()
	a, created, err := r.rt.db.UpsertAttachment(r.ctx, storage.Attachment{SessionID: r.spec.SessionID, MessageID: &msgID,
		Path: "/workspace/" + strings.TrimPrefix(f.Path, "/"), FileName: name, Extension: ext, ContentType: ctype,
		Size: f.Size, Source: "AGENT_GENERATED"})
	if err != nil {
		r.rt.log.ErrorContext(r.ctx, "recording attachment failed", "path", f.Path, "err", err)
		return AttachmentInfo{}, false
	}
	change := "UPDATED"
	if created {
		change = "CREATED"
	}
	return AttachmentInfo{ID: a.ID, SessionID: a.SessionID, MessageID: a.MessageID,
		FileName: a.FileName, Extension: a.Extension, ContentType: a.ContentType, Size: a.Size, VirtualPath: a.Path,
		Source: a.Source, ChangeType: change}, true
}

// checkpoint persists the resume point.
func (r *run) checkpoint() {
	r.keepHints()
	r.rec.State = mustJSON(r.state)
	err := r.rt.db.UpdateOwnedRun(context.WithoutCancel(r.ctx), &r.rec)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		r.cancel(errLostLease) // another replica took it over: write nothing more
	case err != nil:
		r.rt.log.ErrorContext(r.ctx, "run checkpoint failed", "requestId", r.rec.RequestID, "err", err)
	}
}

// leaving reports whether the run's context ended for a reason that leaves its work unfinished
// rather than interrupted: a shutdown (it resumes later) or a takeover by another replica.
func (r *run) leaving() bool {
	if r.ctx.Err() == nil {
		return false
	}
	cause := context.Cause(r.ctx)
	return errors.Is(cause, errShutdown) || errors.Is(cause, errLostLease)
}

// abandon lets the goroutine of a run another replica took over end without writing anything
// more: the run is that replica's now.
func (r *run) abandon() {
	r.rt.log.WarnContext(r.ctx, "run abandoned: another replica took it over", "requestId", r.rec.RequestID)
	r.rt.elog.close(r.rec.ID)
	r.rt.forget(r)
}

// modelFailed ends the run after a model error that was not (or no longer) worth retrying.
func (r *run) modelFailed(err error) {
	if r.ctx.Err() != nil {
		r.stopped()
		return
	}
	var me *model.Error
	if errors.As(err, &me) && me.Kind != model.ErrFatal {
		r.fail(CodeLLMNetwork, err.Error(), true, me.Kind == model.ErrNetwork)
		return
	}
	r.fail(CodeLLMError, err.Error(), false, false)
}

// stopped ends a run whose context was cancelled: by the user (INTERRUPTED) or by shutdown
// (suspended, to be resumed after the restart).
func (r *run) stopped() {
	if errors.Is(context.Cause(r.ctx), errLostLease) {
		r.abandon()
		return
	}
	if errors.Is(context.Cause(r.ctx), errShutdown) {
		if r.inModel { // the call is made again after the restart
			r.state.Step--
			r.state.Text = "" // what it streamed so far is streamed again
			r.inModel = false
		}
		r.suspend(SuspendShutdown, "the daemon is shutting down")
		return
	}
	r.end(OutcomeInterrupted, ReasonInterrupted, "", "")
}

// finish ends the run with an answer.
func (r *run) finish(reason string) { r.end(OutcomeCompleted, reason, "", "") }

// fail ends the run with an error.
func (r *run) fail(code, msg string, recoverable, network bool) {
	r.endWith(OutcomeFailed, "", code, msg, recoverable, network)
}

func (r *run) end(outcome, reason, code, msg string) {
	r.endWith(outcome, reason, code, msg, false, false)
}

// endWith records the run's answer, then its final status with the events that announce it (one
// transition), so a client that sees the end can start the next run on the session at once.
// Then it reports agent_completion.
func (r *run) endWith(outcome, reason, code, msg string, recoverable, network bool) {
	ctx := context.WithoutCancel(r.ctx)
	if r.state.Input == "" {
		// The run never took its input (it is set once the user_message hooks admit it): marked
		// before the end is announced, so that the session's next run cannot show it to the model.
		body := mustJSON(userBody{Text: r.spec.Input, Images: r.spec.Images, Refused: true})
		if err := r.rt.db.UpdateMessage(ctx, r.spec.UserMessageID, body); err != nil {
			r.rt.log.ErrorContext(r.ctx, "marking a refused input failed", "requestId", r.rec.RequestID, "err", err)
		}
	}
	usage := r.state.Usage
	body := assistantBody{Text: r.answer(), Thinking: r.state.Thinking, Transcript: r.state.Transcript, Usage: &usage,
		GenerateReason: reason, MsgUUID: newUUID(), Error: msg, Compacted: r.state.Compacted,
		SummarisedCalls: r.state.SummarisedCalls}
	b := mustJSON(body)
	if err := r.rt.db.UpdateMessage(ctx, r.assistantID(), b); err != nil {
		r.rt.log.ErrorContext(r.ctx, "saving the answer failed", "requestId", r.rec.RequestID, "err", err)
	}
	r.state.Pending = nil
	r.rec.ErrorCode, r.rec.ErrorMessage = code, msg
	var evs []Event
	if outcome != OutcomeFailed {
		evs = append(evs, Event{Kind: KindResult, Result: &ResultInfo{MessageID: r.assistantID(), MsgUUID: body.MsgUUID,
			Name: r.rt.cfg.AgentName, Text: r.answer(), Data: r.state.Sent, GenerateReason: reason, Usage: &usage, At: time.Now().UTC()}})
	}
	duration := time.Since(r.spec.StartedAt)
	evs = append(evs, Event{Kind: KindRunEnded, End: &EndInfo{Outcome: outcome, ErrorCode: code, ErrorMessage: msg, Recoverable: recoverable,
		NetworkError: network, StepCount: r.state.Step, DurationMs: duration.Milliseconds(), MessageID: r.assistantID(), Usage: &usage}})
	status := map[string]string{OutcomeCompleted: storage.RunCompleted, OutcomeFailed: storage.RunFailed,
		OutcomeInterrupted: storage.RunInterrupted}[outcome]
	if !r.leave(status, evs...) {
		return // another replica took it over: its end is that replica's to announce
	}
	r.rt.m.runEnded(outcome)
	r.observe(dispatcher.AgentCompletion, &dispatcher.AgentCompletionContext{Succeeded: outcome == OutcomeCompleted,
		ErrorMessage: optional(msg), ErrorCode: optional(code), Model: r.modelName(), DurationMs: duration.Milliseconds(),
		TotalTokens: usage.Total(), StepCount: r.state.Step, TriggerSourceType: r.spec.TriggerSource,
		RequestID: r.rec.RequestID, AssistantMessageID: ptrTo(r.assistantID()), UserMessageID: &r.spec.UserMessageID,
		NewSession: r.spec.NewSession, AgentName: r.rt.cfg.AgentName, ChannelProvider: optional(r.spec.ChannelProvider)})
}

// suspend pauses the run: it saves its state with the events that say why and what waits (one
// transition), and lets its goroutine end. A resume starts a new one from the saved state.
func (r *run) suspend(reason, msg string) { r.suspendWith(reason, msg, nil) }

func (r *run) suspendWith(reason, msg string, async *AsyncInfo) {
	if !r.leave(storage.RunSuspended, r.pauseEvents(&SuspendInfo{Reason: reason, Message: msg, Async: async})...) {
		return
	}
	ctx := context.WithoutCancel(r.ctx)
	r.rt.afterSuspend(ctx, r.rec)
	if errors.Is(context.Cause(r.ctx), errStopped) {
		// A stop that came while the pause was being recorded (a run that reached an ask at
		// once, say) found the run live and cancelled it, too late for the run to see: it is
		// suspended now, so it ends as a suspended run's stop does.
		if cur, err := r.rt.db.RunsByID(ctx, r.rec.ID); err == nil && cur.Status == storage.RunSuspended {
			if err := r.rt.stopSuspended(ctx, cur); err != nil && !errors.Is(err, ErrNotLive) {
				r.rt.log.WarnContext(ctx, "stopping a run stopped while it paused failed", "requestId", r.rec.RequestID, "err", err)
			}
		}
	}
	r.rt.m.runEnded("suspended")
}

// pauseEvents are the events that record a pause: the state change, then the pause with what
// waits and where the run stands (filled in on pause).
func (r *run) pauseEvents(pause *SuspendInfo) []Event {
	pause.PendingCalls, pause.MessageID, pause.Step, pause.Answer = r.pendingCalls(), r.assistantID(), r.state.Step, r.answer()
	v := mustJSON(map[string]string{"status": "suspended", "reason": pause.Reason})
	return []Event{{Kind: KindCustom, Custom: &CustomInfo{Name: "state_updated", Value: v}}, {Kind: KindSuspended, Suspend: pause}}
}

// answer is the text the turn said so far, for its current assistant message.
func (r *run) answer() string { return r.state.Answer + r.state.Text }

func (r *run) maxIters() int {
	if r.spec.MaxIters > 0 && r.spec.MaxIters < r.rt.cfg.MaxIters {
		return r.spec.MaxIters
	}
	return r.rt.cfg.MaxIters
}

func (r *run) assistantID() int64 {
	if r.state.AssistantMessageID != 0 {
		return r.state.AssistantMessageID
	}
	return r.spec.AssistantMessageID
}

func ptrTo[T any](v T) *T { return &v }

func (r *run) modelName() string {
	if r.spec.Model != "" {
		return r.spec.Model
	}
	return r.rt.cfg.ModelName
}
