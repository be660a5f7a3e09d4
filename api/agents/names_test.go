package agents

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFixtureNamesShared: every field and event name of the harnesses' inputs, as the fixtures
// have them, is one ParseInput shares rather than copies.
func TestFixtureNamesShared(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/agents/*/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ParseInput(body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, ok := names[in.Event]; !ok {
			t.Errorf("%s: event %s is not among names", f, in.Event)
		}
		for k := range in.fields {
			if _, ok := names[k]; !ok {
				t.Errorf("%s: field %s is not among names", f, k)
			}
		}
	}
}
