package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every admin route is documented and every documented route exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not OpenAPI 3: %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	e := newEngine(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	param := regexp.MustCompile(`:(\w+)`)
	served := map[string]bool{}
	for _, r := range e.Routes() {
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Fatalf("routes not documented: %v\ndocumented routes not served: %v", missing, extra)
	}
}
