package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/policy"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// policyServer is the admin API with a running dispatcher.
func policyServer(t *testing.T, db *storage.DB) client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	reg, err := dispatcher.NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	d := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "test"})
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: d,
		AdminTokens: []string{adminToken}, Log: log})))
	t.Cleanup(srv.Close)
	return client{t: t, base: srv.URL, tok: adminToken}
}

// The example, as a compliance team would register it.
const transferPolicy = `{"hookName": "转账限额", "hookType": "pre_tool_use", "toolNameMatch": "transferFunds|payOrder",
 "dispatchType": "policy", "dispatchConfig": {"failureMode": "DENY"},
 "policyConfig": {"rules": [
   {"name": "over-limit", "when": "args.amount > 10000", "decision": "deny",
    "reason": "'单笔金额 ' + string(args.amount) + ' 超过限额 10000'"},
   {"name": "large", "when": "args.amount > 1000", "decision": "ask", "reason": "'大额转账需人工审批'"},
   {"name": "mask-card", "when": "has(args.cardNo)", "decision": "modify",
    "modifiedValue": "args.with({'cardNo': '****' + args.cardNo.substring(args.cardNo.size() - 4)})"}],
  "default": "allow"}}`

func transferEvent(args string) string {
	b, _ := json.Marshal(args)
	return `{"hookType":"pre_tool_use","sessionId":10001,"principalId":1001,"context":{"toolName":"transferFunds","toolCallId":"call_1","arguments":` + string(b) + `}}`
}

