package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookd/hookd/signing"
)

// The operator commands talk to a running daemon's admin API. The address and token come from
// --addr / --token or HOOKD_CLI_ADDR / HOOKD_CLI_TOKEN.
const cliUsage = `operator commands (talk to a running daemon):
  hookd hooks list [--type T] [--agent N]
  hookd hooks add [--file hook.json]        (JSON on stdin without --file)
  hookd hooks rm ID
  hookd hooks test ID
  hookd deliveries list [--status S] [--hook ID] [--event EVENTID] [--limit N]
  hookd deliveries redeliver ID
  hookd verify --secret S --timestamp T --signature SIG < body
common flags: --addr URL (HOOKD_CLI_ADDR, default http://127.0.0.1:8080) --token T (HOOKD_CLI_TOKEN) --json
`

type adminClient struct {
	addr, token string
	http        *http.Client
}

// call sends a request to the admin API and returns the wrapper's data, or an error carrying the
// wrapper's message.
func (c adminClient) call(method, path string, body io.Reader) (json.RawMessage, error) {
	req, err := http.NewRequest(method, strings.TrimRight(c.addr, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach hookd at %s: %w", c.addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var w struct {
		Success bool            `json:"success"`
		Data    json.RawMessage `json:"data"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("%s %s: HTTP %d: not a hookd answer", method, path, resp.StatusCode)
	}
	if !w.Success {
		return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, w.Message)
	}
	return w.Data, nil
}

// runCLI runs an operator command; it returns the exit code.
func runCLI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage)
		return 2
	}
	group, rest := args[0], args[1:]
	sub := ""
	if group != "verify" {
		if len(rest) == 0 {
			fmt.Fprint(stderr, cliUsage)
			return 2
		}
		sub, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet(group+" "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("HOOKD_CLI_ADDR", "http://127.0.0.1:8080"), "daemon address")
	token := fs.String("token", os.Getenv("HOOKD_CLI_TOKEN"), "admin bearer token")
	asJSON := fs.Bool("json", false, "print the raw JSON data")
	typ := fs.String("type", "", "hook type filter")
	agent := fs.String("agent", "", "agent id filter")
	file := fs.String("file", "", "hook definition file")
	status := fs.String("status", "", "delivery status filter")
	hook := fs.String("hook", "", "hook id filter")
	event := fs.String("event", "", "event id filter")
	limit := fs.Int("limit", 50, "rows")
	secret := fs.String("secret", "", "signing secret")
	ts := fs.String("timestamp", "", "X-Webhook-Timestamp (epoch ms) or webhook-timestamp (s) with --id")
	sig := fs.String("signature", "", "X-Webhook-Signature or webhook-signature")
	id := fs.String("id", "", "webhook-id (Standard Webhooks scheme)")
	tolerance := fs.Duration("tolerance", signing.DefaultTolerance, "accepted clock skew")
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	c := adminClient{addr: *addr, token: *token, http: &http.Client{Timeout: 30 * time.Second}}
	arg := func() (string, bool) {
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "hookd %s %s: want exactly one ID\n", group, sub)
			return "", false
		}
		return url.PathEscape(fs.Arg(0)), true
	}
	var data json.RawMessage
	var err error
	switch group + " " + sub {
	case "hooks list":
		q := url.Values{}
		if *typ != "" {
			q.Set("hookType", *typ)
		}
		if *agent != "" {
			q.Set("agentId", *agent)
		}
		data, err = c.call("GET", "/api/hooks?"+q.Encode(), nil)
		if err == nil && !*asJSON {
			return printHooks(data, stdout)
		}
	case "hooks add":
		var body []byte
		if *file != "" {
			body, err = os.ReadFile(*file)
		} else {
			body, err = io.ReadAll(stdin)
		}
		if err == nil {
			data, err = c.call("POST", "/api/hooks", bytes.NewReader(body))
		}
	case "hooks rm":
		if a, ok := arg(); ok {
			data, err = c.call("DELETE", "/api/hooks/"+a, nil)
		} else {
			return 2
		}
	case "hooks test":
		if a, ok := arg(); ok {
			data, err = c.call("POST", "/api/hooks/"+a+"/test", nil)
		} else {
			return 2
		}
	case "deliveries list":
		q := url.Values{"limit": {fmt.Sprint(*limit)}}
		for k, v := range map[string]string{"status": *status, "hookId": *hook, "eventId": *event} {
			if v != "" {
				q.Set(k, v)
			}
		}
		data, err = c.call("GET", "/api/deliveries?"+q.Encode(), nil)
		if err == nil && !*asJSON {
			return printDeliveries(data, stdout)
		}
	case "deliveries redeliver":
		if a, ok := arg(); ok {
			data, err = c.call("POST", "/api/deliveries/"+a+"/redeliver", nil)
		} else {
			return 2
		}
	case "verify ":
		return verify(*secret, *id, *ts, *sig, *tolerance, stdin, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "hookd: unknown command %q\n%s", strings.TrimSpace(group+" "+sub), cliUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookd:", err)
		return 1
	}
	var out bytes.Buffer
	_ = json.Indent(&out, data, "", "  ")
	fmt.Fprintln(stdout, out.String())
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func printHooks(data json.RawMessage, w io.Writer) int {
	var hooks []struct {
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
	if err := json.Unmarshal(data, &hooks); err != nil {
		return 1
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tNAME\tAGENT\tTOOLS\tPRIO\tENABLED\tFAILURE\tURL")
	for _, h := range hooks {
		agent := "*"
		if h.AgentID != nil {
			agent = fmt.Sprint(*h.AgentID)
		}
		tools := h.ToolNameMatch
		if tools == "" {
			tools = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%v\t%s\t%s\n", h.ID, h.HookType, h.HookName, agent, tools, h.Priority,
			h.Enabled, h.DispatchConfig.FailureMode, h.DispatchConfig.URL)
	}
	tw.Flush()
	return 0
}

func printDeliveries(data json.RawMessage, w io.Writer) int {
	var ds []struct {
		ID            int64     `json:"id"`
		EventID       string    `json:"eventId"`
		HookID        int64     `json:"hookId"`
		HookType      string    `json:"hookType"`
		Status        string    `json:"status"`
		Attempts      int       `json:"attempts"`
		NextAttemptAt time.Time `json:"nextAttemptAt"`
		LastError     string    `json:"lastError"`
	}
	if err := json.Unmarshal(data, &ds); err != nil {
		return 1
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tEVENT\tHOOK\tTYPE\tSTATUS\tATTEMPTS\tNEXT\tLAST ERROR")
	for _, d := range ds {
		next := "-"
		if d.Status == "pending" {
			next = d.NextAttemptAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventID, d.HookID, d.HookType, d.Status, d.Attempts, next, d.LastError)
	}
	tw.Flush()
	return 0
}

// verify checks a signature offline, as a receiver would: exit 0 valid, 1 invalid.
func verify(secret, id, ts, sig string, tolerance time.Duration, stdin io.Reader, stdout, stderr io.Writer) int {
	if secret == "" || ts == "" || sig == "" {
		fmt.Fprintln(stderr, "hookd verify: --secret, --timestamp and --signature are required (and --id for the standard scheme)")
		return 2
	}
	body, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
	if err != nil {
		fmt.Fprintln(stderr, "hookd verify:", err)
		return 2
	}
	if id != "" {
		err = signing.VerifyStandard(secret, id, ts, sig, body, tolerance, time.Now())
	} else {
		err = signing.Verify(secret, ts, sig, body, tolerance, time.Now())
	}
	if err != nil {
		fmt.Fprintln(stdout, "invalid:", err)
		if errors.Is(err, signing.ErrTimestampOutOfWindow) {
			fmt.Fprintln(stdout, "(use --tolerance to check an old request)")
		}
		return 1
	}
	fmt.Fprintln(stdout, "valid")
	return 0
}
