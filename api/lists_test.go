package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// walk follows a list's next cursors from path (whose query may filter) with limit per page, and
// returns every item's id or url, in order.
func walk(t *testing.T, c client, path string, limit int) []string {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := path + sep + "limit=" + itoa(int64(limit))
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		status, w := c.do("GET", q, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", q, status, w.Message)
		}
		var p struct {
			Items []struct {
				ID  int64  `json:"id"`
				URL string `json:"url"`
			} `json:"items"`
			Next string `json:"next"`
		}
		json.Unmarshal(w.Data, &p)
		if len(p.Items) > limit {
			t.Fatalf("GET %s: %d items, limit %d", q, len(p.Items), limit)
		}
		for _, it := range p.Items {
			if it.URL != "" {
				out = append(out, it.URL)
			} else {
				out = append(out, itoa(it.ID))
			}
		}
		if p.Next == "" {
			return out
		}
		if pages > 100 {
			t.Fatalf("GET %s: no last page", path)
		}
		cursor = p.Next
	}
}

func TestHookListsWhatItSays(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		create := func(body string) string {
			t.Helper()
			status, w := c.do("POST", "/api/hooks", body)
			if status != 201 {
				t.Fatal(w.Message)
			}
			var h struct{ ID int64 }
			json.Unmarshal(w.Data, &h)
			return itoa(h.ID)
		}
		global := create(`{"hookName": "global", "hookType": "pre_tool_use", "dispatchConfig": {"url": "https://r.example/g"}}`)
		own := create(`{"hookName": "own", "hookType": "pre_tool_use", "agentId": 5001, "dispatchConfig": {"url": "https://r.example/o"}}`)
		other := create(`{"hookName": "other", "hookType": "pre_tool_use", "agentId": 7, "dispatchConfig": {"url": "https://r.example/x"}}`)
		off := create(`{"hookName": "off", "hookType": "user_message", "enabled": false, "dispatchConfig": {"url": "https://r.example/d"}}`)
		for _, tc := range []struct {
			query string
			want  []string
		}{
			{"", []string{global, own, other, off}},
			{"agentId=5001", []string{global, own, off}},
			{"agentId=5001&enabled=true", []string{global, own}},
			{"agentId=7&hookType=pre_tool_use", []string{global, other}},
			{"enabled=false", []string{off}},
			{"agentId=99", []string{global, off}},
		} {
			for _, limit := range []int{1, 2, 500} {
				if got := walk(t, c, "/api/hooks?"+tc.query, limit); !slices.Equal(got, tc.want) {
					t.Errorf("?%s, %d a page: %v, want %v", tc.query, limit, got, tc.want)
				}
			}
		}
		for _, tc := range []struct{ query, want string }{
			{"limit=501", "limit: must be an integer from 1 to 500"},
			{"limit=0", "limit: must be an integer from 1 to 500"},
			{"cursor=not*base64", "cursor: is not a cursor a list gave out; pass its next unchanged"},
			{"cursor=eA", "cursor: is not a cursor a list gave out; pass its next unchanged"},
			{"agentId=0", "agentId: must be a positive integer"},
			{"enabled=maybe", "enabled: must be true or false"},
			{"hookType=pre_everything", "hookType: \"pre_everything\" is not one of"},
		} {
			if status, w := c.do("GET", "/api/hooks?"+tc.query, ""); status != 400 || !strings.HasPrefix(w.Message, tc.want) {
				t.Errorf("?%s: %d %q, want 400 %q", tc.query, status, w.Message, tc.want)
			}
		}
	})
}

