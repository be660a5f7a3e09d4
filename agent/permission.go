package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Permission behaviours.
const (
	BehaviorAllow = "allow"
	BehaviorAsk   = "ask"
	BehaviorDeny  = "deny"
)

// permission decides by the rules of the session, the user and everyone: deny beats ask beats
// allow; with no rule, read-only tools are allowed and the rest follow the configured default.
func (r *run) permission(spec tools.Spec, args json.RawMessage) (behavior, description, pattern string) {
	rules, err := r.rt.db.RulesFor(r.ctx, r.spec.SessionID, r.spec.UserID, time.Now())
	if err != nil {
		r.rt.log.ErrorContext(r.ctx, "reading permission rules failed; asking", "err", err)
		return BehaviorAsk, "permission rules unavailable", ""
	}
	subject := tools.Subject(spec, args)
	rank := map[string]int{BehaviorAllow: 1, BehaviorAsk: 2, BehaviorDeny: 3}
	for _, rule := range rules {
		tm, err1 := hookdtype.ParseNameMatch(rule.ToolName)
		cm, err2 := hookdtype.ParseNameMatch(rule.RuleContent)
		if err1 != nil || err2 != nil || !tm.Match(spec.Name) || !cm.Match(subject) {
			continue
		}
		if rank[rule.Behavior] > rank[behavior] {
			behavior = rule.Behavior
			description = fmt.Sprintf("rule %d (%s, %s scope): %s %s → %s", rule.ID, rule.Source, rule.Scope, rule.ToolName, rule.RuleContent, rule.Behavior)
			pattern = rule.RuleContent
		}
	}
	if behavior != "" {
		return behavior, description, pattern
	}
	if spec.ReadOnly {
		return BehaviorAllow, "read-only tools are allowed by default", "*"
	}
	d := r.rt.cfg.DefaultBehavior
	return d, "tools that write or execute need confirmation by default", "*"
}

func (rt *Runtime) remember(ctx context.Context, rec storage.Run, a Answer) error {
	scope, key := a.RuleScope, fmt.Sprint(rec.SessionID)
	switch scope {
	case "user":
		key = rec.UserID
	case "global":
		key = ""
	default:
		scope = "session"
	}
	var rules []*storage.PermissionRule
	for _, r := range a.Rules {
		if r.Behavior != BehaviorAllow && r.Behavior != BehaviorAsk && r.Behavior != BehaviorDeny {
			return fmt.Errorf("rule behavior %q: want allow, ask or deny", r.Behavior)
		}
		if _, err := hookdtype.ParseNameMatch(r.RuleContent); err != nil {
			return fmt.Errorf("rule_content: %v", err)
		}
		src := r.Source
		if src == "" {
			src = "userSettings"
		}
		rules = append(rules, &storage.PermissionRule{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior,
			Source: src, Scope: scope, ScopeKey: key})
	}
	return rt.db.AddRules(ctx, rules)
}
