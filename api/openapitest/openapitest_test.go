package openapitest_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage/storagetest"
)

// The served document passes the validator's own document check, in a version it fully supports.
func TestDocumentPassesTheValidator(t *testing.T) {
	doc, err := openapitest.Load(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Fatalf("openapi %q: kin-openapi fully supports 3.0.x", doc.OpenAPI)
	}
}

// A document that is wrong about one field fails on a real answer, and the failure names the
// route and the field.
func TestWrongSchemaFails(t *testing.T) {
	doc, err := openapitest.Load(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	hook := doc.Components.Schemas["Hook"].Value
	hook.Properties["priority"] = openapi3.NewStringSchema().NewRef() // the API sends an integer
	delete(hook.Properties, "enabled")                                // the API sends it
	strict, err := openapitest.New(doc)
	if err != nil {
		t.Fatal(err)
	}
	right, err := openapitest.Default()
	if err != nil {
		t.Fatal(err)
	}

	db := storagetest.SQLite(t)
	log := slog.New(slog.DiscardHandler)
	reg, err := dispatcher.NewRegistry(context.Background(), db, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Deps{DB: db, Hooks: reg, Log: log, LoopbackOnly: true}))
	defer srv.Close()
	call := func(method, path, body string) (*http.Request, *http.Response, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return req, resp, raw
	}
	req, resp, body := call("POST", "/api/hooks", `{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"https://r.example.com/h"}}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if err := right.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Fatalf("the real document rejects a real answer: %v", err)
	}
	err = strict.Check(req, resp.StatusCode, resp.Header, body)
	if err == nil {
		t.Fatal("a wrong document accepted the answer")
	}
	for _, want := range []string{"POST /api/hooks → 201", "route POST /api/hooks", `field data.priority`, `"enabled"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("failure does not say %q:\n%v", want, err)
		}
	}

	// An answer with a status the operation does not document fails, naming it.
	req, _ = http.NewRequest("GET", srv.URL+"/api/hooks", nil)
	err = right.Check(req, http.StatusTeapot, http.Header{"Content-Type": {"text/plain"}}, []byte("tea"))
	if err == nil || !strings.Contains(err.Error(), "GET /api/hooks → 418") {
		t.Fatalf("an undocumented answer passed: %v", err)
	}
	// A route the document lacks fails.
	req, _ = http.NewRequest("POST", srv.URL+"/api/nothing-here", nil)
	if err := right.Check(req, http.StatusOK, http.Header{}, nil); err == nil || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("an undocumented route passed: %v", err)
	}
}

// The coding-agent route's answers are held to the document: every golden answer of every
// harness (the daemon's agent tests produce each one live, through Transport) passes, and an
// answer with a field the harnesses do not read, or a value they do not know, fails naming it.
func TestAgentAnswersChecked(t *testing.T) {
	c, err := openapitest.Default()
	if err != nil {
		t.Fatal(err)
	}
	check := func(kind string, body []byte) error {
		req, _ := http.NewRequest("POST", "http://hookd.test/v1/agents/"+kind+"/hooks", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if len(body) == 0 {
			return c.Check(req, http.StatusNoContent, http.Header{}, nil)
		}
		return c.Check(req, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, body)
	}
	goldens, err := filepath.Glob("../../testdata/agents/*/golden/*.golden")
	if err != nil || len(goldens) < 20 {
		t.Fatalf("goldens: %d %v", len(goldens), err)
	}
	for _, g := range goldens {
		body, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		kind := filepath.Base(filepath.Dir(filepath.Dir(g)))
		if err := check(kind, body); err != nil {
			t.Errorf("%s: the document rejects a real answer: %v", g, err)
		}
	}
	for body, field := range map[string]string{
		`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"maybe"}}`:                         "hookSpecificOutput.permissionDecision",
		`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInputs":{"a":1}}}`: "updatedInputs",
		`{"decision":"approve","reason":"x"}`: "field decision",
		`{"permision":"allow"}`:               "permision",
		`{"continue":"no"}`:                   "field continue",
	} {
		err := check("claude-code", []byte(body))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: want a failure naming %s, got %v", body, field, err)
		}
	}
}