func TestRuleAndTaskListsPage(t *testing.T) {
	c := newTaskServer(t, storagetest.SQLite(t))
	var rules, tasks []string
	for i := range 5 {
		status, w := c.do("POST", "/api/rules", `{"toolName": "t`+itoa(int64(i))+`", "behavior": "deny"}`)
		if status != 201 {
			t.Fatal(w.Message)
		}
		var r struct{ ID int64 }
		json.Unmarshal(w.Data, &r)
		rules = append(rules, itoa(r.ID))
		status, w = c.do("POST", "/api/tasks", `{"taskName": "t", "cron": "@daily", "input": "x"}`)
		if status != 201 {
			t.Fatal(w.Message)
		}
		json.Unmarshal(w.Data, &r)
		tasks = append(tasks, itoa(r.ID))
	}
	for _, limit := range []int{1, 2, 5, 50} {
		if got := walk(t, c, "/api/rules?scope=global", limit); !slices.Equal(got, rules) {
			t.Errorf("rules, %d a page: %v, want %v", limit, got, rules)
		}
		if got := walk(t, c, "/api/tasks", limit); !slices.Equal(got, tasks) {
			t.Errorf("tasks, %d a page: %v, want %v", limit, got, tasks)
		}
	}
	if got := walk(t, c, "/api/rules?scope=user", 10); len(got) != 0 {
		t.Errorf("user rules: %v", got)
	}
	for _, path := range []string{"/api/rules?limit=501", "/api/tasks?limit=501", "/api/tasks/" + tasks[0] + "/runs?limit=501", "/api/breakers?limit=501"} {
		if status, w := c.do("GET", path, ""); status != 400 || w.Message != "limit: must be an integer from 1 to 500" {
			t.Errorf("%s: %d %q", path, status, w.Message)
		}
	}
	if status, w := c.do("GET", "/api/rules?scope=team", ""); status != 400 || !strings.HasPrefix(w.Message, "scope:") {
		t.Errorf("unknown scope: %d %q", status, w.Message)
	}
}

