package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

type fakeTool struct{ spec Spec }

func (f fakeTool) Spec() Spec { return f.spec }
func (f fakeTool) Run(context.Context, Env, json.RawMessage) (Result, error) {
	return Result{Text: f.spec.Name}, nil
}

func fake(name string) Tool {
	return fakeTool{Spec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func allTools() []Tool {
	return []Tool{NewWriteFile(), NewReadFile(), NewListFiles(), NewHTTPRequest(nil), NewShell(ShellConfig{})}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry(fake("zeta"), fake("alpha"))
	r.Add(fake("mid"))
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "alpha,mid,zeta" {
		t.Fatalf("Specs order = %s", got)
	}
	if tool, ok := r.Get("mid"); !ok || tool.Spec().Name != "mid" {
		t.Fatalf("Get(mid) = %v, %v", tool, ok)
	}
	if _, ok := r.Get("nope"); ok {
		t.Fatal("Get(nope) found something")
	}
}

func TestRegistryRefuses(t *testing.T) {
	for name, add := range map[string]func(){
		"duplicate":      func() { NewRegistry(fake("a"), fake("a")) },
		"duplicate Add":  func() { NewRegistry(fake("a")).Add(fake("a")) },
		"nil":            func() { NewRegistry(nil) },
		"empty name":     func() { NewRegistry(fake("")) },
		"pipe in name":   func() { NewRegistry(fake("a|b")) },
		"regex name":     func() { NewRegistry(fake("/a/")) },
		"space in name":  func() { NewRegistry(fake("a b")) },
		"star":           func() { NewRegistry(fake("*")) },
		"too long":       func() { NewRegistry(fake(strings.Repeat("a", 65))) },
		"bad parameters": func() { NewRegistry(fakeTool{Spec{Name: "x", Parameters: json.RawMessage(`[1]`)}}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			add()
		})
	}
}

// Every built-in tool has a usable spec: a valid name, a one-line description, an object schema
// whose required fields are properties, and a Subject that is one of the properties.
func TestBuiltinSpecs(t *testing.T) {
	r := NewRegistry(allTools()...)
	want := map[string]struct {
		readOnly bool
		subject  string
		required string
	}{
		NameWriteFile:   {false, "path", "path,content"},
		NameReadFile:    {true, "path", "path"},
		NameListFiles:   {true, "path", ""},
		NameHTTPRequest: {false, "url", "url"},
		NameShell:       {false, "command", "command"},
	}
	specs := r.Specs()
	if len(specs) != len(want) {
		t.Fatalf("%d specs, want %d", len(specs), len(want))
	}
	for _, s := range specs {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected tool %s", s.Name)
			continue
		}
		if s.ReadOnly != w.readOnly || s.Subject != w.subject {
			t.Errorf("%s: ReadOnly=%v Subject=%q, want %v %q", s.Name, s.ReadOnly, s.Subject, w.readOnly, w.subject)
		}
		if s.Description == "" || strings.Contains(s.Description, "\n") {
			t.Errorf("%s: description %q is not one line", s.Name, s.Description)
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			t.Errorf("%s: parameters: %v", s.Name, err)
			continue
		}
		if schema.Type != "object" {
			t.Errorf("%s: schema type %q", s.Name, schema.Type)
		}
		if got := strings.Join(schema.Required, ","); got != w.required {
			t.Errorf("%s: required %q, want %q", s.Name, got, w.required)
		}
		for _, f := range append(schema.Required, s.Subject) {
			if _, ok := schema.Properties[f]; !ok {
				t.Errorf("%s: %q is not a property", s.Name, f)
			}
		}
	}
}

func TestSubject(t *testing.T) {
	shell := Spec{Name: "shell_execute", Subject: "command"}
	whole := Spec{Name: "x"}
	for _, c := range []struct {
		name string
		spec Spec
		args string
		want string
	}{
		{"string subject", shell, `{"command":"ls -la /tmp","timeoutSeconds":3}`, "ls -la /tmp"},
		{"subject unescaped", shell, `{"command":"echo \"<a&b>\"\n"}`, "echo \"<a&b>\"\n"},
		{"missing subject", shell, `{"timeoutSeconds":3}`, ""},
		{"null subject", shell, `{"command":null}`, ""},
		{"non-string subject", shell, `{"command": [ "ls", 1.50 ]}`, `["ls",1.50]`},
		{"invalid args with subject", shell, `{"command":`, ""},
		{"whole args compact, keys sorted", whole, " {\n \"b\": 1.0, \"a\": {\"y\": true, \"x\": \"<&>\"} }\n", `{"a":{"x":"<&>","y":true},"b":1.0}`},
		{"whole args empty", whole, ``, `{}`},
		{"whole args invalid", whole, ` {"a": `, `{"a":`},
		{"whole args trailing garbage", whole, `{"a":1} x`, `{"a":1} x`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Subject(c.spec, json.RawMessage(c.args)); got != c.want {
				t.Errorf("Subject = %q, want %q", got, c.want)
			}
		})
	}
}
