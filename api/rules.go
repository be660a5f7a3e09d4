package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// rulesAPI lets compliance teams see, add and revoke the permission rules the runtime applies
// to tool calls (besides the hooks): deny beats ask beats allow.
type rulesAPI struct{ db *storage.DB }

type ruleRequest struct {
	ToolName    string     `json:"toolName"`
	RuleContent string     `json:"ruleContent"`
	Behavior    string     `json:"behavior"`
	Source      string     `json:"source"`
	Scope       string     `json:"scope"`
	ScopeKey    string     `json:"scopeKey"`
	ExpiresAt   *time.Time `json:"expiresAt"`
}

// list answers one page of rules by id, filtered by ?scope= and ?scopeKey=.
func (a rulesAPI) list(c *gin.Context) {
	if !wire.OnlyQuery(c, "scope", "scopeKey", "cursor", "limit") {
		return
	}
	cursor, limit, good := wire.PageQuery(c)
	if !good {
		return
	}
	f := storage.RuleFilter{Scope: c.Query("scope"), ScopeKey: c.Query("scopeKey"), Limit: limit + 1}
	switch f.Scope {
	case "", "session", "user", "global":
	default:
		wire.Fail(c, http.StatusBadRequest, "scope: must be session, user or global")
		return
	}
	// A filter no rule can match would read as "no such rules": a global rule has no key, and a
	// session rule's is a session id.
	switch {
	case f.Scope == "global" && f.ScopeKey != "":
		wire.Fail(c, http.StatusBadRequest, "scopeKey: global rules have none; leave it out, or name the scope it is a key of")
		return
	case f.Scope == "session" && f.ScopeKey != "" && !isSessionID(f.ScopeKey):
		wire.Fail(c, http.StatusBadRequest, "scopeKey: %q is not a session id (a positive integer) for the session scope", f.ScopeKey)
		return
	}
	if f.AfterID, good = wire.CursorID(c, cursor); !good {
		return
	}
	rules, err := a.db.ListRules(c.Request.Context(), f)
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, wire.PageOf(rules, limit, func(r storage.PermissionRule) string { return wire.IDKey(r.ID) }))
}

func (a rulesAPI) add(c *gin.Context) {
	var req ruleRequest
	if !wire.OnlyQuery(c) || !wire.BindStrict(c, &req) {
		return
	}
	if req.Scope == "" {
		req.Scope = "global"
	}
	if req.Source == "" {
		req.Source = "admin"
	}
	bad := func(field, msg string) { wire.Fail(c, http.StatusBadRequest, "%s: %s", field, msg) }
	switch {
	case req.ToolName == "":
		bad("toolName", "is required (a toolNameMatch expression, * for every tool)")
		return
	case req.Behavior != "allow" && req.Behavior != "deny" && req.Behavior != "ask":
		bad("behavior", "must be allow, deny or ask")
		return
	case req.Scope != "session" && req.Scope != "user" && req.Scope != "global":
		bad("scope", "must be session, user or global")
		return
	case req.Scope != "global" && req.ScopeKey == "":
		bad("scopeKey", "is required for the "+req.Scope+" scope (the session id or the user id)")
		return
	case req.Scope == "global" && req.ScopeKey != "":
		// Dropped, it would make a rule meant for one user or session everyone's.
		bad("scopeKey", "does not apply to the global scope, which is every session's and user's; "+
			"name the scope it is a key of (session or user)")
		return
	case req.Scope == "session" && !isSessionID(req.ScopeKey):
		// A session's rules are found by its id written in decimal: any other key matches none.
		bad("scopeKey", fmt.Sprintf("%q is not a session id (a positive integer) for the session scope", req.ScopeKey))
		return
	case req.ExpiresAt != nil && req.ExpiresAt.Before(time.Now()):
		bad("expiresAt", "is in the past")
		return
	}
	if req.RuleContent == "" {
		req.RuleContent = "*"
	}
	if err := agent.CheckRuleMatch(req.ToolName, req.RuleContent); err != nil {
		re, _ := errors.AsType[*agent.RuleError](err)
		bad(map[string]string{agent.RuleToolName: "toolName", agent.RuleContent: "ruleContent"}[re.Field], re.Err.Error())
		return
	}
	// Valid, but likely not what was meant: "shell*" denies only a tool of that very name.
	notes := append(dispatcher.NameMatchNotes("toolName", "tool name", req.ToolName),
		dispatcher.NameMatchNotes("ruleContent", "subject", req.RuleContent)...)
	rule := &storage.PermissionRule{ToolName: req.ToolName, RuleContent: req.RuleContent, Behavior: req.Behavior,
		Source: req.Source, Scope: req.Scope, ScopeKey: req.ScopeKey, ExpiresAt: req.ExpiresAt}
	if err := a.db.AddRules(c.Request.Context(), []*storage.PermissionRule{rule}); err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OKNoted(c, http.StatusCreated, rule, notes)
}

// isSessionID reports whether key is a session id as the runtime writes one (decimal, no sign or
// leading zero).
func isSessionID(key string) bool {
	id, err := strconv.ParseInt(key, 10, 64)
	return err == nil && id > 0 && strconv.FormatInt(id, 10) == key
}

func (a rulesAPI) revoke(c *gin.Context) {
	id, good := pathID(c)
	if !good || !wire.OnlyQuery(c) {
		return
	}
	if err := a.db.DeleteRule(c.Request.Context(), id); err != nil {
		wire.FailErr(c, err)
		return
	}
	wire.OK(c, http.StatusOK, gin.H{"id": id, "deleted": true})
}
