package hookdtype

import (
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{``, ` `, `{}`, `[]`, `{"a":1}`, ` { "a" : [1, 2.5, {"b": null}], "a": "last" } `, `[1,]`, `{"a":1,}`,
	`{,}`, `[,1]`, `{"a"}`, `{"a":}`, `{1:2}`, `"\u00e9\ud83d\ude00"`, `"\u00g0"`, `"\x"`, `"a` + "\x01" + `"`, "\"\xff\xfe\"",
	`"\/\b\f\n\r\t\\\""`, `-0`, `-`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `-0.0e0`, `2.5e10`, `true`, `tru`, `truex`,
	`false`, `null`, `nul`, `nullnull`, `[true false]`, `[1 2]`, `{"a":1 "b":2}`, `1 2`, "\t\r\n[]\n", `[[[]]]`, `[[[]]`,
	`[]]`, `{"a":{"b":{}}}}`, `{"a":[}`, `["\u12"]`, `"\u1234"`, "\v1", `[-]`, `[1e5,-3.25E+2,0.0]`, `{"":""}`, `"`, `\`}

func TestValid(t *testing.T) {
	cases := append([]string{}, validSeeds...)
	cases = append(cases, strings.Repeat("[", maxNesting)+strings.Repeat("]", maxNesting),
		strings.Repeat("[", maxNesting+1)+strings.Repeat("]", maxNesting+1),
		strings.Repeat(`{"a":`, maxNesting)+"1"+strings.Repeat("}", maxNesting),
		strings.Repeat(`{"a":`, maxNesting+1)+"1"+strings.Repeat("}", maxNesting+1),
		strings.Repeat("[", 200)+strings.Repeat("]", 199))
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.40q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// BenchmarkValid is Valid against json.Valid on a dispatch request's body.
func BenchmarkValid(b *testing.B) {
	body := []byte(`{"hookType":"pre_tool_use","sessionId":10001,"principalId":1001,"context":{"toolName":"transferFunds",` +
		`"toolCallId":"call_1","arguments":{"amount":5000,"currency":"CNY","note":"月度结算 \"A\" \u2028","items":[1,2.5,-3e2,true,null]}}}`)
	b.Run("hookdtype", func(b *testing.B) {
		for b.Loop() {
			if !Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
