package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const taskScript = `{"scripts":[
 {"match":"/slow/","steps":[{"text":"slow answer","delayMs":1500}]},
 {"match":"*","steps":[{"text":"scheduled answer"}]}]}`

// newTaskServer serves the admin API with a running scheduler over a scripted runtime and the
// real dispatcher.
func newTaskServer(t *testing.T, db *storage.DB) client {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var sf model.ScriptFile
	if err := json.Unmarshal([]byte(taskScript), &sf); err != nil {
		t.Fatal(err)
	}
	m, err := model.NewScripted(sf)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dispatcher.NewRegistry(ctx, db, log)
	if err != nil {
		t.Fatal(err)
	}
	disp := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "test"})
	if err := disp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rt := agent.New(db, disp, m, tools.NewRegistry(tools.NewListFiles()), tools.NewWorkspaces(t.TempDir()), log,
		agent.Config{DefaultBehavior: agent.BehaviorAllow})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(db, rt, disp, log, scheduler.Config{PollEvery: 200 * time.Millisecond})
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: disp, Scheduler: sched,
		AdminTokens: []string{adminToken}, Log: log})))
	t.Cleanup(func() {
		srv.Close()
		sched.Stop()
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rt.Shutdown(c)
		disp.Stop(c)
	})
	return client{t: t, base: srv.URL, tok: adminToken}
}

const sampleTask = `{"taskName": "每日财报生成", "cron": "0 9 * * 1-5", "input": "生成昨日财报",
  "agentId": 5001, "principalId": 1001, "reuseSession": true, "catchUp": true}`

