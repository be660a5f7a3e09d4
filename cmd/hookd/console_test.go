package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The console's tests drive the real daemon with real headless Chromium (Debian's chromium
// package; .ci/run installs it). Each step saves a screenshot under the test's temp dir, and a
// failure prints its path.

// chromiumPath finds the browser, or skips the test saying why.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("console browser test skipped: no chromium on PATH (apt-get install chromium; .ci/run does)")
	return ""
}

// browser is a headless Chromium tab pointed at one daemon. It records every console error,
// uncaught exception and request that leaves the daemon's origin.
type browser struct {
	t      *testing.T
	ctx    context.Context
	origin string
	shots  string
	n      *atomic.Int32
	log    *problems
}

// problems is what the tabs of one browser saw go wrong.
type problems struct {
	mu   sync.Mutex
	list []string
}

func newBrowser(t *testing.T, origin string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.Flag("lang", "en-US"))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	b := &browser{t: t, ctx: ctx, origin: origin, shots: t.TempDir(), n: new(atomic.Int32), log: new(problems)}
	b.listen()
	return b
}

// tab opens another tab of the same browser (same cookies, same record of problems).
func (b *browser) tab() *browser {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	nb := *b
	nb.ctx = ctx
	nb.listen()
	return &nb
}

// listen opens the tab and records its problems.
func (b *browser) listen() {
	if err := chromedp.Do(b.ctx); err != nil {
		b.t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatalf("chromium network events: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		b.t.Fatalf("chromium log events: %v", err)
	}
	err := chromedp.Listen(b.ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				b.problem("console error: %s", argsText(e.Args))
			}
		case *cdplog.EventEntryAdded: // failed loads, CSP violations
			// An admin API answer of 4xx is one the app shows (a field error, a refused write); the
			// browser logs it all the same.
			expected := e.Entry.Source == cdplog.EntrySourceNetwork && strings.Contains(e.Entry.URL, "/api/") &&
				strings.Contains(e.Entry.Text, "status of 4")
			if e.Entry.Level == cdplog.EntryLevelError && !expected {
				b.problem("browser log: %s %s", e.Entry.Text, e.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			b.problem("uncaught exception: %s %s", e.ExceptionDetails.Text, exceptionText(e.ExceptionDetails))
		case *network.EventRequestWillBeSent:
			if u, err := url.Parse(e.Request.URL); err == nil && u.Scheme != "data" && u.Scheme+"://"+u.Host != b.origin {
				b.problem("request leaves the daemon's origin: %s", e.Request.URL)
			}
		}
	})
	if err != nil {
		b.t.Fatalf("chromium events: %v", err)
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if len(a.Value) > 0 {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

func (b *browser) problem(format string, args ...any) {
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	b.log.list = append(b.log.list, fmt.Sprintf(format, args...))
}

// run performs actions with a bound; on failure it saves a screenshot and names it.
func (b *browser) run(step string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	// Only the tab in front takes mouse and keyboard input.
	err := chromedp.Do(ctx, append([]chromedp.Action[chromedp.Void]{front}, actions...)...)
	path := b.shot(step)
	if err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		b.log.mu.Lock()
		seen := strings.Join(b.log.list, "\n")
		b.log.mu.Unlock()
		b.t.Fatalf("%s: %v\nscreenshot: %s\nbrowser problems:\n%s\npage: %s", step, err, path, seen, html)
	}
}

// js runs a script in the page for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](expr+`, true`)(ctx, t)
		return err
	})
}

// front brings the tab to the front.
func front(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, page.BringToFront, cdp.Empty{})
	return chromedp.Void{}, err
}

// value runs one action that gives a value, with a bound, failing the test like run.
func value[T any](b *browser, step string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v\nscreenshot: %s", step, err, b.shot(step))
	}
	return v
}

