package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/signing"
)

// newVerifyCmd checks a signature offline, as a receiver would: exit 0 valid, 1 invalid.
func newVerifyCmd() *cobra.Command {
	var secret, id, ts, sig string
	var tolerance time.Duration
	cmd := &cobra.Command{
		Use:   "verify --secret S --timestamp T --signature SIG [--id ID] < body",
		Short: "check a delivered event's signature offline (exit 0 valid, 1 invalid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 16<<20))
			if err != nil {
				return err
			}
			if id != "" {
				err = signing.VerifyStandard(secret, id, ts, sig, body, tolerance, time.Now())
			} else {
				err = signing.Verify(secret, ts, sig, body, tolerance, time.Now())
			}
			out := cmd.OutOrStdout()
			if err != nil {
				fmt.Fprintln(out, "invalid:", err)
				if errors.Is(err, signing.ErrTimestampOutOfWindow) {
					fmt.Fprintln(out, "(use --tolerance to check an old request)")
				}
				return errors.New("signature does not verify")
			}
			fmt.Fprintln(out, "valid")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&secret, "secret", "", "the hook's signing secret")
	f.StringVar(&ts, "timestamp", "", "X-Webhook-Timestamp (epoch ms), or webhook-timestamp (s) with --id")
	f.StringVar(&sig, "signature", "", "X-Webhook-Signature, or webhook-signature with --id")
	f.StringVar(&id, "id", "", "webhook-id (the Standard Webhooks scheme)")
	f.DurationVar(&tolerance, "tolerance", signing.DefaultTolerance, "accepted clock skew")
	for _, name := range []string{"secret", "timestamp", "signature"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
