package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hookd/hookd/dispatcher"
)

const transferHookYAML = `hookName: 转账限额
hookType: pre_tool_use
toolNameMatch: transferFunds|payOrder
dispatchType: policy
dispatchConfig: {failureMode: DENY}
policyConfig:
  rules:
    - name: over-limit
      when: args.amount > 10000
      decision: deny
      reason: "'单笔金额 ' + string(args.amount) + ' 超过限额 10000'"
    - name: large
      when: args.amount > 1000
      decision: ask
      reason: "'大额转账需人工审批'"
    - name: mask-card
      when: has(args.cardNo)
      decision: modify
      modifiedValue: "args.with({'cardNo': args.cardNo.mask(4)})"
  default: allow
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyTestCommand(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "transfer.yaml", transferHookYAML)
	pass := writeFile(t, dir, "transfer_test.yaml", `policy: transfer.yaml
cases:
  - name: over the limit is denied
    event: {principalId: 7, context: {toolName: transferFunds, toolCallId: c1, arguments: {amount: 12000}}}
    decision: deny
    rule: over-limit
    reason: 单笔金额 12000 超过限额 10000
  - name: large asks a person
    event: {context: {toolName: transferFunds, toolCallId: c2, arguments: {amount: 5000}}}
    decision: ask
    rule: large
  - name: the card is masked
    event: {context: {toolName: payOrder, toolCallId: c3, arguments: {amount: 5, cardNo: "6222020012345678"}}}
    decision: modify
    modifiedValue: {amount: 5, cardNo: "************5678"}
  - name: small passes by default
    event: {context: {toolName: transferFunds, toolCallId: c4, arguments: {amount: 5}}}
    decision: allow
    rule: ""
  - name: an unreadable amount is denied by failureMode
    event: {context: {toolName: transferFunds, toolCallId: c5, arguments: {amount: "many"}}}
    decision: deny
    fromFailureMode: true
`)
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(binary, args...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli("policy", "test", pass)
	if code != 0 || !strings.Contains(out, "5 passed, 0 failed") {
		t.Fatalf("passing cases: %d\n%s", code, out)
	}
	fail := writeFile(t, t.TempDir(), "wrong_test.yaml", `policy: `+filepath.Join(dir, "transfer.yaml")+`
cases:
  - name: right
    event: {context: {toolName: transferFunds, toolCallId: c1, arguments: {amount: 12000}}}
    decision: deny
  - name: wrong decision
    event: {context: {toolName: transferFunds, toolCallId: c2, arguments: {amount: 5000}}}
    decision: allow
  - name: wrong value
    event: {context: {toolName: payOrder, toolCallId: c3, arguments: {amount: 5, cardNo: "6222020012345678"}}}
    decision: modify
    modifiedValue: {amount: 5, cardNo: "6222020012345678"}
  - name: a tool the hook does not match
    event: {context: {toolName: transferFund, toolCallId: c4, arguments: {amount: 12000}}}
    decision: deny
  - name: a broken rule's deny
    event: {context: {toolName: transferFunds, toolCallId: c5, arguments: {amount: "many"}}}
    decision: deny
  - name: a failure that does not come
    event: {context: {toolName: transferFunds, toolCallId: c6, arguments: {amount: 12000}}}
    decision: deny
    fromFailureMode: true