func TestPolicyHooksThroughTheAPI(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		code, w := c.do("POST", "/api/hooks", transferPolicy)
		if code != 201 {
			t.Fatalf("create: %d %s", code, w.Message)
		}
		var hk dispatcher.Hook
		json.Unmarshal(w.Data, &hk)
		if hk.DispatchType != "policy" || hk.PolicyConfig == nil || len(hk.PolicyConfig.Rules) != 3 ||
			hk.DispatchConfig.FailureMode != "DENY" || hk.DispatchConfig.URL != "" {
			t.Fatalf("created %s", w.Data)
		}

		t.Run("registration names rule and field", func(t *testing.T) {
			bad := strings.Replace(transferPolicy, `"when": "args.amount > 1000"`, `"when": "amount > 1000"`, 1)
			code, w := c.do("POST", "/api/hooks", bad)
			if code != 400 || w.Message != "policyConfig.rules[1].when: undeclared reference to 'amount' (1:1)" {
				t.Fatalf("%d %q", code, w.Message)
			}
			code, w = c.do("POST", "/api/hooks", strings.Replace(transferPolicy, `"decision": "ask"`, `"decison": "ask"`, 1))
			if code != 400 || !strings.Contains(w.Message, "policyConfig.rules[1].decison") {
				t.Fatalf("unknown field: %d %q", code, w.Message)
			}
			code, w = c.do("POST", "/api/hooks", strings.Replace(transferPolicy, `"default": "allow"`, `"default": "allow", "costLimit": -1`, 1))
			if code != 400 || w.Message != "policyConfig.costLimit: must be a non-negative integer, not number -1" {
				t.Fatalf("a negative cost limit: %d %q", code, w.Message)
			}
		})

		t.Run("dispatch answers ask", func(t *testing.T) {
			for _, c2 := range []struct{ args, decision, reason, modified string }{
				{`{"amount":5000}`, "ask", "大额转账需人工审批", ""},
				{`{"amount":12000}`, "deny", "单笔金额 12000 超过限额 10000", ""},
				{`{"amount":5,"cardNo":"6222020012345678"}`, "modify", "", `{"amount":5,"cardNo":"****5678"}`},
			} {
				code, w := c.do("POST", "/api/hooks/dispatch", transferEvent(c2.args))
				var dec struct {
					Decision, DecisionID  string
					Reason, ModifiedValue *string
				}
				json.Unmarshal(w.Data, &dec)
				if code != 200 || dec.Decision != c2.decision || deref(dec.Reason) != c2.reason || deref(dec.ModifiedValue) != c2.modified {
					t.Fatalf("%s: %d %s", c2.args, code, w.Data)
				}
				ds, err := db.ListDecisions(context.Background(), storage.DecisionFilter{DecisionID: dec.DecisionID})
				if err != nil || len(ds) != 1 || ds[0].Outcome != c2.decision || ds[0].RuleName == "" {
					t.Fatalf("decision log %+v %v", ds, err)
				}
			}
			// The log is filtered by every outcome it records, ask included, the list and the
			// live tail alike; an outcome it never records is a 400 on both.
			if got := getPage[storage.Decision](t, c, "/api/decisions?outcome=ask"); len(got.Items) != 1 || got.Items[0].Outcome != "ask" {
				t.Fatalf("decisions?outcome=ask: %+v", got)
			}
			for _, path := range []string{"/api/decisions?outcome=maybe", "/api/decisions/stream?outcome=maybe"} {
				if code, w := c.do("GET", path, ""); code != 400 || w.Message != "outcome: must be allow, deny, modify, ask or error" {
					t.Errorf("GET %s: %d %q", path, code, w.Message)
				}
			}
		})

		t.Run("a webhook may answer ask", func(t *testing.T) {
			rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(`{"decision":"ASK","reason":"需要复核"}`))
			}))
			defer rec.Close()
			code, w := c.do("POST", "/api/hooks", `{"hookName":"复核","hookType":"user_message","agentId":42,
				"dispatchConfig":{"url":"`+rec.URL+`"}}`)
			if code != 201 {
				t.Fatalf("%d %s", code, w.Message)
			}
			code, w = c.do("POST", "/api/hooks/dispatch", `{"hookType":"user_message","agentId":42,
				"context":{"userInput":"hi","chatMode":"single_chat","triggerSource":{"sourceType":"api_call","channelType":null,"channelProvider":null},"bizKey":null,"userNickname":null}}`)
			if code != 200 || !strings.Contains(string(w.Data), `"decision":"ask"`) || !strings.Contains(string(w.Data), "需要复核") {
				t.Fatalf("%d %s", code, w.Data)
			}
		})

		t.Run("evaluate records nothing", func(t *testing.T) {
			code, w := c.do("POST", "/api/hooks", `{"hookName":"agent-only","hookType":"user_message","agentId":5001,"enabled":false,
				"dispatchType":"policy","policyConfig":{"rules":[{"name":"pw","when":"input.contains('password')","decision":"deny"}]}}`)
			var agentOnly dispatcher.Hook
			if json.Unmarshal(w.Data, &agentOnly); code != 201 {
				t.Fatalf("agent-only: %d %s", code, w.Message)
			}
			// A disabled hook may be tried before it is enabled.
			if code, w := c.do("POST", "/api/policies/evaluate", `{"hookId":`+itoa(agentOnly.ID)+`,"event":{"agentId":5001,"context":{"userInput":"my password"}}}`); code != 200 ||
				!strings.Contains(string(w.Data), `"decision":"deny","rule":"pw"`) ||
				w.Message != "success; note: hook "+itoa(agentOnly.ID)+" is disabled: no dispatch asks it until it is enabled; this is what it will decide then" {
				t.Fatalf("agent-only: %d %s %s", code, w.Message, w.Data)
			}
			before, _ := db.ListDecisions(context.Background(), storage.DecisionFilter{Limit: 500})
			var cfg struct {
				PolicyConfig json.RawMessage `json:"policyConfig"`
			}
			json.Unmarshal([]byte(transferPolicy), &cfg)
			cases := []struct{ body, want string }{
				{`{"policyConfig":` + string(cfg.PolicyConfig) + `,"event":` + transferEvent(`{"amount":5000}`) + `}`,
					`"decision":"ask","rule":"large","reason":"大额转账需人工审批"`},
				{`{"hookId":` + itoa(hk.ID) + `,"event":` + transferEvent(`{"amount":5,"cardNo":"6222020012345678"}`) + `}`,
					`"decision":"modify","rule":"mask-card","modifiedValue":"{\"amount\":5,\"cardNo\":\"****5678\"}"`},
				{`{"hookId":` + itoa(hk.ID) + `,"event":` + transferEvent(`{"amount":5}`) + `}`, `"decision":"allow","cost":`},
				// With hookId, the event's hookType defaults to the hook's own.
				{`{"hookId":` + itoa(hk.ID) + `,"event":{"context":{"toolName":"transferFunds","arguments":{"amount":12000}}}}`,
					`"decision":"deny","rule":"over-limit"`},
				// A path with .. in it does not walk round a glob.
				{`{"policyConfig":{"rules":[{"name":"etc","when":"args.path.glob('/etc/**')","decision":"deny"}]},"event":{"hookType":"pre_tool_use","context":{"toolName":"write_file","arguments":{"path":"/tmp/../etc/passwd"}}}}`,
					`"decision":"deny","rule":"etc"`},
				{`{"policyConfig":{"rules":[{"name":"x","when":"args.missing > 1","decision":"deny"}]},"failureMode":"DENY","event":` + transferEvent(`{}`) + `}`,
					`"decision":"deny","rule":"x","reason":"hook policy could not decide: its policy failed (failureMode DENY)"`},
			}
			for _, tc := range cases {
				code, w := c.do("POST", "/api/policies/evaluate", tc.body)
				if code != 200 || !strings.Contains(string(w.Data), tc.want) {
					t.Fatalf("%s\n→ %d %s %s", tc.body, code, w.Message, w.Data)
				}
			}
			var ev struct{ Cost int }
			_, w = c.do("POST", "/api/policies/evaluate", cases[0].body)
			if json.Unmarshal(w.Data, &ev); ev.Cost <= 0 {
				t.Fatalf("no cost in %s", w.Data)
			}
			for _, bad := range []struct{ body, msg string }{
				{`{"event":` + transferEvent(`{}`) + `}`, "policyConfig: give either policyConfig or hookId"},
				{`{"policyConfig":{"rules":[{"name":"x","when":"nope","decision":"deny"}]},"event":` + transferEvent(`{}`) + `}`,
					"policyConfig.rules[0].when: undeclared reference to 'nope' (1:1)"},
				{`{"policyConfig":{"rules":[{"name":"x","when":"has(event.context.toolname)","decision":"deny"}]},"event":` + transferEvent(`{}`) + `}`,
					`policyConfig.rules[0].when: event.context of pre_tool_use has no member "toolname" (did you mean "toolName"?)`},
				{`{"policyConfig":{},"event":{"hookType":"post_tool_use","context":{}}}`, "event.hookType"},
				{`{"policyConfig":{},"event":{"hookType":"pre_tool_use","context":{"toolNme":"x"}}}`, "event.context.toolNme"},
				// A stored hook is tried only on events a dispatch would ask it about: a trial of a
				// tool its toolNameMatch misses would show a decision no dispatch makes.
				{`{"hookId":` + itoa(hk.ID) + `,"event":{"hookType":"pre_tool_use","context":{"toolName":"transferFund","arguments":{"amount":12000}}}}`,
					"event.context.toolName: hook " + itoa(hk.ID) + ` does not apply to tool "transferFund" (toolNameMatch "transferFunds|payOrder"): a dispatch would not ask it`},
				{`{"hookId":` + itoa(agentOnly.ID) + `,"event":{"hookType":"user_message","agentId":7,"context":{"userInput":"hi"}}}`,
					"event.agentId: hook " + itoa(agentOnly.ID) + " applies to agent 5001 only: a dispatch would not ask it"},
				{`{"hookId":` + itoa(agentOnly.ID) + `,"event":{"hookType":"user_message","context":{"userInput":"hi"}}}`,
					"event.agentId: hook " + itoa(agentOnly.ID) + " applies to agent 5001 only: a dispatch would not ask it"},
				// A stored hook is tried on events of its own type, not compiled again for another.
				{`{"hookId":` + itoa(hk.ID) + `,"event":{"hookType":"user_message","context":{"userInput":"hi"}}}`,
					"event.hookType: user_message, but hook " + itoa(hk.ID) + " is a pre_tool_use hook"},
			} {
				code, w := c.do("POST", "/api/policies/evaluate", bad.body)
				if code != 400 || !strings.Contains(w.Message, bad.msg) {
					t.Fatalf("%s → %d %q, want %q", bad.body, code, w.Message, bad.msg)
				}
			}
			after, _ := db.ListDecisions(context.Background(), storage.DecisionFilter{Limit: 500})
			if len(after) != len(before) {
				t.Fatalf("evaluate recorded %d decisions", len(after)-len(before))
			}
		})
	})
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// A modify to a blank value cannot take the place of a user's input or a task's: it is refused as
// an invalid modify (502 through the dispatch API, the turn or firing fails), never run as an
// empty message.
func TestBlankModifyRefused(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	for _, hookType := range []string{"user_message", "pre_scheduled_task"} {
		if st, w := c.do("POST", "/api/hooks", `{"hookName":"blank `+hookType+`","hookType":"`+hookType+`","dispatchType":"policy",
			"dispatchConfig":{"failureMode":"DENY"},
			"policyConfig":{"rules":[{"name":"blank","when":"true","decision":"modify","modifiedValue":"'  '"}]}}`); st != 201 {
			t.Fatalf("%s hook: %d %s", hookType, st, w.Message)
		}
	}
	for hookType, context := range map[string]string{"user_message": `{"userInput":"hello"}`, "pre_scheduled_task": `{"taskId":1,"taskName":"daily"}`} {
		st, w := c.do("POST", "/api/hooks/dispatch", `{"hookType":"`+hookType+`","context":`+context+`}`)
		if st != http.StatusBadGateway || !strings.Contains(w.Message, "returned a modifiedValue that is blank") {
			t.Errorf("%s: %d %s", hookType, st, w.Message)
		}
	}
}

