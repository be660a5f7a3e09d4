package agent

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/tracing"
)

// runCall produces p's result: it runs the tool, or reports why it did not.
func (r *run) runCall(p *pendingCall) {
	start := time.Now()
	started := &ToolInfo{CallID: p.ID, Name: p.Name}
	switch p.Stage { // a call that will not run says so from its start: it is not running
	case stageDenied:
		started.State = ToolDenied
	case stageError:
		started.State = ToolError
	}
	r.emit(Event{Kind: KindToolResultStarted, Tool: started})
	done := func(state, output, errMsg string) {
		p.Stage, p.State = stageDone, state
		r.emit(Event{Kind: KindToolResultEnded, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, Arguments: p.Args,
			State: state, Output: output, Error: errMsg, DurationMs: time.Since(start).Milliseconds()}})
		r.toolUsed(p, state, output, errMsg, time.Since(start))
		text := output
		if state != ToolSuccess && errMsg != "" {
			text = errMsg
		}
		p.Result = &model.Message{Role: model.RoleTool, ToolCallID: p.ID, Name: p.Name, Text: text}
	}
	switch p.Stage {
	case stageDenied:
		done(ToolDenied, "", p.Reason)
		return
	case stageError:
		done(ToolError, "", p.Reason)
		return
	case stageDone: // an external result arrived
		return
	}
	if r.ctx.Err() != nil {
		if !r.leaving() {
			done(ToolInterrupted, "", "interrupted before it ran")
		}
		return
	}
	if p.Name == spawnTool {
		state, answer, errMsg := r.spawn(p)
		if answer != "" { // the subagent's answer is its result's text, as a tool's output is
			r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: answer}})
		}
		done(state, answer, errMsg)
		return
	}
	tool, _ := r.rt.tools.Get(p.Name)
	dir, err := r.rt.ws.Dir(r.spec.SessionID)
	if err != nil {
		done(ToolError, "", err.Error())
		return
	}
	streamed := false
	env := tools.Env{SessionID: r.spec.SessionID, Workspace: dir, Progress: func(text string) {
		streamed = true
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: text}})
	}}
	tctx, endSpan := tracing.StartToolCall(r.ctx, p.Name, p.ID)
	res, err := tool.Run(tctx, env, json.RawMessage(p.Args))
	endSpan(err)
	if r.leaving() {
		return // not finished: it stays ready and runs again after the restart
	}
	if err != nil {
		r.rt.log.WarnContext(tctx, "tool failed", "tool", p.Name, "requestId", r.rec.RequestID, "err", err)
		res = tools.Result{Text: err.Error(), IsError: true}
	}
	if a := res.Async; a != nil && err == nil {
		// The work goes on elsewhere: the run waits for its result like for a client-side tool.
		p.Stage, p.AskID = stageExternal, "async_"+newEventID()[:20]
		p.Async = &AsyncInfo{TaskID: a.TaskID, CallID: p.ID, Name: p.Name, Arguments: p.Args,
			SubmittedAtMs: time.Now().UnixMilli(), TimeoutMs: a.Timeout.Milliseconds(), Strategy: a.Strategy}
		return
	}
	if !streamed && res.Text != "" {
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name, OutputDelta: res.Text}})
	}
	for _, d := range res.Data {
		r.emit(Event{Kind: KindToolResultDelta, Tool: &ToolInfo{CallID: p.ID, Name: p.Name,
			Data: &DataContent{ID: newEventID(), Name: d.Name, MediaType: d.MediaType, Base64: base64.StdEncoding.EncodeToString(d.Bytes)}}})
	}
	for _, f := range res.Files {
		if a, ok := r.attach(f); ok {
			r.emit(Event{Kind: KindAttachment, Attachment: &a})
		}
	}
	switch {
	case r.ctx.Err() != nil:
		done(ToolInterrupted, res.Text, "interrupted")
	case res.IsError:
		done(ToolError, res.Text, firstLine(res.Text))
	default:
		done(ToolSuccess, res.Text, "")
		for _, s := range res.Sent {
			r.send(s)
		}
	}
}

// toolUsed tells the post_tool_use hooks how call p ended: run here, or elsewhere (the client, an
// asynchronous job) with its result handed back.
func (r *run) toolUsed(p *pendingCall, state, output, errMsg string, took time.Duration) {
	r.observe(dispatcher.PostToolUse, &dispatcher.PostToolUseContext{ToolName: p.Name, ToolCallID: p.ID,
		Arguments: dispatcher.Value(p.Args), Output: dispatcher.Value(output), Succeeded: state == ToolSuccess,
		ErrorMessage: optional(errMsg), DurationMs: took.Milliseconds()})
}

// sendChunk is how many bytes of a sent file one data block delta carries (64 KiB as base64).
const sendChunk = 48 << 10

// send hands a workspace file to the user: it becomes a session attachment marked as sent, its
// bytes stream as a data block, and the block joins the turn's final message. It comes after
// the call's result, as content of the answer rather than of the tool's output.
func (r *run) send(s tools.Sent) {
	a, ok := r.attach(s.File)
	if !ok {
		return
	}
	a.Sent = true
	r.emit(Event{Kind: KindAttachment, Attachment: &a})
	d := DataContent{ID: newEventID(), Name: s.NameOf(), MediaType: s.MediaType}
	id := "blk-" + newEventID()[:12]
	desc := d // the start event describes the block; its bytes follow as deltas
	r.emit(Event{Kind: KindBlockStarted, Block: &Block{ID: id, Type: BlockData, Data: &desc}})
	for off := 0; off < len(s.Bytes) || off == 0; off += sendChunk {
		piece := s.Bytes[off:min(off+sendChunk, len(s.Bytes))]
		r.emit(Event{Kind: KindBlockDelta, Block: &Block{ID: id, Type: BlockData, Delta: base64.StdEncoding.EncodeToString(piece)}})
	}
	r.emit(Event{Kind: KindBlockEnded, Block: &Block{ID: id, Type: BlockData}})
	d.Base64 = base64.StdEncoding.EncodeToString(s.Bytes)
	r.state.Sent = append(r.state.Sent, d)
}
