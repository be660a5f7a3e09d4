package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/api/wire"
)

// adminClient talks to a running daemon's admin API. Its address and token come from the
// --addr / --token flags of the group (addAdminFlags), or HOOKD_CLI_ADDR / HOOKD_CLI_TOKEN.
type adminClient struct {
	addr, token string
	json        bool // --json: print the API's data verbatim, not a table
	http        *http.Client
}

// addAdminFlags gives group and all its sub-commands the admin API flags; the returned client
// is ready once a sub-command runs.
func addAdminFlags(group *cobra.Command) *adminClient {
	c := &adminClient{http: &http.Client{Timeout: 30 * time.Second}}
	f := group.PersistentFlags()
	f.StringVar(&c.addr, "addr", envOr("HOOKD_CLI_ADDR", "http://127.0.0.1:8080"), "daemon address (HOOKD_CLI_ADDR)")
	// No default shown: help must not print the token from the environment.
	f.StringVar(&c.token, "token", "", "admin bearer token (default: HOOKD_CLI_TOKEN)")
	f.BoolVar(&c.json, "json", false, "print the answer's JSON data (lists print a table without it)")
	return c
}

// call sends a request to the admin API and returns the wrapper's data, or an error carrying the
// wrapper's message.
func (c *adminClient) call(method, path string, body io.Reader) (json.RawMessage, error) {
	data, _, err := c.callNoted(method, path, body)
	return data, err
}

// callNoted is call that also returns the notes of a success (wire.OKNoted).
func (c *adminClient) callNoted(method, path string, body io.Reader) (json.RawMessage, []string, error) {
	req, err := http.NewRequest(method, strings.TrimRight(c.addr, "/")+path, body)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token := cmp.Or(c.token, os.Getenv("HOOKD_CLI_TOKEN")); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach hookd at %s: %w", shownAddr(c.addr), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	var w struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, nil, fmt.Errorf("%s %s: HTTP %d: not a hookd answer", method, path, resp.StatusCode)
	}
	if !w.Success {
		return nil, nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, w.Message)
	}
	return w.Data, wire.Notes(w.Message), nil
}

// print calls the API and prints the data as indented JSON, and on stderr what the daemon noted
// of the request (valid, but likely not what was meant: a glob-like toolNameMatch, say), so that
// the JSON on stdout stays the data alone.
func (c *adminClient) print(cmd *cobra.Command, method, path string, body io.Reader) error {
	_, err := c.printed(cmd, method, path, body)
	return err
}

// printed is print that also returns the answer's data, for a command that judges it.
func (c *adminClient) printed(cmd *cobra.Command, method, path string, body io.Reader) (json.RawMessage, error) {
	data, notes, err := c.callNoted(method, path, body)
	if err != nil {
		return nil, err
	}
	if err := printJSON(cmd.OutOrStdout(), data); err != nil {
		return nil, err
	}
	for _, n := range notes {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", n)
	}
	return data, nil
}

// list calls a list endpoint and prints its items with table, or the data verbatim with --json.
// It reads both a bare array and a page ({"items": [...], "next": "…"}); with a next page it says
// how to get it.
func list[T any](c *adminClient, cmd *cobra.Command, path string, table func(io.Writer, []T)) error {
	data, err := c.call("GET", path, nil)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(cmd.OutOrStdout(), data)
	}
	var page struct {
		Items []T    `json:"items"`
		Next  string `json:"next"`
	}
	if err := json.Unmarshal(data, &page.Items); err != nil {
		if err := json.Unmarshal(data, &page); err != nil {
			return fmt.Errorf("GET %s: unexpected answer: %w", path, err)
		}
	}
	table(cmd.OutOrStdout(), page.Items)
	if page.Next != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: add --cursor %s\n", page.Next)
	}
	return nil
}

// idCommand is a command that takes one ID, sends method to path (its %s is the escaped ID) and
// prints the answer.
func (c *adminClient) idCommand(use, short, method, path string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.print(cmd, method, fmt.Sprintf(path, url.PathEscape(args[0])), nil)
		},
	}
}

func printJSON(w io.Writer, data json.RawMessage) error {
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		out.Reset()
		out.Write(data)
	}
	_, err := fmt.Fprintln(w, out.String())
	return err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// shownAddr is a daemon address as messages show it: a password in it is "xxxxx" (the forwarder's
// messages reach the coding agent's user and model).
func shownAddr(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "(unparsable address)"
	}
	return u.Redacted()
}

// textTable prints rows aligned in columns. A cell shows its control and bidirectional-format
// characters escaped (\x1b, \u202e): a hook name, a tool name or a receiver's error is another
// party's text, which could otherwise move the cursor, rewrite the lines above it (a deny shown
// as an allow), set the terminal's title or clipboard, or split a row into columns of its own.
type textTable struct{ tw *tabwriter.Writer }

func newTextTable(w io.Writer, header ...string) *textTable {
	t := &textTable{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

func (t *textTable) row(cells ...any) {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = terminalSafe(fmt.Sprint(c))
	}
	fmt.Fprintln(t.tw, strings.Join(out, "\t"))
}

func (t *textTable) flush() { t.tw.Flush() }

// terminalSafe escapes s's control and bidirectional-format characters.
func terminalSafe(s string) string {
	unsafe := func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }
	if !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unsafe(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
