package hookdtype

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

type strictInner struct {
	FailureMode string            `json:"failureMode"`
	Headers     map[string]string `json:"headers"`
	Rules       []struct {
		When string `json:"when"`
	} `json:"rules"`
}

type strictEmbedded struct {
	CreatedAt *time.Time `json:"createdAt"`
}

type strictOuter struct {
	strictEmbedded
	HookName string          `json:"hookName"`
	Timeout  int             `json:"timeoutMs"`
	Config   strictInner     `json:"dispatchConfig"`
	Ptr      *strictInner    `json:"ptr"`
	Raw      json.RawMessage `json:"context"`
	Any      any             `json:"any"`
	skipped  int
	Ignored  int `json:"-"`
}

func TestDecodeStrict(t *testing.T) {
	cases := []struct {
		body, at, field, msg string
	}{
		{`{"hook_name":"x"}`, "", "hook_name", `unknown field (did you mean "hookName"?)`},
		{`{"HookName":"x"}`, "", "HookName", `unknown field (did you mean "hookName"?)`},
		{`{"dispatchConfig":{"failure_mode":"DENY"}}`, "", "dispatchConfig.failure_mode", `unknown field (did you mean "failureMode"?)`},
		{`{"ptr":{"zzz":1}}`, "", "ptr.zzz", "unknown field"},
		// A field sent one object too far out is pointed to where it belongs; a close name at
		// the field's own level is the likelier typo and wins.
		{`{"failure_mode":"DENY"}`, "", "failure_mode", `unknown field here (did you mean "dispatchConfig.failureMode"?)`},
		{`{"when":"a"}`, "", "when", "unknown field"},
		{`{"timeout":1}`, "", "timeout", `unknown field (did you mean "timeoutMs"?)`},
		{`{"dispatchConfig":{"rules":[{"when":"a"},{"wehn":"b"}]}}`, "", "dispatchConfig.rules[1].wehn", `unknown field (did you mean "when"?)`},
		{`{"Ignored":1}`, "", "Ignored", "unknown field"},
		{`{"skipped":1}`, "", "skipped", "unknown field"},
		{`{"timeoutMs":"3000"}`, "", "timeoutMs", "must be an integer, not string"},
		{`{"dispatchConfig":{"failureMode":1}}`, "", "dispatchConfig.failureMode", "must be a string, not number"},
		// A wrong type is named with its indices, which encoding/json leaves out (rules.when).
		{`{"dispatchConfig":{"rules":[{"when":"a"},{"when":"a"},{"when":5}]}}`, "", "dispatchConfig.rules[2].when", "must be a string, not number"},
		{`{"dispatchConfig":{"rules":[{"when":"a"},{"when":true}]}}`, "", "dispatchConfig.rules[1].when", "must be a string, not bool"},
		{`{"timeoutMs":1.5}`, "", "timeoutMs", "must be an integer, not number 1.5"},
		{`{"zzz":1}`, "context", "context.zzz", "unknown field"},
		{`[]`, "", "body", "must be an object, not array"},
		{`[]`, "context", "context", "must be an object, not array"},
		{``, "", "body", "is empty; a JSON object is required"},
		{`{"hookName":"a"} {}`, "", "body", "trailing data after the JSON value"},
		{`{"hookName":`, "", "body", "malformed JSON: unexpected EOF"},
		{`{"hookName":"a","hookName":"b"}`, "", "hookName", "appears twice; send each field once"},
		{`{"dispatchConfig":{"failureMode":"ALLOW","failureMode":"DENY"}}`, "", "dispatchConfig.failureMode", "appears twice; send each field once"},
		{`{"dispatchConfig":{"rules":[{"when":"a"},{"when":"a","when":"b"}]}}`, "", "dispatchConfig.rules[1].when", "appears twice; send each field once"},
		{`{"x":1,"x":2}`, "context", "context.x", "appears twice; send each field once"},
		{`{"hookName" 1}`, "", "body", "malformed JSON at byte 12: invalid character '1' after object key"},
	}
	for _, c := range cases {
		var v strictOuter
		err := DecodeStrict([]byte(c.body), &v, c.at)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || ve.Msg != c.msg {
			t.Errorf("%s at %q: %v, want %s: %s", c.body, c.at, err, c.field, c.msg)
		}
	}
	var v strictOuter
	ok := `{"hookName":"a","createdAt":"2026-01-01T00:00:00Z","context":{"anything":1},"any":{"x":[1]},
		"dispatchConfig":{"headers":{"X-Any":"1"},"rules":[{"when":"a"}]}}`
	if err := DecodeStrict([]byte(ok), &v, ""); err != nil || v.HookName != "a" || v.CreatedAt == nil || v.Config.Headers["X-Any"] != "1" {
		t.Fatalf("valid body: %v %+v", err, v)
	}
}

