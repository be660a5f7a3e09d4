package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

// sessionEventsAPI lets business middleware push its own events into a user's session: a custom
// event (CUSTOM: team_updated, task_progress, …) or a hint the model sees at its next step
// (HINT_BLOCK: "alice joined"). The run in progress streams them to every dialect and keeps them
// in its event log.
type sessionEventsAPI struct{ rt *agent.Runtime }

// Push types, as the harness document names the events.
const (
	pushCustom = "CUSTOM"
	pushHint   = "HINT_BLOCK"
)

type pushRequest struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Value      json.RawMessage `json:"value"`
	Hint       string          `json:"hint"`
	HintSource string          `json:"hintSource"`
}

// check refuses a request that is not exactly one of the two kinds, naming the field.
func (p pushRequest) check() error {
	present := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	switch p.Type {
	case pushCustom:
		switch {
		case strings.TrimSpace(p.Name) == "":
			return hookdtype.Invalid("name", "is required for a CUSTOM event")
		case p.Name == dispatcher.ReservedEventName:
			return hookdtype.Invalid("name", "%q is the runtime's own event (the run's status)", p.Name)
		case !present(p.Value):
			return hookdtype.Invalid("value", "is required for a CUSTOM event (a JSON object)")
		case p.Hint != "" || p.HintSource != "":
			return hookdtype.Invalid("hint", "belongs to a HINT_BLOCK, not a CUSTOM event")
		}
	case pushHint:
		switch {
		case strings.TrimSpace(p.Hint) == "":
			return hookdtype.Invalid("hint", "is required for a HINT_BLOCK")
		case p.Name != "" || present(p.Value):
			return hookdtype.Invalid("name", "name and value belong to a CUSTOM event, not a HINT_BLOCK")
		}
	case "":
		return hookdtype.Invalid("type", "is required: CUSTOM or HINT_BLOCK")
	default:
		if s := hookdtype.Suggest(p.Type, []string{pushCustom, pushHint}); s != "" {
			return hookdtype.Invalid("type", "%q is neither CUSTOM nor HINT_BLOCK; did you mean %q?", p.Type, s)
		}
		return hookdtype.Invalid("type", "%q is neither CUSTOM nor HINT_BLOCK", p.Type)
	}
	return nil
}

// push is POST /api/users/{userId}/sessions/{sessionKey}/events. It answers once the event is
// durable: 201 with the run and the event's seq; 404 for a session the user does not have; 409
// when the session has no run in progress here.
func (a sessionEventsAPI) push(c *gin.Context) {
	if !wire.OnlyQuery(c) {
		return
	}
	var req pushRequest
	if !wire.BindStrict(c, &req) {
		return
	}
	if err := req.check(); err != nil {
		wire.FailErr(c, err)
		return
	}
	user, key := c.Param("userId"), c.Param("sessionKey")
	ev, err := a.rt.PushToSession(c.Request.Context(), user, key,
		agent.Push{Hint: req.Hint, HintSource: req.HintSource, Name: req.Name, Value: req.Value})
	switch {
	case errors.Is(err, agent.ErrNotFound):
		wire.Fail(c, http.StatusNotFound, "user %s has no session %s", user, key)
	case errors.Is(err, agent.ErrNotLive):
		wire.Fail(c, http.StatusConflict, "%v", err)
	case err != nil:
		wire.FailErr(c, err)
	default:
		wire.OK(c, http.StatusCreated, gin.H{"type": req.Type, "requestId": ev.RunID, "eventId": ev.ID, "seq": ev.Seq})
	}
}
