package agents_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/dispatcher"
)

var update = flag.Bool("update", false, "rewrite the ask goldens in testdata/agents")

const dir = "../../testdata/agents"

// eachFixture maps every fixture of every harness.
func eachFixture(t *testing.T, fn func(ad agents.Adapter, file string, m agents.Mapped)) {
	for _, kind := range agents.Kinds {
		ad := agents.For(kind)
		files, _ := filepath.Glob(filepath.Join(dir, kind, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no fixtures of %s", kind)
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, err := agents.ParseInput(body)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			m, err := ad.Map(in)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			fn(ad, f, m)
		}
	}
}

// TestAskGoldens renders an ask on every interceptive fixture: Claude Code and Cursor ask, the
// harnesses that cannot ask from that hook block with the reason. The daemon test compares its
// answers under a receiver that asks with the same files.
func TestAskGoldens(t *testing.T) {
	eachFixture(t, func(ad agents.Adapter, f string, m agents.Mapped) {
		if !m.Point.Interceptive() {
			return
		}
		got := ad.Answer(m, agents.Verdict{Decision: agents.Ask, Reason: "a person from finance must approve this"})
		path := filepath.Join(filepath.Dir(f), "golden", strings.TrimSuffix(filepath.Base(f), ".json")+".ask.golden")
		if *update {
			os.WriteFile(path, got, 0o644)
			return
		}
		want, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s %s ask:\n got %s\nwant %s (%v)", ad.Kind(), m.Event, got, want, err)
		}
	})
}

// Every fixture maps: an event with a point names its subject and session; the others have none.
func TestFixturesMap(t *testing.T) {
	eachFixture(t, func(ad agents.Adapter, f string, m agents.Mapped) {
		if m.Point == "" {
			return
		}
		if m.Session == "" || m.Cwd == "" {
			t.Errorf("%s: session %q cwd %q", f, m.Session, m.Cwd)
		}
		switch c := m.Context.(type) {
		case *dispatcher.PreToolUseContext:
			if c.ToolName == "" || !json.Valid([]byte(c.Arguments)) {
				t.Errorf("%s: %+v", f, c)
			}
		case *dispatcher.PostToolUseContext:
			if c.ToolName == "" {
				t.Errorf("%s: %+v", f, c)
			}
		case *dispatcher.UserMessageContext:
			if c.UserInput == "" {
				t.Errorf("%s: %+v", f, c)
			}
		case nil:
			t.Errorf("%s: no context", f)
		}
	})
}