// shot saves a screenshot of the page as it is now and returns its path.
func (b *browser) shot(step string) string {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "(no screenshot: " + err.Error() + ")"
	}
	name := fmt.Sprintf("%02d-%s.png", b.n.Add(1), strings.ReplaceAll(step, " ", "-"))
	path := filepath.Join(b.shots, name)
	if err := os.WriteFile(path, png, 0o600); err != nil {
		return "(no screenshot: " + err.Error() + ")"
	}
	if dir := os.Getenv("CONSOLE_SCREENSHOTS"); dir != "" { // to look at them after the run
		_ = os.WriteFile(filepath.Join(dir, name), png, 0o600)
	}
	return path
}

// clean fails the test if any page logged an error or sent a request elsewhere.
func (b *browser) clean() {
	b.t.Helper()
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	if len(b.log.list) > 0 {
		b.t.Fatalf("the console was not clean:\n%s", strings.Join(b.log.list, "\n"))
	}
}

// consoleReceiver answers the hooks of the console test: pre_tool_use allows; the observational
// hook fails with 500 until healed, then takes the events.
type consoleReceiver struct {
	srv    *httptest.Server
	healed atomic.Bool
	got    chan string // hookType of each event taken
}

func newConsoleReceiver(t *testing.T) *consoleReceiver {
	r := &consoleReceiver{got: make(chan string, 64)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var env struct{ HookType string }
		json.Unmarshal(body, &env)
		switch {
		case env.HookType == "pre_tool_use":
			io.WriteString(w, `{"decision":"allow"}`)
		case !r.healed.Load():
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
			return
		default:
			w.WriteHeader(http.StatusOK)
		}
		r.got <- env.HookType
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func startConsoleDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`{"scripts":[{"match":"*","steps":[
		{"thinking":"save it","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"report.md","content":"# Q3"}}]},
		{"text":"saved report.md"}]}]}`), 0o600)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
auth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1},
  {key: rev-test, userId: reviewer-1, principalId: 2, role: reviewer, reviews: [tester]},
  {key: key-outsider, userId: outsider, principalId: 3}]}