func TestTaskValidation(t *testing.T) {
	c := newTaskServer(t, storagetest.SQLite(t))
	with := func(field, value string) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(sampleTask), &m)
		if value == "<absent>" {
			delete(m, field)
		} else {
			var v any
			if err := json.Unmarshal([]byte(value), &v); err != nil {
				t.Fatal(err)
			}
			m[field] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct{ field, value string }{
		{"taskName", `<absent>`},
		{"taskName", `"   "`},
		{"taskName", `"` + strings.Repeat("名", 201) + `"`},
		{"taskName", `42`},
		// Shown in the console and sent as the hooks' taskName, where an escape or a newline would
		// pass for other text; PostgreSQL's text refuses a NUL (a 500 there, stored on SQLite).
		{"taskName", `"report\u001b[2K\rdone"`},
		{"taskName", `"a\nb"`},
		{"taskName", `"a\u0000b"`},
		{"cron", `<absent>`},
		{"cron", `"every day"`},
		{"cron", `"61 * * * *"`},
		{"cron", `"* * * *"`},
		{"cron", `"1 2 3 4 5 6 7"`},
		{"cron", `"CRON_TZ=Mars/Olympus 0 9 * * *"`},
		{"cron", `"@fortnightly"`},
		{"cron", `"0 0 30 2 *"`},
		{"cron", `"@every -5s"`}, // the parser would make it 1 s: a typo firing every second
		{"cron", `"@every 0s"`},
		{"cron", `"@every 1500ms"`},
		{"cron", `"CRON_TZ= 0 9 * * *"`}, // the parser would read UTC
		// A step over the field's range fires once a cycle: hourly, not every 90 minutes.
		{"cron", `"*/90 * * * *"`},
		{"cron", `"0 0 */36 * * *"`},
		{"cron", `"CRON_TZ=Asia/Shanghai 0 0,5/45 * * *"`},
		{"input", `<absent>`},
		{"input", `""`},
		{"input", `["a"]`},
		{"input", `"report\u0000"`},
		{"agentId", `0`},
		{"agentId", `"5001"`},
		{"principalId", `-1`},
		{"principalId", `1.5`},
		{"reuseSession", `"yes"`},
		{"enabled", `1`},
		{"catchUp", `"true"`},
		// Output only, and read like settings: a new task that sets them is refused.
		{"sessionId", `999`},
		{"nextRunAt", `"2026-12-02T09:00:00Z"`},
		{"lastRunAt", `"2026-11-30T09:00:00Z"`},
	}
	for _, tc := range cases {
		status, w := c.do("POST", "/api/tasks", with(tc.field, tc.value))
		if status != http.StatusBadRequest || !strings.HasPrefix(w.Message, tc.field+":") {
			t.Errorf("%s = %s: %d %q, want 400 naming %s", tc.field, tc.value, status, w.Message, tc.field)
		}
	}
	// The same rules on replace.
	_, w := c.do("POST", "/api/tasks", sampleTask)
	var task scheduler.Task
	json.Unmarshal(w.Data, &task)
	if status, w := c.do("PUT", "/api/tasks/"+itoa(task.ID), with("cron", `"bad"`)); status != 400 || !strings.HasPrefix(w.Message, "cron:") {
		t.Fatalf("replace with a bad cron: %d %s", status, w.Message)
	}
	// A session the task is not bound to is refused, as on create; its own (none yet) is not.
	if status, w := c.do("PUT", "/api/tasks/"+itoa(task.ID), with("sessionId", "424242")); status != 400 ||
		w.Message != "sessionId: 424242, but the task has no bound session; sessionId is set by hookd (leave it out or send it as GET shows it)" {
		t.Fatalf("replace naming a session: %d %s", status, w.Message)
	}
	// A task read with GET goes back with PUT unchanged, its output-only fields included.
	_, w = c.do("GET", "/api/tasks/"+itoa(task.ID), "")
	if status, w := c.do("PUT", "/api/tasks/"+itoa(task.ID), string(w.Data)); status != 200 {
		t.Fatalf("GET then PUT: %d %s", status, w.Message)
	}
	for _, path := range []string{"/api/tasks/x", "/api/tasks/0/run", "/api/tasks/-1/runs"} {
		if status, w := c.do("GET", path, ""); status != 400 && status != 405 || status == 400 && !strings.HasPrefix(w.Message, "id:") {
			t.Fatalf("%s: %d %s", path, status, w.Message)
		}
	}
	if status, w := c.do("GET", "/api/tasks/"+itoa(task.ID)+"/runs?status=maybe", ""); status != 400 || !strings.HasPrefix(w.Message, "status:") {
		t.Fatalf("runs with a bad status: %d %s", status, w.Message)
	}
	if status, w := c.do("GET", "/api/tasks/"+itoa(task.ID)+"/runs?limit=0", ""); status != 400 || !strings.HasPrefix(w.Message, "limit:") {
		t.Fatalf("runs with a bad limit: %d %s", status, w.Message)
	}
	// Every accepted syntax.
	for _, spec := range []string{"*/10 * * * * *", "0 30 9 * * 1-5", "@every 1h", "@daily", "@hourly",
		"CRON_TZ=Asia/Shanghai 0 9 * * *", "TZ=UTC 0 9 * * *", "0 9 1,15 * *", "*/60 * * * * *", "0 */24 * * *", "5/15 9-17/2 * * MON-FRI"} {
		body := with("cron", `"`+spec+`"`)
		if status, w := c.do("POST", "/api/tasks", body); status != http.StatusCreated {
			t.Errorf("cron %q: %d %s", spec, status, w.Message)
		}
	}
}

