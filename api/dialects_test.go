package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The chat dialects are mappings over the agent's follower API and views: none imports storage
// (directly — the agent itself stands on it) and none depends on another dialect (at any depth).
func TestDialectImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \",\"}}",
		"github.com/hookd/hookd/api/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dialects := map[string]bool{}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, " ")
		switch strings.TrimPrefix(pkg, "github.com/hookd/hookd/api/") {
		case "harness", "platform", "volo", "agui", "aisdk":
			dialects[pkg] = true
			imports[pkg] = strings.Split(imps, ",")
		}
	}
	if len(dialects) < 3 {
		t.Fatalf("found only the dialects %v", dialects)
	}
	for pkg := range dialects {
		for _, imp := range imports[pkg] {
			if imp == "github.com/hookd/hookd/storage" || strings.HasPrefix(imp, "github.com/hookd/hookd/storage/") {
				t.Errorf("%s imports %s: a dialect reads runs through the agent", pkg, imp)
			}
		}
		deps, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(deps)) {
			if d != pkg && dialects[d] {
				t.Errorf("%s depends on the dialect %s", pkg, d)
			}
		}
	}
}