`)
	out, code = cli("policy", "test", fail, pass)
	if code != 1 || !strings.Contains(out, "6 passed, 5 failed") ||
		!strings.Contains(out, "FAIL "+fail+": a broken rule's deny: the policy failed (") ||
		!strings.Contains(out, "so failureMode decided deny; set fromFailureMode: true if the case tests that") ||
		!strings.Contains(out, "FAIL "+fail+": a failure that does not come: want the policy to fail, got deny by rule over-limit") ||
		!strings.Contains(out, "FAIL "+fail+`: a tool the hook does not match: event.context.toolName: hook "转账限额" does not apply to tool "transferFund" (toolNameMatch "transferFunds|payOrder"): a dispatch would not ask it`) ||
		!strings.Contains(out, "FAIL "+fail+": wrong decision: want allow, got ask by rule large") ||
		!strings.Contains(out, "FAIL "+fail+": wrong value: want modifiedValue") {
		t.Fatalf("failing cases: %d\n%s", code, out)
	}
	// A directory runs its *_test.yaml files; a typo in a test file is named.
	if out, code = cli("policy", "test", dir); code != 0 || !strings.Contains(out, "5 passed") {
		t.Fatalf("directory: %d\n%s", code, out)
	}
	// A disabled hook is tested (before it is enabled), and the output says the daemon does not ask it yet.
	off := t.TempDir()
	writeFile(t, off, "transfer.yaml", "enabled: false\n"+transferHookYAML)
	offTest := writeFile(t, off, "off_test.yaml", "policy: transfer.yaml\ncases:\n  - event: {context: {toolName: transferFunds, toolCallId: c1, arguments: {amount: 12000}}}\n    decision: deny\n")
	if out, code = cli("policy", "test", offTest); code != 0 || !strings.Contains(out, "note "+offTest+`: hook "转账限额" is disabled: the daemon asks it only once it is enabled`) {
		t.Fatalf("disabled: %d\n%s", code, out)
	}
	// A webhook beside the policy in its file needs no secret for the test: nothing is sent.
	both := t.TempDir()
	writeFile(t, both, "all.yaml", transferHookYAML+"---\nhookName: audit\nhookType: post_tool_use\n"+
		"dispatchConfig: {url: 'https://audit.example.com/h', signingSecret: '${HOOKD_TEST_UNSET_AUDIT_SECRET}'}\n")
	bothTest := writeFile(t, both, "all_test.yaml", "policy: all.yaml\ncases:\n  - event: {context: {toolName: transferFunds, toolCallId: c1, arguments: {amount: 12000}}}\n    decision: deny\n")
	if out, code = cli("policy", "test", bothTest); code != 0 || !strings.Contains(out, "1 passed, 0 failed") {
		t.Fatalf("a policy beside a webhook whose secret is not set: %d\n%s", code, out)
	}
	typo := writeFile(t, t.TempDir(), "typo_test.yaml", "policy: "+filepath.Join(dir, "transfer.yaml")+"\ncases:\n  - name: x\n    decison: deny\n")
	if out, code = cli("policy", "test", typo); code != 1 || !strings.Contains(out, "cases[0].decison") {
		t.Fatalf("typo: %d\n%s", code, out)
	}
}

func TestHooksApply(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nauth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}\n")
	d := startDaemon(t, cfg)
	cli := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d.addr, "HOOKD_CLI_TOKEN=adm-test"), env...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	// A hook made by hand is left alone by apply, unless the files name it.
	if st := d.call("POST", "/api/hooks", `{"hookName":"by hand","hookType":"pre_tool_use","dispatchType":"policy","policyConfig":{"rules":[]}}`, nil); st != 201 {
		t.Fatalf("by hand: %d", st)
	}
	files := t.TempDir()
	writeFile(t, files, "transfer.yaml", transferHookYAML)
	writeFile(t, files, "audit.yaml", `hookName: audit
hookType: post_tool_use
dispatchConfig:
  url: https://audit.example.com/hook
  signingSecret: ${AUDIT_SECRET}
