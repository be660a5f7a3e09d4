package policy_test

import (
	"strings"
	"testing"

	"github.com/hookd/hookd/policy"
)

// netRule is the internal-network example of docs/policies.md.
var netRule = policy.Rule{Name: "net", Decision: "deny", When: `tool == 'http_get' && (isIP(args.host)
  ? cidr('10.0.0.0/8').containsIP(ip(args.host)) || cidr('192.168.0.0/16').containsIP(ip(args.host))
  : args.host.matches(r'^[0-9.]+$|^0[xX][0-9a-fA-F]+$|:'))`}

// The examples of docs/policies.md compile and decide as the document says.
func TestDocumentedExamples(t *testing.T) {
	cases := []struct {
		hookType, event string
		rule            policy.Rule
		decision, value string
	}{
		{"pre_tool_use", toolEvent("shell", `{"command":"cat /etc/hosts"}`),
			policy.Rule{Name: "etc", When: `tool == 'shell' && args.command.matches('(^|\\s)/etc(/|\\s|$)')`, Decision: "ask"}, "ask", ""},
		{"pre_tool_use", toolEvent("write_file", `{"path":"/workspace/../etc/x"}`),
			policy.Rule{Name: "ws", When: "tool == 'write_file' && !pathWithin(args.path, '/workspace')", Decision: "deny"}, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"192.168.1.1"}`), netRule, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"::ffff:10.0.0.1"}`), netRule, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"010.0.0.1"}`), netRule, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"0x0a000001"}`), netRule, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"[::1]"}`), netRule, "deny", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"8.8.8.8"}`), netRule, "allow", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"example.com"}`), netRule, "allow", ""},
		{"pre_tool_use", toolEvent("http_get", `{"host":"api.0x1.dev"}`), netRule, "allow", ""},
		{"user_message", `{"hookType":"user_message","context":{"userInput":"身份证 11010519491231002X"}}`,
			policy.Rule{Name: "id", When: "input.matches('[0-9]{17}[0-9Xx]')", Decision: "modify",
				ModifiedValue: "regex.replace(input, '([0-9]{14})([0-9]{3}[0-9Xx])', r'**************\\2')"}, "modify", "身份证 **************002X"},
		{"pre_tool_use", toolEvent("x", `{}`),
			policy.Rule{Name: "cjk", When: "'张三丰'.mask(1) == '**丰'", Decision: "deny"}, "deny", ""},
		{"pre_tool_use", toolEvent("x", `{"path":"/a/b/key.pem"}`),
			policy.Rule{Name: "pem", When: "args.path.glob('**/*.pem')", Decision: "deny"}, "deny", ""},
		{"pre_tool_use", toolEvent("pay", `{"memo":"short"}`),
			policy.Rule{Name: "memo", When: "has(args.memo)", Decision: "modify",
				ModifiedValue: "args.with({'memo': args.memo.substring(0, math.least(140, args.memo.size()))})"}, "modify", `{"memo":"short"}`},
		{"pre_tool_use", toolEvent("pay", `{"memo":"`+strings.Repeat("m", 150)+`"}`),
			policy.Rule{Name: "memo", When: "has(args.memo)", Decision: "modify",
				ModifiedValue: "args.with({'memo': args.memo.substring(0, math.least(140, args.memo.size()))})"}, "modify", `{"memo":"` + strings.Repeat("m", 140) + `"}`},
	}
	for _, c := range cases {
		p, err := policy.Compile(policy.Config{Rules: []policy.Rule{c.rule}}, c.hookType)
		if err != nil {
			t.Fatalf("%s: %v", c.rule.Name, err)
		}
		res, err := p.Eval(input(t, c.event))
		if err != nil {
			t.Fatalf("%s: %v", c.rule.Name, err)
		}
		if res.Decision != c.decision || (c.value != "" && (res.ModifiedValue == nil || *res.ModifiedValue != c.value)) {
			t.Errorf("%s: %+v", c.rule.Name, res)
		}
	}
}