func TestTaskCRUDRunNowAndHistory(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newTaskServer(t, db)
		if status, w := (client{t: t, base: c.base}).do("GET", "/api/tasks", ""); status != http.StatusUnauthorized {
			t.Fatalf("no token: %d %s", status, w.Message)
		}
		status, w := c.do("POST", "/api/tasks", sampleTask)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, w.Message)
		}
		var task scheduler.Task
		json.Unmarshal(w.Data, &task)
		var raw map[string]any
		json.Unmarshal(w.Data, &raw)
		if task.ID == 0 || task.TaskName != "每日财报生成" || !*task.Enabled || !task.ReuseSession || !task.CatchUp ||
			*task.AgentID != 5001 || *task.PrincipalID != 1001 || task.NextRunAt == nil || !task.NextRunAt.After(time.Now()) {
			t.Fatalf("created: %s", w.Data)
		}
		for _, k := range []string{"nextRunAt", "lastRunAt", "sessionId"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("response lacks %s: %s", k, w.Data)
			}
		}
		if raw["lastRunAt"] != nil {
			t.Fatalf("lastRunAt of a new task: %v", raw["lastRunAt"])
		}
		path := "/api/tasks/" + itoa(task.ID)

		if status, w := c.do("GET", path, ""); status != 200 || !strings.Contains(string(w.Data), `"cron":"0 9 * * 1-5"`) {
			t.Fatalf("get: %d %s", status, w.Data)
		}
		// The id of a new task is hookd's; the output-only fields that read like settings are
		// refused (TestTaskValidation).
		if status, w := c.do("POST", "/api/tasks", `{"taskName":"x","cron":"@daily","input":"i","id":77}`); status != 201 ||
			strings.Contains(string(w.Data), `"id":77`) {
			t.Fatalf("id of a new task: %d %s", status, w.Data)
		}
		if status, w := c.do("POST", "/api/tasks", `{"taskName":"x","cron":"@daily","input":"i","nextRunAt":"2000-01-01T00:00:00Z"}`); status != 400 {
			t.Fatalf("nextRunAt of a new task: %d %s", status, w.Message)
		}
		if status, w := c.do("POST", "/api/tasks", `{"taskName":"x","cron":"@daily","input":"i","enabled":null}`); status != 400 ||
			!strings.HasPrefix(w.Message, "enabled: is empty") {
			t.Fatalf("enabled null: %d %s", status, w.Message)
		}
		_, w = c.do("GET", "/api/tasks", "")
		var page struct{ Items []scheduler.Task }
		json.Unmarshal(w.Data, &page)
		if list := page.Items; len(list) != 2 || list[0].ID != task.ID {
			t.Fatalf("list: %s", w.Data)
		}

		// Replace: a new schedule and input; disabled means no next run.
		status, w = c.do("PUT", path, `{"taskName":"renamed","cron":"@every 1h","input":"slow please","enabled":false}`)
		if status != 200 {
			t.Fatalf("put: %d %s", status, w.Message)
		}
		json.Unmarshal(w.Data, &raw)
		if raw["taskName"] != "renamed" || raw["enabled"] != false || raw["nextRunAt"] != nil || raw["agentId"] != nil || raw["reuseSession"] != false {
			t.Fatalf("replaced: %s", w.Data)
		}
		status, w = c.do("PUT", path, `{"taskName":"renamed","cron":"@every 1h","input":"slow please"}`)
		json.Unmarshal(w.Data, &task)
		if status != 200 || !*task.Enabled || task.NextRunAt == nil || task.NextRunAt.Sub(time.Now()) < 59*time.Minute {
			t.Fatalf("re-enabled: %d %s", status, w.Data)
		}

		// Run now: 202 with the firing and its run; a second while it runs: 409, recorded as skipped.
		status, w = c.do("POST", path+"/run", "")
		if status != http.StatusAccepted {
			t.Fatalf("run now: %d %s", status, w.Message)
		}
		var run storage.TaskRun
		json.Unmarshal(w.Data, &run)
		if run.ID == 0 || run.Status != storage.TaskRunRunning || run.RequestID == nil || run.Kind != storage.FireManual ||
			run.Input != "slow please" || run.SessionID == nil {
			t.Fatalf("run now: %s", w.Data)
		}
		if status, w := c.do("POST", path+"/run", ""); status != http.StatusConflict || !strings.Contains(w.Message, "still running") {
			t.Fatalf("run now while running: %d %s", status, w.Message)
		}
		deadline := time.Now().Add(10 * time.Second)
		var runs []storage.TaskRun
		for {
			_, w = c.do("GET", path+"/runs", "")
			runs = pageItems[storage.TaskRun](t, w.Data)
			if len(runs) == 2 && runs[1].Status == storage.TaskRunSucceeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("history: %s", w.Data)
			}
			time.Sleep(100 * time.Millisecond)
		}
		done := runs[1]
		if done.ID != run.ID || *done.RequestID != *run.RequestID || done.Output != "slow answer" || done.FinishedAt == nil ||
			done.DurationMs < 1000 || runs[0].Status != storage.TaskRunSkipped || runs[0].Reason != "still running" {
			t.Fatalf("history: %s", w.Data)
		}
		_, w = c.do("GET", path+"/runs?status=skipped&limit=5", "")
		if runs = pageItems[storage.TaskRun](t, w.Data); len(runs) != 1 || runs[0].Status != storage.TaskRunSkipped {
			t.Fatalf("history filtered: %s", w.Data)
		}
		_, w = c.do("GET", path, "")
		json.Unmarshal(w.Data, &task)
		if task.LastRunAt == nil {
			t.Fatalf("lastRunAt after a run: %s", w.Data)
		}

		// Delete: gone, and so are its routes but its history, which stays for the record; an id
		// that never was has none.
		if status, w := c.do("DELETE", path, ""); status != 200 || !strings.Contains(string(w.Data), `"deleted":true`) {
			t.Fatalf("delete: %d %s", status, w.Data)
		}
		if status, w := c.do("GET", path+"/runs", ""); status != 200 || len(pageItems[storage.TaskRun](t, w.Data)) != 2 {
			t.Fatalf("the history of a deleted task: %d %s", status, w.Data)
		}
		if status, w := c.do("GET", path+"/runs?status=failed", ""); status != 200 || len(pageItems[storage.TaskRun](t, w.Data)) != 0 {
			t.Fatalf("the history of a deleted task, filtered: %d %s", status, w.Data)
		}
		for _, r := range []struct{ method, path string }{{"GET", path}, {"PUT", path}, {"DELETE", path},
			{"POST", path + "/run"}, {"GET", "/api/tasks/99999/runs"}} {
			body := ""
			if r.method == "PUT" {
				body = sampleTask
			}
			if status, w := c.do(r.method, r.path, body); status != http.StatusNotFound {
				t.Fatalf("%s %s after delete: %d %s", r.method, r.path, status, w.Message)
			}
		}
	})
}

