package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/dispatcher"
)

func newHooksApplyCmd(c *adminClient) *cobra.Command {
	var paths []string
	var dryRun, resendSecrets bool
	var owner string
	cmd := &cobra.Command{
		Use:   "apply -f DIR|FILE [--dry-run]",
		Short: "make the daemon's hooks match hook files: create, update and delete the hooks they manage, by hookName",
		Long: `Reads every hook of the files (YAML or JSON, one hook per document; a directory means its
.yaml/.yml/.json files except *_test.yaml), checks them as the daemon would, and makes the daemon
match: hooks missing there are created, hooks whose definition differs are updated, and hooks it
created from files earlier (managedBy) that the files no longer hold are deleted. A hook of the
same name made by hand is taken over; one another --owner manages is refused. A secret or an auth
the files leave out (or write "") is cleared. Secrets are written ${NAME} in the files and read from
the environment. --dry-run prints the plan and changes nothing. The daemon never shows a secret, so
a changed secret alone is not seen: --resend-secrets sends the secrets of every hook that has one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var files []string
			for _, p := range paths {
				fs, err := filesOf(p, false)
				if err != nil {
					return err
				}
				files = append(files, fs...)
			}
			if len(files) == 0 {
				return usageErrorf("no hook files in %v", paths)
			}
			desired, err := loadHooks(files, false)
			if err != nil {
				return err
			}
			current, err := allHooks(c)
			if err != nil {
				return err
			}
			plan, err := planApply(desired, current, owner, resendSecrets)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			plan.print(out)
			if err := plan.check(c, out); err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintln(out, "dry run: nothing changed")
				return nil
			}
			return plan.run(c, out)
		},
	}
	cmd.Flags().StringSliceVarP(&paths, "file", "f", nil, "a hook file or a directory of them (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change and change nothing")
	cmd.Flags().BoolVar(&resendSecrets, "resend-secrets", false, "update every hook that has a secret, so a rotated secret reaches the daemon")
	cmd.Flags().StringVar(&owner, "owner", "files", "the managedBy mark of the hooks these files manage")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// allHooks reads every hook of the daemon, page by page.
func allHooks(c *adminClient) ([]dispatcher.Hook, error) {
	var out []dispatcher.Hook
	for cursor := ""; ; {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		data, err := c.call("GET", "/api/hooks?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []dispatcher.Hook `json:"items"`
			Next  string            `json:"next"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return nil, fmt.Errorf("GET /api/hooks: unexpected answer: %w", err)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
	}
}

type applyStep struct {
	op      string // create, update, delete, keep
	hook    dispatcher.Hook
	id      int64
	changes []string
}

type applyPlan []applyStep

