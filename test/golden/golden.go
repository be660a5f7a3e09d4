// Package golden compares the transcripts of the AG-UI and AI SDK dialects' tests with their
// golden files: ids and times normalised, equal values to equal placeholders, so a transcript
// still shows which ids are shared.
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
	{"blk", regexp.MustCompile(`blk-[0-9a-f]{12}`)},
	{"call", regexp.MustCompile(`call_[0-9A-Za-z_]+`)},
	{"ask", regexp.MustCompile(`\bask_[0-9a-f]{20}\b`)},
	{"uuid", regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)},
	{"hex", regexp.MustCompile(`\b[0-9a-f]{32}\b`)},
	{"request", regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{13}\b`)},
}

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
		if key == "timestamp" {
			return "<timestamp>"
		}
	case string:
		if key == "expiresAt" {
			return "<expiresAt>"
		}
		for _, r := range idREs {
			x = r.re.ReplaceAllStringFunc(x, func(s string) string { return n.ph(r.class, s) })
		}
		return x
	}
	return v
}