// A pre_scheduled_task dispatch that names its task by name alone is recorded without a task id,
// not as task 0.
func TestTaskNamedByNameAloneHasNoTaskID(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	if st, w := c.do("POST", "/api/hooks", `{"hookName":"gate","hookType":"pre_scheduled_task","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"no","when":"true","decision":"deny","reason":"'no'"}]}}`); st != 201 {
		t.Fatalf("hook: %d %s", st, w.Message)
	}
	for ctx, want := range map[string]string{`{"taskName":"daily"}`: "", `{"taskId":7,"taskName":"daily"}`: `"taskId":7`} {
		st, w := c.do("POST", "/api/hooks/dispatch", `{"hookType":"pre_scheduled_task","context":`+ctx+`}`)
		var dec struct{ DecisionID string }
		json.Unmarshal(w.Data, &dec)
		if st != 200 || dec.DecisionID == "" {
			t.Fatalf("dispatch %s: %d %s", ctx, st, w.Data)
		}
		_, w = c.do("GET", "/api/decisions?decisionId="+dec.DecisionID, "")
		if rows := string(w.Data); !strings.Contains(rows, dec.DecisionID) || strings.Contains(rows, `"taskId":0`) ||
			(want != "" && !strings.Contains(rows, want)) || (want == "" && strings.Contains(rows, `"taskId"`)) {
			t.Errorf("the row of %s: %s", ctx, rows)
		}
	}
}

