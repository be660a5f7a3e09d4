package api

import (
	"encoding/json"
	"testing"

	"github.com/hookd/hookd/dispatcher"
)

// FuzzDispatchAnswer: the dispatch answer written by hand is json.Marshal's, byte for byte.
func FuzzDispatchAnswer(f *testing.F) {
	for _, s := range []string{"", "ask", "大额转账需人工审批", `<script>&"\`, "\u2028\u2029\x00\x1f\t", "\xff\xfe", `{"amount":1}`} {
		f.Add("deny", s, s, true)
	}
	f.Fuzz(func(t *testing.T, decision, reason, modified string, withModified bool) {
		id := "0HKD1F9X2A3B4"
		for _, a := range []dispatchAnswer{{Decision: decision}, {Decision: decision, DecisionID: &id, Reason: &reason},
			{Decision: decision, DecisionID: &id, Reason: nullIfEmpty(reason), ModifiedValue: map[bool]*string{true: &modified}[withModified]},
			{Decision: decision, Extras: []dispatcher.Extra{{HookName: reason, Hint: modified}}}} {
			got, err := a.AppendJSON([]byte("x"))
			want, werr := json.Marshal(a)
			if err != nil || werr != nil || string(got) != "x"+string(want) {
				t.Fatalf("%+v:\n got %s (%v)\nwant x%s (%v)", a, got, err, want, werr)
			}
		}
	})
}
