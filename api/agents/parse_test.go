package agents

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParseInputMatchesUnmarshal: ParseInput reads the fields json.Unmarshal into a map of raw
// values reads, and str decodes a field as json.Unmarshal into a string does.
func TestParseInputMatchesUnmarshal(t *testing.T) {
	for _, body := range []string{
		`{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{"command":"ls -la","n":[1,2,{"a":null}]}}`,
		" \n{ \"hook_event_name\" : \"Stop\" ,\t\"x\" : 1.5e3 , \"y\":true,\"z\":null } \n",
		`{"hook_event_name":"A","hook_event_name":"B"}`,
		`{"hook_\u0065vent_name":"\u0050re\"Tool\\Use\ud83d\ude00","cwd":"/tmp/\u00e9"}`,
		"{\"hook_event_name\":\"\xff\xfeX\",\"prompt\":\"日本\"}",
		`{"hook_event_name":"A","prompt":123,"cwd":["x"],"source":{"a":"b"}}`,
		`{"hook_event_name":"A","":""}`,
	} {
		in, err := ParseInput([]byte(body))
		var want map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &want) != nil {
			t.Fatalf("%s: not JSON", body)
		}
		if err != nil || !reflect.DeepEqual(in.fields, want) {
			t.Fatalf("%s: %v %q, want %q", body, err, in.fields, want)
		}
		for k := range want {
			var s string
			_ = json.Unmarshal(want[k], &s)
			if got := in.str(k); got != s {
				t.Fatalf("%s: str(%q) = %q, want %q", body, k, got, s)
			}
		}
	}
	for _, body := range []string{``, `null`, `[]`, `"x"`, `{"hook_event_name":1}`, `{"a":1}`, `{"hook_event_name":"A"`,
		`{"hook_event_name":"A"} {}`, `{"hook_event_name":""}`} {
		if _, err := ParseInput([]byte(body)); err != ErrNotHookInput {
			t.Fatalf("%q: %v", body, err)
		}
	}
}
