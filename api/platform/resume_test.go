package platform_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A client drops its connection mid-run and reconnects with the id of the last frame it got:
// it gets every later frame exactly once — the stored ones, then the live ones — by the
// lastEventId parameter or by the Last-Event-ID header.
func TestResumeLive(t *testing.T) {
	schema := loadSchema(t)
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newTEnv(t, db, platformScript, agent.Config{}, time.Hour)
		s := e.startRun(alice, map[string]any{"userInput": "long"})
		requestID := s.Header.Get("X-Request-Id")
		const n = 12
		var first []frame
		for len(first) < n {
			f, err := s.next()
			if err != nil {
				t.Fatal(err)
			}
			first = append(first, f)
		}
		s.close()
		if run, _ := e.rt.Run(t.Context(), "alice", requestID); run.Status != storage.RunRunning {
			t.Fatalf("the run is %s already; the test needs it live", run.Status)
		}
		rest := e.replay(alice, requestID, first[n-1].LastEventID).rest(nil)
		if len(rest) == 0 || rest[len(rest)-1].EventType != platform.MessageCompleted {
			t.Fatalf("after reconnecting: %s", types(rest))
		}
		all := e.replay(alice, requestID, "").rest(nil)
		checkStream(t, schema, requestID, all)
		sameFrames(t, "before the drop", first, all[:n])
		sameFrames(t, "after the reconnect", rest, all[n:])

		// The Last-Event-ID header, as an EventSource sends it; of it and the query id the newer wins.
		h := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID, http.Header{"Last-Event-Id": {all[5].LastEventID}}, nil)
		sameFrames(t, "Last-Event-ID", h.rest(nil), all[6:])
		q := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID+"&lastEventId="+all[9].LastEventID,
			http.Header{"Last-Event-Id": {all[2].LastEventID}}, nil)
		sameFrames(t, "a newer lastEventId over Last-Event-ID", q.rest(nil), all[10:])
		hq := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID+"&lastEventId="+all[2].LastEventID,
			http.Header{"Last-Event-Id": {all[9].LastEventID}}, nil)
		sameFrames(t, "a newer Last-Event-ID over lastEventId", hq.rest(nil), all[10:])
		if q.Header.Get("X-Request-Id") != requestID {
			t.Fatalf("X-Request-Id on a resumed stream: %q", q.Header.Get("X-Request-Id"))
		}
	})
}

// A resume can start right after any frame, also inside the frames of one canonical event
// (an ask of two calls: ids N and N.1), and after the terminal frame it sends nothing and ends.
func TestResumeAfterEveryFrame(t *testing.T) {
	e := newTEnv(t, storagetest.SQLite(t), platformScript,
		agent.Config{DefaultBehavior: agent.BehaviorAsk, AskTimeout: 300 * time.Millisecond, SweepEvery: 25 * time.Millisecond}, time.Hour)
	s := e.startRun(alice, map[string]any{"userInput": "two"})
	requestID := s.Header.Get("X-Request-Id")
	live := s.rest(nil) // both asks time out
	all := e.replay(alice, requestID, "").rest(nil)
	sameFrames(t, "replay", all, live)
	dotted := 0
	for i := range all {
		if _, k := cursorOf(t, all[i]); k > 0 {
			dotted++
		}
		if i == len(all)-1 {
			// At the end of a finished run: 204, which tells an EventSource to stop reconnecting.
			end := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID+"&lastEventId="+all[i].LastEventID, nil, nil)
			if end.Status != http.StatusNoContent {
				t.Fatalf("after the terminal frame: %d %s, want 204", end.Status, end.Body)
			}
			continue
		}
		got := e.replay(alice, requestID, all[i].LastEventID).rest(nil)
		sameFrames(t, "after "+all[i].LastEventID, got, all[i+1:])
	}
	if dotted != 2 {
		t.Fatalf("want the second PERMISSION_ASK and PERMISSION_ASK_RESOLVED on dotted ids: %d", dotted)
	}
}

func cursorOf(t *testing.T, f frame) (int64, int) {
	t.Helper()
	c, err := platform.ParseCursor(f.LastEventID)
	if err != nil {
		t.Fatal(err)
	}
	return c.Seq, c.K
}

// The daemon restarts while a client is away: the run is suspended (SHUTDOWN_INTERRUPT), a new
// runtime on the same database serves the resume from the client's last id, the stream stays
// open while the run waits, and goes on on the same connection once the run is resumed.
func TestResumeAcrossRestart(t *testing.T) {
	schema := loadSchema(t)
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newTEnv(t, db, platformScript, agent.Config{}, time.Hour)
		s := e.startRun(alice, map[string]any{"userInput": "restart"})
		requestID := s.Header.Get("X-Request-Id")
		first := s.until(platform.ToolCompleted, nil)
		s.close()
		agenttest.WaitModelCall(t, e.rt, requestID, 2)

		e.restart()
		s2 := e.replay(alice, requestID, first[len(first)-1].LastEventID)
		mid := s2.until(platform.MessageSuspended, nil)
		reason := mid[len(mid)-1].data()["suspendReason"].(map[string]any)
		if reason["type"] != "SHUTDOWN_INTERRUPT" {
			t.Fatalf("suspend reason %v", reason)
		}
		time.Sleep(200 * time.Millisecond) // the stream of a suspended run stays open
		e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/resume", nil, "success")
		after := s2.rest(nil)
		if len(after) == 0 || after[len(after)-1].EventType != platform.MessageCompleted {
			t.Fatalf("after the resume: %s", types(after))
		}
		all := e.replay(alice, requestID, "").rest(nil)
		checkStream(t, schema, requestID, all)
		sameFrames(t, "across the restart", append(append(append([]frame{}, first...), mid...), after...), all)
		n := newNormaliser(e)
		n.name(requestID, "<requestId>")
		golden(t, "restart", n.transcript(all), db.Dialect() == storage.SQLite)
	})
}

