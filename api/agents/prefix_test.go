package agents

import "testing"

// topLevelString reads a member of an object cut anywhere: only a top-level name counts, the last
// of one sent twice, and an input cut before the name (or inside its value) names nothing.
func TestTopLevelString(t *testing.T) {
	for _, c := range []struct {
		in, want string
		found    bool
	}{
		{`{"session_id":"s","hook_event_name":"PreToolUse","tool_input":{"content":"xxxx`, "PreToolUse", true},
		{`{"tool_input":{"hook_event_name":"PostToolUse"},"hook_event_name":"PreToolUse","x":"`, "PreToolUse", true},
		{`{"tool_input":{"hook_event_name":"PostToolUse","content":"xxxx`, "", false},
		{`{"tool_input":["hook_event_name",{"a":"hook_event_name"}],"hook_event_name":"Stop"`, "Stop", true},
		{`{"memo":"\"hook_event_name\":\"PostToolUse\"","hook_event_name" : "BeforeTool" ,"b":1`, "BeforeTool", true},
		{`{"hook_event_name":"UserPromptSubmit","hook_event_name":"PreToolUse","prompt":"`, "PreToolUse", true},
		{`{"hook_\u0065vent_name":"PreToolUse"`, "PreToolUse", true},
		{`{"hook_event_name":"PreTo`, "", false},
		{`{"hook_event_name":`, "", false},
		{`{"hook_event_name"`, "", false},
		{`{"hook_event_name":7,"tool_name":"Bash"`, "", false},
		{`["hook_event_name","PreToolUse"]`, "", false},
		{`{"a":"b\`, "", false},
		{``, "", false},
	} {
		got, found := topLevelString([]byte(c.in), "hook_event_name")
		if got != c.want || found != c.found {
			t.Errorf("%s: %q %v, want %q %v", c.in, got, found, c.want, c.found)
		}
	}
}

// FuzzTopLevelString: on any bytes it never fails, and on a whole hook input it names the event
// ParseInput names.
func FuzzTopLevelString(f *testing.F) {
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_input":{"command":"ls"}}`))
	f.Add([]byte(`{"tool_input":{"hook_event_name":"x"},"hook_event_name":"Stop"}`))
	f.Add([]byte(`{"a":[1,{"b":"}"}],"hook_event_name":"A\"B"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, found := topLevelString(b, "hook_event_name")
		if in, err := ParseInput(b); err == nil && (!found || got != in.Event) {
			t.Fatalf("%q: %q %v, ParseInput %q", b, got, found, in.Event)
		}
	})
}
