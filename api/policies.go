package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
)

// policiesAPI serves trial evaluations of policies: what a policy would decide about a sample
// event, with nothing recorded.
type policiesAPI struct {
	reg *dispatcher.Registry
}

type evaluateRequest struct {
	// Exactly one of PolicyConfig (with FailureMode) and HookID names the policy. Sent empty, a
	// failureMode or hookId is refused, as a hook's failureMode is: "" would be ALLOW, silently.
	PolicyConfig *policy.Config   `json:"policyConfig"`
	FailureMode  string           `json:"failureMode" strict:"nonempty"`
	HookID       int64            `json:"hookId" strict:"nonempty"`
	Event        *dispatchRequest `json:"event"`
}

func (a policiesAPI) evaluate(c *gin.Context) {
	var req evaluateRequest
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &req) {
		return
	}
	var h dispatcher.Hook
	var stored dispatcher.Hook // the stored hook hookId names
	switch {
	case (req.PolicyConfig == nil) == (req.HookID == 0):
		wire.Fail(c, http.StatusBadRequest, "policyConfig: give either policyConfig or hookId")
		return
	case req.HookID != 0:
		if req.FailureMode != "" {
			wire.Fail(c, http.StatusBadRequest, "failureMode: the hook's own applies with hookId")
			return
		}
		var err error
		stored, err = a.reg.Get(c.Request.Context(), req.HookID)
		if err != nil {
			wire.FailErr(c, err)
			return
		}
		if stored.DispatchType != dispatcher.DispatchPolicy {
			wire.Fail(c, http.StatusBadRequest, "hookId: hook %d is a %s hook, not a policy", req.HookID, stored.DispatchType)
			return
		}
		h = dispatcher.Hook{HookName: stored.HookName, PolicyConfig: stored.PolicyConfig,
			DispatchConfig: dispatcher.DispatchConfig{FailureMode: stored.DispatchConfig.FailureMode}}
	default:
		h = dispatcher.Hook{HookName: "policy", PolicyConfig: req.PolicyConfig,
			DispatchConfig: dispatcher.DispatchConfig{FailureMode: req.FailureMode}}
	}
	if req.Event == nil {
		wire.Fail(c, http.StatusBadRequest, "event: is required")
		return
	}
	e := req.Event
	switch {
	case stored.HookType != "" && e.HookType == "":
		e.HookType = stored.HookType
	case stored.HookType != "" && e.HookType != stored.HookType:
		wire.Fail(c, http.StatusBadRequest, "event.hookType: %s, but hook %d is a %s hook", e.HookType, req.HookID, stored.HookType)
		return
	}
	if !e.HookType.Interceptive() {
		wire.Fail(c, http.StatusBadRequest, "event.hookType: %q is not one of user_message, pre_tool_use, pre_scheduled_task", e.HookType)
		return
	}
	if err := dispatcher.CheckTraceID(e.TraceID); err != nil {
		wire.FailErr(c, prefixed("event.", err))
		return
	}
	ctxValue, err := dispatcher.DecodeContext(e.HookType, e.Context)
	if err != nil {
		wire.FailErr(c, prefixed("event.", err))
		return
	}
	ev := dispatcher.Event{HookType: e.HookType, TraceID: e.TraceID, SessionID: e.SessionID, PrincipalID: e.PrincipalID,
		AgentID: e.AgentID, Context: ctxValue}
	if req.HookID != 0 {
		// A trial of an event no dispatch would ask the hook about shows a decision no dispatch makes.
		if err := stored.WouldAsk(ev); err != nil {
			wire.FailErr(c, err)
			return
		}
	}
	res, err := dispatcher.EvaluatePolicy(c.Request.Context(), h, ev)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	var notes []string
	if req.HookID != 0 && stored.Enabled != nil && !*stored.Enabled {
		// Tried before it is trusted, as this endpoint is for; but no dispatch asks it now.
		notes = append(notes, fmt.Sprintf("hook %d is disabled: no dispatch asks it until it is enabled; this is what it will decide then", req.HookID))
	}
	wire.OKNoted(c, http.StatusOK, res, notes)
}

// prefixed names a validation error's field below prefix: the event's context is event.context.
func prefixed(prefix string, err error) error {
	var ve *hookdtype.ValidationError
	if errors.As(err, &ve) {
		return &hookdtype.ValidationError{Field: prefix + ve.Field, Msg: ve.Msg}
	}
	return err
}