---
hookName: greeting
hookType: user_message
dispatchType: policy
policyConfig: {rules: [{name: pw, when: "input.contains('password')", decision: deny}]}
`)
	writeFile(t, files, "transfer_test.yaml", "policy: transfer.yaml\ncases: []\n") // a test file is not a hook
	secret := []string{"AUDIT_SECRET=whsec-from-env"}

	if out, code := cli(nil, "hooks", "apply", "-f", files, "--dry-run"); code != 1 || !strings.Contains(out, "environment variable AUDIT_SECRET is not set") {
		t.Fatalf("missing secret: %d\n%s", code, out)
	}
	out, code := cli(secret, "hooks", "apply", "-f", files, "--dry-run")
	if code != 0 || !strings.Contains(out, "+ create audit (post_tool_use, webhook)") || !strings.Contains(out, "+ create 转账限额 (pre_tool_use, policy)") ||
		!strings.Contains(out, "plan: 3 to create, 0 to update, 0 to delete, 0 unchanged") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("dry run: %d\n%s", code, out)
	}
	var hooks []map[string]any
	list := func() []map[string]any {
		var page struct{ Items []map[string]any }
		d.call("GET", "/api/hooks", "", &page)
		return page.Items
	}
	if hooks = list(); len(hooks) != 1 {
		t.Fatalf("the dry run changed the hooks: %v", hooks)
	}
	// A test file named alone is refused: its directory's apply skips it, and would delete what
	// it had created.
	if out, code := cli(secret, "hooks", "apply", "-f", filepath.Join(files, "transfer_test.yaml"), "--dry-run"); code == 0 ||
		!strings.Contains(out, "is named as a policy test file") {
		t.Fatalf("a test file applied: %d\n%s", code, out)
	}
	if out, code = cli(secret, "hooks", "apply", "-f", files); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	if hooks = list(); len(hooks) != 4 {
		t.Fatalf("after apply: %v", hooks)
	}
	// Applied again, nothing changes.
	if out, code = cli(secret, "hooks", "apply", "-f", files, "--dry-run"); code != 0 || !strings.Contains(out, "plan: 0 to create, 0 to update, 0 to delete, 3 unchanged") {
		t.Fatalf("second dry run: %d\n%s", code, out)
	}
	// Edited files: one rule changed, one hook gone, the hand-made hook taken over.
	os.WriteFile(filepath.Join(files, "transfer.yaml"), []byte(strings.Replace(transferHookYAML, "args.amount > 1000\n", "args.amount > 2000\n", 1)), 0o600)
	os.WriteFile(filepath.Join(files, "audit.yaml"), []byte(`hookName: audit
hookType: post_tool_use
dispatchConfig: {url: "https://audit.example.com/hook", signingSecret: "${AUDIT_SECRET}"}
---
hookName: by hand
hookType: pre_tool_use
dispatchType: policy
policyConfig: {rules: []}
`), 0o600)
	out, code = cli(secret, "hooks", "apply", "-f", files, "--dry-run")
	for _, want := range []string{"~ update 转账限额", `policyConfig.rules[1].when: "args.amount > 1000" → "args.amount > 2000"`,
		"- delete greeting", "~ update by hand", `managedBy: (absent) → "files"`,
		// audit keeps its signingSecret from the environment: the plan cannot see a rotated one.
		"= keep   audit (id 2; secrets not compared: --resend-secrets sends them)",
		"plan: 0 to create, 2 to update, 1 to delete, 1 unchanged"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run after edits: want %q in\n%s", want, out)
		}
	}
	if out, code = cli(secret, "hooks", "apply", "-f", files); code != 0 {
		t.Fatalf("apply edits: %d\n%s", code, out)
	}
	hooks = list()
	names := map[string]map[string]any{}
	for _, h := range hooks {
		names[h["hookName"].(string)] = h
	}
	if len(hooks) != 3 || names["greeting"] != nil || names["by hand"]["managedBy"] != "files" {
		t.Fatalf("after the edits: %v", hooks)
	}
	b, _ := json.Marshal(names["转账限额"])
	if !strings.Contains(string(b), "args.amount \\u003e 2000") && !strings.Contains(string(b), "args.amount > 2000") {
		t.Fatalf("rule not updated: %s", b)
	}
	// The secret went to the daemon from the environment and is never shown.
	if strings.Contains(out, "whsec-from-env") || !strings.Contains(mustJSON(names["audit"]), `"signingSecret":"***"`) {
		t.Fatalf("secret: %s / %v", out, names["audit"])
	}
	// A secret the files leave out is cleared (a PUT alone would keep it), and the plan says so;
	// applied, the files and the daemon agree.
	os.WriteFile(filepath.Join(files, "audit.yaml"), []byte(`hookName: audit