// A hook input without its subject at a point hookd decides is refused with a block, naming the
// field; the session number is stable and differs across principals and harnesses.
func TestMissingSubjectAndSessionNumbers(t *testing.T) {
	in, err := agents.ParseInput([]byte(`{"hook_event_name":"PreToolUse","session_id":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := agents.For(agents.ClaudeCode).Map(in)
	if err == nil || m.Point != dispatcher.PreToolUse || !strings.Contains(err.Error(), "tool_name") {
		t.Fatalf("%+v %v", m, err)
	}
	// A call's arguments are part of its subject: missing, or not an object, they are refused.
	for kind, body := range map[string]string{
		agents.Codex:     `{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Bash","tool_input":null}`,
		agents.GeminiCLI: `{"hook_event_name":"BeforeTool","session_id":"s1","tool_name":"run_shell_command","tool_input":["rm","-rf","/"]}`,
		agents.Cursor:    `{"hook_event_name":"beforeMCPExecution","conversation_id":"c1","tool_name":"db","tool_input":"drop table users"}`,
	} {
		in, err := agents.ParseInput([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if m, err := agents.For(kind).Map(in); err == nil || m.Point != dispatcher.PreToolUse || !strings.Contains(err.Error(), "tool_input") {
			t.Errorf("%s: %+v %v, want tool_input refused", kind, m, err)
		}
	}
	if _, err := agents.ParseInput([]byte(`[1]`)); err == nil {
		t.Fatal("an array is not a hook input")
	}
	p1, p2 := int64(1), int64(2)
	a := agents.SessionID(agents.ClaudeCode, &p1, "s1")
	if a != agents.SessionID(agents.ClaudeCode, &p1, "s1") || a == agents.SessionID(agents.ClaudeCode, &p2, "s1") ||
		a == agents.SessionID(agents.Codex, &p1, "s1") || a <= 0 || a >= 1<<53 {
		t.Fatalf("session numbers: %d", a)
	}
}

// Two hooks' extras: their hints and notices in chain order, their custom events counted, a tool
// event without a userMessage adding nothing.
func TestExtrasOf(t *testing.T) {
	hint, notice, events := agents.ExtrasOf([]dispatcher.Extra{
		{HookName: "a", Hint: "first", Events: []dispatcher.CustomEvent{{Name: "x", Value: json.RawMessage(`{}`)}},
			ToolEvent: &dispatcher.ToolEvent{Category: "resource_created"}},
		{HookName: "b", Hint: "second", Events: []dispatcher.CustomEvent{{Name: "y", Value: json.RawMessage(`{}`)}},
			ToolEvent: &dispatcher.ToolEvent{Category: "auth_required", UserMessage: "approve at https://a.example/1"}},
	})
	if hint != "first\n\nsecond" || notice != "approve at https://a.example/1" || events != 2 {
		t.Errorf("ExtrasOf: %q %q %d", hint, notice, events)
	}
	if hint, notice, events := agents.ExtrasOf(nil); hint != "" || notice != "" || events != 0 {
		t.Errorf("ExtrasOf(nil): %q %q %d", hint, notice, events)
	}
}

// TestEnforceIsWhatIsAnswered: the decision log records Enforce's verdict, so it must be what the
// answer tells the harness: on every interceptive fixture and every verdict, the answer to the
// enforced verdict is the answer to the verdict, and enforcing again changes nothing. A harness
// that cannot ask from a hook enforces an ask as a deny.
func TestEnforceIsWhatIsAnswered(t *testing.T) {
	obj, text := `{"command":"make test"}`, `not an object`
	verdicts := []agents.Verdict{{Decision: dispatcher.Allow}, {Decision: dispatcher.Deny, Reason: "no"},
		{Decision: agents.Ask, Reason: "ask finance"}, {Decision: dispatcher.Modify, Modified: &obj, Reason: "masked"},
		{Decision: dispatcher.Modify, Modified: &text}, {Decision: agents.Ask, Hint: "a hint", Notice: "a notice"},
		{Decision: agents.Ask, Reason: "review", Modified: &obj}, {Decision: agents.Ask, Modified: &text}}
	eachFixture(t, func(ad agents.Adapter, f string, m agents.Mapped) {
		if !m.Point.Interceptive() {
			return
		}
		for _, v := range verdicts {
			e := ad.Enforce(m, v)
			if !bytes.Equal(ad.Answer(m, v), ad.Answer(m, e)) {
				t.Errorf("%s %s %+v: the answer is not the enforced verdict's %+v", ad.Kind(), m.Event, v, e)
			}
			if again := ad.Enforce(m, e); again.Decision != e.Decision || again.Reason != e.Reason {
				t.Errorf("%s %s %+v: enforced twice %+v, once %+v", ad.Kind(), m.Event, v, again, e)
			}
			if e.Decision == agents.Ask && (ad.Kind() == agents.Codex || ad.Kind() == agents.GeminiCLI || m.Point == dispatcher.UserMessage) {
				t.Errorf("%s %s: an ask enforced as an ask, where the harness cannot ask", ad.Kind(), m.Event)
			}
			// An ask about a rewritten call either carries the rewrite to the harness or blocks:
			// approving the original is not what the hooks decided.
			if v.Decision == agents.Ask && v.Modified != nil && e.Decision == agents.Ask && e.Modified != nil &&
				!bytes.Contains(ad.Answer(m, v), []byte(`"command":"make test"`)) {
				t.Errorf("%s %s: an ask about a rewritten call answered without the rewrite: %s", ad.Kind(), m.Event, ad.Answer(m, v))
			}
		}
	})
}

// A block never reaches a harness with a blank reason (Codex throws such an answer out and runs
// the call or submits the prompt), and no modify is answered with the harness's approval
// (Cursor's allow with updated_input would approve the rewritten call for the user).
func TestBlocksSayWhyAndModifyNeverApproves(t *testing.T) {
	obj := `{"command":"make test"}`
	eachFixture(t, func(ad agents.Adapter, f string, m agents.Mapped) {
		if !m.Point.Interceptive() {
			return
		}
		for _, blank := range []string{"   ", "\n", "\t "} {
			for _, d := range []string{dispatcher.Deny, agents.Ask} {
				// hookd's own reason stands in ("hookd: denied", "hookd: this call needs a person's approval").
				if out := ad.Answer(m, agents.Verdict{Decision: d, Reason: blank}); !bytes.Contains(out, []byte("hookd")) {
					t.Errorf("%s %s %s with a blank reason: %s", ad.Kind(), m.Event, d, out)
				}
			}
		}
		out := string(ad.Answer(m, agents.Verdict{Decision: dispatcher.Modify, Modified: &obj}))
		if strings.Contains(out, `"permission":"allow"`) || strings.Contains(out, `"permissionDecision":"allow"`) {
			t.Errorf("%s %s: a modify answered with the harness's allow: %s", ad.Kind(), m.Event, out)
		}
	})
}
