// Command hookd-receiver is a sample webhook receiver: it verifies each request's signature,
// prints the event, and answers interceptive events — denying the tools it is told to deny.
// It is what a compliance team's endpoint does, in a hundred lines.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/hookd/hookd/signing"
)

type envelope struct {
	EventID         string          `json:"eventId"`
	HookType        string          `json:"hookType"`
	HookName        string          `json:"hookName"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
	SessionID       *int64          `json:"sessionId"`
	Context         json.RawMessage `json:"context"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	secret := flag.String("secret", os.Getenv("WEBHOOK_SECRET"), "the hook's signing secret (empty: accept unsigned)")
	deny := flag.String("deny", "", "comma-separated tool names to deny on pre_tool_use")
	flag.Parse()
	denied := map[string]bool{}
	for _, t := range strings.Split(*deny, ",") {
		if t = strings.TrimSpace(t); t != "" {
			denied[t] = true
		}
	}
	var mu sync.Mutex
	seen := map[string]bool{} // eventId → seen: retries carry the same id
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var err error
		if *secret != "" {
			body, err = signing.VerifyRequest(r, *secret, 0, 1<<20)
		} else {
			body, err = io.ReadAll(io.LimitReader(r.Body, 1<<20))
		}
		if err != nil {
			fmt.Printf("✗ rejected a request: %v\n", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := seen[env.EventID]
		seen[env.EventID] = true
		mu.Unlock()
		verdict := decide(env, denied)
		mark := "✓"
		if *secret == "" {
			mark = "·"
		}
		note := ""
		if dup {
			note = " (retry of an event already seen)"
		}
		fmt.Printf("%s %-19s %-8s %s%s\n", mark, env.HookType, verdict.label(), summary(env), note)
		w.Header().Set("Content-Type", "application/json")
		if verdict.Decision != "" {
			json.NewEncoder(w).Encode(verdict)
		}
	})
	fmt.Printf("hookd-receiver listening on %s (signatures %s, denying %v)\n", *listen,
		map[bool]string{true: "verified", false: "not checked"}[*secret != ""], keys(denied))
	log.Fatal(http.ListenAndServe(*listen, nil))
}

type answer struct {
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func (a answer) label() string {
	if a.Decision == "" {
		return "noted"
	}
	return a.Decision
}

// decide answers interceptive events; observational ones need only a 2xx.
func decide(env envelope, denied map[string]bool) answer {
	switch env.HookType {
	case "pre_tool_use":
		var c struct{ ToolName string }
		json.Unmarshal(env.Context, &c)
		if denied[c.ToolName] {
			return answer{Decision: "deny", Reason: "compliance policy: " + c.ToolName + " is not allowed"}
		}
		return answer{Decision: "allow"}
	case "user_message", "pre_scheduled_task":
		return answer{Decision: "allow"}
	}
	return answer{}
}

func summary(env envelope) string {
	var c map[string]any
	json.Unmarshal(env.Context, &c)
	switch env.HookType {
	case "pre_tool_use", "post_tool_use":
		args, _ := json.Marshal(c["arguments"])
		return fmt.Sprintf("%v %s", c["toolName"], truncate(string(args), 80))
	case "user_message":
		return fmt.Sprintf("%q", c["userInput"])
	case "post_llm_call":
		return fmt.Sprintf("step %v, %v tokens", c["step"], c["totalTokens"])
	case "agent_completion":
		return fmt.Sprintf("succeeded=%v, %v steps, %v tokens", c["succeeded"], c["stepCount"], c["totalTokens"])
	case "session_start":
		return fmt.Sprintf("newSession=%v", c["newSession"])
	}
	return truncate(string(env.Context), 100)
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
