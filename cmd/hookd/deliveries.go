package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/storage"
)

func newDeliveriesCmd() *cobra.Command {
	g := newGroup("deliveries", "inspect and redeliver the observational deliveries of a running daemon")
	c := addAdminFlags(g)
	g.AddCommand(
		newDeliveriesListCmd(c),
		newDeliveriesRedeliverCmd(c),
	)
	return g
}

func newDeliveriesListCmd(c *adminClient) *cobra.Command {
	var status, hook, event, cursor string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list deliveries, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			for _, p := range []struct{ param, flag, v string }{{"status", "status", status}, {"hookId", "hook", hook},
				{"eventId", "event", event}, {"cursor", "cursor", cursor}} {
				if p.v != "" || cmd.Flags().Changed(p.flag) { // given empty: the daemon refuses it
					q.Set(p.param, p.v)
				}
			}
			return list(c, cmd, "/api/deliveries?"+q.Encode(), printDeliveries)
		},
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only deliveries in this state (pending, delivering, delivered, failed, dead)")
	f.StringVar(&hook, "hook", "", "only deliveries to this hook id")
	f.StringVar(&event, "event", "", "only deliveries of this event id")
	f.StringVar(&cursor, "cursor", "", "the page after this cursor (a list prints it when there is more)")
	f.IntVar(&limit, "limit", 50, "rows")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions([]string{storage.StatusPending,
		storage.StatusDelivering, storage.StatusDelivered, storage.StatusFailed, storage.StatusDead}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

type deliveryRow struct {
	ID            int64     `json:"id"`
	EventID       string    `json:"eventId"`
	HookID        int64     `json:"hookId"`
	HookType      string    `json:"hookType"`
	Status        string    `json:"status"`
	Paused        bool      `json:"paused"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"nextAttemptAt"`
	LastError     string    `json:"lastError"`
}

func printDeliveries(w io.Writer, ds []deliveryRow) {
	t := newTextTable(w, "ID", "EVENT", "HOOK", "TYPE", "STATUS", "ATTEMPTS", "NEXT", "LAST ERROR")
	for _, d := range ds {
		next, status := "-", d.Status
		switch {
		case d.Paused:
			status += " (paused)" // its hook is disabled: not attempted until it is enabled
		case d.Status == storage.StatusPending && !d.NextAttemptAt.IsZero():
			next = d.NextAttemptAt.Local().Format(time.DateTime)
		}
		t.row(d.ID, d.EventID, d.HookID, d.HookType, status, d.Attempts, next, d.LastError)
	}
	t.flush()
}

// newDeliveriesRedeliverCmd prints the delivery after its attempt and exits 1 unless the attempt
// delivered it: an operator's script must not read a failed attempt as done.
func newDeliveriesRedeliverCmd(c *adminClient) *cobra.Command {
	return &cobra.Command{
		Use:   "redeliver ID",
		Short: "one more attempt of a delivery now, same eventId (a 409 when its hook is deleted or disabled, or its receiver's breaker is open); exit 1 unless it was delivered",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.printed(cmd, "POST", "/api/deliveries/"+url.PathEscape(args[0])+"/redeliver", nil)
			if err != nil {
				return err
			}
			var d deliveryRow
			if err := json.Unmarshal(data, &d); err != nil {
				return fmt.Errorf("POST /api/deliveries/%s/redeliver: unexpected answer: %w", args[0], err)
			}
			if d.Status != storage.StatusDelivered {
				return fmt.Errorf("delivery %s was not delivered: it is %s: %s", args[0], d.Status, terminalSafe(cmp.Or(d.LastError, "no error recorded")))
			}
			return nil
		},
	}
}
