package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// validName is what a tool name may look like: what the model APIs accept, and nothing a
// toolNameMatch expression gives a meaning to ("|" separates names, "/.../" is a regex, "*"
// matches all, surrounding spaces are trimmed), so every name can be matched exactly.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Registry holds the tools of an agent by name. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools. Like Add, it panics on a nil tool, an invalid
// name or a duplicate name.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		r.Add(t)
	}
	return r
}

// Add registers t. Names are unique: Add panics (a wiring mistake, like registering an HTTP
// route twice) on a nil tool, a name that is not 1-64 characters of [A-Za-z0-9_-], a name
// already registered, or parameters that are not a JSON object.
func (r *Registry) Add(t Tool) {
	if t == nil {
		panic("tools: Registry.Add of a nil tool")
	}
	spec := t.Spec()
	if !validName.MatchString(spec.Name) {
		panic(fmt.Sprintf("tools: invalid tool name %q (want 1-64 characters of A-Z a-z 0-9 _ -)", spec.Name))
	}
	if p := bytes.TrimSpace(spec.Parameters); len(p) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p, &obj); err != nil || obj == nil {
			panic(fmt.Sprintf("tools: tool %q: parameters are not a JSON schema object", spec.Name))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		panic(fmt.Sprintf("tools: tool %q registered twice", spec.Name))
	}
	r.tools[spec.Name] = t
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Specs returns the specs of all tools, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	specs := make([]Spec, 0, len(r.tools))
	for _, t := range r.tools {
		specs = append(specs, t.Spec())
	}
	r.mu.RUnlock()
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// Subject returns the string permission rules match a call against: the value of the argument
// spec.Subject names (the command, the URL, the path) when it is a JSON string, its compact JSON
// when it is something else, and "" when it is absent; for a spec without Subject, the whole
// arguments as canonical compact JSON (object keys sorted, no insignificant whitespace, numbers
// as written). Arguments that are not valid JSON are returned trimmed, as they are.
func Subject(spec Spec, args json.RawMessage) string {
	args = bytes.TrimSpace(args)
	if spec.Subject != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			return ""
		}
		v, ok := obj[spec.Subject]
		if !ok || string(v) == "null" {
			return ""
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			return s
		}
		return canonicalJSON(v)
	}
	if len(args) == 0 {
		return "{}"
	}
	return canonicalJSON(args)
}

// canonicalJSON re-encodes raw with sorted object keys and no insignificant whitespace, keeping
// numbers exactly as written and not escaping <, > and &. Invalid JSON is returned as it is.
func canonicalJSON(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return strings.TrimSpace(string(raw))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return strings.TrimSpace(string(raw))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return strings.TrimSpace(string(raw))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