func TestTasksWithoutScheduler(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	if status, w := c.do("GET", "/api/tasks", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("no scheduler: %d %s", status, w.Message)
	}
}

// Two run-now calls that carry one traceparent (a caller's trace) are two firings: each run of a
// task without reuseSession gets its own session, never the other's conversation.
func TestRunNowInOneTraceGetsTwoSessions(t *testing.T) {
	c := newTaskServer(t, storagetest.SQLite(t))
	status, w := c.do("POST", "/api/tasks", `{"taskName":"t","cron":"@daily","input":"slow please"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, w.Message)
	}
	var task scheduler.Task
	json.Unmarshal(w.Data, &task)
	path := "/api/tasks/" + itoa(task.ID)
	runNow := func() storage.TaskRun {
		t.Helper()
		req, _ := http.NewRequest("POST", c.base+path+"/run", nil)
		req.Header.Set("Authorization", "Bearer "+c.tok)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Data storage.TaskRun }
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusAccepted || out.Data.SessionID == nil {
			t.Fatalf("run now: %d %+v", resp.StatusCode, out.Data)
		}
		return out.Data
	}
	first := runNow()
	// The second waits for the first to end (a task runs once at a time).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, w := c.do("GET", path+"/runs", "")
		if runs := pageItems[storage.TaskRun](t, w.Data); len(runs) == 1 && runs[0].Status != storage.TaskRunRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first firing did not end")
		}
	}
	second := runNow()
	if *first.SessionID == *second.SessionID {
		t.Fatalf("two firings share session %d", *first.SessionID)
	}
}
