package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"gopkg.in/yaml.v3"
)

// Every expression of docs/policies.md compiles as written: each line of a cel block, and each
// rule of a yaml block read as YAML reads it (a "\\s" there is \s to CEL, an invalid escape in a
// quoted string, so the examples use CEL's raw strings).
func TestDocumentedBlocksCompile(t *testing.T) {
	doc, err := os.ReadFile("../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	env, err := environment()
	if err != nil {
		t.Fatal(err)
	}
	var lang string
	var block []string
	checked := 0
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "```") && lang == "":
			lang, block = strings.TrimPrefix(line, "```"), nil
			if lang == "" {
				lang = "text"
			}
		case strings.HasPrefix(line, "```"):
			checked += checkBlock(t, env, lang, block)
			lang = ""
		case lang != "":
			block = append(block, line)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d expressions found in docs/policies.md", checked)
	}
}

// checkBlock compiles the expressions of one fenced block and returns how many it did.
func checkBlock(t *testing.T, env *cel.Env, lang string, block []string) int {
	compile := func(where, expr string) {
		if _, iss := env.Compile(expr); iss != nil && iss.Err() != nil {
			t.Errorf("docs/policies.md, %s %q: %s", where, expr, issues(iss))
		}
	}
	n := 0
	switch lang {
	case "cel":
		for _, line := range block {
			if strings.TrimSpace(line) != "" {
				compile("cel block", line)
				n++
			}
		}
	case "yaml":
		dec := yaml.NewDecoder(strings.NewReader(strings.Join(block, "\n")))
		for {
			var doc any
			if err := dec.Decode(&doc); err != nil {
				break // the end, or a block that is not YAML (an excerpt): not rules
			}
			walkRules(doc, func(rule map[string]any) {
				for _, field := range []string{"when", "reason", "modifiedValue"} {
					if expr, ok := rule[field].(string); ok {
						compile(fmt.Sprintf("rule %v, %s", rule["name"], field), expr)
						n++
					}
				}
			})
		}
	}
	return n
}

// walkRules calls f with every map of v that names a rule and its when.
func walkRules(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["when"]; ok {
			if _, ok := x["name"]; ok {
				f(x)
				return
			}
		}
		for _, e := range x {
			walkRules(e, f)
		}
	case []any:
		for _, e := range x {
			walkRules(e, f)
		}
	}
}
