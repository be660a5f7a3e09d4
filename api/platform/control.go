package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/wire"
)

// replyRequest is the body of POST /api/agent/permission/reply.
type replyRequest struct {
	AskID    *string `json:"askId"`
	Approved *bool   `json:"approved"`
	Reason   string  `json:"reason"`
	// Remember, with an approval, allows later calls of the same tool on the same subject (the
	// path, URL or command) in this session without asking.
	Remember bool   `json:"remember"`
	UserID   string `json:"userId"`
}

func (a *api) reply(c *gin.Context) {
	ctx := c.Request.Context()
	var body replyRequest
	if !wire.BindStrict(c, &body) {
		return
	}
	caller, ok := a.identify(c, body.UserID)
	if !ok {
		return
	}
	if body.AskID == nil || strings.TrimSpace(*body.AskID) == "" {
		wire.Fail(c, http.StatusBadRequest, "askId: is required")
		return
	}
	if body.Approved == nil {
		wire.Fail(c, http.StatusBadRequest, "approved: is required (true or false)")
		return
	}
	askID := strings.TrimSpace(*body.AskID)
	owner := a.askOwner(ctx, caller, askID)
	requestID, err := a.Runtime.RunOfAsk(ctx, owner, askID)
	if err != nil {
		a.fail(c, "askId", err)
		return
	}
	// The reply names one ask, which it answers once, as the approvals API does: a second reply
	// is refused even when it says the same. (A chat client's resend answers every ask of a
	// pause, and the runtime takes one answered the same way meanwhile as a no-op.)
	if v, err := a.Runtime.Ask(ctx, askID); err == nil && v.Status != agent.AskPending {
		wire.Fail(c, http.StatusConflict, "askId: ask %s was already answered (%s)", askID, v.Status)
		return
	}
	ans := agent.Answer{AskID: askID, Approved: *body.Approved, Reason: body.Reason}
	if owner != caller.UserID {
		// A reviewer, recorded as the approvals API records one: with its role, so that a
		// reviewer whose userId is "admin" is not taken for an admin in the decision log.
		ans.AnsweredBy = string(wire.RoleReviewer) + ":" + caller.UserID
	}
	remembered := false
	if ans.Approved {
		call, err := a.askCall(ctx, owner, requestID, askID)
		if err != nil {
			a.fail(c, "askId", err)
			return
		}
		// The approval is for the arguments asked about, unchanged. Saying so explicitly matters:
		// agent.Answer stores an absent Input as JSON null, which the resumed run would take for
		// edited arguments "null".
		ans.Arguments, ans.Input = json.RawMessage(call.Arguments), json.RawMessage(call.Arguments)
		if body.Remember && owner != caller.UserID {
			wire.Fail(c, http.StatusForbidden, "remember: a reviewer answers this ask only; rules for the session are its user's")
			return
		}
		if body.Remember {
			spec, ok := a.toolSpec(call.ToolName)
			if !ok {
				wire.Fail(c, http.StatusConflict, "remember: tool %q is not registered here", call.ToolName)
				return
			}
			subject := tools.Subject(spec, json.RawMessage(call.Arguments))
			ans.Rules = []agent.RuleSpec{{ToolName: call.ToolName, RuleContent: exactly(subject), Behavior: agent.BehaviorAllow, Source: "userSettings"}}
			if err := agent.CheckRuleMatch(call.ToolName, ans.Rules[0].RuleContent); err != nil {
				// A subject too long for a rule (every rule is compiled again at every call):
				// the user can still approve this call alone.
				wire.Fail(c, http.StatusBadRequest, "remember: the call cannot be remembered as a rule (%v); approve it without remember", err)
				return
			}
			ans.RuleScope, remembered = "session", true
		}
	}
	if err := a.Runtime.Answer(ctx, owner, requestID, []agent.Answer{ans}); err != nil {
		a.fail(c, "askId", err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"askId": askID, "requestId": requestID, "approved": ans.Approved, "remembered": remembered})
}

