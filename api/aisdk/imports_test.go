package aisdk_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The dialect is a mapping over the agent's follower API: it imports neither storage nor
// another dialect (at any depth, for the dialects; directly, for storage, which the agent
// itself stands on).
func TestImports(t *testing.T) {
	checkImports(t, "github.com/hookd/hookd/api/aisdk")
}

func checkImports(t *testing.T, pkg string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if imp == "github.com/hookd/hookd/storage" || strings.HasPrefix(imp, "github.com/hookd/hookd/storage/") {
			t.Errorf("%s imports %s", pkg, imp)
		}
	}
	deps, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(deps)) {
		switch d {
		case "github.com/hookd/hookd/api/harness", "github.com/hookd/hookd/api/platform", "github.com/hookd/hookd/api/volo",
			"github.com/hookd/hookd/api/aisdk", "github.com/hookd/hookd/api", "github.com/hookd/hookd/api/agui":
			if d != pkg {
				t.Errorf("%s depends on the dialect %s", pkg, d)
			}
		}
	}
}