// Heartbeats come at the configured interval with no id: they leave the last event id where it
// was, and the numbering of the frames is the same as without them.
func TestHeartbeats(t *testing.T) {
	schema := loadSchema(t)
	e := newTEnv(t, storagetest.SQLite(t), platformScript, agent.Config{}, 30*time.Millisecond)
	s := e.startRun(alice, map[string]any{"userInput": "long"})
	requestID := s.Header.Get("X-Request-Id")
	frames := s.rest(nil)
	beats := 0
	lastID := ""
	beforeBeat := -1 // index, among the other frames, of the frame right before a heartbeat
	var others []frame
	for _, f := range frames {
		if err := schema.validate(f.Data, false); err != nil {
			t.Fatal(err)
		}
		if f.EventType != platform.Heartbeat {
			others = append(others, f)
			lastID = f.LastEventID
			continue
		}
		beats++
		if f.HasID || f.LastEventID != lastID || len(f.Env) != 2 {
			t.Fatalf("heartbeat %+v after id %q", f, lastID)
		}
		if beforeBeat < 0 && len(others) > 0 {
			beforeBeat = len(others) - 1
		}
	}
	if beats < 5 || beforeBeat < 0 {
		t.Fatalf("%d heartbeats in %s", beats, types(frames))
	}
	checkStream(t, schema, requestID, frames)
	replay := withoutHeartbeats(e.replay(alice, requestID, "").rest(nil))
	sameFrames(t, "ids with and without heartbeats", others, replay)
	// Resuming from the frame before a heartbeat starts with the frame after it.
	got := withoutHeartbeats(e.replay(alice, requestID, others[beforeBeat].LastEventID).rest(nil))
	sameFrames(t, "resume across a heartbeat", got, others[beforeBeat+1:])

	// A suspended run's stream is kept alive by heartbeats alone.
	e2 := newTEnv(t, storagetest.SQLite(t), platformScript, agent.Config{DefaultBehavior: agent.BehaviorAsk}, 30*time.Millisecond)
	s2 := e2.startRun(alice, map[string]any{"userInput": "write"})
	s2.until(platform.MessageSuspended, nil)
	idle := s2.until(platform.Heartbeat, nil)
	idle = append(idle, s2.until(platform.Heartbeat, nil)...)
	if len(idle) != 2 {
		t.Fatalf("while suspended: %s", types(idle))
	}
	e2.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+s2.Header.Get("X-Request-Id")+"/stop", nil, "success")
	if end := withoutHeartbeats(s2.rest(nil)); len(end) != 1 || end[0].EventType != platform.MessageFailed {
		t.Fatalf("after stop: %s", types(end))
	}
}

// A browser's EventSource reconnects to the URL it was opened with — here one that names an id
// — and sends the newest id it got in the Last-Event-ID header. Two reconnects in a live run
// deliver every frame exactly once; an id beyond the live run's last event is a 400 naming
// lastEventId; ids are strictly increasing integers.
func TestEventSourceReconnects(t *testing.T) {
	e := newTEnv(t, storagetest.SQLite(t), platformScript, agent.Config{}, time.Hour)
	s := e.startRun(alice, map[string]any{"userInput": "long"})
	requestID := s.Header.Get("X-Request-Id")
	var got []frame
	read := func(s *stream, n int) {
		for range n {
			f, err := s.next()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f)
		}
		s.close()
	}
	read(s, 3)
	url := "/api/agent/run/stream?requestId=" + requestID + "&lastEventId=" + got[1].LastEventID // the URL the page opened
	for range 2 {
		read(e.openStream(alice, http.MethodGet, url, http.Header{"Last-Event-Id": {got[len(got)-1].LastEventID}}, nil), 3)
	}
	if run, _ := e.rt.Run(t.Context(), "alice", requestID); run.Status != agent.StatusRunning {
		t.Fatalf("the run is %s already; the test needs it live", run.Status)
	}
	beyond := platform.FrameID(1<<20, 0)
	bad := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID, http.Header{"Last-Event-Id": {beyond}}, nil)
	if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), "Last-Event-ID: ") {
		t.Fatalf("an id beyond the live run, in the header: %d %s", bad.Status, bad.Body)
	}
	// Every query parameter is the stream's: a typo or a repeat is refused, not ignored.
	for q, want := range map[string]string{"&lastEventID=5000": `lastEventID: unknown query parameter (did you mean \"lastEventId\"?)`,
		"&lastEventId=1000&lastEventId=2000": "lastEventId: appears twice"} {
		bad := e.openStream(alice, http.MethodGet, "/api/agent/run/stream?requestId="+requestID+q, nil, nil)
		if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), want) {
			t.Fatalf("%s: %d %s", q, bad.Status, bad.Body)
		}
	}
	got = append(got, e.openStream(alice, http.MethodGet, url, http.Header{"Last-Event-Id": {got[len(got)-1].LastEventID}}, nil).rest(nil)...)
	all := e.replay(alice, requestID, "").rest(nil)
	sameFrames(t, "across two EventSource reconnects", got, all)
	prev := int64(-1)
	for _, f := range all {
		n, err := strconv.ParseInt(f.LastEventID, 10, 64)
		if err != nil || n <= prev || n > 1<<53-1 {
			t.Fatalf("id %q after %d: not a strictly increasing JS-safe integer", f.LastEventID, prev)
		}
		prev = n
	}
}
