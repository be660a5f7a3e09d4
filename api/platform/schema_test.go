package platform_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// frameSchema is testdata/platform/schema.json: the fields of every frame, by event type.
type frameSchema struct {
	Envelope  map[string]string `json:"envelope"`
	Heartbeat map[string]string `json:"heartbeat"`
	Events    map[string]struct {
		Type      string            `json:"type"`
		NullStep  bool              `json:"nullStep"`
		Heartbeat bool              `json:"heartbeat"`
		Fields    map[string]string `json:"fields"`
	} `json:"events"`
	SuspendReason   map[string]map[string]string `json:"suspendReason"`
	PendingToolCall map[string]string            `json:"pendingToolCall"`
}

func loadSchema(t testing.TB) *frameSchema {
	t.Helper()
	b, err := os.ReadFile("../../testdata/platform/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s frameSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Events) != 22 {
		t.Fatalf("the schema lists %d event types, not 22", len(s.Events))
	}
	return &s
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$`)

// validate checks one frame's JSON; normalised allows the placeholders of golden files ("<ts>"
// for a timestamp, "<ms>" for a time in milliseconds).
func (s *frameSchema) validate(raw string, normalised bool) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	et, _ := env["eventType"].(string)
	spec, ok := s.Events[et]
	if !ok {
		return fmt.Errorf("eventType %q is not one of the 22", et)
	}
	v := validator{s: s, normalised: normalised}
	if spec.Heartbeat {
		return v.object("envelope", s.Heartbeat, env)
	}
	if err := v.object("envelope", s.Envelope, env); err != nil {
		return err
	}
	if spec.NullStep && (env["step"] != nil || env["totalTokens"] != nil) {
		return fmt.Errorf("%s: step and totalTokens must be null", et)
	}
	data := env["data"].(map[string]any)
	if data["type"] != spec.Type {
		return fmt.Errorf("%s: data.type %v, want %q", et, data["type"], spec.Type)
	}
	fields := map[string]string{"type": "string"}
	for k, t := range spec.Fields {
		fields[k] = t
	}
	return v.object(et+".data", fields, data)
}

type validator struct {
	s          *frameSchema
	normalised bool
}

func (v validator) object(where string, fields map[string]string, obj map[string]any) error {
	for name, typ := range fields {
		optional := strings.HasSuffix(typ, "?")
		typ = strings.TrimSuffix(typ, "?")
		val, present := obj[name]
		if !present {
			if optional {
				continue
			}
			return fmt.Errorf("%s: %s is missing", where, name)
		}
		if err := v.value(where+"."+name, typ, val); err != nil {
			return err
		}
	}
	for name := range obj {
		if _, known := fields[name]; !known {
			return fmt.Errorf("%s: field %s is not in the schema", where, name)
		}
	}
	return nil
}

func (v validator) value(where, typ string, val any) error {
	if base, ok := strings.CutSuffix(typ, "|null"); ok {
		if val == nil {
			return nil
		}
		typ = base
	}
	bad := func() error { return fmt.Errorf("%s: %v is not %s", where, val, typ) }
	switch {
	case typ == "string":
		if _, ok := val.(string); !ok {
			return bad()
		}
	case typ == "integer":
		if v.normalised && val == "<ms>" {
			return nil
		}
		n, ok := val.(json.Number)
		if !ok {
			return bad()
		}
		if _, err := n.Int64(); err != nil {
			return bad()
		}
	case typ == "boolean":
		if _, ok := val.(bool); !ok {
			return bad()
		}
	case typ == "object":
		if _, ok := val.(map[string]any); !ok {
			return bad()
		}
	case typ == "json":
		s, ok := val.(string)
		if !ok || !json.Valid([]byte(s)) {
			return bad()
		}
	case typ == "timestamp":
		s, _ := val.(string)
		if !timestampRE.MatchString(s) && !(v.normalised && s == "<ts>") {
			return bad()
		}
	case strings.HasPrefix(typ, "enum:"):
		s, _ := val.(string)
		if !slices.Contains(strings.Split(strings.TrimPrefix(typ, "enum:"), ","), s) {
			return bad()
		}
	case typ == "suspendReason":
		obj, ok := val.(map[string]any)
		if !ok {
			return bad()
		}
		kind, _ := obj["type"].(string)
		fields, ok := v.s.SuspendReason[kind]
		if !ok {
			return fmt.Errorf("%s: suspend type %q is not in the schema", where, kind)
		}
		all := map[string]string{"type": "string"}
		for k, t := range fields {
			all[k] = t
		}
		return v.object(where+"("+kind+")", all, obj)
	case typ == "pendingToolCalls":
		arr, ok := val.([]any)
		if !ok {
			return bad()
		}
		for i, it := range arr {
			obj, ok := it.(map[string]any)
			if !ok {
				return bad()
			}
			if err := v.object(fmt.Sprintf("%s[%d]", where, i), v.s.PendingToolCall, obj); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s: the schema names an unknown type %q", where, typ)
	}
	return nil
}

// readGolden parses a golden transcript into its frames.
func readGolden(t testing.TB, path string) []sseEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := newSSEParser(bytes.NewReader(b))
	var out []sseEvent
	for {
		ev, err := p.Next()
		if err != nil {
			return out
		}
		out = append(out, ev)
	}
}

// Every golden transcript validates against the schema, and together they hold all 22 types.
func TestGoldenFilesCoverEveryTypeAndValidate(t *testing.T) {
	s := loadSchema(t)
	files, _ := os.ReadDir("../../testdata/platform")
	seen := map[string][]string{}
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".sse") {
			continue
		}
		n++
		for i, ev := range readGolden(t, "../../testdata/platform/"+f.Name()) {
			if err := s.validate(ev.Data, true); err != nil {
				t.Errorf("%s frame %d: %v", f.Name(), i, err)
			}
			var env struct {
				EventType string `json:"eventType"`
			}
			json.Unmarshal([]byte(ev.Data), &env)
			if !slices.Contains(seen[env.EventType], f.Name()) {
				seen[env.EventType] = append(seen[env.EventType], f.Name())
			}
		}
	}
	if n == 0 {
		t.Fatal("no golden transcripts (run the tests with -update)")
	}
	var missing []string
	for et := range s.Events {
		if len(seen[et]) == 0 {
			missing = append(missing, et)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("event types in no golden transcript: %v", missing)
	}
}
