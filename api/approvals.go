package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/console"
	"github.com/hookd/hookd/storage"
)

// approvalsAPI is the inbox of tool calls waiting for a person, across runs: an admin sees every
// one, a reviewer signed in to the console only those of the users it reviews.
type approvalsAPI struct {
	rt        *agent.Runtime
	db        *storage.DB
	heartbeat time.Duration
}

// reviewerUsers is nil for an admin (every user), else the users the console's reviewer reviews.
func reviewerUsers(c *gin.Context) []string {
	id, ok := c.Get(consoleIdentity)
	if !ok {
		return nil
	}
	if who := id.(console.Identity); who.Role == console.RoleReviewer {
		return append([]string{}, who.Reviews...)
	}
	return nil
}

// answeredBy names who answers, for the ask's record.
func answeredBy(c *gin.Context) string {
	if id, ok := c.Get(consoleIdentity); ok {
		who := id.(console.Identity)
		return who.Role + ":" + who.Subject
	}
	return "admin"
}

func (a approvalsAPI) list(c *gin.Context) {
	if !wire.OnlyQuery(c, "cursor", "limit") {
		return
	}
	cursor, limit, ok := wire.PageQuery(c)
	if !ok {
		return
	}
	after, ok := wire.CursorKey(c, cursor)
	if !ok {
		return
	}
	items, next, err := a.rt.Approvals(c.Request.Context(), reviewerUsers(c), after, limit)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	page := wire.Page[agent.Approval]{Items: items}
	if next != "" {
		page.Next = wire.Cursor(next)
	}
	wire.OK(c, http.StatusOK, page)
}

type approvalAnswer struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
}

func (a approvalsAPI) answer(c *gin.Context) {
	var body approvalAnswer
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &body) {
		return
	}
	if body.Approved == nil {
		wire.Fail(c, http.StatusBadRequest, "approved: is required (true or false)")
		return
	}
	err := a.rt.AnswerApproval(c.Request.Context(), c.Param("askId"), *body.Approved, body.Reason, answeredBy(c), reviewerUsers(c))
	switch {
	case errors.Is(err, agent.ErrAlreadyAnswered), errors.Is(err, agent.ErrNotWaiting):
		wire.Fail(c, http.StatusConflict, "ask %s: %v", c.Param("askId"), err)
	case err != nil:
		wire.FailErr(c, err)
	default:
		wire.OK(c, http.StatusOK, gin.H{"askId": c.Param("askId"), "approved": *body.Approved})
	}
}

// stream sends an `approvals` event with the number of pending asks whenever it may have changed:
// at once, after every ask made or answered in this process, and every few seconds for the
// asks of other replicas.
func (a approvalsAPI) stream(c *gin.Context) {
	if !wire.OnlyQuery(c) {
		return
	}
	ctx := c.Request.Context()
	users := reviewerUsers(c)
	sse := wire.StartSSE(c.Writer, nil)
	beat := time.NewTicker(orDefault(a.heartbeat))
	defer beat.Stop()
	last := "-"
	for {
		changed := a.rt.ApprovalsChanged() // taken before the read, so no change falls between
		items, _, err := a.rt.Approvals(ctx, users, "", wire.MaxLimit)
		if err != nil {
			return
		}
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.AskID
		}
		if key := strings.Join(ids, ","); key != last {
			last = key
			b, _ := json.Marshal(gin.H{"pending": len(ids), "askIds": ids}) // strings and an int: cannot fail
			if sse.Event("", "approvals", b) != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-beat.C:
			// Each beat re-reads too: another replica's asks are not announced here.
			if sse.Comment("ping") != nil {
				return
			}
		}
	}
}

type overviewAPI struct {
	db *storage.DB
	d  breakerLister
}

// breakerLister is the part of the dispatcher the overview reads.
type breakerLister interface{ Breakers() []breaker.Status }

// overview is storage's overview plus the breakers open now (they live in memory, per replica).
type overview struct {
	storage.Overview
	OpenBreakers int `json:"openBreakers"`
}

// get sums the last hour for the console's first page.
func (o overviewAPI) get(c *gin.Context) {
	if !wire.OnlyQuery(c) {
		return
	}
	now := time.Now()
	ov, err := o.db.ReadOverview(c.Request.Context(), now.Add(-time.Hour), now)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	out := overview{Overview: ov}
	for _, b := range o.d.Breakers() {
		if b.State != "closed" {
			out.OpenBreakers++
		}
	}
	wire.OK(c, http.StatusOK, out)
}