// planApply compares the files' hooks with the daemon's, by hookName.
func planApply(desired, current []dispatcher.Hook, owner string, resendSecrets bool) (applyPlan, error) {
	// An empty owner would be every hand-made hook's (their managedBy is empty), and these files
	// would delete them; the daemon trims the mark, so a padded one would never match again.
	if owner == "" || strings.TrimSpace(owner) != owner {
		return nil, usageErrorf("--owner %q: must be a name without surrounding spaces (the hand-made hooks have none, and are never touched)", owner)
	}
	byName := map[string][]dispatcher.Hook{}
	for _, h := range current {
		byName[h.HookName] = append(byName[h.HookName], h)
	}
	var plan applyPlan
	wanted := map[string]bool{}
	for _, h := range desired {
		if h.ManagedBy != "" && h.ManagedBy != owner {
			return nil, fmt.Errorf("hook %q: managedBy %q in the file, but these files are applied as --owner %q; leave managedBy out of hook files",
				h.HookName, h.ManagedBy, owner)
		}
		h.ManagedBy = owner
		wanted[h.HookName] = true
		cur := byName[h.HookName]
		switch len(cur) {
		case 0:
			plan = append(plan, applyStep{op: "create", hook: h})
			continue
		case 1:
		default:
			return nil, fmt.Errorf("the daemon has %d hooks named %q; hooks are matched by name, so delete all but one first", len(cur), h.HookName)
		}
		if by := cur[0].ManagedBy; by != "" && by != owner {
			// Another set of files keeps it: taking it over would let the two undo each other,
			// and these files' removal of it would delete the other owner's hook.
			return nil, fmt.Errorf("hook %q (id %d) is managed by %q, not %q: apply it with --owner %s, or give this one another name",
				h.HookName, cur[0].ID, by, owner, by)
		}
		if dispatchType(h) == dispatcher.DispatchWebhook {
			// The files are the truth for secrets too: one they leave out, or write "", is cleared.
			// A PUT keeps what it does not name, so the clearing is sent.
			dc, was := &h.DispatchConfig, cur[0].DispatchConfig
			if (dc.SigningSecret == nil || *dc.SigningSecret == "") && was.SigningSecret != nil {
				empty := ""
				dc.SigningSecret = &empty
			}
			if dc.Auth == nil && was.Auth != nil && was.Auth.Type != dispatcher.AuthNone {
				dc.Auth = &dispatcher.Auth{Type: dispatcher.AuthNone}
			}
		}
		changes, err := hookChanges(h, cur[0])
		if err != nil {
			return nil, err
		}
		if resendSecrets && hasSecrets(h) {
			changes = append(changes, "secrets sent again")
		}
		op := "update"
		if len(changes) == 0 {
			op = "keep"
		}
		plan = append(plan, applyStep{op: op, hook: h, id: cur[0].ID, changes: changes})
	}
	deletes := 0
	for _, h := range current {
		if h.ManagedBy == owner && !wanted[h.HookName] {
			plan = append(plan, applyStep{op: "delete", hook: h, id: h.ID})
			deletes++
		}
	}
	if len(desired) == 0 && deletes > 0 {
		// An emptied file or a wrong directory would take every policy away at once.
		return nil, fmt.Errorf("the files hold no hooks: applying them would delete all %d hooks --owner %s manages; "+
			"delete those through the API (DELETE /api/hooks/{id}) if that is what you mean", deletes, owner)
	}
	return plan, nil
}

// hasSecrets reports whether the files give h a secret (a cleared one is none).
func hasSecrets(h dispatcher.Hook) bool {
	dc := h.DispatchConfig
	return dc.SigningSecret != nil && *dc.SigningSecret != "" || dc.Auth != nil && dc.Auth.Type != dispatcher.AuthNone
}

// hookChanges lists the fields in which the daemon's hook differs from the file's, as the daemon
// would store the file's (defaults filled, secrets masked: the daemon never shows them).
func hookChanges(file, daemon dispatcher.Hook) ([]string, error) {
	var want dispatcher.Hook
	b, _ := json.Marshal(file)
	if err := json.Unmarshal(b, &want); err != nil {
		return nil, err
	}
	if err := want.Normalize(); err != nil {
		return nil, err
	}
	flat := func(h dispatcher.Hook) map[string]string {
		// A secret cleared ("") and none, an auth of type NONE and none, are the same hook.
		if s := h.DispatchConfig.SigningSecret; s != nil && *s == "" {
			h.DispatchConfig.SigningSecret = nil
		}
		if a := h.DispatchConfig.Auth; a != nil && a.Type == dispatcher.AuthNone {
			h.DispatchConfig.Auth = nil
		}
		h = h.Masked()
		h.ID, h.CreatedAt, h.UpdatedAt = 0, nil, nil
		b, _ := json.Marshal(h)
		var v any
		json.Unmarshal(b, &v)
		out := map[string]string{}
		flatten("", v, out)
		return out
	}
	a, d := flat(want), flat(daemon)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range d {
		keys[k] = true
	}
	var changes []string
	for k := range keys {
		if a[k] != d[k] {
			changes = append(changes, fmt.Sprintf("%s: %s → %s", k, shown(d[k]), shown(a[k])))
		}
	}
	sort.Strings(changes)
	return changes, nil
}