hookType: post_tool_use
dispatchConfig: {url: "https://audit.example.com/hook"}
---
hookName: by hand
hookType: pre_tool_use
dispatchType: policy
policyConfig: {rules: []}
`), 0o600)
	if out, code = cli(nil, "hooks", "apply", "-f", files); code != 0 || !strings.Contains(out, `dispatchConfig.signingSecret: "***" → (absent)`) {
		t.Fatalf("secret left out: %d\n%s", code, out)
	}
	var audit map[string]any
	for _, h := range list() {
		if h["hookName"] == "audit" {
			audit = h
		}
	}
	if strings.Contains(mustJSON(audit), "signingSecret") {
		t.Fatalf("the secret the files left out is still there: %v", audit)
	}
	if out, code = cli(nil, "hooks", "apply", "-f", files, "--dry-run"); code != 0 || !strings.Contains(out, "= keep   audit (id 2)\n") {
		t.Fatalf("after clearing, the plan does not settle: %d\n%s", code, out)
	}
	// A hook another owner's files manage is not taken over, nor deleted by these files.
	other := writeFile(t, t.TempDir(), "shared.yaml", "hookName: shared\nhookType: pre_tool_use\ndispatchType: policy\npolicyConfig: {rules: []}\n")
	if out, code = cli(nil, "hooks", "apply", "-f", other, "--owner", "teamB"); code != 0 {
		t.Fatalf("teamB: %d\n%s", code, out)
	}
	writeFile(t, files, "shared.yaml", "hookName: shared\nhookType: pre_tool_use\ndispatchType: policy\npolicyConfig: {rules: []}\n")
	if out, code = cli(nil, "hooks", "apply", "-f", files, "--dry-run"); code != 1 || !strings.Contains(out, `hook "shared" (id`) ||
		!strings.Contains(out, `is managed by "teamB", not "files"`) {
		t.Fatalf("another owner's hook: %d\n%s", code, out)
	}
	os.Remove(filepath.Join(files, "shared.yaml"))
	if out, code = cli(nil, "hooks", "apply", "-f", files, "--dry-run"); code != 0 || strings.Contains(out, "delete shared") {
		t.Fatalf("another owner's hook, not in the files: %d\n%s", code, out)
	}
	// A secret written in a file is refused.
	bad := writeFile(t, t.TempDir(), "bad.yaml", "hookName: x\nhookType: post_tool_use\ndispatchConfig: {url: 'https://x.example', signingSecret: plain}\n")
	if out, code = cli(nil, "hooks", "apply", "-f", bad, "--dry-run"); code != 1 || !strings.Contains(out, "dispatchConfig.signingSecret: write ${NAME}") {
		t.Fatalf("plain secret: %d\n%s", code, out)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// apply checks every hook as the daemon would write it, receivers included, before it changes
// anything: a dry run shows what the real run would refuse, and a refused hook leaves the
// daemon as it was instead of half applied.
func TestHooksApplyChecksWithTheDaemon(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nauth: {adminTokens: [adm-test], apiKeys: [{key: key-test, userId: tester, principalId: 1}]}\n")
	d := startDaemon(t, cfg)
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "HOOKD_CLI_ADDR=http://"+d.addr, "HOOKD_CLI_TOKEN=adm-test")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	files := t.TempDir()
	writeFile(t, files, "a.yaml", "hookName: a-good\nhookType: post_tool_use\ndispatchConfig: {url: 'https://audit.example.com/hook'}\n")
	writeFile(t, files, "z.yaml", "hookName: z-private\nhookType: post_tool_use\ndispatchConfig: {url: 'http://10.0.0.7/hook'}\n")
	const want = "dispatchConfig.url: 10.0.0.7 is private (RFC1918), which the SSRF guard refuses at every call"
	for _, args := range [][]string{{"--dry-run"}, {}} {
		out, code := cli(append([]string{"hooks", "apply", "-f", files}, args...)...)
		if code != 1 || !strings.Contains(out, "create z-private: ") || !strings.Contains(out, want) || !strings.Contains(out, "(nothing changed)") {
			t.Fatalf("apply %v: %d\n%s", args, code, out)
		}
	}
	var hooks struct{ Items []json.RawMessage }
	if st := d.call("GET", "/api/hooks", "", &hooks); st != 200 || len(hooks.Items) != 0 {
		t.Fatalf("after a refused apply: %d %d hooks, want none", st, len(hooks.Items))
	}
	// With the private receiver gone, the same files apply.
	os.Remove(filepath.Join(files, "z.yaml"))
	if out, code := cli("hooks", "apply", "-f", files); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	// An update is checked against the stored hook too.
	writeFile(t, files, "a.yaml", "hookName: a-good\nhookType: post_tool_use\ndispatchConfig: {url: 'http://127.0.0.1:9/hook'}\n")
	if out, code := cli("hooks", "apply", "-f", files, "--dry-run"); code != 1 || !strings.Contains(out, "update a-good: ") || !strings.Contains(out, "dispatchConfig.url: 127.0.0.1 is loopback") {
		t.Fatalf("update dry run: %d\n%s", code, out)
	}
	// What the daemon notes of a hook it takes (a toolNameMatch that looks like a glob) is printed.
	writeFile(t, files, "a.yaml", "hookName: a-good\nhookType: post_tool_use\ntoolNameMatch: 'transfer*'\ndispatchConfig: {url: 'https://audit.example.com/hook'}\n")
	if out, code := cli("hooks", "apply", "-f", files); code != 0 || !strings.Contains(out, `note: a-good: toolNameMatch: "transfer*" is matched as that exact tool name`) || !strings.Contains(out, "applied") {
		t.Fatalf("apply with a note: %d\n%s", code, out)
	}
	// A hand-made hook is never the files': an empty --owner (which every hand-made hook's empty
	// managedBy would match, and the files would delete) or a padded one is refused, and so is
	// a file claiming another owner.
	if st := d.call("POST", "/api/hooks", `{"hookName":"by-hand","hookType":"post_tool_use","dispatchConfig":{"url":"https://audit.example.com/h"}}`, nil); st != 201 {
		t.Fatalf("hand-made hook: %d", st)
	}
	for _, owner := range []string{"", " files", "files "} {
		if out, code := cli("hooks", "apply", "-f", files, "--owner", owner); code != 2 || !strings.Contains(out, "--owner") {
			t.Errorf("--owner %q: %d\n%s", owner, code, out)
		}
	}
	writeFile(t, files, "b.yaml", "hookName: b\nhookType: post_tool_use\nmanagedBy: other-team\ndispatchConfig: {url: 'https://audit.example.com/b'}\n")
	if out, code := cli("hooks", "apply", "-f", files); code != 1 || !strings.Contains(out, `hook "b": managedBy "other-team" in the file`) {
		t.Errorf("a file's managedBy: %d\n%s", code, out)
	}
	// Files emptied by mistake (here: a file of no documents) do not take every hook they manage away.
	os.Remove(filepath.Join(files, "b.yaml"))
	writeFile(t, files, "a.yaml", "---\n")
	for _, args := range [][]string{{"--dry-run"}, {}} {
		if out, code := cli(append([]string{"hooks", "apply", "-f", files}, args...)...); code != 1 ||
			!strings.Contains(out, "the files hold no hooks: applying them would delete all 1 hooks --owner files manages") {
			t.Errorf("empty files %v: %d\n%s", args, code, out)
		}
	}
	var left struct{ Items []struct{ HookName string } }
	if st := d.call("GET", "/api/hooks", "", &left); st != 200 || len(left.Items) != 2 {
		t.Fatalf("after the refused runs: %d %+v, want a-good and by-hand", st, left.Items)
	}
}

// A hook or test file's YAML becomes the JSON the daemon takes with each scalar as written: an
// unquoted date stays its text (YAML would make it a time, and the JSON a timestamp no rule on the
// text matches), a long number keeps its digits.
func TestYAMLScalarsAsWritten(t *testing.T) {
	p := writeFile(t, t.TempDir(), "e.yaml", "date: 2026-01-01\nbig: 12345678901234567890\nratio: 0.10\nhex: 0x1F\nok: true\nnone: null\nname: \"x\"\nlist: [a, 1, 2026-01-02T03:04:05Z]\n---\n---\nbase: &b {k: v}\ncopy: *b\n")
	docs, err := yamlDocuments(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"date":"2026-01-01","big":12345678901234567890,"ratio":0.10,"hex":31,"ok":true,"none":null,"name":"x","list":["a",1,"2026-01-02T03:04:05Z"]}`,
		`{"base":{"k":"v"},"copy":{"k":"v"}}`}
	if len(docs) != len(want) {
		t.Fatalf("%d documents: %s", len(docs), docs)
	}
	for i := range want {
		if string(docs[i]) != want[i] {
			t.Errorf("document %d:\n got %s\nwant %s", i, docs[i], want[i])
		}
	}
	// A number YAML tools read differently (05001 is 2561 to yaml.v3, 5001 to YAML 1.2) is refused
	// rather than read one way: agentId 05001 would guard another agent.
	for _, v := range []string{"05001", "-010", "0o17", "1_000", ".inf", "+5"} {
		p := writeFile(t, t.TempDir(), "n.yaml", "agentId: "+v+"\n")
		if _, err := yamlDocuments(p); err == nil || !strings.Contains(err.Error(), "line 1: "+v+" is not a number as JSON writes it") {
			t.Errorf("%s: %v", v, err)
		}
	}
}

