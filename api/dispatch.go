package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
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
	if err := dispatcher.CheckTraceID(req.TraceID); err != nil {
		wire.FailErr(c, err)
		return
	}
	ctxValue, err := dispatcher.DecodeContext(req.HookType, req.Context)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	ev := dispatcher.Event{HookType: req.HookType, TraceID: cmp.Or(req.TraceID, tracing.TraceID(c.Request.Context())), SessionID: req.SessionID,
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
	if bad, ok := errors.AsType[*dispatcher.InvalidModifyError](err); ok {
		wire.Fail(c, http.StatusBadGateway, "%v", bad)
		return
	}
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKJSON(c, http.StatusOK, &dispatchAnswer{Decision: dec.Decision, DecisionID: nullIfEmpty(dec.DecisionID),
		Extras: dec.Extras, ModifiedValue: dec.ModifiedValue, Reason: nullIfEmpty(dec.Reason)})
}

// dispatchAnswer is an interceptive dispatch's data: a struct rather than a map, which encodes
// without sorting its keys (the fields are in the order a map's would be). Extras are there only
// when a hook sent some: an agent outside hookd shows them itself.
type dispatchAnswer struct {
	Decision      string             `json:"decision"`
	DecisionID    *string            `json:"decisionId"`
	Extras        []dispatcher.Extra `json:"extras,omitempty"`
	ModifiedValue *string            `json:"modifiedValue"`
	Reason        *string            `json:"reason"`
}

// AppendJSON implements wire.JSONAppender: by hand for an answer without extras, the common one
// on every decision's path; through json.Marshal with them (FuzzDispatchAnswer).
func (a *dispatchAnswer) AppendJSON(b []byte) ([]byte, error) {
	if len(a.Extras) > 0 {
		out, err := json.Marshal(a)
		return append(b, out...), err
	}
	b = hookdtype.AppendJSONString(append(b, `{"decision":`...), a.Decision)
	b = hookdtype.AppendJSONStringPtr(append(b, `,"decisionId":`...), a.DecisionID)
	b = hookdtype.AppendJSONStringPtr(append(b, `,"modifiedValue":`...), a.ModifiedValue)
	b = hookdtype.AppendJSONStringPtr(append(b, `,"reason":`...), a.Reason)
	return append(b, '}'), nil
}

func (a dispatchAPI) probe(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
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
	if !wire.OnlyQuery(c, "hookId", "eventId", "status", "cursor", "limit") {
		return
	}
	cursor, limit, good := pageQuery(c)
	if !good {
		return
	}
	f := storage.DeliveryFilter{EventID: c.Query("eventId"), Status: c.Query("status"), BeforeID: cursor, Limit: limit + 1}
	if f.HookID, good = queryHookID(c); !good {
		return
	}
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
	page := wire.PageOf(ds, limit, func(d storage.Delivery) string { return wire.IDKey(d.ID) })
	ds = page.Items
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	attempts, err := a.db.Attempts(c.Request.Context(), ids)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	out := wire.Page[deliveryView]{Items: make([]deliveryView, len(ds)), Next: page.Next}
	for i, d := range ds {
		out.Items[i] = deliveryView{Delivery: d, Attempts: attempts[d.ID]}
		if out.Items[i].Attempts == nil {
			out.Items[i].Attempts = []storage.Attempt{}
		}
	}
	wire.OK(c, http.StatusOK, out)
}

// deleteDelivery removes one delivery and its attempts, in whatever state unless a worker holds
// it right now: a pending one is then never delivered.
func (a dispatchAPI) deleteDelivery(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
		return
	}
	if deliveryFailed(c, id, a.db.DeleteDelivery(c.Request.Context(), id)) {
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"deleted": 1})
}

// deliveryFailed answers err of an operation on delivery id, if any: 409 while a worker holds it.
func deliveryFailed(c *gin.Context, id int64, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, storage.ErrBusy):
		wire.Fail(c, http.StatusConflict, "delivery %d is being delivered right now", id)
	case errors.As(err, new(*dispatcher.RedeliverError)):
		wire.Fail(c, http.StatusConflict, "%s", err.Error())
	default:
		wire.FailErr(c, err)
	}
	return true
}

// purgeDeliveries removes the failed or dead deliveries a filter names (status is required: a
// purge never takes rows that may still be delivered), in batches.
func (a dispatchAPI) purgeDeliveries(c *gin.Context) {
	if !wire.OnlyQuery(c, "status", "hookId", "before") {
		return
	}
	var f storage.PurgeFilter
	switch st := c.Query("status"); st {
	case storage.StatusFailed, storage.StatusDead:
		f.Statuses = []string{st}
	case "failed,dead", "dead,failed":
		f.Statuses = []string{storage.StatusFailed, storage.StatusDead}
	case "":
		wire.Fail(c, http.StatusBadRequest, "status: is required (failed, dead or failed,dead)")
		return
	default:
		wire.Fail(c, http.StatusBadRequest, "status: must be failed, dead or failed,dead")
		return
	}
	var good bool
	if f.HookID, good = queryHookID(c); !good {
		return
	}
	if f.Before, good = queryTime(c, "before"); !good {
		return
	}
	var total int64
	for {
		n, err := a.db.PurgeDeliveries(c.Request.Context(), f, 500)
		if err != nil {
			wire.FailErr(c, err)
			return
		}
		total += n
		if n < 500 {
			break
		}
	}
	wire.OK(c, http.StatusOK, gin.H{"deleted": total})
}

