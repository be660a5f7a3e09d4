package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
)

// tasksAPI serves scheduled agent tasks: CRUD, run-now and the firing history. The scheduler
// validates; a change takes effect at once. Handlers pass c.Request.Context(), not c: gin pools
// its contexts, and database/sql may still read a context after the handler returned.
type tasksAPI struct{ s *scheduler.Scheduler }

// ready answers 503 when the daemon runs no scheduler.
func (a tasksAPI) ready(c *gin.Context) bool {
	if a.s == nil {
		wire.Fail(c, http.StatusServiceUnavailable, "the scheduler is not running")
		return false
	}
	return true
}

func (a tasksAPI) create(c *gin.Context) {
	var t scheduler.Task
	if !a.ready(c) || !wire.OnlyQuery(c) || !wire.BindStrict(c, &t) {
		return
	}
	out, err := a.s.Create(c.Request.Context(), t)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKNoted(c, http.StatusCreated, out, postedID("task", t.ID))
}

// list answers one page of tasks by id.
func (a tasksAPI) list(c *gin.Context) {
	if !a.ready(c) || !wire.OnlyQuery(c, "cursor", "limit") {
		return
	}
	cursor, limit, good := wire.PageQuery(c)
	if !good {
		return
	}
	f := storage.TaskFilter{Limit: limit + 1}
	if f.AfterID, good = wire.CursorID(c, cursor); !good {
		return
	}
	tasks, err := a.s.List(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, wire.PageOf(tasks, limit, func(t scheduler.Task) string { return wire.IDKey(t.ID) }))
}

func (a tasksAPI) get(c *gin.Context) {
	id, good := pathID(c)
	if !good || !a.ready(c) || !wire.OnlyQuery(c) {
		return
	}
	t, err := a.s.Get(c.Request.Context(), id)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, t)
}

func (a tasksAPI) replace(c *gin.Context) {
	id, good := pathID(c)
	if !good || !a.ready(c) {
		return
	}
	var t scheduler.Task
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &t) || !sameID(c, t.ID, id) {
		return
	}
	out, err := a.s.Replace(c.Request.Context(), id, t)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, out)
}

func (a tasksAPI) delete(c *gin.Context) {
	id, good := pathID(c)
	if !good || !a.ready(c) || !wire.OnlyQuery(c) {
		return
	}
	if err := a.s.Delete(c.Request.Context(), id); err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"id": id, "deleted": true})
}

// run fires the task now: 202 with the firing (its requestId follows the run on the platform
// stream), or 409 when the task is still running.
func (a tasksAPI) run(c *gin.Context) {
	id, good := pathID(c)
	if !good || !a.ready(c) || !wire.OnlyQuery(c) {
		return
	}
	run, err := a.s.RunNow(c.Request.Context(), id)
	switch {
	case errors.Is(err, scheduler.ErrStopped):
		wire.Fail(c, http.StatusServiceUnavailable, "the scheduler is stopping")
	case err != nil:
		wire.FailErr(c, err)
	case run.Status == storage.TaskRunSkipped:
		wire.Fail(c, http.StatusConflict, "task %d is %s; this firing was skipped (task run %d)", id, run.Reason, run.ID)
	default:
		wire.OK(c, http.StatusAccepted, run)
	}
}

// runs answers one page of the task's firings, newest first, filtered by ?status=.
func (a tasksAPI) runs(c *gin.Context) {
	id, good := pathID(c)
	if !good || !a.ready(c) || !wire.OnlyQuery(c, "status", "cursor", "limit") {
		return
	}
	cursor, limit, good := wire.PageQuery(c)
	if !good {
		return
	}
	f := storage.TaskRunFilter{TaskID: id, Status: c.Query("status"), Limit: limit + 1}
	if f.BeforeID, good = wire.CursorID(c, cursor); !good {
		return
	}
	status := f.Status
	switch status {
	case "", storage.TaskRunRunning, storage.TaskRunSucceeded, storage.TaskRunFailed, storage.TaskRunSkipped,
		storage.TaskRunDenied, storage.TaskRunInterrupted, storage.TaskRunSuspended:
	default:
		wire.Fail(c, http.StatusBadRequest, "status: %q is not one of running, succeeded, failed, skipped, denied, interrupted, suspended", status)
		return
	}
	runs, err := a.s.Runs(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, wire.PageOf(runs, limit, func(r storage.TaskRun) string { return wire.IDKey(r.ID) }))
}
