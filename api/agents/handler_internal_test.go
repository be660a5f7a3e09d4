package agents

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
)

// The headers hookd reads are named in canonical form, as oneHeader looks them up.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, name := range []string{AgentIDHeader, ToolEventsHeader} {
		if textproto.CanonicalMIMEHeaderKey(name) != name {
			t.Errorf("%s is not in canonical form", name)
		}
	}
}

// An event that no harness documents is answered with nothing to say and logged, once per harness
// and name; a documented one hookd leaves alone is not logged.
func TestUnknownEventsLogged(t *testing.T) {
	var logs bytes.Buffer
	h := newHandler(Deps{Keys: wire.NewKeys(nil), Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST(HookRoute, h.hook)
	srv := httptest.NewServer(r)
	defer srv.Close()
	post := func(kind, event string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/agents/"+kind+"/hooks",
			strings.NewReader(`{"session_id":"s1","hook_event_name":"`+event+`","tool_name":"Bash","tool_input":{"command":"ls"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-User-Id", "dev-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Nothing to say: Claude Code's 204, the others' {}.
		if kind == ClaudeCode && resp.StatusCode != http.StatusNoContent || kind != ClaudeCode && string(body) != "{}" {
			t.Fatalf("%s %s: %d %s, want nothing to say", kind, event, resp.StatusCode, body)
		}
	}
	post(ClaudeCode, "PreTooluse")
	post(ClaudeCode, "PreTooluse")
	post(ClaudeCode, "Notification")
	post(ClaudeCode, "UserPromptExpansion")
	post(Codex, "PreTooluse")
	// A harness's events are its own: Notification is Claude Code's and Gemini CLI's, not Cursor's.
	post(Cursor, "Notification")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"kind":"claude-code","event":"PreTooluse"`) ||
		!strings.Contains(lines[1], `"kind":"codex","event":"PreTooluse"`) || !strings.Contains(lines[0], `"level":"WARN"`) ||
		!strings.Contains(lines[2], `"kind":"cursor","event":"Notification"`) {
		t.Fatalf("logged:\n%s", logs.String())
	}
	// The names are the callers': only the first maxUnknownWarnings are logged.
	for i := range 2 * maxUnknownWarnings {
		post(ClaudeCode, "Unknown"+strconv.Itoa(i))
	}
	if n := strings.Count(logs.String(), "\n"); n != maxUnknownWarnings {
		t.Fatalf("%d warnings logged, want %d", n, maxUnknownWarnings)
	}
}
