package dispatcher

import (
	"errors"
	"testing"

	"github.com/hookd/hookd/hookdtype"
)

// The extras of an answer are decoded strictly: a malformed one is the hook failing, naming the
// field, never an extra silently dropped.
func TestParseAnswerExtras(t *testing.T) {
	dec, _, err := parseAnswer([]byte(`{"decision":"deny","reason":"r","hint":"h","events":[{"name":"team_updated","value":{"a":1}}],
		"toolEvent":{"category":"auth_required","payload":{"authUrl":"https://x"},"userMessage":"m"}}`), PreToolUse)
	if err != nil || dec.Decision != Deny || len(dec.Extras) != 1 {
		t.Fatalf("%+v %v", dec, err)
	}
	x := dec.Extras[0]
	if x.Hint != "h" || len(x.Events) != 1 || x.Events[0].Name != "team_updated" || string(x.Events[0].Value) != `{"a":1}` ||
		x.ToolEvent == nil || x.ToolEvent.Category != "auth_required" || string(x.ToolEvent.Payload) != `{"authUrl":"https://x"}` || x.ToolEvent.UserMessage != "m" {
		t.Fatalf("%+v", x)
	}
	for body, want := range map[string]string{
		`{"decision":"allow"}`: "",
		`{"decision":"allow","hint":null,"events":null,"toolEvent":null}`: "",
		`{"decision":"allow","events":[]}`:                                "",
		`{"hint":3}`:                                                      "hint",
		`{"hint":"  "}`:                                                   "hint",
		`{"events":{"name":"x"}}`:                                         "events",
		`{"events":[{"name":"x","value":{},"extra":1}]}`:                  "events[0].extra",
		`{"events":[{"value":{}}]}`:                                       "events[0].name",
		`{"events":[{"name":"x","value":3}]}`:                             "events[0].value",
		`{"events":[{"name":"x"}]}`:                                       "events[0].value",
		`{"events":[{"name":"state_updated","value":{}}]}`:                "events[0].name",
		`{"toolEvent":{"payload":{}}}`:                                    "toolEvent.category",
		`{"toolEvent":{"category":"c","payload":[1]}}`:                    "toolEvent.payload",
		`{"toolEvent":{"category":"c","user_message":"m"}}`:               "toolEvent.user_message",
	} {
		dec, _, err := parseAnswer([]byte(body), PreToolUse)
		var ve *hookdtype.ValidationError
		switch {
		case want == "" && (err != nil || len(dec.Extras) != 0):
			t.Errorf("%s: %+v %v", body, dec, err)
		case want != "" && (!errors.As(err, &ve) || ve.Field != want):
			t.Errorf("%s: %v, want an error naming %s", body, err, want)
		}
	}
	// What a hook point cannot carry.
	if _, _, err := parseAnswer([]byte(`{"toolEvent":{"category":"c"}}`), UserMessage); err == nil {
		t.Error("a tool event on user_message")
	}
	if _, _, err := parseAnswer([]byte(`{"hint":"h"}`), PreScheduledTask); err == nil {
		t.Error("a hint on pre_scheduled_task")
	}
	if dec, _, err := parseAnswer([]byte(`{"hint":"h"}`), UserMessage); err != nil || dec.Extras[0].Hint != "h" {
		t.Errorf("a hint on user_message: %+v %v", dec, err)
	}
}

// TestFlawedDenyStands: an answer that says deny (or ask) is that decision whatever else in it
// hookd cannot use, the flaw named; the same flaws around any other decision are a failure, for
// the failureMode to decide. So failureMode ALLOW never turns a receiver's deny into an allow.
func TestFlawedDenyStands(t *testing.T) {
	for _, c := range []struct {
		body string
		t    HookType
		want string // the decision that stands; "" a failure
		flaw string // the field the flaw or the failure names
	}{
		{`{"decision":"deny","reason":"no","hint":"try later"}`, PreScheduledTask, Deny, "hint"},
		{`{"decision":" DENY ","reason":"no","toolEvent":{"category":"c"}}`, UserMessage, Deny, "toolEvent"},
		{`{"decision":"deny","reason":"no","events":[{"name":"x","value":3}]}`, PreToolUse, Deny, "events[0].value"},
		{`{"decision":"ask","reason":"a person","hint":"  "}`, PreToolUse, Ask, "hint"},
		{`{"decision":"deny","decision":"allow"}`, PreToolUse, Deny, "decision"},
		{`{"Decision":"allow","DECISION":"Deny"}`, PreToolUse, Deny, "decision"},
		{`{"decision":"deny","reason":"a","reason":"b"}`, UserMessage, Deny, "reason"},
		{`{"decision":"allow","hint":"h"}`, PreScheduledTask, "", "hint"},
		{`{"decision":"modify","modifiedValue":"x","hint":3}`, UserMessage, "", "hint"},
		{`{"decision":"allow","decision":"modify"}`, PreToolUse, "", "decision"},
		{`{"decision":"ask","decision":"allow"}`, PreToolUse, "", "decision"},
		{`{"decision":"deny","reason":5}`, PreToolUse, Deny, "reason"},
		{`{"reason":["r"],"decision":"ask"}`, UserMessage, Ask, "reason"},
		{`{"decision":"allow","reason":{"a":1}}`, PreToolUse, "", "reason"},
		{`{"decision":["deny"]}`, PreToolUse, "", "decision"},
		{`{"decision":"modify","modifiedValue":5}`, PreToolUse, "", "modifiedValue"},
		{`{"decision":"modify","modifiedValue":false}`, PreToolUse, "", "modifiedValue"},
	} {
		dec, flaw, err := parseAnswer([]byte(c.body), c.t)
		var ve *hookdtype.ValidationError
		switch {
		case c.want != "" && (err != nil || dec.Decision != c.want || len(dec.Extras) != 0 || !errors.As(flaw, &ve) || ve.Field != c.flaw):
			t.Errorf("%s on %s: %+v, flaw %v, err %v; want %s standing, the flaw naming %s", c.body, c.t, dec, flaw, err, c.want, c.flaw)
		case c.want == "" && (flaw != nil || !errors.As(err, &ve) || ve.Field != c.flaw):
			t.Errorf("%s on %s: %+v, flaw %v, err %v; want a failure naming %s", c.body, c.t, dec, flaw, err, c.flaw)
		}
	}
	if dec, _, _ := parseAnswer([]byte(`{"decision":"deny","reason":"no","hint":3}`), PreToolUse); dec.Reason != "no" {
		t.Errorf("the reason of a flawed deny: %+v", dec)
	}
	if dec, _, _ := parseAnswer([]byte(`{"decision":"deny","Reason":5,"reason":"no"}`), PreToolUse); dec.Reason != "no" {
		t.Errorf("the reason of a deny beside a reason of the wrong type: %+v", dec)
	}
}

// TestSentTwice: a member hookd reads, sent twice in any case, is named; others are not.
func TestSentTwice(t *testing.T) {
	for body, want := range map[string]string{
		`{"decision":"deny","decision":"allow"}`:                  "decision",
		` { "Decision" : "deny" , "DECISION":"allow" } `:          "decision",
		`{"reason":"a","x":{"reason":1,"reason":2},"reason":"b"}`: "reason",
		`{"modifiedvalue":"{}","modifiedValue":"{}"}`:             "modifiedValue",
		`{"decision":"deny","x":[{"decision":1}],"y":"decision"}`: "",
		`{"a":1,"a":2}`: "",
		`{}`:            "",
		`null`:          "",
		`{"d\u0065cision":"deny","decision":"allow"}`: "decision",
	} {
		if got := sentTwice([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}
