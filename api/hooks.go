package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
)

type hooksAPI struct{ reg *dispatcher.Registry }

func (a hooksAPI) create(c *gin.Context) {
	var h dispatcher.Hook
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &h) {
		return
	}
	h.ID = 0
	out, err := a.reg.Create(c.Request.Context(), h)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusCreated, out.Masked())
}

func (a hooksAPI) list(c *gin.Context) {
	if !wire.OnlyQuery(c, "hookType", "agentId") {
		return
	}
	t := dispatcher.HookType(c.Query("hookType"))
	if t != "" && !t.Valid() {
		wire.Fail(c, http.StatusBadRequest, "hookType: %q is not a hook type", t)
		return
	}
	var agentID *int64
	if s := c.Query("agentId"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			wire.Fail(c, http.StatusBadRequest, "agentId: must be an integer")
			return
		}
		agentID = &v
	}
	hooks, err := a.reg.List(c.Request.Context(), t, agentID)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	out := make([]dispatcher.Hook, len(hooks))
	for i, h := range hooks {
		out[i] = h.Masked()
	}
	wire.OK(c, http.StatusOK, out)
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
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &h) {
		return
	}
	out, err := a.reg.Replace(c.Request.Context(), id, h)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, out.Masked())
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

// pathID reads the :id parameter, answering 400 when it is not a positive integer.
func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		wire.Fail(c, http.StatusBadRequest, "id: must be a positive integer")
		return 0, false
	}
	return id, true
}