// A time zone written in a rule is one CEL reads, or the hook is refused naming the rule and
// field: getHours('Asia/Shangai') failed every call it was reached on, so under failureMode ALLOW
// an office-hours deny let everything through. A zone or offset CEL reads is taken, and a
// computed one is the input's and left to the evaluation.
func TestPolicyTimeZoneChecked(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		hook := func(name, when string) string {
			return policyHook(name, dispatcher.PreToolUse, policy.Rule{Name: "ok", When: "tool == 'read'", Decision: "allow"},
				policy.Rule{Name: "night", When: when, Decision: "deny", Reason: "'not at night'"})
		}
		const at = "timestamp(int(event.occurredAt) / 1000)"
		for when, msg := range map[string]string{
			at + ".getHours('Asia/Shangai') < 8":                       `getHours: time zone "Asia/Shangai": unknown time zone Asia/Shangai`,
			at + ".getDayOfWeek('+25:00') == 0":                        `getDayOfWeek: time zone "+25:00": timezone offset hours out of range [-23, 23]: +25:00`,
			"[1].exists(x, " + at + ".getMinutes('Europe/Berln') > x)": `getMinutes: time zone "Europe/Berln"`,
		} {
			code, w := c.do("POST", "/api/hooks", hook("office-hours", when))
			if code != 400 || !strings.HasPrefix(w.Message, "policyConfig.rules[1].when: ") || !strings.Contains(w.Message, msg) {
				t.Errorf("%s: %d %q, want policyConfig.rules[1].when: …%s…", when, code, w.Message, msg)
			}
			rules, _ := json.Marshal(policy.Config{Rules: []policy.Rule{{Name: "night", When: when, Decision: "deny"}}})
			body := `{"policyConfig":` + string(rules) + `,"event":` + transferEvent(`{}`) + `}`
			if code, w := c.do("POST", "/api/policies/evaluate", body); code != 400 || !strings.Contains(w.Message, msg) {
				t.Errorf("evaluate %s: %d %q", when, code, w.Message)
			}
		}
		for i, when := range []string{
			at + ".getHours('Asia/Shanghai') < 8",
			at + ".getHours('+08:00') < 8 || " + at + ".getDate('UTC') == 1 || " + at + ".getHours() < 0",
			at + ".getHours(args.?zone.orValue('UTC')) < 8",
		} {
			if code, w := c.do("POST", "/api/hooks", hook("ok-"+itoa(int64(i)), when)); code != 201 {
				t.Errorf("%s: %d %s", when, code, w.Message)
			}
		}
	})
}

