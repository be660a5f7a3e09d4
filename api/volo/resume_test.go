package volo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/volo"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const reconnectScript = `{"scripts":[
 {"match":"ask please","steps":[
   {"text":"writing both","toolCalls":[
     {"name":"workspace_write_file","arguments":{"path":"a.md","content":"A"}},
     {"name":"workspace_write_file","arguments":{"path":"b.md","content":"B"}}]},
   {"text":"both written"}]},
 {"match":"long run","steps":[
   {"text":"step one speaks at length","chunkSize":4,"toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"step two speaks too","chunkSize":4,"toolCalls":[{"name":"workspace_list_files"}],"delayMs":400},
   {"text":"and step three ends it","chunkSize":4,"delayMs":1500}]},
 {"match":"think thrice","steps":[
   {"thinking":"first I list, ","toolCalls":[{"name":"workspace_list_files"}]},
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"n.md","content":"N"}}]},
   {"thinking":"then I sum up","text":"listed and written"}]},
 {"match":"*","steps":[{"text":"default answer","chunkSize":3}]}
]}`

// sameFrames fails unless got is want, frame by frame, byte for byte.
func sameFrames(t *testing.T, what string, got, want []frame) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		if i >= len(got) || i >= len(want) || got[i].sse.Event != want[i].sse.Event || got[i].sse.Data != want[i].sse.Data {
			t.Fatalf("%s: frame %d differs:\n got %s\nwant %s", what, i, names(got), names(want))
		}
	}
}

// cursorOf is what a client that kept its frames sends as afterSeq: the last frame's seq, and
// how many frames of that seq it has (the frames of one event share its seq).
func cursorOf(fs []frame) string {
	last := fs[len(fs)-1].ev.Seq
	k := 0
	for i := len(fs) - 1; i >= 0 && fs[i].ev.Seq == last; i-- {
		k++
	}
	return fmt.Sprintf("%d.%d", last, k)
}

func resumePath(turn, after string) string {
	p := prefix + "/resume?turnId=" + turn
	if after != "" {
		p += "&afterSeq=" + url.QueryEscape(after)
	}
	return p
}

// waitStatus waits until the turn's run is in the given status.
func waitStatus(t *testing.T, e *env, turn, status string) agent.RunView {
	t.Helper()
	run, err := e.rt.RunByReply(context.Background(), "local", turn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := e.rt.Subscribe(ctx, run.RequestID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for open := true; ; {
		if run, err = e.rt.RunByReply(context.Background(), "local", turn); err == nil && run.Status == status {
			return run
		}
		if !open {
			t.Fatalf("the turn is %s, not %s", run.Status, status)
		}
		_, open = <-ch // the next event, or the run's end (or the timeout)
	}
}

// Audit A: the connection drops after the last TOOL_DELTA, before the INTERACTION frames. A
// resume with no response replays the turn to its pause, the interactions included; afterSeq
// sends only what the client lacks, also from inside the frames of one event; then the answer
// goes through resume, and the whole turn can be replayed from its start across its pause.
func TestReconnectBeforeInteraction(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: reconnectScript, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		l := e.open("POST", intentPath("s-reask"), map[string]any{"userMessage": "ask please", "executionMode": "MAX"})
		finals := 0
		l.until(func(f frame) bool {
			if f.ev.Type == volo.TypeToolDelta && f.ev.Tool.Final {
				finals++
			}
			return finals == 2
		})
		l.resp.Body.Close()
		seen := l.got
		turn := turnOf(seen)
		waitStatus(t, e, turn, agent.StatusSuspended)

		st, replay := e.stream("POST", resumePath(turn, ""), nil)
		if st != 200 || replay[len(replay)-1].ev.Phase != volo.PhasePaused {
			t.Fatalf("resume without a response: %d %s", st, names(replay))
		}
		sameFrames(t, "the replay's start", replay[:len(seen)], seen)
		var asks []frame
		for _, f := range replay {
			if f.ev.Type == volo.TypeInteraction {
				asks = append(asks, f)
			}
		}
		if len(asks) != 2 || asks[0].ev.Interaction.ToolName != tools.NameWriteFile || !strings.Contains(asks[1].ev.Interaction.Arguments, "b.md") {
			t.Fatalf("interactions: %s", names(replay))
		}

		_, rest := e.stream("POST", resumePath(turn, cursorOf(seen)), nil)
		sameFrames(t, "after the client's last frame", rest, replay[len(seen):])
		if asks[0].ev.Seq == asks[1].ev.Seq { // one ask event, two frames: a drop between them
			_, second := e.stream("POST", resumePath(turn, fmt.Sprintf("%d.1", asks[0].ev.Seq)), map[string]any{})
			if second[0].sse.Data != asks[1].sse.Data {
				t.Fatalf("after the first of two INTERACTIONs: %s", names(second))
			}
		}
		pause := replay[len(replay)-1].ev.Seq
		st, early := e.stream("POST", resumePath(turn, fmt.Sprint(pause)), nil)
		if st != 409 || early[0].ev.ErrorCode != "agent.error.responseRequired" {
			t.Fatalf("nothing left to replay and no answer: %d %s", st, names(early))
		}

		// The answer, in the body with the cursor.
		st, after := e.stream("POST", prefix+"/resume", map[string]any{"turnId": turn, "response": "approve", "afterSeq": pause})
		if st != 200 || after[0].ev.Phase != volo.PhaseResumed || after[len(after)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("after the answer: %d %s", st, names(after))
		}
		// From the start: one stream across the answered pause.
		_, whole := e.stream("POST", resumePath(turn, "0"), nil)
		sameFrames(t, "the whole turn", whole, append(append([]frame{}, replay...), after...))
	})
}

// resume answers its turn's interactions all at once: a response that leaves one open is
// refused (409 naming it) and keeps nothing; its stream sent nothing until another request
// answered the rest.
func TestResumeAnswersEveryInteraction(t *testing.T) {
	e := newEnv(t, opts{script: reconnectScript, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
	_, fs := e.stream("POST", intentPath("s-two"), map[string]any{"userMessage": "ask please", "executionMode": "MAX"})
	turn := turnOf(fs)
	var asks []string
	for _, f := range fs {
		if f.ev.Type == volo.TypeInteraction {
			asks = append(asks, f.ev.Interaction.InteractionID)
		}
	}
	if len(asks) != 2 {
		t.Fatalf("interactions: %s", names(fs))
	}
	type result struct {
		status int
		fs     []frame
	}
	done := make(chan result, 1)
	go func() {
		st, fs := e.stream("POST", resumePath(turn, ""), map[string]any{"response": []any{map[string]any{"interactionId": asks[0], "approved": true}}})
		done <- result{st, fs}
	}()
	select {
	case r := <-done:
		if r.status != 409 || r.fs[0].ev.ErrorCode != "agent.error.responseRequired" || !strings.Contains(r.fs[0].ev.Message, asks[1]) ||
			strings.Contains(r.fs[0].ev.Message, asks[0]) {
			t.Fatalf("one of two answered: %d %s", r.status, names(r.fs))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("one of two answered: the stream sends nothing")
	}
	st, after := e.stream("POST", resumePath(turn, ""), map[string]any{"response": []any{
		map[string]any{"interactionId": asks[0], "approved": true}, map[string]any{"interactionId": asks[1], "approved": false}}})
	if st != 200 || after[len(after)-1].ev.Status != volo.StatusCompleted {
		t.Fatalf("both answered (the first was not kept when refused): %d %s", st, names(after))
	}
}

// Audit B: the client read part of a long turn, the daemon restarted (its run suspended:
// SHUTDOWN_INTERRUPT) while the turn went on; resume with afterSeq sends every frame the client
// did not get — the rest of step one, the tool call, the RESUME interaction and its pause — and
// then the resumed turn, each frame once.
func TestReconnectAfterRestart(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: reconnectScript})
		l := e.open("POST", intentPath("s-restart"), map[string]any{"userMessage": "long run", "executionMode": "MAX"})
		for len(l.got) < 5 {
			l.until(func(frame) bool { return true })
		}
		l.resp.Body.Close()
		seen := l.got
		turn := turnOf(seen)
		run, _ := e.rt.RunByReply(context.Background(), "local", turn)
		agenttest.WaitModelCall(t, e.rt, run.RequestID, 2)

		e.restart()
		run = waitStatus(t, e, turn, agent.StatusSuspended)
		st, rest := e.stream("POST", resumePath(turn, cursorOf(seen)), nil)
		if st != 200 || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("resume after the restart: %d %s", st, names(rest))
		}
		got := append(append([]frame{}, seen...), rest...)
		_, whole := e.stream("POST", resumePath(turn, "0"), nil)
		sameFrames(t, "what the client got, against the whole turn", got, whole)
		var shutdown, resumed bool
		for _, f := range rest {
			shutdown = shutdown || (f.ev.Type == volo.TypeInteraction && f.ev.Interaction.Reason == agent.SuspendShutdown)
			resumed = resumed || f.ev.Phase == volo.PhaseResumed
		}
		if !shutdown || !resumed || find(rest, volo.TypeToolEnd) == nil {
			t.Fatalf("the frames after the client's last: %s", names(rest))
		}
		// Without afterSeq the stream starts after the pause (what the client had before this
		// extension); the frames before it are the ones afterSeq brings back.
		_, fromPause := e.stream("POST", resumePath(turn, ""), nil)
		if fromPause[0].ev.Phase != volo.PhaseResumed || len(fromPause) >= len(rest) {
			t.Fatalf("resume without afterSeq: %s", names(fromPause))
		}
	})
}

// afterSeq on a turn that never paused follows it again from that frame; a cursor that is not a
// frame's seq is 400.
func TestResumeAfterSeq(t *testing.T) {
	e := newEnv(t, opts{script: reconnectScript})
	_, fs := e.stream("POST", intentPath("s-seq"), map[string]any{"userMessage": "tell me", "executionMode": "MAX"})
	turn := turnOf(fs)
	_, rest := e.stream("POST", resumePath(turn, fmt.Sprint(fs[2].ev.Seq)), nil)
	sameFrames(t, "after the third frame", rest, fs[3:])
	_, rest = e.stream("POST", prefix+"/resume", map[string]any{"turnId": turn, "afterSeq": fmt.Sprint(fs[3].ev.Seq)})
	sameFrames(t, "afterSeq in the body, as text", rest, fs[4:])
	if st, none := e.stream("POST", resumePath(turn, fmt.Sprint(fs[len(fs)-1].ev.Seq)), nil); st != 200 || len(none) != 0 {
		t.Fatalf("after the last frame: %d %s", st, names(none))
	}
	for _, bad := range []struct {
		query string
		body  any
	}{
		{"abc", nil}, {"-1", nil}, {"3.0", nil}, {"3.", nil}, {"1e3", nil},
		{"3", map[string]any{"afterSeq": 2}}, // the body's differs from the query's
		{"", map[string]any{"afterSeq": 2.5}},
		// Beyond the turn's last frame (a seq of another turn): the stream would wait for frames
		// the turn never sends, and end without the ones the client lacks.
		{fmt.Sprint(fs[len(fs)-1].ev.Seq + 1), nil}, {fmt.Sprintf("%d.1", fs[len(fs)-1].ev.Seq+1), nil},
	} {
		if st, early := e.stream("POST", resumePath(turn, bad.query), bad.body); st != 400 || early[0].ev.ErrorCode != "agent.error.badRequest" ||
			!strings.Contains(early[0].ev.Message, "afterSeq") {
			t.Fatalf("afterSeq %+v: %d %s", bad, st, names(early))
		}
	}
}

// Audit C: the catch-up's assistant message has every step's thinking, not the last one's, and
// the results of the turn's tool calls as its TOOL_END frames carried them.
func TestMessagesHaveEveryStepsThinkingAndToolResults(t *testing.T) {
	e := newEnv(t, opts{script: reconnectScript})
	_, fs := e.stream("POST", intentPath("s-think"), map[string]any{"userMessage": "think thrice", "executionMode": "MAX"})
	var thinking string
	var ends []*volo.ToolInfo
	for _, f := range fs {
		if f.ev.Phase == volo.PhaseThinking {
			thinking += f.ev.Content
		}
		if f.ev.Type == volo.TypeToolEnd {
			ends = append(ends, f.ev.Tool)
		}
	}
	if thinking != "first I list, then I sum up" || len(ends) != 2 {
		t.Fatalf("streamed thinking %q, %d tool ends: %s", thinking, len(ends), names(fs))
	}
	code, r, raw := e.call("GET", prefix+"/s-think/messages", nil)
	b, _ := json.Marshal(r.Data)
	var msgs []volo.ChatMessage
	_ = json.Unmarshal(b, &msgs)
	if code != 200 || len(msgs) != 2 {
		t.Fatalf("%d %s", code, raw)
	}
	a := msgs[1]
	if a.Thinking != thinking || len(a.ToolResults) != 2 {
		t.Fatalf("assistant message: %s", b)
	}
	for i, tr := range a.ToolResults {
		if *tr != *ends[i] {
			t.Fatalf("tool result %d: %+v, TOOL_END %+v", i, *tr, *ends[i])
		}
	}
	if a.ToolResults[1].ToolName != tools.NameWriteFile || a.ToolResults[1].Status != agent.ToolSuccess || a.ToolResults[0].Output == "" {
		t.Fatalf("tool results: %s", b)
	}
}