// askOwner is the user whose ask askID is, when caller may answer it as a reviewer; else the
// caller itself, so another user's ask stays not found.
func (a *api) askOwner(ctx context.Context, caller wire.Caller, askID string) string {
	if caller.Role != wire.RoleReviewer {
		return caller.UserID
	}
	if ask, err := a.Runtime.Ask(ctx, askID); err == nil && caller.MayAnswerFor(ask.UserID) {
		return ask.UserID
	}
	return caller.UserID
}

// askCall is the call an ask of userID's run requestID is about.
func (a *api) askCall(ctx context.Context, userID, requestID, askID string) (agent.AskView, error) {
	asks, err := a.Runtime.Asks(ctx, userID, requestID, "")
	if err != nil {
		return agent.AskView{}, err
	}
	for _, ask := range asks {
		if ask.AskID == askID {
			return ask, nil
		}
	}
	return agent.AskView{}, fmt.Errorf("%w: no ask %s in run %s", agent.ErrNotWaiting, askID, requestID)
}

// toolSpec is the spec of one of the runtime's tools: what names a call's subject.
func (a *api) toolSpec(name string) (tools.Spec, bool) {
	for _, s := range a.Runtime.Tools() {
		if s.Name == name {
			return s, true
		}
	}
	return tools.Spec{}, false
}

// exactly is a toolNameMatch expression that matches s and nothing else. A plain name is the
// expression itself; what the syntax gives a meaning to ("" and "*" match all, "|" separates
// names, "/…/" is a regex, spaces are trimmed) becomes an anchored, quoted regex.
func exactly(s string) string {
	plain := s != "" && s != "*" && s == strings.TrimSpace(s) && !strings.Contains(s, "|") &&
		!(len(s) >= 2 && s[0] == '/' && s[len(s)-1] == '/')
	if plain {
		return s
	}
	return "/^" + regexp.QuoteMeta(s) + "$/"
}

func (a *api) runControl(c *gin.Context, op func(ctx context.Context, userID, requestID string) error) {
	caller, ok := a.identify(c, "")
	if !ok {
		return
	}
	requestID := strings.TrimSpace(c.Param("requestId"))
	if err := op(c.Request.Context(), caller.UserID, requestID); err != nil {
		a.fail(c, "requestId", err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"requestId": requestID})
}

// stop ends the run (MESSAGE_FAILED with errorCode INTERRUPTED on its stream).
func (a *api) stop(c *gin.Context) { a.runControl(c, a.Runtime.Stop) }

// suspend pauses the run at its next step boundary (MESSAGE_SUSPENDED, MANUAL_SUSPEND).
func (a *api) suspend(c *gin.Context) { a.runControl(c, a.Runtime.Suspend) }

// resumeRun continues a run paused by suspend, the token budget or a shutdown; its stream goes on.
func (a *api) resumeRun(c *gin.Context) { a.runControl(c, a.Runtime.Resume) }

// inputRequest is the body of POST /api/agent/run/{requestId}/input.
type inputRequest struct {
	Content *string `json:"content"`
	UserID  string  `json:"userId"`
}

// input queues supplementary input; the run takes it at its next step boundary
// (SUPPLEMENTARY_INPUT_CONSUMED).
func (a *api) input(c *gin.Context) {
	var body inputRequest
	if !wire.BindStrict(c, &body) {
		return
	}
	caller, ok := a.identify(c, body.UserID)
	if !ok {
		return
	}
	if body.Content == nil || strings.TrimSpace(*body.Content) == "" {
		wire.Fail(c, http.StatusBadRequest, "content: is required")
		return
	}
	requestID := strings.TrimSpace(c.Param("requestId"))
	inputID, err := a.Runtime.AppendInput(c.Request.Context(), caller.UserID, requestID, *body.Content)
	if err != nil {
		a.fail(c, "requestId", err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"requestId": requestID, "inputId": inputID})
}