// A field tagged strict:"nonempty" takes its default when absent; sent empty it is refused, since
// the empty value would take the default too, silently.
func TestDecodeStrictNonEmpty(t *testing.T) {
	type config struct {
		FailureMode string `json:"failureMode,omitempty" strict:"nonempty"`
		TimeoutMs   int    `json:"timeoutMs,omitempty" strict:"nonempty"`
		MaxRetries  *int   `json:"maxRetries,omitempty" strict:"nonnull"`
		Name        string `json:"name"`
	}
	type outer struct {
		Config *config `json:"dispatchConfig"`
	}
	const msg = "is empty; leave it out for the default, or give a value"
	for body, field := range map[string]string{
		`{"dispatchConfig":{"failureMode":""}}`:        "dispatchConfig.failureMode",
		`{"dispatchConfig":{"failureMode": null}}`:     "dispatchConfig.failureMode",
		`{"dispatchConfig":{"timeoutMs": 0 }}`:         "dispatchConfig.timeoutMs",
		`{"dispatchConfig":{"name":"","timeoutMs":0}}`: "dispatchConfig.timeoutMs",
		`{"dispatchConfig":{"maxRetries":null}}`:       "dispatchConfig.maxRetries",
	} {
		var v outer
		err := DecodeStrict([]byte(body), &v, "")
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field || ve.Msg != msg {
			t.Errorf("%s: %v, want %s: %s", body, err, field, msg)
		}
	}
	var v outer
	if err := DecodeStrict([]byte(`{"dispatchConfig":{"name":"","failureMode":"DENY","timeoutMs":10,"maxRetries":0}}`), &v, ""); err != nil ||
		v.Config.FailureMode != "DENY" || v.Config.TimeoutMs != 10 || v.Config.MaxRetries == nil || *v.Config.MaxRetries != 0 {
		t.Fatalf("set fields: %v %+v", err, v.Config)
	}
	if err := DecodeStrict([]byte(`{"dispatchConfig":{}}`), &v, ""); err != nil {
		t.Fatalf("absent fields: %v", err)
	}
}

// manyKeys is an object of n keys k0 … k(n-1), with key k(dup) once more at the end when dup ≥ 0.
func manyKeys(n, dup int) []byte {
	b := []byte{'{'}
	for i := range n {
		b = fmt.Appendf(b, `"k%d":%d,`, i, i)
	}
	if dup >= 0 {
		b = fmt.Appendf(b, `"k%d":0,`, dup)
	}
	return append(b[:len(b)-1], '}')
}

// A key sent twice is found however many keys its object has, past the few compared one by one
// as well as among them, in an object and in arguments sent as text (Duplicate).
func TestDuplicateAmongManyKeys(t *testing.T) {
	for _, n := range []int{3, 15, 16, 17, 40, 5000} {
		for _, dup := range []int{-1, 0, n / 2, n - 1} {
			body := manyKeys(n, dup)
			var m map[string]int
			err := DecodeStrict(body, &m, "context")
			derr := Duplicate(body, "context.arguments")
			if dup < 0 {
				if err != nil || len(m) != n || derr != nil {
					t.Errorf("%d keys, none twice: %v, %d decoded; Duplicate %v", n, err, len(m), derr)
				}
				continue
			}
			want := fmt.Sprintf("context.k%d: appears twice; send each field once", dup)
			if err == nil || err.Error() != want {
				t.Errorf("%d keys, k%d twice: %v, want %s", n, dup, err, want)
			}
			if want = "context.arguments" + want[len("context"):]; derr == nil || derr.Error() != want {
				t.Errorf("%d keys, k%d twice, Duplicate: %v, want %s", n, dup, derr, want)
			}
		}
	}
}

// Bodies under the 1 MiB limit built to be costly to read are refused at a cost in proportion to
// their size: bytes allocated are counted (not time, which depends on the machine). Before the
// bounds, the deep malformed body took 4.5 GB, the deep duplicate 3 GB and the unknown keys 15 s.
func TestHostileBodiesCostLittle(t *testing.T) {
	key := `"` + strings.Repeat("a", 90) + `":`
	longKey := strings.Repeat("b", 1800)
	var unknown strings.Builder
	unknown.WriteString("{")
	for i := range 80000 {
		fmt.Fprintf(&unknown, `"k%d":1,`, i)
	}
	for _, c := range []struct {
		name, body, field, msg string
	}{
		{"deep and malformed", strings.Repeat("{"+key, 9990) + "1", "body", "nests objects and arrays more than 512 levels deep"},
		{"deep arrays", strings.Repeat("[", 600) + strings.Repeat("]", 600), "body", "nests objects and arrays more than 512 levels deep"},
		{"a key twice, 500 levels of long keys down", strings.Repeat(`{"`+longKey+`":`, 500) + `{"x":1,"x":1}` + strings.Repeat("}", 500),
			"", "appears twice; send each field once"},
		{"malformed, 500 levels of long keys down", strings.Repeat(`{"`+longKey+`":`, 500) + `{"x":1,"x":1`, "", "appears twice; send each field once"},
		{"80,000 unknown keys", strings.TrimSuffix(unknown.String(), ",") + "}", "k0", "unknown field"},
		{"a megabyte of unknown key", `{"` + strings.Repeat("c", 1<<20-10) + `":1}`, "", "unknown field"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var v strictOuter
		err := DecodeStrict([]byte(c.body), &v, "")
		runtime.ReadMemStats(&after)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Msg != c.msg || (c.field != "" && ve.Field != c.field) || len(ve.Field) > 520 {
			t.Errorf("%s: %.200v", c.name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 40*uint64(len(c.body)) {
			t.Errorf("%s: %d bytes allocated for a body of %d", c.name, alloc, len(c.body))
		}
	}
	// Arguments sent as text, read by Duplicate.
	if err := Duplicate([]byte(strings.Repeat("[", 600)+strings.Repeat("]", 600)), "context.arguments"); err == nil ||
		err.Error() != "context.arguments: nests objects and arrays more than 512 levels deep" {
		t.Errorf("deep arguments: %v", err)
	}
}