// policyHook is the JSON of a policy hook named name, of hookType, with rules.
func policyHook(name string, hookType dispatcher.HookType, rules ...policy.Rule) string {
	b, _ := json.Marshal(dispatcher.Hook{HookName: name, HookType: hookType, DispatchType: dispatcher.DispatchPolicy,
		PolicyConfig: &policy.Config{Rules: rules}})
	return string(b)
}

// A trial's failureMode sent empty is refused, as a hook's is: taken as the default ALLOW, a
// failureMode meant to come from a template showed a policy that fails open where the hook
// registered with it would have been refused. So is a hookId of 0.
func TestPolicyEvaluateRefusesEmpty(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		rules := `{"rules":[{"name":"x","when":"args.missing > 1","decision":"deny"}]}`
		for body, msg := range map[string]string{
			`{"policyConfig":` + rules + `,"failureMode":"","event":` + transferEvent(`{}`) + `}`:   "failureMode: is empty",
			`{"policyConfig":` + rules + `,"failureMode":null,"event":` + transferEvent(`{}`) + `}`: "failureMode: is empty",
			`{"policyConfig":` + rules + `,"hookId":0,"event":` + transferEvent(`{}`) + `}`:         "hookId: is empty",
		} {
			if code, w := c.do("POST", "/api/policies/evaluate", body); code != 400 || !strings.HasPrefix(w.Message, msg) {
				t.Errorf("%s → %d %q, want %q", body, code, w.Message, msg)
			}
		}
		body := `{"policyConfig":` + rules + `,"failureMode":"DENY","event":` + transferEvent(`{}`) + `}`
		if code, w := c.do("POST", "/api/policies/evaluate", body); code != 200 || !strings.Contains(string(w.Data), `"decision":"deny"`) {
			t.Fatalf("%d %s %s", code, w.Message, w.Data)
		}
	})
}

// A regex.replace whose replacement, written in the rule, names a group its pattern lacks (or has
// a \ before no digit) is refused naming the rule and field: CEL reads the replacement only when
// the pattern matches, so the modify failed on exactly the inputs it was for, and under
// failureMode ALLOW an ID number meant to be masked went through as it was.
func TestPolicyReplacementChecked(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		hook := func(name, value string) string {
			return policyHook(name, dispatcher.UserMessage,
				policy.Rule{Name: "id-number", When: "input.matches('[0-9]{17}[0-9Xx]')", Decision: "modify", ModifiedValue: value})
		}
		for value, msg := range map[string]string{
			`regex.replace(input, '([0-9]{14})([0-9]{3}[0-9Xx])', r'**************\3')`: `regex.replace: the replacement "**************\\3" names group 3; the pattern has 2`,
			`regex.replace(input, '[0-9]{14}', r'\0\1')`:                                `the replacement "\\0\\1" names group 1; the pattern has 0`,
			`regex.replace(input, '([0-9]{14})', r'*\x', 1)`:                            `the replacement "*\\x" has a \ before neither a digit nor a \`,
			`regex.replace(input, '([0-9]{14})', r'*\')`:                                `the replacement "*\\" ends in a \`,
		} {
			code, w := c.do("POST", "/api/hooks", hook("bad", value))
			if code != 400 || !strings.HasPrefix(w.Message, "policyConfig.rules[0].modifiedValue: ") || !strings.Contains(w.Message, msg) {
				t.Errorf("%s: %d %q, want policyConfig.rules[0].modifiedValue: …%s…", value, code, w.Message, msg)
			}
		}
		for i, value := range []string{
			`regex.replace(input, '([0-9]{14})([0-9]{3}[0-9Xx])', r'**************\2')`,
			`regex.replace(input, '([0-9]{14})', r'\\\1\0')`,
			`regex.replace(input, '([0-9]{14})', input)`, // computed: the input's, left to the evaluation
		} {
			if code, w := c.do("POST", "/api/hooks", hook("ok-"+itoa(int64(i)), value)); code != 201 {
				t.Errorf("%s: %d %s", value, code, w.Message)
			}
		}
	})
}

