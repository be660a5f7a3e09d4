package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// decisionLogAPI is the decision log as it grows (a live tail); the list itself is GET
// /api/decisions.
type decisionLogAPI struct {
	db        *storage.DB
	heartbeat time.Duration
}

// stream sends each decision row committed after the cursor as an SSE event `decision` whose id
// is the row's id: a reconnecting EventSource (Last-Event-ID) misses none and repeats none.
// Without a cursor it starts at the newest row; a cursor beyond it is refused. It wakes on every commit of this process and, for
// the rows of other replicas, at each heartbeat.
func (a decisionLogAPI) stream(c *gin.Context) {
	if !wire.OnlyQuery(c, "hookType", "outcome", "after") {
		return
	}
	hookType, outcome := c.Query("hookType"), c.Query("outcome")
	if hookType != "" && !dispatcher.HookType(hookType).Interceptive() {
		wire.Fail(c, http.StatusBadRequest, "hookType: must be an interceptive hook type")
		return
	}
	if !knownOutcome(c, outcome) {
		return
	}
	ctx := c.Request.Context()
	// The cursor is ?after= or an EventSource's Last-Event-ID. Sent both, the newer is taken, as
	// the platform stream's resume does: an EventSource opened with ?after= keeps that URL, and
	// sends the id of the last row it got as Last-Event-ID when it reconnects.
	var after int64
	from := ""
	for _, src := range []struct{ field, v string }{{"after", c.Query("after")}, {"Last-Event-ID", c.GetHeader("Last-Event-ID")}} {
		if src.v == "" {
			continue
		}
		v, err := strconv.ParseInt(src.v, 10, 64)
		if err != nil || v < 0 {
			wire.Fail(c, http.StatusBadRequest, "%s: must be the id of a decision row", src.field)
			return
		}
		if from == "" || v > after {
			after, from = v, src.field
		}
	}
	last, err := a.db.LastDecisionID(ctx)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	switch {
	case from == "":
		after = last
	case after > last:
		// No row has that id yet: the stream would be silent until the log grew past it, and then
		// start there, the rows before it never shown.
		wire.Fail(c, http.StatusBadRequest, "%s: %d is beyond the newest decision row (%d)", from, after, last)
		return
	}
	sse := wire.StartSSE(c.Writer, nil)
	beat := time.NewTicker(orDefault(a.heartbeat))
	defer beat.Stop()
	for {
		changed := a.db.Changed(storage.TopicDecisions) // taken before the read: no commit falls between
		rows, err := a.db.DecisionsAfter(ctx, after, hookType, outcome, wire.MaxLimit)
		if err != nil {
			return
		}
		for _, d := range rows {
			b, err := json.Marshal(d)
			if err != nil {
				return
			}
			if sse.Event(strconv.FormatInt(d.ID, 10), "decision", b) != nil {
				return
			}
			after = d.ID
		}
		if len(rows) == wire.MaxLimit {
			continue // more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-beat.C:
			if sse.Comment("ping") != nil {
				return
			}
		}
	}
}

// orDefault is the heartbeat of the admin API's streams when the config gives none.
func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return 15 * time.Second
	}
	return d
}