// /api/breakers lists the URLs that registered hooks use, called or not, and the breaker metrics
// those of them that were called; neither keeps the URL of a hook deleted or moved elsewhere.
func TestBreakersOnlyOfHooksThatExist(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, metrics := newDispatchServer(t, db)
		a := newReceiver(t, `{"decision": "allow"}`)
		b := newReceiver(t, `{"decision": "allow"}`)
		moved := newReceiver(t, `{"decision": "allow"}`)
		ids := map[string]string{}
		for name, r := range map[string]*receiver{"a": a, "b": b} {
			status, w := c.do("POST", "/api/hooks", `{"hookName": "`+name+`", "hookType": "user_message", "dispatchConfig": {"url": "`+r.URL+`"}}`)
			if status != 201 {
				t.Fatal(w.Message)
			}
			var h struct{ ID int64 }
			json.Unmarshal(w.Data, &h)
			ids[name] = itoa(h.ID)
		}
		dispatch := func() {
			t.Helper()
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "user_message", "context": {"userInput": "hi"}}`); status != 200 {
				t.Fatal(w.Message)
			}
		}
		want := func(step string, listed, series []string) {
			t.Helper()
			slices.Sort(listed)
			slices.Sort(series)
			for _, limit := range []int{1, 50} {
				if got := walk(t, c, "/api/breakers", limit); !slices.Equal(got, listed) {
					t.Errorf("%s: /api/breakers, %d a page: %v, want %v", step, limit, got, listed)
				}
			}
			if got := breakerSeries(t, metrics); !slices.Equal(got, series) {
				t.Errorf("%s: hookd_breaker_state series %v, want %v", step, got, series)
			}
		}
		want("registered, not yet called", []string{a.URL, b.URL}, []string{})
		dispatch()
		want("both called", []string{a.URL, b.URL}, []string{a.URL, b.URL})

		if status, w := c.do("DELETE", "/api/hooks/"+ids["a"], ""); status != 200 {
			t.Fatal(w.Message)
		}
		want("a deleted", []string{b.URL}, []string{b.URL})

		if status, w := c.do("PUT", "/api/hooks/"+ids["b"], `{"hookName": "b", "hookType": "user_message", "dispatchConfig": {"url": "`+moved.URL+`"}}`); status != 200 {
			t.Fatal(w.Message)
		}
		want("b moved, not yet called", []string{moved.URL}, []string{})
		dispatch()
		want("b moved and called", []string{moved.URL}, []string{moved.URL})
	})
}

// /api/breakers has one row per distinct receiver URL of the registered webhook hooks, enabled or
// not, from the moment they are registered and again after a restart: closed with no failures
// until called, then the breaker's own state. Policy hooks have no receiver and no row.
func TestBreakersListEveryReceiverOfARegisteredHook(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		allow := newReceiver(t, `{"decision": "allow"}`)
		shared := newReceiver(t, `{}`)
		off := newReceiver(t, `{}`)
		down := newReceiver(t, `{}`)
		down.Close() // connection refused: a no-response failure
		for _, h := range []string{
			`{"hookName": "a", "hookType": "user_message", "dispatchConfig": {"url": "` + allow.URL + `"}}`,
			`{"hookName": "s1", "hookType": "post_tool_use", "dispatchConfig": {"url": "` + shared.URL + `"}}`,
			`{"hookName": "s2", "hookType": "session_start", "dispatchConfig": {"url": "` + shared.URL + `"}}`,
			`{"hookName": "off", "hookType": "agent_completion", "enabled": false, "dispatchConfig": {"url": "` + off.URL + `"}}`,
			`{"hookName": "down", "hookType": "pre_tool_use", "toolNameMatch": "t", "dispatchConfig": {"url": "` + down.URL + `", "failureMode": "ALLOW"}}`,
			`{"hookName": "p", "hookType": "pre_tool_use", "dispatchType": "policy", "dispatchConfig": {"failureMode": "DENY"},
			  "policyConfig": {"rules": [{"name": "over", "when": "args.amount > 10000", "decision": "deny", "reason": "'too much'"}], "default": "allow"}}`,
		} {
			if status, w := c.do("POST", "/api/hooks", h); status != 201 {
				t.Fatal(w.Message)
			}
		}
		urls := []string{allow.URL, shared.URL, off.URL, down.URL}
		slices.Sort(urls)
		rows := func(c client) map[string]breaker.Status {
			t.Helper()
			got := getPage[breaker.Status](t, c, "/api/breakers")
			out := map[string]breaker.Status{}
			var order []string
			for _, s := range got.Items {
				out[s.URL] = s
				order = append(order, s.URL)
			}
			if !slices.Equal(order, urls) {
				t.Fatalf("/api/breakers rows %v, want %v", order, urls)
			}
			return out
		}
		fresh := func(step string, s breaker.Status) {
			t.Helper()
			if s.State != breaker.StateClosed || s.ConsecutiveFailures != 0 || s.OpenedAt != nil || s.HalfOpenAt != nil {
				t.Errorf("%s: %+v, want closed with no failures", step, s)
			}
		}
		for _, s := range rows(c) {
			fresh("registered, none called", s)
		}

		// The down receiver's hook is asked and not answered: its row counts the failure.
		if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "t", "arguments": {}}}`); status != 200 {
			t.Fatal(w.Message)
		}
		got := rows(c)
		if s := got[down.URL]; s.State != breaker.StateClosed || s.ConsecutiveFailures != 1 {
			t.Errorf("after one failed call: %+v, want closed with 1 failure", s)
		}
		for _, u := range []string{allow.URL, shared.URL, off.URL} {
			fresh("another URL's call", got[u])
		}

		// A restart knows no breaker yet, and lists every URL all the same.
		restarted, _ := newDispatchServer(t, db)
		for _, s := range rows(restarted) {
			fresh("after a restart", s)
		}
	})
}

// breakerSeries are the url labels of hookd_breaker_state, sorted.
func breakerSeries(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, f := range families {
		if f.GetName() != "hookd_breaker_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "url" {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