// event.occurredAt and event.dispatchedAt are milliseconds: timestamp() of one, which takes
// seconds, is out of range on every call, so a rule written with it never decided (and under
// failureMode ALLOW let everything through). It is refused naming the rule, the field and the
// way to write it; a millisecond count divided first is taken.
func TestPolicyMillisecondTimestampRefused(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		hook := func(name, when string) string {
			return policyHook(name, dispatcher.PreToolUse, policy.Rule{Name: "ok", When: "tool == 'read'", Decision: "allow"},
				policy.Rule{Name: "night", When: when, Decision: "deny"})
		}
		for when, member := range map[string]string{
			"timestamp(event.occurredAt).getHours('Asia/Shanghai') >= 22":     "occurredAt",
			"timestamp(int(event.dispatchedAt)).getDayOfWeek() == 0":          "dispatchedAt",
			"timestamp(event.?occurredAt.orValue(0)) > timestamp(1700000000)": "occurredAt",
		} {
			code, w := c.do("POST", "/api/hooks", hook("bad", when))
			want := "policyConfig.rules[1].when: event." + member + " is milliseconds since the epoch and timestamp() takes seconds: write timestamp(event." + member + " / 1000)"
			if code != 400 || w.Message != want {
				t.Errorf("%s: %d %q, want %q", when, code, w.Message, want)
			}
		}
		for i, when := range []string{
			"timestamp(event.occurredAt / 1000).getHours('Asia/Shanghai') >= 22",
			"timestamp(int(event.dispatchedAt) / 1000) > timestamp(1700000000)",
			"event.occurredAt > 1700000000000",
		} {
			if code, w := c.do("POST", "/api/hooks", hook("ok-"+itoa(int64(i)), when)); code != 201 {
				t.Errorf("%s: %d %s", when, code, w.Message)
			}
		}
	})
}

// A member read by an index written in the rule is checked as a selected one: the index is the
// same read (event.context['permisionMode'] is never there, so the rule never fired, and under
// failureMode ALLOW let the call through).
func TestPolicyIndexedMemberChecked(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		for when, msg := range map[string]string{
			"event.context['permisionMode'] == 'plan'": `event.context of pre_tool_use has no member "permisionMode" (did you mean "permissionMode"?)`,
			"event['contxt'].cwd == '/'":               `event has no member "contxt" (did you mean "context"?)`,
			"event.context[?'cwdd'].hasValue()":        `event.context of pre_tool_use has no member "cwdd" (did you mean "cwd"?)`,
		} {
			code, w := c.do("POST", "/api/hooks", policyHook("bad", dispatcher.PreToolUse, policy.Rule{Name: "plan", When: when, Decision: "deny"}))
			if code != 400 || !strings.HasPrefix(w.Message, "policyConfig.rules[0].when: "+msg) {
				t.Errorf("%s: %d %q, want …%s…", when, code, w.Message, msg)
			}
		}
		when := "event.context['permissionMode'] == 'plan' && event['context'][?'cwd'].orValue('') == '/' && args['a b'] == 1"
		if code, w := c.do("POST", "/api/hooks", policyHook("ok", dispatcher.PreToolUse, policy.Rule{Name: "plan", When: when, Decision: "deny"})); code != 201 {
			t.Errorf("%s: %d %s", when, code, w.Message)
		}
	})
}

