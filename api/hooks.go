package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

type hooksAPI struct{ reg *dispatcher.Registry }

func (a hooksAPI) create(c *gin.Context) {
	var h dispatcher.Hook
	dryRun, good := dryRunQuery(c)
	if !good || !wire.BindStrict(c, &h) {
		return
	}
	sent := h.ID
	h.ID = 0
	if dryRun {
		a.check(c, 0, h, postedID("hook", sent))
		return
	}
	out, err := a.reg.Create(c.Request.Context(), h)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKNoted(c, http.StatusCreated, out.Masked(), append(out.Notes(), postedID("hook", sent)...))
}

// postedID is the note of a create whose body named the id sent (a hook or task read with GET
// and sent back, say): a POST always makes a new one, a copy, and a caller who meant to change
// that one is told how.
func postedID(kind string, sent int64) []string {
	if sent == 0 {
		return nil
	}
	return []string{fmt.Sprintf("id: %d is not taken from a POST, which always creates a new %s; PUT /api/%ss/%d changes %s %d",
		sent, kind, kind, sent, kind, sent)}
}

// dryRunQuery reads ?dryRun=true|false, the only query parameter of a hook write.
func dryRunQuery(c *gin.Context) (dryRun, ok bool) {
	if !wire.OnlyQuery(c, "dryRun") {
		return false, false
	}
	switch c.Query("dryRun") {
	case "", "false":
		return false, true
	case "true":
		return true, true
	}
	wire.Fail(c, http.StatusBadRequest, "dryRun: must be true or false")
	return false, false
}

// check answers a dry run of a write of hook id (0: a create): the hook as it would be stored,
// with nothing stored.
func (a hooksAPI) check(c *gin.Context, id int64, h dispatcher.Hook, notes []string) {
	out, err := a.reg.Check(c.Request.Context(), id, h)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKNoted(c, http.StatusOK, out.Masked(), append(out.Notes(), notes...))
}

// list answers one page of hooks by id: ?hookType= and ?enabled= filter, ?agentId= keeps the
// hooks that apply to that agent (its own and those of every agent).
func (a hooksAPI) list(c *gin.Context) {
	if !wire.OnlyQuery(c, "hookType", "agentId", "enabled", "cursor", "limit") {
		return
	}
	cursor, limit, good := wire.PageQuery(c)
	if !good {
		return
	}
	f := storage.HookFilter{HookType: c.Query("hookType"), Limit: limit + 1}
	if f.AfterID, good = wire.CursorID(c, cursor); !good {
		return
	}
	if t := dispatcher.HookType(f.HookType); t != "" && !t.Valid() {
		wire.Fail(c, http.StatusBadRequest, "hookType: %q is not one of %v", t, dispatcher.HookTypes)
		return
	}
	if s, found := c.GetQuery("agentId"); found {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			wire.Fail(c, http.StatusBadRequest, "agentId: must be a positive integer")
			return
		}
		f.AppliesTo = &v
	}
	if s, found := c.GetQuery("enabled"); found {
		v, err := strconv.ParseBool(s)
		if err != nil {
			wire.Fail(c, http.StatusBadRequest, "enabled: must be true or false")
			return
		}
		f.Enabled = &v
	}
	hooks, err := a.reg.List(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	for i, h := range hooks {
		hooks[i] = h.Masked()
	}
	wire.OK(c, http.StatusOK, wire.PageOf(hooks, limit, func(h dispatcher.Hook) string { return wire.IDKey(h.ID) }))
}

func (a hooksAPI) get(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
		return
	}
	h, err := a.reg.Get(c.Request.Context(), id)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, h.Masked())
}

func (a hooksAPI) replace(c *gin.Context) {
	id, good := pathID(c)
	if !good {
		return
	}
	var h dispatcher.Hook
	dryRun, good := dryRunQuery(c)
	if !good || !wire.BindStrict(c, &h) || !sameID(c, h.ID, id) {
		return
	}
	if dryRun {
		a.check(c, id, h, nil)
		return
	}
	out, err := a.reg.Replace(c.Request.Context(), id, h)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKNoted(c, http.StatusOK, out.Masked(), out.Notes())
}

func (a hooksAPI) delete(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
		return
	}
	if err := a.reg.Delete(c.Request.Context(), id); err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"id": id, "deleted": true})
}

// sameID answers 400 unless a PUT body's id is absent or the one its path names, and reports
// whether it is.
func sameID(c *gin.Context, bodyID, pathID int64) bool {
	if bodyID != 0 && bodyID != pathID {
		wire.Fail(c, http.StatusBadRequest, "id: %d, but the path names %d; a PUT replaces what its path names", bodyID, pathID)
		return false
	}
	return true
}

// pathID reads the :id parameter, answering 400 when it is not a positive integer.
func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		wire.Fail(c, http.StatusBadRequest, "id: must be a positive integer")
		return 0, false
	}
	return id, true
}
