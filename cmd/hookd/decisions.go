package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/storage"
)

func newDecisionsCmd() *cobra.Command {
	g := newGroup("decisions", "read and verify the decision log of a running daemon")
	c := addAdminFlags(g)
	g.AddCommand(
		newDecisionsListCmd(c),
		newDecisionsVerifyCmd(c),
	)
	return g
}

func newDecisionsListCmd(c *adminClient) *cobra.Command {
	var limit int
	filters, flagOf := map[string]*string{}, map[string]string{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list decisions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			for k, v := range filters {
				if *v != "" || cmd.Flags().Changed(flagOf[k]) { // given empty: the daemon refuses it
					q.Set(k, *v)
				}
			}
			return list(c, cmd, "/api/decisions?"+q.Encode(), printDecisions)
		},
	}
	f := cmd.Flags()
	for _, fl := range []struct{ flag, param, usage string }{
		{"type", "hookType", "only this hook type"},
		{"hook", "hookId", "only this hook id's"},
		{"session", "sessionId", "only this session's"},
		{"principal", "principalId", "only this principal's"},
		{"tool", "toolName", "only calls of this tool"},
		{"outcome", "outcome", "only this outcome (allow, deny, modify, ask, error)"},
		{"since", "since", "created at or after (RFC 3339)"},
		{"until", "until", "created before (RFC 3339)"},
		{"cursor", "cursor", "the page after this cursor (a list prints it when there is more)"},
	} {
		filters[fl.param] = f.String(fl.flag, "", fl.usage)
		flagOf[fl.param] = fl.flag
	}
	f.IntVar(&limit, "limit", 50, "rows")
	return cmd
}

func printDecisions(w io.Writer, ds []storage.Decision) {
	t := newTextTable(w, "ID", "TIME", "TYPE", "HOOK", "SUBJECT", "OUTCOME", "FALLBACK", "REASON")
	for _, d := range ds {
		subject := d.ToolName
		if subject == "" && d.TaskID != nil {
			subject = fmt.Sprintf("task %d", *d.TaskID)
		}
		why := d.Reason
		if d.Error != "" {
			why = d.Error
		}
		t.row(d.ID, d.CreatedAt.Local().Format(time.DateTime), d.HookType, d.HookName, subject, d.Outcome, d.FromFailureMode, why)
	}
	t.flush()
}

func newDecisionsVerifyCmd(c *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "check the decision log's hash chain; fails naming the first row where it breaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.http.Timeout = 0 // the walk reads the whole log
			data, err := c.call("GET", "/api/decisions/verify", nil)
			if err != nil {
				return err
			}
			var rep storage.ChainReport
			if err := json.Unmarshal(data, &rep); err != nil {
				return fmt.Errorf("GET /api/decisions/verify: unexpected answer: %w", err)
			}
			if c.json {
				if err := printJSON(cmd.OutOrStdout(), data); err != nil {
					return err
				}
			}
			if !rep.OK && rep.BrokenID == 0 { // no row is left to name
				return fmt.Errorf("decision log chain broken: %s", rep.Problem)
			}
			if !rep.OK {
				return fmt.Errorf("decision log chain broken at row %d (decisionId %s): %s", rep.BrokenID,
					rep.BrokenDecisionID, rep.Problem)
			}
			if !c.json {
				fmt.Fprintf(cmd.OutOrStdout(), "decision log intact: %d rows checked", rep.Checked)
				if rep.PrunedThrough > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), ", starting after row %d (pruned by retention)", rep.PrunedThrough)
				}
				if rep.Unchained > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "; %d older rows predate the chain and prove nothing", rep.Unchained)
				}
				fmt.Fprintln(cmd.OutOrStdout())
			}
			return nil
		},
	}
}
