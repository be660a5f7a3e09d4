// Package golden compares the transcripts of the chat dialects' tests (Harness, AG-UI, AI SDK,
// the daemon's every-event-type tests) with their golden files: ids and times normalised, equal
// values to equal placeholders, so a transcript still shows which ids are shared.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Compare writes v (normalised, indented) to path when update is set, else compares it with
// path's content and fails at the first line that differs.
func Compare(t *testing.T, path string, v any, update bool) {
	t.Helper()
	b, _ := json.Marshal(v)
	var doc any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	n := &normaliser{seen: map[string]map[string]string{}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(n.value("", doc)); err != nil {
		t.Fatal(err)
	}
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	gl, wl := strings.Split(buf.String(), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got  %s\n want %s\n(run with -update to accept)", path, i+1, g, w)
		}
	}
}

type normaliser struct{ seen map[string]map[string]string }

var idREs = []struct {
	class string
	re    *regexp.Regexp
}{
	{"blk", regexp.MustCompile(`blk-(hint-)?[0-9a-f]{12}`)},
	{"sub", regexp.MustCompile(`\.[a-z]+-[0-9a-f]{8}\b`)}, // a subagent's session key: <parent>.<name>-<8 hex>
	{"call", regexp.MustCompile(`call_[0-9A-Za-z_]+`)},
	{"ask", regexp.MustCompile(`\bask_[0-9a-f]{20}\b`)},
	{"input", regexp.MustCompile(`\binput_[0-9a-f]{16}\b`)},
	{"uuid", regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)},
	{"hex", regexp.MustCompile(`\b[0-9a-f]{32}\b`)},
	{"request", regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{13}\b`)},
}

var (
	// dateRE is a date and time as the dialects write them (ISO-8601, or with a space).
	dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)
)

func (n *normaliser) ph(class, v string) string {
	m := n.seen[class]
	if m == nil {
		m = map[string]string{}
		n.seen[class] = m
	}
	p, ok := m[v]
	if !ok {
		p = fmt.Sprintf("<%s-%d>", class, len(m)+1)
		m[v] = p
	}
	return p
}

func (n *normaliser) value(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x[k] = n.value(k, x[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = n.value(key, x[i])
		}
		return x
	case json.Number:
		switch {
		case key == "timestamp":
			return "<timestamp>"
		case key == "time": // a duration in seconds (Harness usage)
			return "<seconds>"
		}
	case string:
		switch {
		case key == "expiresAt":
			return "<expiresAt>"
		case (key == "createdAt" || key == "timestamp") && dateRE.MatchString(x):
			return "<" + key + ">"
		}
		for _, r := range idREs {
			x = r.re.ReplaceAllStringFunc(x, func(s string) string {
				if r.class == "sub" { // keep the subagent's name: only its suffix is random
					i := strings.LastIndexByte(s, '-') + 1
					return s[:i] + n.ph(r.class, s)
				}
				return n.ph(r.class, s)
			})
		}
		return x
	}
	return v
}