webhooks: {allowPrivateNetworks: true, retry: {fast: [50ms], ladder: [50ms], jitter: 0}}
model: {provider: scripted, script: %s}
agent: {toolDefault: ask}
`, filepath.Join(dir, "hookd.db"), script))
	return startDaemon(t, cfg)
}

func TestConsoleInTheBrowser(t *testing.T) {
	chromiumPath(t)
	recv := newConsoleReceiver(t)
	d := startConsoleDaemon(t)
	b := newBrowser(t, "http://"+d.addr)

	// Sign in with the admin token.
	b.run("sign in", 20*time.Second,
		chromedp.Navigate(d.url("/console/")),
		chromedp.WaitVisible(chromedp.CSS(`input[name=credential]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=credential]`), "adm-test"),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#nav a[data-page=hooks]`)))

	// newHook fills the new hook form for a pre_tool_use webhook to the receiver, and sends it.
	newHook := func(name, match, failureMode string, then chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(chromedp.Navigate(d.url("/console/#/hooks/new")),
			chromedp.WaitVisible(chromedp.CSS(`[data-field=hookName]`)),
			chromedp.SendKeys(chromedp.CSS(`[data-field=hookName]`), name),
			chromedp.SetValue(chromedp.CSS(`[data-field=hookType]`), "pre_tool_use"),
			chromedp.SendKeys(chromedp.CSS(`[data-field=toolNameMatch]`), match),
			chromedp.SendKeys(chromedp.CSS(`[data-field="dispatchConfig.url"]`), recv.srv.URL),
			chromedp.SetValue(chromedp.CSS(`#f-dispatchConfig-failureMode`), failureMode),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)),
			then)
	}

	// A hook with a typo: the API's message stands at the field it names.
	b.run("new hook with a typo", 15*time.Second,
		newHook("console-approval", "/workspace_(/", "DENY", chromedp.WaitVisible(chromedp.CSS(`[data-error-for=toolNameMatch]`))))
	if msg := value(b, "read the error", chromedp.Text(chromedp.CSS(`[data-error-for=toolNameMatch]`))); !strings.Contains(msg, "toolNameMatch") {
		t.Fatalf("error at the field: %q", msg)
	}
	if invalid := value(b, "field marked", chromedp.AttributeValue(chromedp.CSS(`[data-field=toolNameMatch]`), "aria-invalid")); invalid.Value != "true" {
		t.Fatalf("toolNameMatch not marked invalid: %q", invalid.Value)
	}

	// Fixed, it is saved and listed.
	b.run("fix the typo", 15*time.Second,
		chromedp.SetValue(chromedp.CSS(`[data-field=toolNameMatch]`), "workspace_write_file"),
		chromedp.SendKeys(chromedp.CSS(`[data-field="dispatchConfig.signingSecret"]`), "console-signing-secret"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[text()="console-approval"]`)))

	// What the daemon notes of a hook is shown: a toolNameMatch that looks like a glob.
	b.run("a noted hook", 15*time.Second,
		newHook("console-glob", "workspace_*", "ALLOW",
			chromedp.WaitVisible(chromedp.Search(`//div[@id="toast"]/div[contains(., 'Note: toolNameMatch: "workspace_*" is matched as that exact tool name')]`))),
		chromedp.WaitVisible(chromedp.Search(`//a[text()="console-glob"]`)))

	// Disable and enable it from the list.
	row := `//tr[.//a[text()="console-approval"]]`
	b.run("disable and enable", 15*time.Second,
		chromedp.Click(chromedp.Search(row+`//button[text()="Disable"]`)),
		chromedp.WaitVisible(chromedp.Search(row+`//span[text()="disabled"]`)),
		chromedp.Click(chromedp.Search(row+`//button[text()="Enable"]`)),
		chromedp.WaitVisible(chromedp.Search(row+`//span[text()="enabled"]`)))

	// A policy's rules, tried against a sample event before they are saved.
	b.run("policy rule editor", 15*time.Second,
		chromedp.Navigate(d.url("/console/#/hooks/new")),
		chromedp.WaitVisible(chromedp.CSS(`[data-field=dispatchType]`)),
		chromedp.SetValue(chromedp.CSS(`[data-field=dispatchType]`), "policy"),
		js(`document.querySelector('[data-field=dispatchType]').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.Search(`//button[text()="Add rule"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-field="policyConfig.rules[0].name"]`), "over-limit"),
		chromedp.SendKeys(chromedp.CSS(`[data-field="policyConfig.rules[0].when"]`), "args.amount > 10000"),
		chromedp.SendKeys(chromedp.CSS(`[data-field="policyConfig.rules[0].reason"]`), "'over ' + string(args.amount)"),
		chromedp.Click(chromedp.Search(`//button[text()="Evaluate against the sample"]`)),
		chromedp.WaitVisible(chromedp.Search(`//pre[contains(., '"decision": "deny"')]`)))
	// A rule that does not compile is refused at its field.
	b.run("policy rule error", 15*time.Second,
		chromedp.SetValue(chromedp.CSS(`[data-field="policyConfig.rules[0].when"]`), "amount > 10000"),
		chromedp.Click(chromedp.Search(`//button[text()="Evaluate against the sample"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-field="policyConfig.rules[0].when"][aria-invalid="true"]`)))

	// Send a test event: the signed request and the receiver's answer are shown.
	b.run("send test event", 15*time.Second,
		chromedp.Navigate(d.url("/console/#/hooks")),
		chromedp.Click(chromedp.Search(`//a[text()="console-approval"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[text()="Send test event"]`)),
		chromedp.Click(chromedp.Search(`//button[text()="Send test event"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#probe pre`)))
	probe := value(b, "probe text", chromedp.Text(chromedp.CSS(`#probe`)))
	for _, want := range []string{"X-Webhook-Signature", `"decision": "allow"`, "Receiver's answer · 200", `"hookType":"pre_tool_use"`} {
		if !strings.Contains(probe, want) {
			t.Fatalf("the test event's view lacks %q:\n%s", want, probe)
		}
	}
	if strings.Contains(probe, "console-signing-secret") {
		t.Fatalf("the test event's view shows the signing secret:\n%s", probe)
	}

	// An observational hook whose receiver is down: its delivery dies, for the redeliver step.
	if st := d.call("POST", "/api/hooks", fmt.Sprintf(`{"hookName":"console-audit","hookType":"post_tool_use",
		"dispatchType":"webhook","dispatchConfig":{"url":%q,"maxRetries":0}}`, recv.srv.URL), nil); st != 201 {
		t.Fatalf("create the observational hook: %d", st)
	}

	// One tab follows the decision log live; another holds the approvals inbox when the run asks.
	b.run("live tail on", 10*time.Second,
		chromedp.Navigate(d.url("/console/#/decisions")),
		chromedp.WaitVisible(chromedp.CSS(`#tail`)),
		chromedp.Click(chromedp.CSS(`#tail`)))
	inbox := b.tab()
	inbox.run("approvals inbox", 15*time.Second,
		chromedp.Navigate(d.url("/console/#/approvals")),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Nothing waits")]`)))
	req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"sessionId":"console-1","userInput":"write the Q3 report"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(bearer(req))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %v %v", err, resp)
	}
	requestID := resp.Header.Get("X-Request-Id")
	before := readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" })
	var ask struct{ AskID string }
	for _, f := range before {
		if f.EventType == "PERMISSION_ASK" {
			json.Unmarshal(f.Data, &ask)
		}
	}
	if ask.AskID == "" {
		t.Fatalf("no ask: %+v", before)
	}
	asked := time.Now()
	card := fmt.Sprintf(`[data-ask=%q]`, ask.AskID)
	inbox.run("ask shows", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(card)))
	if took := time.Since(asked); took > time.Second {
		t.Fatalf("the ask took %v to show in the inbox, want under 1 s", took)
	}
	// The card says who asks, for which tool, with which arguments, and what asked for a person.
	if txt := value(inbox, "the ask's card", chromedp.Text(chromedp.CSS(card))); !strings.Contains(txt, "workspace_write_file") ||
		!strings.Contains(txt, "tester") || !strings.Contains(txt, `"path": "report.md"`) || !strings.Contains(txt, "Asked by") {
		t.Fatalf("the ask's card: %q", txt)
	}
	inbox.run("approve", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(card+` input`), "reviewed in the console"),
		chromedp.Click(chromedp.CSS(card+` button.primary`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Nothing waits")]`)))

	// The run completes exactly as after the chat's own answer, and its tool's decision shows live.
	r2, _ := http.NewRequest("GET", d.url("/api/agent/run/stream?requestId="+requestID+"&lastEventId="+before[len(before)-1].ID), nil)
	resp2, err := (&http.Client{Timeout: 30 * time.Second}).Do(bearer(r2))
	if err != nil || resp2.StatusCode != 200 {
		t.Fatalf("resume stream: %v %v", err, resp2)
	}
	after := readFrames(t, resp2, func(f frame) bool { return f.EventType == "MESSAGE_COMPLETED" || f.EventType == "MESSAGE_FAILED" })
	if len(after) == 0 || after[len(after)-1].EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("the run after the approval: %+v", after)
	}
	b.run("decision in the live tail", 10*time.Second,
		chromedp.WaitVisible(chromedp.Search(`//td[text()="workspace_write_file"]`)))

	// Redeliver the dead delivery once its receiver is back: a second attempt appears.
	b.run("dead delivery", 20*time.Second,
		chromedp.Navigate(d.url("/console/#/deliveries")),
		chromedp.WaitVisible(chromedp.Search(`//span[contains(@class,"badge") and text()="dead"]`)))
	recv.healed.Store(true)
	b.run("redeliver", 20*time.Second,
		chromedp.Click(chromedp.CSS(`tbody tr[tabindex] td:first-child`)),
		chromedp.WaitVisible(chromedp.CSS(`#delivery-detail .timeline li:nth-child(2)`)),
		chromedp.Click(chromedp.CSS(`#delivery-detail button`)),
		// The page follows the delivery: the new attempt shows in its timeline.
		chromedp.WaitVisible(chromedp.Search(`//span[contains(@class,"badge") and text()="delivered"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#delivery-detail .timeline li:nth-child(3)`)))

	// A task run links to its pre_scheduled_task decision on the decision log.
	if st := d.call("POST", "/api/hooks", `{"hookName":"task gate","hookType":"pre_scheduled_task","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"any task","when":"true","decision":"allow"}]}}`, nil); st != 201 {
		t.Fatalf("task hook: %d\n%s", st, d.log())
	}
	var task struct{ ID int64 }
	if st := d.call("POST", "/api/tasks", `{"taskName":"console report","cron":"@yearly","input":"hello"}`, &task); st != 201 {
		t.Fatalf("create task: %d\n%s", st, d.log())
	}
	var firing struct{ DecisionID *string }
	if st := d.call("POST", fmt.Sprintf("/api/tasks/%d/run", task.ID), "", &firing); st != 202 || firing.DecisionID == nil {
		t.Fatalf("run task: %d %+v\n%s", st, firing, d.log())
	}
	b.run("task run links its decision", 15*time.Second,
		chromedp.Navigate(d.url("/console/#/tasks")),
		chromedp.Click(chromedp.Search(`//td[text()="console report"]`)),
		chromedp.Click(chromedp.Search(`//a[contains(@class,"decision-link") and text()="`+*firing.DecisionID+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//td[text()="pre_scheduled_task"]`)))
	if v := value(b, "decision filter", chromedp.Value(chromedp.CSS(`input[name=decisionId]`))); v != *firing.DecisionID {
		t.Fatalf("the decisions page is not filtered by the run's decision: %q", v)
	}

	// Editing a hook keeps what the form does not show: a policy's costLimit and a hook-files
	// hook's managedBy (a PUT replaces the whole hook; before, the save dropped both).
	var kept struct{ ID int64 }
	if st := d.call("POST", "/api/hooks", `{"hookName":"console-kept","hookType":"pre_tool_use","dispatchType":"policy",
		"managedBy":"files","policyConfig":{"costLimit":5000,"rules":[{"name":"big","when":"args.amount > 10","decision":"deny"}]}}`, &kept); st != 201 {
		t.Fatalf("policy hook: %d\n%s", st, d.log())
	}
	b.run("edit keeps the rest", 15*time.Second,
		chromedp.Navigate(d.url(fmt.Sprintf("/console/#/hooks/%d", kept.ID))),
		chromedp.WaitVisible(chromedp.CSS(`[data-field="policyConfig.rules[0].when"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-field=priority]`), "7"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[text()="console-kept"]`)))
	var saved struct {
		Priority     int
		ManagedBy    string
		PolicyConfig struct{ CostLimit int }
	}
	if st := d.call("GET", fmt.Sprintf("/api/hooks/%d", kept.ID), "", &saved); st != 200 || saved.Priority != 7 ||
		saved.ManagedBy != "files" || saved.PolicyConfig.CostLimit != 5000 {
		t.Fatalf("after the console's save: %d %+v", st, saved)
	}

	// A write without the CSRF token is refused, with the session cookie and all.
	status := value(b, "csrf", chromedp.Evaluate[int](`fetch("/api/hooks", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({hookName: "forged", hookType: "user_message", dispatchType: "webhook", dispatchConfig: {url: "https://example.com/h"}})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != http.StatusForbidden {
		t.Fatalf("a write without the CSRF token: %d, want 403", status)
	}

	// Sign out: the sign-in form is back, and the session's cookie opens nothing any more.
	jar, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var cookie string
	for _, c := range jar.Cookies {
		if c.Name == "hookd_console" {
			cookie = c.Name + "=" + c.Value
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Fatalf("session cookie: HttpOnly %v, SameSite %q", c.HTTPOnly, c.SameSite)
			}
		}
	}
	if cookie == "" {
		t.Fatal("no session cookie while signed in")
	}
	b.run("sign out", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#signout`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=credential]`)))
	old, _ := http.NewRequest("GET", d.url("/api/hooks"), nil)
	old.Header.Set("Cookie", cookie)
	if resp, err := http.DefaultClient.Do(old); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the signed-out session's cookie: %v %v, want 401", err, resp)
	}
	b.clean()
}

// consoleClient signs in to the console over plain HTTP and keeps its cookie and CSRF token.
type consoleClient struct {
	t      *testing.T
	d      *daemon
	cookie string
	csrf   string
}

func signIn(t *testing.T, d *daemon, credential string) (*consoleClient, int) {
	t.Helper()
	c := &consoleClient{t: t, d: d}
	resp, body := c.do("POST", "/console/session", fmt.Sprintf(`{"credential":%q}`, credential), true)
	if resp.StatusCode != http.StatusCreated {
		return nil, resp.StatusCode
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "hookd_console" {
			c.cookie = ck.Name + "=" + ck.Value
		}
	}
	var w struct{ Data struct{ CSRFToken string } }
	json.Unmarshal(body, &w)
	c.csrf = w.Data.CSRFToken
	if c.cookie == "" || c.csrf == "" {
		t.Fatalf("sign-in gave no cookie or CSRF token: %s", body)
	}
	return c, resp.StatusCode
}

func (c *consoleClient) do(method, path, body string, withCSRF bool) (*http.Response, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.d.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	if withCSRF && c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A reviewer's console session opens its approvals inbox and nothing else; a chat key or a wrong
// token signs nobody in.
func TestConsoleSessionsAndRoles(t *testing.T) {
	d := startConsoleDaemon(t)
	for _, bad := range []string{"key-test", "wrong", "adm-test "} {
		if _, st := signIn(t, d, strings.TrimSpace(bad)+"x"); st != http.StatusUnauthorized {
			t.Fatalf("sign-in with %q: %d, want 401", bad, st)
		}
	}
	if _, st := signIn(t, d, "key-test"); st != http.StatusUnauthorized {
		t.Fatalf("a chat key signed in to the console: %d", st)
	}
	// Two users ask: tester (whom the reviewer reviews) and outsider (whom it does not).
	asks := map[string]string{}
	for user, key := range map[string]string{"tester": "key-test", "outsider": "key-outsider"} {
		req, _ := http.NewRequest("POST", d.url("/api/agent/run/stream"), strings.NewReader(`{"sessionId":"roles-1","userInput":"write it"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("run of %s: %v %v", user, err, resp)
		}
		for _, f := range readFrames(t, resp, func(f frame) bool { return f.EventType == "MESSAGE_SUSPENDED" }) {
			if f.EventType == "PERMISSION_ASK" {
				var a struct{ AskID string }
				json.Unmarshal(f.Data, &a)
				asks[user] = a.AskID
			}
		}
	}
	rev, st := signIn(t, d, "rev-test")
	if st != http.StatusCreated {
		t.Fatalf("reviewer sign-in: %d", st)
	}
	if resp, _ := rev.do("GET", "/api/hooks", "", false); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a reviewer read the hooks: %d", resp.StatusCode)
	}
	resp, body := rev.do("GET", "/api/approvals", "", false)
	var inbox struct {
		Data struct {
			Items []struct{ AskID, UserID string }
		}
	}
	json.Unmarshal(body, &inbox)
	if resp.StatusCode != 200 || len(inbox.Data.Items) != 1 || inbox.Data.Items[0].UserID != "tester" {
		t.Fatalf("the reviewer's inbox: %d %s", resp.StatusCode, body)
	}
	if resp, _ := rev.do("POST", "/api/approvals/"+asks["outsider"], `{"approved":true}`, true); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a reviewer answered the ask of a user it does not review: %d", resp.StatusCode)
	}
	if resp, _ := rev.do("POST", "/api/approvals/"+asks["tester"], `{"approved":false,"reason":"no"}`, false); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an answer without the CSRF token: %d", resp.StatusCode)
	}
	if resp, body := rev.do("POST", "/api/approvals/"+asks["tester"], `{"approved":false,"reason":"not today"}`, true); resp.StatusCode != 200 {
		t.Fatalf("the reviewer's answer: %d %s", resp.StatusCode, body)
	}
	if resp, _ := rev.do("POST", "/api/approvals/"+asks["tester"], `{"approved":true}`, true); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a second answer: %d, want 409", resp.StatusCode)
	}
	// The admin sees the outsider's ask; a typo in the body is refused by name.
	adm, _ := signIn(t, d, "adm-test")
	resp, body = adm.do("GET", "/api/approvals", "", false)
	if json.Unmarshal(body, &inbox); resp.StatusCode != 200 || len(inbox.Data.Items) != 1 || inbox.Data.Items[0].UserID != "outsider" {
		t.Fatalf("the admin's inbox: %s", body)
	}
	if resp, body := adm.do("POST", "/api/approvals/"+asks["outsider"], `{"aproved":true}`, true); resp.StatusCode != 400 || !strings.Contains(string(body), "approved") {
		t.Fatalf("a typo in the answer: %d %s", resp.StatusCode, body)
	}
}

// Every page, in both languages and at a phone's width, renders without an error, sends nothing
// to another origin, and fits the screen; the keyboard reaches the navigation.
func TestConsolePagesAreClean(t *testing.T) {
	chromiumPath(t)
	recv := newConsoleReceiver(t)
	d := startConsoleDaemon(t)
	// A decision for the detail view: a pre_tool_use hook and one dispatch.
	if st := d.call("POST", "/api/hooks", fmt.Sprintf(`{"hookName":"pages-gate","hookType":"pre_tool_use",
		"toolNameMatch":"shell","dispatchType":"webhook","dispatchConfig":{"url":%q,"failureMode":"DENY"}}`, recv.srv.URL), nil); st != 201 {
		t.Fatalf("create hook: %d", st)
	}
	if st := d.call("POST", "/api/hooks/dispatch", `{"hookType":"pre_tool_use","sessionId":7,
		"context":{"toolName":"shell","toolCallId":"call-1","arguments":{"cmd":"ls"}}}`, nil); st != 200 {
		t.Fatalf("dispatch: %d", st)
	}
	b := newBrowser(t, "http://"+d.addr)
	b.run("sign in", 20*time.Second,
		chromedp.Navigate(d.url("/console/")),
		chromedp.WaitVisible(chromedp.CSS(`input[name=credential]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=credential]`), "adm-test"),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`#nav a[data-page=overview]`)))

	pages := map[string]string{"overview": "Overview", "hooks": "Hooks", "decisions": "Decisions", "deliveries": "Deliveries",
		"breakers": "Breakers", "approvals": "Approvals", "tasks": "Scheduled tasks"}
	zh := map[string]string{"overview": "概览", "hooks": "钩子", "decisions": "决策记录", "deliveries": "投递",
		"breakers": "熔断器", "approvals": "审批", "tasks": "定时任务"}
	visit := func(tag string, names map[string]string) {
		for page, title := range names {
			b.run(tag+" "+page, 10*time.Second,
				chromedp.Navigate(d.url("/console/#/"+page)),
				chromedp.WaitVisible(chromedp.Search(fmt.Sprintf(`//h1[text()=%q]`, title))))
			over := value(b, tag+" "+page+" width", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
			if over && tag == "phone" {
				t.Errorf("%s at a phone's width is wider than the screen: %s", page, b.shot(page+"-too-wide"))
			}
		}
	}
	visit("desktop", pages)

	// The decision's detail: its place in the chain, which verifies up to it.
	b.run("decision detail", 10*time.Second,
		chromedp.Navigate(d.url("/console/#/decisions")),
		chromedp.Click(chromedp.Search(`//td[text()="shell"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "The chain verifies up to this row")]`)))

	// The keyboard: Tab reaches the skip link, then the navigation; Enter follows a link.
	b.run("keyboard", 10*time.Second,
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(d.url("/console/#/hooks")),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Hooks"]`)),
		chromedp.KeyEvent("\t"), chromedp.KeyEvent("\t"))
	if focused := value(b, "focus", chromedp.Evaluate[string](`document.activeElement.outerHTML`)); !strings.Contains(focused, `data-page="overview"`) {
		t.Fatalf("two Tabs focus %s, want the first navigation link", focused)
	}
	b.run("keyboard enter", 10*time.Second,
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Overview"]`)))

	// Chinese, from the switch; then a phone's width.
	b.run("switch to Chinese", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#lang`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="概览"]`)))
	visit("zh", zh)
	if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride,
		emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	visit("phone", zh)
	b.clean()
}

// TestConsoleSessionsEndWithTheirCredential: a console session is as good as the credential it
// was signed in with, now: after a restart with the admin token rotated, the reviewer key
// removed, or development mode left, the old cookies open nothing; the new token signs in.
func TestConsoleSessionsEndWithTheirCredential(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hookd.db")
	start := func(auth string) *daemon {
		return startDaemon(t, writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\ndatabase: sqlite:%s\n%s", db, auth)))
	}
	opens := func(c *consoleClient) bool {
		resp, _ := c.do("GET", "/api/hooks", "", false)
		return resp.StatusCode == http.StatusOK
	}
	// Development mode: the empty sign-in is the admin.
	d := start("")
	local, st := signIn(t, d, "")
	if st != http.StatusCreated || !opens(local) {
		t.Fatalf("development sign-in: %d", st)
	}
	d.kill()
	keys := "auth: {adminTokens: [adm-old], apiKeys: [{key: key-user, userId: user-1, principalId: 1},\n" +
		"  {key: rev-old, userId: reviewer-1, principalId: 2, role: reviewer, reviews: [user-1]}]}\n"
	d = start(keys)
	local.d = d
	if opens(local) {
		t.Fatal("a development-mode session outlived development mode")
	}
	adm, _ := signIn(t, d, "adm-old")
	rev, _ := signIn(t, d, "rev-old")
	if adm == nil || rev == nil || !opens(adm) {
		t.Fatal("sign-in with the configured credentials failed")
	}
	if resp, _ := rev.do("GET", "/api/approvals", "", false); resp.StatusCode != http.StatusOK {
		t.Fatalf("the reviewer's inbox: %d", resp.StatusCode)
	}
	d.kill()
	// The admin token rotated, the reviewer key removed.
	d = start("auth: {adminTokens: [adm-new], apiKeys: [{key: key-user, userId: user-1, principalId: 1}]}\n")
	adm.d, rev.d = d, d
	if opens(adm) {
		t.Fatal("an admin session outlived its rotated token")
	}
	if resp, _ := rev.do("GET", "/api/approvals", "", false); resp.StatusCode == http.StatusOK {
		t.Fatal("a reviewer session outlived its removed key")
	}
	if resp, body := rev.do("GET", "/console/session", "", false); strings.Contains(string(body), "reviewer-1") {
		t.Fatalf("the removed reviewer's session is still shown: %d %s", resp.StatusCode, body)
	}
	if c, st := signIn(t, d, "adm-new"); st != http.StatusCreated || !opens(c) {
		t.Fatalf("the new token: %d", st)
	}
}