// A member of a nested object of the context is checked as a top-level one is: a typo there
// (triggerSource.sourceTyp) made has() never true and a read fail every call, deciding by the
// failureMode (under ALLOW, the call went through). What the type leaves free-form (a tool's
// arguments) stays unchecked.
func TestPolicyNestedMemberChecked(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		for when, msg := range map[string]string{
			"has(event.context.triggerSource.sourceTyp)":          `event.context.triggerSource of user_message has no member "sourceTyp" (did you mean "sourceType"?); it has sourceType, channelType, channelProvider`,
			"event.context.triggerSource.channelTyp == 'x'":       `event.context.triggerSource of user_message has no member "channelTyp" (did you mean "channelType"?)`,
			"event.context['triggerSource'][?'sorceType'] == 'x'": `event.context.triggerSource of user_message has no member "sorceType" (did you mean "sourceType"?)`,
		} {
			code, w := c.do("POST", "/api/hooks", policyHook("bad", dispatcher.UserMessage, policy.Rule{Name: "a", When: when, Decision: "deny"}))
			if code != 400 || !strings.HasPrefix(w.Message, "policyConfig.rules[0].when: "+msg) {
				t.Errorf("%s: %d %q, want …%s…", when, code, w.Message, msg)
			}
			body := `{"policyConfig":{"rules":[{"name":"a","when":` + strconv.Quote(when) + `,"decision":"deny"}]},"failureMode":"ALLOW",` +
				`"event":{"hookType":"user_message","context":{"userInput":"hi","triggerSource":{"sourceType":"human_message"}}}}`
			if code, w := c.do("POST", "/api/policies/evaluate", body); code != 400 || !strings.HasPrefix(w.Message, "policyConfig.rules[0].when: "+msg) {
				t.Errorf("evaluate %s: %d %q %s", when, code, w.Message, w.Data)
			}
		}
		for _, ok := range []struct {
			hookType dispatcher.HookType
			when     string
		}{
			{dispatcher.UserMessage, "event.context.triggerSource.sourceType == 'human_message' && has(event.context.triggerSource.channelType)"},
			{dispatcher.PreToolUse, "has(event.context.arguments.to.account) && event.context.arguments.to.account == 'x'"},
		} {
			if code, w := c.do("POST", "/api/hooks", policyHook("ok", ok.hookType, policy.Rule{Name: "a", When: ok.when, Decision: "deny"})); code != 201 {
				t.Errorf("%s: %d %s", ok.when, code, w.Message)
			}
		}
	})
}

// A modify hands on the arguments as they came but for what the rule changes: a number JSON
// carries that a double does not hold (an account number of 23 digits, a rate of 20 decimals,
// 1e400) stays the number it was, where it came out rounded (1.2345678901234568e+22, 0.1) or
// failed the rule (+Inf has no JSON form), so that under failureMode ALLOW the card number went
// on unmasked.
func TestPolicyModifyKeepsNumbers(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := policyServer(t, db)
		hook := policyHook("mask-card", dispatcher.PreToolUse, policy.Rule{Name: "mask", When: "has(args.cardNo)", Decision: "modify",
			ModifiedValue: "args.with({'cardNo': args.cardNo.mask(4), 'fee': double(args.amount) * 0.01})"})
		code, w := c.do("POST", "/api/hooks", hook)
		var hk dispatcher.Hook
		if json.Unmarshal(w.Data, &hk); code != 201 {
			t.Fatalf("%d %s", code, w.Message)
		}
		args := `{"cardNo":"6222020012345678","account":12345678901234567890123,"rate":0.10000000000000000001,` +
			`"limit":1e400,"amount":250,"share":0.25,"nested":{"ids":[9007199254740993,-12345678901234567890.5]}}`
		for _, path := range []string{"/api/hooks/dispatch", "/api/policies/evaluate"} {
			body := `{"hookType":"pre_tool_use","sessionId":1,"principalId":1,"context":{"toolName":"pay","toolCallId":"c1","arguments":` + args + `}}`
			if path == "/api/policies/evaluate" {
				body = `{"hookId":` + itoa(hk.ID) + `,"event":` + body + `}`
			}
			code, w := c.do("POST", path, body)
			var got struct{ Decision, ModifiedValue string }
			json.Unmarshal(w.Data, &got)
			want := `{"account":12345678901234567890123,"amount":250,"cardNo":"************5678","fee":2.5,"limit":1e400,` +
				`"nested":{"ids":[9007199254740993,-12345678901234567890.5]},"rate":0.10000000000000000001,"share":0.25}`
			if code != 200 || got.Decision != "modify" || got.ModifiedValue != want {
				t.Errorf("%s: %d %s %s\nwant modifiedValue %s", path, code, w.Message, w.Data, want)
			}
		}
	})
}

// A policy of no rules (its default decides) is answered with an empty list of rules, as the
// API document says, not null: openapitest checks every answer of the server against it.
func TestPolicyWithoutRules(t *testing.T) {
	c := policyServer(t, storagetest.SQLite(t))
	code, w := c.do("POST", "/api/hooks", `{"hookName": "p", "hookType": "user_message", "dispatchType": "policy", "policyConfig": {}}`)
	if code != 201 || !strings.Contains(string(w.Data), `"rules":[]`) {
		t.Fatalf("create: %d %s %s", code, w.Message, w.Data)
	}
}
