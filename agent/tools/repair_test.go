package tools

import (
	"strings"
	"testing"
)

func TestRepairArguments(t *testing.T) {
	for _, c := range []struct {
		name, in, want string // want "" with errPart set: an error is expected
		errPart        string
	}{
		{name: "valid", in: `{"path":"a.md","content":"x"}`, want: `{"path":"a.md","content":"x"}`},
		{name: "valid compacted", in: "{\n  \"a\": [1, 2],\n  \"b\": {\"c\": null}\n}", want: `{"a":[1,2],"b":{"c":null}}`},
		{name: "empty", in: ``, want: `{}`},
		{name: "whitespace", in: " \n\t ", want: `{}`},
		{name: "null", in: `null`, want: `{}`},
		{name: "empty object", in: `{}`, want: `{}`},
		{name: "surrounding whitespace", in: "\n  {\"a\":1}  \n", want: `{"a":1}`},
		{name: "fence json", in: "```json\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "fence plain", in: "```\n{\"a\":1}\n```", want: `{"a":1}`},
		{name: "fence one line", in: "```{\"a\":1}```", want: `{"a":1}`},
		{name: "fence unclosed", in: "```json\n{\"a\":1}", want: `{"a":1}`},
		{name: "fence empty", in: "```json\n```", want: `{}`},
		{name: "fence and repair", in: "```json\n{\"a\":[1,2,],}\n```", want: `{"a":[1,2]}`},
		{name: "missing brace", in: `{"a":1`, want: `{"a":1}`},
		{name: "missing bracket and brace", in: `{"a":[1,2`, want: `{"a":[1,2]}`},
		{name: "missing quote and brace", in: `{"command":"ls -la`, want: `{"command":"ls -la"}`},
		{name: "missing quote, bracket, braces", in: `{"a":{"b":["x","y`, want: `{"a":{"b":["x","y"]}}`},
		{name: "dangling backslash", in: `{"a":"x\`, want: `{"a":"x"}`},
		{name: "escaped quote kept", in: `{"a":"say \"hi\"`, want: `{"a":"say \"hi\""}`},
		{name: "trailing comma object", in: `{"a":1,}`, want: `{"a":1}`},
		{name: "trailing comma spaced", in: "{\"a\":1 ,\n }", want: `{"a":1}`},
		{name: "trailing comma array", in: `{"a":[1,2,]}`, want: `{"a":[1,2]}`},
		{name: "trailing comma at end", in: `{"a":1,`, want: `{"a":1}`},
		{name: "trailing comma after object", in: `{"a":1},`, want: `{"a":1}`},
		{name: "comma in string untouched", in: `{"a":",}",}`, want: `{"a":",}"}`},
		{name: "braces in string untouched", in: `{"a":"{[","b":1`, want: `{"a":"{[","b":1}`},
		{name: "double encoded", in: `"{\"a\":1}"`, want: `{"a":1}`},
		{name: "double encoded and repaired", in: `"{\"a\":1,"`, want: `{"a":1}`},
		{name: "unicode", in: `{"a":"héllo ✓`, want: `{"a":"héllo ✓"}`},

		{name: "array", in: `[1,2]`, errPart: "must be a JSON object, got an array"},
		{name: "string", in: `"hello"`, errPart: "must be a JSON object, got a string"},
		{name: "number", in: `42`, errPart: "must be a JSON object, got a number"},
		{name: "boolean", in: `true`, errPart: "must be a JSON object, got a boolean"},
		{name: "two objects", in: `{"a":1}{"b":2}`, errPart: "arguments are not valid JSON"},
		{name: "text after", in: `{"a":1} thanks`, errPart: "arguments are not valid JSON"},
		{name: "prose", in: `Sure, here it is`, errPart: "arguments are not valid JSON"},
		{name: "single quotes", in: `{'a': 1}`, errPart: "arguments are not valid JSON"},
		{name: "missing value", in: `{"a":`, errPart: "arguments are not valid JSON"},
		{name: "missing colon", in: `{"a"`, errPart: "arguments are not valid JSON"},
		{name: "truncated literal", in: `{"a":tru`, errPart: "arguments are not valid JSON"},
		{name: "unquoted key", in: `{a:1}`, errPart: "arguments are not valid JSON"},
		{name: "mismatched closer", in: `{"a":[1}`, errPart: "arguments are not valid JSON"},
		{name: "extra closer", in: `{"a":1}}`, errPart: "arguments are not valid JSON"},
		{name: "double encoded array", in: `"[1]"`, errPart: "got a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RepairArguments(c.in)
			if c.errPart != "" {
				if err == nil {
					t.Fatalf("RepairArguments(%q) = %s, want an error with %q", c.in, got, c.errPart)
				}
				if !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("error %q does not contain %q", err, c.errPart)
				}
				return
			}
			if err != nil {
				t.Fatalf("RepairArguments(%q): %v", c.in, err)
			}
			if string(got) != c.want {
				t.Fatalf("RepairArguments(%q) = %s, want %s", c.in, got, c.want)
			}
		})
	}
}

func TestRepairArgumentsErrorSaysWhere(t *testing.T) {
	_, err := RepairArguments(`{"a": 1 "b": 2}`)
	if err == nil || !strings.Contains(err.Error(), "at byte") {
		t.Fatalf("error %v does not name the offset", err)
	}
}
