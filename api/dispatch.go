package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// dispatchAPI serves the dispatcher's admin endpoints: outside dispatch, hook probes, the
// delivery and decision logs, and breaker states.
type dispatchAPI struct {
	d  *dispatcher.Dispatcher
	db *storage.DB
}

type dispatchRequest struct {
	HookType    dispatcher.HookType `json:"hookType"`
	SessionID   *int64              `json:"sessionId"`
	PrincipalID *int64              `json:"principalId"`
	AgentID     *int64              `json:"agentId"`
	TraceID     string              `json:"traceId"`
	Context     json.RawMessage     `json:"context"`
}

// dispatch lets an agent outside hookd use it as its policy daemon: interceptive types answer
// with the chain's decision, observational ones once the events are durably queued.
func (a dispatchAPI) dispatch(c *gin.Context) {
	var req dispatchRequest
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &req) {
		return
	}
	if req.HookType == "" {
		wire.Fail(c, http.StatusBadRequest, "hookType: is required")
		return
	}
	if !req.HookType.Valid() {
		wire.Fail(c, http.StatusBadRequest, "hookType: %q is not one of %v", req.HookType, dispatcher.HookTypes)
		return
	}
	for _, id := range []struct {
		name string
		v    *int64
	}{{"sessionId", req.SessionID}, {"principalId", req.PrincipalID}, {"agentId", req.AgentID}} {
		if id.v != nil && *id.v <= 0 {
			wire.Fail(c, http.StatusBadRequest, "%s: must be a positive id, or absent", id.name)
			return
		}
	}
	ctxValue, err := dispatcher.DecodeContext(req.HookType, req.Context)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	ev := dispatcher.Event{HookType: req.HookType, TraceID: req.TraceID, SessionID: req.SessionID,
		PrincipalID: req.PrincipalID, AgentID: req.AgentID, Context: ctxValue}
	if !req.HookType.Interceptive() {
		ids, err := a.d.Observe(c.Request.Context(), ev)
		if err != nil {
			wire.FailErr(c, err)
			return
		}
		if ids == nil {
			ids = []string{}
		}
		wire.OK(c, http.StatusAccepted, gin.H{"eventIds": ids})
		return
	}
	dec, err := a.d.Intercept(c.Request.Context(), ev)
	var bad *dispatcher.InvalidModifyError
	if errors.As(err, &bad) {
		wire.Fail(c, http.StatusBadGateway, "%v", bad)
		return
	}
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"decision": dec.Decision, "reason": nullIfEmpty(dec.Reason),
		"modifiedValue": dec.ModifiedValue, "decisionId": nullIfEmpty(dec.DecisionID)})
}

func (a dispatchAPI) probe(c *gin.Context) {
	id, good := pathID(c)
	if !good {
		return
	}
	res, err := a.d.Probe(c.Request.Context(), id)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, res)
}

// deliveryView is a delivery with its attempts.
type deliveryView struct {
	storage.Delivery
	Attempts []storage.Attempt `json:"attemptLog"`
}

func (a dispatchAPI) deliveries(c *gin.Context) {
	f := storage.DeliveryFilter{EventID: c.Query("eventId"), Status: c.Query("status")}
	var good bool
	if f.HookID, good = queryInt(c, "hookId"); !good {
		return
	}
	if f.BeforeID, good = queryInt(c, "before"); !good {
		return
	}
	limit, good := queryInt(c, "limit")
	if !good {
		return
	}
	f.Limit = int(limit)
	switch f.Status {
	case "", storage.StatusPending, storage.StatusDelivering, storage.StatusDelivered, storage.StatusFailed, storage.StatusDead:
	default:
		wire.Fail(c, http.StatusBadRequest, "status: must be pending, delivering, delivered, failed or dead")
		return
	}
	ds, err := a.db.ListDeliveries(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	attempts, err := a.db.Attempts(c.Request.Context(), ids)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	out := make([]deliveryView, len(ds))
	for i, d := range ds {
		out[i] = deliveryView{Delivery: d, Attempts: attempts[d.ID]}
		if out[i].Attempts == nil {
			out[i].Attempts = []storage.Attempt{}
		}
	}
	wire.OK(c, http.StatusOK, out)
}

func (a dispatchAPI) redeliver(c *gin.Context) {
	id, good := pathID(c)
	if !good {
		return
	}
	d, err := a.d.Redeliver(c.Request.Context(), id)
	if errors.Is(err, storage.ErrBusy) {
		wire.Fail(c, http.StatusConflict, "delivery %d is being delivered right now", id)
		return
	}
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	attempts, err := a.db.Attempts(c.Request.Context(), []int64{id})
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, deliveryView{Delivery: d, Attempts: attempts[id]})
}

func (a dispatchAPI) decisions(c *gin.Context) {
	f := storage.DecisionFilter{HookType: c.Query("hookType"), DecisionID: c.Query("decisionId")}
	if f.HookType != "" && !dispatcher.HookType(f.HookType).Interceptive() {
		wire.Fail(c, http.StatusBadRequest, "hookType: must be an interceptive hook type")
		return
	}
	if c.Query("sessionId") != "" {
		v, good := queryInt(c, "sessionId")
		if !good {
			return
		}
		f.SessionID = &v
	}
	var good bool
	if f.BeforeID, good = queryInt(c, "before"); !good {
		return
	}
	limit, good := queryInt(c, "limit")
	if !good {
		return
	}
	f.Limit = int(limit)
	ds, err := a.db.ListDecisions(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, ds)
}

// breakers answers one page of the breakers of the receiver URLs hooks use, by URL.
func (a dispatchAPI) breakers(c *gin.Context) {
	if !wire.OnlyQuery(c, "cursor", "limit") {
		return
	}
	cursor, limit, good := wire.PageQuery(c)
	if !good {
		return
	}
	after, good := wire.CursorKey(c, cursor)
	if !good {
		return
	}
	all := a.d.Breakers()
	rest := all[sort.Search(len(all), func(i int) bool { return all[i].URL > after }):]
	rest = rest[:min(len(rest), limit+1)]
	wire.OK(c, http.StatusOK, wire.PageOf(rest, limit, func(s breaker.Status) string { return s.URL }))
}

// queryInt reads an optional integer query parameter (0 when absent), answering 400 naming it.
func queryInt(c *gin.Context, name string) (int64, bool) {
	s := c.Query(name)
	if s == "" {
		return 0, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		wire.Fail(c, http.StatusBadRequest, "%s: must be a non-negative integer", name)
		return 0, false
	}
	return v, true
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
