package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/dispatcher"
)

func newHooksCmd() *cobra.Command {
	g := newGroup("hooks", "manage the hooks of a running daemon")
	c := addAdminFlags(g)
	g.AddCommand(
		newHooksAddCmd(c),
		newHooksApplyCmd(c),
		newHooksListCmd(c),
		newHooksRmCmd(c),
		newHooksTestCmd(c),
	)
	return g
}

func newHooksListCmd(c *adminClient) *cobra.Command {
	var typ, agent, cursor string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list the hooks, highest priority first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for _, p := range []struct{ param, flag, v string }{{"hookType", "type", typ}, {"agentId", "agent", agent},
				{"cursor", "cursor", cursor}} {
				if p.v != "" || cmd.Flags().Changed(p.flag) { // given empty: the daemon refuses it
					q.Set(p.param, p.v)
				}
			}
			return list(c, cmd, "/api/hooks?"+q.Encode(), printHooks)
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "only hooks of this hook type")
	cmd.Flags().StringVar(&agent, "agent", "", "only hooks of this agent id")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the page after this cursor (a list prints it when there is more)")
	_ = cmd.RegisterFlagCompletionFunc("type", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		types := make([]string, len(dispatcher.HookTypes))
		for i, t := range dispatcher.HookTypes {
			types[i] = string(t)
		}
		return types, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

type hookRow struct {
	ID             int64  `json:"id"`
	HookName       string `json:"hookName"`
	HookType       string `json:"hookType"`
	AgentID        *int64 `json:"agentId"`
	ToolNameMatch  string `json:"toolNameMatch"`
	Priority       int    `json:"priority"`
	Enabled        bool   `json:"enabled"`
	DispatchConfig struct {
		URL         string `json:"url"`
		FailureMode string `json:"failureMode"`
	} `json:"dispatchConfig"`
}

func printHooks(w io.Writer, hooks []hookRow) {
	t := newTextTable(w, "ID", "TYPE", "NAME", "AGENT", "TOOLS", "PRIO", "ENABLED", "FAILURE", "URL")
	for _, h := range hooks {
		agent := "*"
		if h.AgentID != nil {
			agent = fmt.Sprint(*h.AgentID)
		}
		tools := h.ToolNameMatch
		if tools == "" {
			tools = "-"
		}
		t.row(h.ID, h.HookType, h.HookName, agent, tools, h.Priority, h.Enabled, h.DispatchConfig.FailureMode, h.DispatchConfig.URL)
	}
	t.flush()
}

func newHooksAddCmd(c *adminClient) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "add [--file hook.json]",
		Short: "register a hook from its JSON definition (stdin without --file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var body io.Reader = cmd.InOrStdin()
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				body = f
			}
			return c.print(cmd, "POST", "/api/hooks", body)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the hook definition (JSON)")
	_ = cmd.MarkFlagFilename("file", "json")
	return cmd
}

func newHooksRmCmd(c *adminClient) *cobra.Command {
	cmd := c.idCommand("rm ID", "delete a hook", "DELETE", "/api/hooks/%s")
	cmd.ValidArgsFunction = c.completeHookIDs
	return cmd
}

// newHooksTestCmd prints the test's result and exits 1 when it shows the receiver failing (no
// answer, an error status, an answer hookd cannot use): a script that checks a hook before a
// change must not read a failed test as a passed one.
func newHooksTestCmd(c *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:               "test ID",
		Short:             "send a signed test event to a hook's receiver and show its answer (exit 1 when the receiver failed)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeHookIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.printed(cmd, "POST", "/api/hooks/"+url.PathEscape(args[0])+"/test", nil)
			if err != nil {
				return err
			}
			var res struct {
				Error *string `json:"error"`
			}
			if err := json.Unmarshal(data, &res); err != nil {
				return fmt.Errorf("POST /api/hooks/%s/test: unexpected answer: %w", args[0], err)
			}
			if res.Error != nil {
				return fmt.Errorf("hook %s failed the test: %s", args[0], *res.Error)
			}
			return nil
		},
	}
}

// completeHookIDs offers the daemon's hook ids, each described by its type and name.
func (c *adminClient) completeHookIDs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	_ = list(c, &cobra.Command{}, "/api/hooks", func(_ io.Writer, hooks []hookRow) {
		for _, h := range hooks {
			ids = append(ids, fmt.Sprintf("%d\t%s %s", h.ID, h.HookType, strings.TrimSpace(h.HookName)))
		}
	})
	return ids, cobra.ShellCompDirectiveNoFileComp
}
