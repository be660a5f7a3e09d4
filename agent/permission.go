package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/dispatcher"
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
		if err := errors.Join(err1, err2); err != nil {
			// Skipped, a rule that cannot be read lets through what it may have been written to
			// deny: the call is asked about, as when the rules cannot be read at all, and a valid
			// deny still wins.
			r.rt.log.ErrorContext(r.ctx, "a permission rule cannot be parsed; asking", "ruleId", rule.ID,
				"toolName", rule.ToolName, "ruleContent", rule.RuleContent, "err", err)
			if rank[BehaviorAsk] > rank[behavior] {
				behavior = BehaviorAsk
				description = fmt.Sprintf("rule %d (%s, %s scope) cannot be parsed (%v); the call is asked about", rule.ID, rule.Source, rule.Scope, err)
				pattern = ""
			}
			continue
		}
		if !tm.Match(spec.Name) || !cm.Match(subject) {
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

// remember stores the rules an answer gives, checked by Reply before anything was kept.
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
		src := r.Source
		if src == "" {
			src = "userSettings"
		}
		rules = append(rules, &storage.PermissionRule{ToolName: r.ToolName, RuleContent: r.RuleContent, Behavior: r.Behavior,
			Source: src, Scope: scope, ScopeKey: key})
	}
	return rt.db.AddRules(ctx, rules)
}

// The parts of a permission rule a RuleError names, as the rule is written (RuleSpec).
const (
	RuleToolName = "tool_name"
	RuleContent  = "rule_content"
	RuleBehavior = "behavior"
)

// A RuleError is a permission rule refused: Field (RuleToolName, RuleContent or RuleBehavior)
// of the Index-th rule of an answer is wrong.
type RuleError struct {
	Index int
	Field string
	Err   error
}

func (e *RuleError) Error() string { return fmt.Sprintf("rules[%d].%s: %v", e.Index, e.Field, e.Err) }
func (e *RuleError) Unwrap() error { return e.Err }

// CheckRuleMatch checks a rule's tool name and subject expressions as every tool call the rule
// is weighed at will parse them (permission): a rule stored that cannot be parsed makes every
// call ask. The error is a *RuleError naming the expression.
func CheckRuleMatch(toolName, ruleContent string) error {
	if strings.TrimSpace(toolName) == "" {
		// Parsed, it is every tool: a rule meant for one would govern them all.
		return &RuleError{Field: RuleToolName, Err: errors.New(`is required (a toolNameMatch expression, * for every tool)`)}
	}
	if err := dispatcher.CheckToolNameMatch(toolName); err != nil {
		return &RuleError{Field: RuleToolName, Err: err}
	}
	if len(ruleContent) > dispatcher.MaxToolNameMatch {
		// Every rule is compiled again at every tool call the runtime checks.
		return &RuleError{Field: RuleContent, Err: fmt.Errorf("is %d bytes long; at most %d are accepted", len(ruleContent), dispatcher.MaxToolNameMatch)}
	}
	if _, err := hookdtype.ParseNameMatch(ruleContent); err != nil {
		return &RuleError{Field: RuleContent, Err: err}
	}
	return nil
}

// checkRules checks the rules an answer gives, whole, naming the first one wrong.
func checkRules(rules []RuleSpec) error {
	for i, r := range rules {
		var err error
		switch r.Behavior {
		case BehaviorAllow, BehaviorAsk, BehaviorDeny:
			err = CheckRuleMatch(r.ToolName, r.RuleContent)
		default:
			err = &RuleError{Field: RuleBehavior, Err: fmt.Errorf("%q: want allow, ask or deny", r.Behavior)}
		}
		if re, ok := errors.AsType[*RuleError](err); ok {
			re.Index = i
			return re
		}
	}
	return nil
}