func shown(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// flatten writes v's leaves as dotted paths (lists by index) with their JSON values.
func flatten(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			flatten(strings.TrimPrefix(prefix+"."+k, "."), e, out)
		}
	case []any:
		for i, e := range v {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), e, out)
		}
	default:
		if v == nil {
			return // null and absent are the same to the daemon
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // a CEL rule's > and & as written
		enc.Encode(v)
		out[prefix] = strings.TrimSuffix(b.String(), "\n")
	}
}

func (p applyPlan) print(w io.Writer) {
	counts := map[string]int{}
	for _, s := range p {
		counts[s.op]++
		switch s.op {
		case "create":
			fmt.Fprintf(w, "+ create %s (%s, %s)\n", s.hook.HookName, s.hook.HookType, dispatchType(s.hook))
		case "update":
			fmt.Fprintf(w, "~ update %s (id %d)\n", s.hook.HookName, s.id)
			for _, c := range s.changes {
				fmt.Fprintf(w, "    %s\n", c)
			}
		case "delete":
			fmt.Fprintf(w, "- delete %s (id %d)\n", s.hook.HookName, s.id)
		case "keep":
			// The daemon never shows a secret, so "unchanged" cannot cover the secrets: the plan
			// says so rather than claim a rotated secret is in place.
			if hasSecrets(s.hook) {
				fmt.Fprintf(w, "= keep   %s (id %d; secrets not compared: --resend-secrets sends them)\n", s.hook.HookName, s.id)
			} else {
				fmt.Fprintf(w, "= keep   %s (id %d)\n", s.hook.HookName, s.id)
			}
		}
	}
	fmt.Fprintf(w, "plan: %d to create, %d to update, %d to delete, %d unchanged\n",
		counts["create"], counts["update"], counts["delete"], counts["keep"])
}

func dispatchType(h dispatcher.Hook) string {
	if h.DispatchType == "" {
		return dispatcher.DispatchWebhook
	}
	return h.DispatchType
}

// write is the request of a create or update step.
func (s applyStep) write() (method, path string, body []byte) {
	body, _ = json.Marshal(s.hook)
	if s.op == "update" {
		return "PUT", fmt.Sprintf("/api/hooks/%d", s.id), body
	}
	return "POST", "/api/hooks", body
}

// check has the daemon check every create and update as it would make it (?dryRun=true:
// receivers against its SSRF guard, the stored secrets merged), so that a dry run shows what
// the run would refuse, and a run refused on one hook changes none. What the daemon notes of a
// hook (valid, but likely not what was meant) is printed to w.
func (p applyPlan) check(c *adminClient, w io.Writer) error {
	for _, s := range p {
		if s.op != "create" && s.op != "update" {
			continue
		}
		method, path, body := s.write()
		_, notes, err := c.callNoted(method, path+"?dryRun=true", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%s %s: %w (nothing changed)", s.op, s.hook.HookName, err)
		}
		for _, n := range notes {
			fmt.Fprintf(w, "note: %s: %s\n", s.hook.HookName, n)
		}
	}
	return nil
}

// run carries the plan out, stopping at the first error (the steps before it stay done: run
// apply again to finish).
func (p applyPlan) run(c *adminClient, w io.Writer) error {
	done, total := 0, 0
	for _, s := range p {
		if s.op != "keep" {
			total++
		}
	}
	for _, s := range p {
		var err error
		switch s.op {
		case "create", "update":
			method, path, body := s.write()
			_, err = c.call(method, path, bytes.NewReader(body))
		case "delete":
			_, err = c.call("DELETE", fmt.Sprintf("/api/hooks/%d", s.id), nil)
		default:
			continue
		}
		if err != nil {
			// The daemon has the changes before this one: say so, where the check's refusal
			// said nothing changed. Hooks are matched by name, so a second run finishes the rest.
			return fmt.Errorf("%s %s: %w (%d of %d changes were applied before it; run again to apply the rest)",
				s.op, s.hook.HookName, err, done, total)
		}
		done++
	}
	if total == 0 {
		fmt.Fprintln(w, "nothing to apply")
		return nil
	}
	fmt.Fprintf(w, "applied %d changes\n", total)
	return nil
}