func (a dispatchAPI) redeliver(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
		return
	}
	d, err := a.d.Redeliver(c.Request.Context(), id)
	if deliveryFailed(c, id, err) {
		return
	}
	attempts, err := a.db.Attempts(c.Request.Context(), []int64{id})
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	out := deliveryView{Delivery: d, Attempts: attempts[id]}
	if out.Attempts == nil { // none made yet (an open breaker, an unreadable secret): empty, never null
		out.Attempts = []storage.Attempt{}
	}
	wire.OK(c, http.StatusOK, out)
}

func (a dispatchAPI) decisions(c *gin.Context) {
	if !wire.OnlyQuery(c, "hookType", "hookId", "sessionId", "principalId", "toolName", "outcome", "decisionId",
		"since", "until", "cursor", "limit") {
		return
	}
	cursor, limit, good := pageQuery(c)
	if !good {
		return
	}
	f := storage.DecisionFilter{HookType: c.Query("hookType"), DecisionID: c.Query("decisionId"),
		ToolName: c.Query("toolName"), Outcome: c.Query("outcome"), BeforeID: cursor, Limit: limit + 1}
	if f.HookType != "" && !dispatcher.HookType(f.HookType).Interceptive() {
		wire.Fail(c, http.StatusBadRequest, "hookType: must be an interceptive hook type")
		return
	}
	if !knownOutcome(c, f.Outcome) {
		return
	}
	if f.HookID, good = queryHookID(c); !good {
		return
	}
	for _, p := range []struct {
		name string
		dst  **int64
	}{{"sessionId", &f.SessionID}, {"principalId", &f.PrincipalID}} {
		if c.Query(p.name) != "" {
			v, good := queryInt(c, p.name)
			if good && v == 0 {
				// No decision is for id 0 (a dispatch refuses one): an empty page would read as
				// "none for this session".
				wire.Fail(c, http.StatusBadRequest, "%s: must be a positive id", p.name)
				return
			}
			if !good {
				return
			}
			*p.dst = &v
		}
	}
	if f.Since, good = queryTime(c, "since"); !good {
		return
	}
	if f.Until, good = queryTime(c, "until"); !good {
		return
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		// Most likely the two swapped: an empty page would read as "no decisions then".
		wire.Fail(c, http.StatusBadRequest, "until: must be after since (the range is [since, until))")
		return
	}
	ds, err := a.db.ListDecisions(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, wire.PageOf(ds, limit, func(d storage.Decision) string { return wire.IDKey(d.ID) }))
}

// knownOutcome answers 400 unless outcome (a filter of the decision log) is empty or one the log
// records: a filter no row can match would silently show nothing.
func knownOutcome(c *gin.Context, outcome string) bool {
	switch outcome {
	case "", dispatcher.Allow, dispatcher.Deny, dispatcher.Modify, dispatcher.Ask, storage.OutcomeError:
		return true
	}
	wire.Fail(c, http.StatusBadRequest, "outcome: must be allow, deny, modify, ask or error")
	return false
}

// verifyDecisions checks the decision log's hash chain (hookd decisions verify).
func (a dispatchAPI) verifyDecisions(c *gin.Context) {
	if !wire.OnlyQuery(c, "upTo") {
		return
	}
	upTo, good := queryInt(c, "upTo") // 0: every row; else whether the record up to that row holds
	if !good {
		return
	}
	rep, err := a.db.VerifyDecisionsThrough(c.Request.Context(), upTo)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, rep)
}

// pageQuery reads the paging parameters of a list newest first by id: the cursor is the id the
// next page starts below.
func pageQuery(c *gin.Context) (beforeID int64, limit int, ok bool) {
	cursor, limit, ok := wire.PageQuery(c)
	if !ok {
		return 0, 0, false
	}
	beforeID, ok = wire.CursorID(c, cursor)
	return beforeID, limit, ok
}

// queryTime reads an optional RFC 3339 time query parameter (zero when absent).
func queryTime(c *gin.Context, name string) (time.Time, bool) {
	s := c.Query(name)
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		wire.Fail(c, http.StatusBadRequest, "%s: must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z", name)
		return time.Time{}, false
	}
	return t, true
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

// queryHookID reads the optional ?hookId= filter (0 when absent). Hook ids start at 1: a 0 would
// read as no filter, and a purge of "hook 0" would take every hook's rows.
func queryHookID(c *gin.Context) (int64, bool) {
	id, ok := queryInt(c, "hookId")
	if ok && id == 0 && c.Query("hookId") != "" {
		wire.Fail(c, http.StatusBadRequest, "hookId: must be a hook id, from 1")
		return 0, false
	}
	return id, ok
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
