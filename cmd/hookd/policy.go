package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
)

func newPolicyCmd() *cobra.Command {
	return newGroup("policy", "try policy hooks before the daemon enforces them", newPolicyTestCmd())
}

// policySuite is a test file: the hook file of the policy and cases of event → expected decision.
type policySuite struct {
	Policy string       `json:"policy"` // the hook file, relative to the test file
	Hook   string       `json:"hook"`   // the hook's name, when the file holds several
	Cases  []policyCase `json:"cases"`
}

type policyCase struct {
	Name  string `json:"name"`
	Event struct {
		HookType    dispatcher.HookType `json:"hookType"` // the hook's when absent
		SessionID   *int64              `json:"sessionId"`
		PrincipalID *int64              `json:"principalId"`
		AgentID     *int64              `json:"agentId"`
		TraceID     string              `json:"traceId"`
		Context     json.RawMessage     `json:"context"`
	} `json:"event"`
	Decision      string          `json:"decision"`
	Rule          *string         `json:"rule"`   // "" expects the default
	Reason        *string         `json:"reason"` // checked when given
	ModifiedValue json.RawMessage `json:"modifiedValue"`
	// FromFailureMode expects the policy to fail on this event (an evaluation error, a cost
	// overrun) so that failureMode decides. Without it such a case fails whatever the decision:
	// a deny by a broken rule under failureMode DENY is not the rule's deny.
	FromFailureMode bool `json:"fromFailureMode"`
}

func newPolicyTestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "test FILE|DIR...",
		Short: "run policy test cases (*_test.yaml: event → expected decision) offline; exit 1 if one fails",
		Long: `Runs the cases of each test file against the policy hook it names, in-process, exactly as the
daemon would evaluate it (failureMode included), and prints PASS or FAIL per case. A directory
means its *_test.yaml files. See docs/policies.md for the file format.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files []string
			for _, a := range args {
				fs, err := filesOf(a, true)
				if err != nil {
					return err
				}
				files = append(files, fs...)
			}
			if len(files) == 0 {
				return usageErrorf("no test files (*_test.yaml) in %v", args)
			}
			out := cmd.OutOrStdout()
			passed, failed := 0, 0
			for _, f := range files {
				results, disabled, err := runSuite(cmd.Context(), f)
				if err != nil {
					return err
				}
				if disabled != "" {
					// Tried before it is enabled, as tests are for; but the daemon does not ask it yet.
					fmt.Fprintf(out, "note %s: hook %q is disabled: the daemon asks it only once it is enabled\n", f, disabled)
				}
				for _, r := range results {
					if r.problem == "" {
						passed++
						fmt.Fprintf(out, "PASS %s: %s\n", f, r.name)
					} else {
						failed++
						fmt.Fprintf(out, "FAIL %s: %s: %s\n", f, r.name, r.problem)
					}
				}
			}
			fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
			if failed > 0 {
				return fmt.Errorf("%d of %d policy cases failed", failed, passed+failed)
			}
			return nil
		},
	}
}

type caseResult struct{ name, problem string }

// runSuite runs the cases of the test file path, and names the hook they test when it is disabled.
func runSuite(ctx context.Context, path string) (results []caseResult, disabled string, err error) {
	docs, err := yamlDocuments(path)
	if err != nil {
		return nil, "", err
	}
	if len(docs) != 1 {
		return nil, "", fmt.Errorf("%s: a test file is one document with policy and cases", path)
	}
	var s policySuite
	if err := hookdtype.DecodeStrict(docs[0], &s, ""); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if s.Policy == "" || len(s.Cases) == 0 {
		return nil, "", fmt.Errorf("%s: policy (the hook file) and cases are required", path)
	}
	hookFile := s.Policy
	if !filepath.IsAbs(hookFile) {
		hookFile = filepath.Join(filepath.Dir(path), hookFile)
	}
	hooks, err := loadHooks([]string{hookFile}, true)
	if err != nil {
		return nil, "", err
	}
	var hook *dispatcher.Hook
	for i := range hooks {
		if hooks[i].DispatchType == dispatcher.DispatchPolicy && (s.Hook == "" || hooks[i].HookName == s.Hook) {
			if hook != nil {
				return nil, "", fmt.Errorf("%s: %s holds several policy hooks; name one with hook", path, hookFile)
			}
			hook = &hooks[i]
		}
	}
	if hook == nil {
		return nil, "", fmt.Errorf("%s: no policy hook %q in %s", path, s.Hook, hookFile)
	}
	var out []caseResult
	for i, c := range s.Cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("cases[%d]", i)
		}
		out = append(out, caseResult{name: name, problem: runCase(ctx, *hook, c)})
	}
	if hook.Enabled != nil && !*hook.Enabled {
		disabled = hook.HookName
	}
	return out, disabled, nil
}

// runCase evaluates one case; the problem is "" when it passes.
func runCase(ctx context.Context, h dispatcher.Hook, c policyCase) string {
	e := c.Event
	if e.HookType == "" {
		e.HookType = h.HookType
	}
	if e.HookType != h.HookType {
		return fmt.Sprintf("event.hookType %s, but the hook is %s", e.HookType, h.HookType)
	}
	ctxValue, err := dispatcher.DecodeContext(e.HookType, e.Context)
	if err != nil {
		return "event." + err.Error()
	}
	ev := dispatcher.Event{HookType: e.HookType, TraceID: e.TraceID, SessionID: e.SessionID, PrincipalID: e.PrincipalID,
		AgentID: e.AgentID, Context: ctxValue}
	if err := h.WouldAsk(ev); err != nil {
		return err.Error() // the daemon would not ask the hook: its decision here would be no one's
	}
	got, err := dispatcher.EvaluatePolicy(ctx, h, ev)
	if err != nil {
		return err.Error()
	}
	describe := func() string {
		s := got.Decision
		if got.Rule != "" {
			s += " by rule " + got.Rule
		} else {
			s += " by default"
		}
		if got.Error != "" {
			s += " (" + got.Error + ")"
		}
		return s
	}
	switch {
	case c.Decision == "":
		return "decision: is required"
	case got.FromFailureMode && !c.FromFailureMode:
		return fmt.Sprintf("the policy failed (%s), so failureMode decided %s; set fromFailureMode: true if the case tests that", got.Error, got.Decision)
	case c.FromFailureMode && !got.FromFailureMode:
		return fmt.Sprintf("want the policy to fail, got %s", describe())
	case got.Decision != c.Decision:
		return fmt.Sprintf("want %s, got %s", c.Decision, describe())
	case c.Rule != nil && got.Rule != *c.Rule:
		return fmt.Sprintf("want rule %q, got %s", *c.Rule, describe())
	case c.Reason != nil && got.Reason != *c.Reason:
		return fmt.Sprintf("want reason %q, got %q", *c.Reason, got.Reason)
	}
	if len(c.ModifiedValue) > 0 {
		if got.ModifiedValue == nil {
			return "want a modifiedValue, got none"
		}
		if !sameValue(e.HookType, c.ModifiedValue, *got.ModifiedValue) {
			shown := *got.ModifiedValue
			if e.HookType != dispatcher.PreToolUse {
				shown = string(hookdtype.AppendJSONString(nil, shown)) // text, quoted as the expected one is
			}
			return fmt.Sprintf("want modifiedValue %s, got %s", c.ModifiedValue, shown)
		}
	}
	return ""
}

// sameValue compares an expected modifiedValue (a YAML object, or a string) with the one a hook of
// type t gave. pre_tool_use's is the tool's arguments: compared as JSON values when both are JSON,
// else as text. Any other type's is the new input, text compared exactly: a prompt typed as
// {"amount": 1000.00} is not {"amount":1e3}, though the two are one JSON value.
func sameValue(t dispatcher.HookType, want json.RawMessage, got string) bool {
	var s string
	text := json.Unmarshal(want, &s) == nil
	if text && s == got {
		return true
	}
	if t != dispatcher.PreToolUse {
		return false
	}
	if text {
		want = json.RawMessage(s)
	}
	// Numbers as written (json.Number), not as float64: 9007199254740993 is not 9007199254740992.
	decode := func(b []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	a, ok1 := decode(want)
	b, ok2 := decode([]byte(got))
	return ok1 && ok2 && sameJSON(a, b)
}

// sameJSON compares two decoded JSON values, numbers by their exact value (1 is 1.0).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		var ra, rb big.Rat
		_, okA := ra.SetString(string(a))
		_, okB := rb.SetString(string(b))
		return ok && okA && okB && ra.Cmp(&rb) == 0
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