// A merge key (<<) is refused, naming its line: its mapping was decoded whole, past the scalar
// checks, and <<: {agentId: 05001} scoped the hook to agent 2561. An alias is checked at its anchor.
func TestHookFileRefusesMergeKeys(t *testing.T) {
	dir := t.TempDir()
	for name, y := range map[string]string{
		"inline.yaml": "hookName: merged-octal\n<<: {agentId: 05001}\nhookType: pre_tool_use\ndispatchType: policy\n" +
			"policyConfig: {rules: [{name: r, when: 'true', decision: deny}]}\n",
		"alias.yaml":      "hookName: merged\nhookType: pre_tool_use\nbase: &b {agentId: 5001}\nx:\n  <<: *b\n",
		"cases_test.yaml": "policy: h.yaml\ncases:\n  - name: c\n    event: {context: {userInput: hi}}\n    <<: {decision: allow}\n",
	} {
		p := writeFile(t, dir, name, y)
		line := strings.Count(y[:strings.Index(y, "<<")], "\n") + 1
		// Hook files and test files are both read by yamlDocuments.
		if _, err := yamlDocuments(p); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: a merge key (<<) is not taken", line)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p := writeFile(t, dir, "anchor.yaml", "hookName: a\nid: &x 05001\nagentId: *x\n")
	if _, err := yamlDocuments(p); err == nil || !strings.Contains(err.Error(), "line 2: 05001 is not a number as JSON writes it") {
		t.Errorf("an alias of an octal number: %v", err)
	}
}

// A token endpoint's URL may carry a client secret in its query, which the daemon keeps secret
// (shown as ***): in a hook file such a URL comes from the environment whole; written out, it is
// refused, so it never sits in git.
func TestHookFileTokenURL(t *testing.T) {
	hook := func(url string) *dispatcher.Hook {
		return &dispatcher.Hook{HookName: "t", DispatchConfig: dispatcher.DispatchConfig{Auth: &dispatcher.Auth{
			Type: dispatcher.AuthCustomHTTPToken, TokenFetchConfig: &dispatcher.TokenFetch{URL: url}}}}
	}
	h := hook("https://idp.example.com/token?client_secret=LITERAL")
	if err := expandSecrets(h); err == nil || !strings.Contains(err.Error(), "dispatchConfig.auth.tokenFetchConfig.url: its query is secret") {
		t.Fatalf("a literal query: %v", err)
	}
	t.Setenv("HOOKD_TEST_TOKEN_URL", "https://idp.example.com/token?client_secret=from-env")
	h = hook("${HOOKD_TEST_TOKEN_URL}")
	if err := expandSecrets(h); err != nil || h.DispatchConfig.Auth.TokenFetchConfig.URL != "https://idp.example.com/token?client_secret=from-env" {
		t.Fatalf("from the environment: %v %q", err, h.DispatchConfig.Auth.TokenFetchConfig.URL)
	}
	if err := expandSecrets(hook("${HOOKD_TEST_UNSET_URL}")); err == nil || !strings.Contains(err.Error(), "HOOKD_TEST_UNSET_URL is not set") {
		t.Fatalf("an unset variable: %v", err)
	}
	if h := hook("https://idp.example.com/token"); expandSecrets(h) != nil || h.DispatchConfig.Auth.TokenFetchConfig.URL != "https://idp.example.com/token" {
		t.Fatal("a URL without a query is taken as written")
	}
}

// What the daemon says of a hook (its id, times, an unreadable secret) is not a hook file's to
// say: taken, secretUnreadable would show as a change on every run.
func TestHookFileRefusesTheDaemonsFields(t *testing.T) {
	for _, field := range []string{"id: 3", "createdAt: '2026-01-01T00:00:00Z'", "updatedAt: '2026-01-01T00:00:00Z'", "secretUnreadable: true"} {
		p := writeFile(t, t.TempDir(), "h.yaml", "hookName: h\nhookType: post_tool_use\n"+field+"\ndispatchConfig: {url: 'https://audit.example.com/h'}\n")
		if _, err := loadHooks([]string{p}, false); err == nil || !strings.Contains(err.Error(), "belong to the daemon, not to a hook file") {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// A case's expected modifiedValue is compared number by number as written: 2⁵³ + 1 is not 2⁵³
// (they were, as float64s), and 1 is 1.0.
func TestSameValueExactNumbers(t *testing.T) {
	for _, c := range []struct {
		want, got string
		same      bool
	}{
		{`{"id": 9007199254740992}`, `{"id":9007199254740993}`, false},
		{`{"id": 9007199254740993}`, `{"id":9007199254740993}`, true},
		{`{"a": 1, "b": [0.5, "x"]}`, `{"b":[0.50,"x"],"a":1.0}`, true},
		{`{"a": 1}`, `{"a":"1"}`, false},
		{`"plain text"`, `plain text`, true},
	} {
		if got := sameValue(dispatcher.PreToolUse, json.RawMessage(c.want), c.got); got != c.same {
			t.Errorf("sameValue(%s, %s) = %v", c.want, c.got, got)
		}
	}
}

// A user_message's or pre_scheduled_task's modifiedValue is the new input, text: compared as
// written, not as the JSON it may hold ({"amount": 1000.00} typed is not {"amount":1e3}).
func TestSameValueTextInput(t *testing.T) {
	for _, typ := range []dispatcher.HookType{dispatcher.UserMessage, dispatcher.PreScheduledTask} {
		for _, c := range []struct {
			want, got string
			same      bool
		}{
			{`"{\"amount\": 1000.00}"`, `{"amount":1e3}`, false},
			{`"{\"a\": 1}"`, `{"a":1}`, false},
			{`{"a": 1}`, `{"a":1}`, false}, // a text's expected value is a string
			{`"{\"amount\": 1000.00}"`, `{"amount": 1000.00}`, true},
			{`"plain text"`, `plain text`, true},
		} {
			if got := sameValue(typ, json.RawMessage(c.want), c.got); got != c.same {
				t.Errorf("%s: sameValue(%s, %s) = %v", typ, c.want, c.got, got)
			}
		}
	}

	// As the command runs it: a rewrite of the prompt's text fails the case that wants it kept.
	dir := t.TempDir()
	writeFile(t, dir, "um.yaml", `hookName: um-normalise
hookType: user_message
dispatchType: policy
dispatchConfig: {failureMode: DENY}
policyConfig:
  rules:
    - {name: amount, when: "input.startsWith('{')", decision: modify,
       modifiedValue: "input.replace('1000.00', '1e3').replace(' ', '')"}
`)
	p := writeFile(t, dir, "um_test.yaml", `policy: um.yaml
cases:
  - name: text must stay exactly as typed
    event: {context: {userInput: '{"amount": 1000.00}'}}
    decision: modify
    modifiedValue: '{"amount": 1000.00}'
  - name: the rewrite as it is
    event: {context: {userInput: '{"amount": 1000.00}'}}
    decision: modify
    modifiedValue: '{"amount":1e3}'
`)
	cmd := exec.Command(binary, "policy", "test", p)
	b, _ := cmd.CombinedOutput()
	out := string(b)
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(out, "1 passed, 1 failed") ||
		!strings.Contains(out, `FAIL `+p+`: text must stay exactly as typed: want modifiedValue "{\"amount\": 1000.00}", got "{\"amount\":1e3}"`) {
		t.Fatalf("exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// Aliases that repeat aliases expand exponentially (600 bytes of them took gigabytes): a file is
// refused once it expands past what the daemon takes in a request, whatever its size.
func TestHookFileAliasBomb(t *testing.T) {
	y := "hookName: h\nhookType: post_tool_use\ndispatchConfig: {url: 'https://audit.example.com/h'}\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		y += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	p := writeFile(t, t.TempDir(), "bomb.yaml", y)
	if _, err := loadHooks([]string{p}, false); err == nil || !strings.Contains(err.Error(), "expands to more than 1048576 bytes of JSON") {
		t.Fatalf("an alias bomb: %v", err)
	}
}

// A rule's time zone, and a task's CRON_TZ, are read from the daemon's own copy of the zone
// database when the host has none (a distroless or scratch image): the machine's zoneinfo, and
// Go's own beside the toolchain, are covered here in a mount namespace of the test's.
func TestZonesWithoutTheHostsZoneDatabase(t *testing.T) {
	covers := []string{"/usr/share/zoneinfo", filepath.Join(runtime.GOROOT(), "lib", "time")}
	script := ""
	for _, dir := range covers {
		if _, err := os.Stat(dir); err == nil {
			script += "mount -t tmpfs none " + dir + " && "
		}
	}
	if out, err := exec.Command("unshare", "-Ur", "--mount", "sh", "-c", script+"true").CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespaces here to hide the zone database in (%v: %s)", err, out)
	}
	dir := t.TempDir()
	writeFile(t, dir, "night.yaml", `hookName: 夜间转账
hookType: pre_tool_use
toolNameMatch: transferFunds
dispatchType: policy
dispatchConfig: {failureMode: ALLOW}
policyConfig:
  rules:
    - name: any-hour
      when: timestamp(event.occurredAt / 1000).getHours('Asia/Shanghai') >= 0
      decision: deny
  default: allow
`)
	test := writeFile(t, dir, "night_test.yaml", `policy: night.yaml
cases:
  - event: {context: {toolName: transferFunds, toolCallId: c1, arguments: {amount: 1}}}
    decision: deny
    rule: any-hour
`)
	out, err := exec.Command("unshare", "-Ur", "--mount", "sh", "-c", script+`exec "$0" policy test "$1"`, binary, test).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 passed, 0 failed") {
		t.Fatalf("with the host's zone database hidden: %v\n%s", err, out)
	}
}
