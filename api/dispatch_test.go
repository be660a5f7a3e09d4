package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/openapitest"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

type page[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

func getPage[T any](t *testing.T, c client, path string) page[T] {
	t.Helper()
	status, w := c.do("GET", path, "")
	if status != 200 {
		t.Fatalf("GET %s: %d %s", path, status, w.Message)
	}
	var p page[T]
	if err := json.Unmarshal(w.Data, &p); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, w.Data)
	}
	return p
}

// The delivery and decision logs page with a cursor, refuse unknown parameters and a limit above
// the cap, and filter as they say; the chain verifies through the API.
func TestLogLists(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		allow := newReceiver(t, `{"decision": "allow"}`)
		deny := newReceiver(t, `{"decision": "deny", "reason": "no"}`)
		for _, h := range []string{
			`{"hookName": "a", "hookType": "pre_tool_use", "toolNameMatch": "readFile|readDir", "dispatchConfig": {"url": "` + allow.URL + `"}}`,
			`{"hookName": "d", "hookType": "pre_tool_use", "toolNameMatch": "transferFunds", "dispatchConfig": {"url": "` + deny.URL + `"}}`,
			`{"hookName": "o", "hookType": "post_tool_use", "dispatchConfig": {"url": "` + allow.URL + `"}}`,
		} {
			if status, w := c.do("POST", "/api/hooks", h); status != 201 {
				t.Fatal(w.Message)
			}
		}
		for i, tool := range []string{"readFile", "readDir", "transferFunds"} {
			body := fmt.Sprintf(`{"hookType": "pre_tool_use", "principalId": %d, "context": {"toolName": %q, "toolCallId": "c%d", "arguments": {}}}`,
				1000+i, tool, i)
			if status, w := c.do("POST", "/api/hooks/dispatch", body); status != 200 {
				t.Fatal(w.Message)
			}
			body = fmt.Sprintf(`{"hookType": "post_tool_use", "context": {"toolName": %q}}`, tool)
			if status, w := c.do("POST", "/api/hooks/dispatch", body); status != 202 {
				t.Fatal(w.Message)
			}
		}

		// Pages: two, then the last one without a next cursor.
		first := getPage[storage.Decision](t, c, "/api/decisions?limit=2")
		if len(first.Items) != 2 || first.Next == "" || first.Items[0].ToolName != "transferFunds" {
			t.Fatalf("first page: %+v", first)
		}
		last := getPage[storage.Decision](t, c, "/api/decisions?limit=2&cursor="+first.Next)
		if len(last.Items) != 1 || last.Next != "" || last.Items[0].ToolName != "readFile" {
			t.Fatalf("last page: %+v", last)
		}
		for q, want := range map[string]int{"toolName=readDir": 1, "outcome=deny": 1, "principalId=1000": 1,
			"hookType=pre_tool_use": 3, "outcome=allow&toolName=transferFunds": 0, "since=2000-01-01T00:00:00Z": 3,
			"until=2000-01-01T00:00:00Z": 0} {
			if got := getPage[storage.Decision](t, c, "/api/decisions?"+q); len(got.Items) != want {
				t.Errorf("decisions?%s: %d rows, want %d", q, len(got.Items), want)
			}
		}
		ds := getPage[storage.Delivery](t, c, "/api/deliveries?limit=2")
		if len(ds.Items) != 2 || ds.Next == "" {
			t.Fatalf("deliveries page: %+v", ds)
		}
		if rest := getPage[storage.Delivery](t, c, "/api/deliveries?limit=2&cursor="+ds.Next); len(rest.Items) != 1 || rest.Next != "" {
			t.Fatalf("deliveries last page: %+v", rest)
		}

		for _, tc := range []struct{ path, want string }{
			{"/api/deliveries?stauts=dead", `stauts: unknown query parameter (did you mean "status"?)`},
			{"/api/deliveries?limit=5000", "limit: must be an integer from 1 to 500"},
			{"/api/deliveries?status=gone", "status: must be pending, delivering, delivered, failed or dead"},
			{"/api/deliveries?cursor=nonsense", "cursor: is not a cursor a list gave out; pass its next unchanged"},
			{"/api/deliveries?before=9", "before: unknown query parameter"},
			{"/api/decisions?tool_name=x", `tool_name: unknown query parameter (did you mean "toolName"?)`},
			{"/api/decisions?limit=0", "limit: must be an integer from 1 to 500"},
			{"/api/decisions?outcome=maybe", "outcome: must be allow, deny, modify, ask or error"},
			{"/api/decisions?since=yesterday", "since: must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"},
			{"/api/decisions?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "until: must be after since (the range is [since, until))"},
			{"/api/decisions?since=2026-12-01T00:00:00Z&until=2026-12-01T00:00:00Z", "until: must be after since (the range is [since, until))"},
			{"/api/decisions/verify?fast=1", "fast: unknown query parameter"},
		} {
			if status, w := c.do("GET", tc.path, ""); status != 400 || w.Message != tc.want {
				t.Errorf("GET %s: %d %q, want 400 %q", tc.path, status, w.Message, tc.want)
			}
		}

		status, w := c.do("GET", "/api/decisions/verify", "")
		var rep storage.ChainReport
		json.Unmarshal(w.Data, &rep)
		if status != 200 || !rep.OK || rep.Checked != 3 {
			t.Fatalf("verify: %d %s", status, w.Data)
		}

		// Deleting: one row by id, and a purge that needs a final status.
		id := ds.Items[0].ID
		if status, w := c.do("DELETE", fmt.Sprintf("/api/deliveries/%d", id), ""); status != 200 && status != 409 {
			t.Fatalf("delete: %d %s", status, w.Message)
		} else if status == 200 {
			if status, _ := c.do("DELETE", fmt.Sprintf("/api/deliveries/%d", id), ""); status != 404 {
				t.Fatalf("delete again: %d, want 404", status)
			}
		}
		for _, tc := range []struct{ path, want string }{
			{"/api/deliveries", "status: is required (failed, dead or failed,dead)"},
			{"/api/deliveries?status=pending", "status: must be failed, dead or failed,dead"},
			{"/api/deliveries?status=dead&before=soon", "before: must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"},
		} {
			if status, w := c.do("DELETE", tc.path, ""); status != 400 || w.Message != tc.want {
				t.Errorf("DELETE %s: %d %q, want 400 %q", tc.path, status, w.Message, tc.want)
			}
		}
		if status, w := c.do("DELETE", "/api/deliveries?status=failed,dead&hookId=3", ""); status != 200 ||
			!strings.Contains(string(w.Data), `"deleted":0`) {
			t.Fatalf("purge: %d %s", status, w.Data)
		}
	})
}

// Redelivering a delivery whose hook was deleted is refused: there is no receiver left to send
// it to, and a 200 would say an attempt was made when none was.
func TestRedeliverOfADeletedHooksDelivery(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		recv := newReceiver(t, `{}`)
		status, w := c.do("POST", "/api/hooks", `{"hookName": "audit", "hookType": "session_start", "dispatchConfig": {"url": "`+recv.URL+`"}}`)
		if status != 201 {
			t.Fatal(w.Message)
		}
		var hk dispatcher.Hook
		json.Unmarshal(w.Data, &hk)
		if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "session_start", "context": {"newSession": true}}`); status != 202 {
			t.Fatal(w.Message)
		}
		var d storage.Delivery
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got := getPage[storage.Delivery](t, c, "/api/deliveries"); len(got.Items) == 1 && got.Items[0].Status == storage.StatusDelivered {
				d = got.Items[0]
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the delivery was not delivered")
			}
		}
		// While the hook exists, a redelivery is one more attempt.
		if status, w := c.do("POST", fmt.Sprintf("/api/deliveries/%d/redeliver", d.ID), ""); status != 200 || recv.calls.Load() != 2 {
			t.Fatalf("redeliver: %d %s, %d calls", status, w.Message, recv.calls.Load())
		}
		if status, w := c.do("DELETE", fmt.Sprintf("/api/hooks/%d", hk.ID), ""); status != 200 {
			t.Fatal(w.Message)
		}
		status, w = c.do("POST", fmt.Sprintf("/api/deliveries/%d/redeliver", d.ID), "")
		if want := fmt.Sprintf("delivery %d: its hook %d was deleted; there is no receiver to deliver it to", d.ID, hk.ID); status != 409 || w.Message != want {
			t.Fatalf("redeliver after the hook was deleted: %d %q, want 409 %q", status, w.Message, want)
		}
		if n := recv.calls.Load(); n != 2 {
			t.Fatalf("receiver calls = %d, want 2", n)
		}
		// Nothing was tried, so nothing of the record changes: it was delivered, and says so.
		after := getPage[storage.Delivery](t, c, "/api/deliveries").Items
		if len(after) != 1 || after[0].Status != storage.StatusDelivered || after[0].Attempts != 2 ||
			after[0].LastStatusCode != 200 || after[0].LastError != "" {
			t.Fatalf("after the refused redelivery: %+v", after)
		}
	})
}

// Redelivering a delivery whose hook is disabled is refused, naming the hook and the way out, and
// changes nothing: a disabled hook's deliveries are paused and nothing is sent to it, so a 200 would
// report an attempt that was never made. Once the hook is enabled, the same call delivers.
func TestRedeliverOfADisabledHooksDelivery(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newIdleDispatchServer(t, db)
		recv := newReceiver(t, `{}`)
		hook := `{"hookName": "audit", "hookType": "session_start", "enabled": %t, "dispatchConfig": {"url": "` + recv.URL + `"}}`
		status, w := c.do("POST", "/api/hooks", fmt.Sprintf(hook, true))
		if status != 201 {
			t.Fatal(w.Message)
		}
		var hk dispatcher.Hook
		json.Unmarshal(w.Data, &hk)
		setEnabled := func(on bool) {
			t.Helper()
			if status, w := c.do("PUT", fmt.Sprintf("/api/hooks/%d", hk.ID), fmt.Sprintf(hook, on)); status != 200 {
				t.Fatal(w.Message)
			}
		}
		if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "session_start", "context": {"newSession": true}}`); status != 202 {
			t.Fatal(w.Message)
		}
		setEnabled(false)
		one := func() deliveryWithAttempts {
			t.Helper()
			got := getPage[deliveryWithAttempts](t, c, "/api/deliveries")
			if len(got.Items) != 1 {
				t.Fatalf("%d deliveries, want 1", len(got.Items))
			}
			return got.Items[0]
		}
		paused := one()
		if paused.Status != storage.StatusPending || !paused.Paused {
			t.Fatalf("the disabled hook's delivery: %s paused=%v, want pending and paused", paused.Status, paused.Paused)
		}
		redeliver := fmt.Sprintf("/api/deliveries/%d/redeliver", paused.ID)
		refused := fmt.Sprintf(`delivery %d: its hook %d ("audit") is disabled, so its deliveries are paused until it is`+
			` enabled (PUT /api/hooks/%d with "enabled": true); no attempt was made`, paused.ID, hk.ID, hk.ID)
		if status, w := c.do("POST", redeliver, ""); status != 409 || w.Message != refused {
			t.Fatalf("redeliver of a paused delivery: %d %q, want 409 %q", status, w.Message, refused)
		}
		if got := one(); recv.calls.Load() != 0 || !got.sameState(paused) {
			t.Fatalf("after the refused redelivery: %d calls, %+v, want none and %+v", recv.calls.Load(), got, paused)
		}

		// Enabled, the same call is one attempt now.
		setEnabled(true)
		status, w = c.do("POST", redeliver, "")
		var done deliveryWithAttempts
		json.Unmarshal(w.Data, &done)
		if status != 200 || done.Status != storage.StatusDelivered || len(done.Attempts) != 1 || recv.calls.Load() != 1 {
			t.Fatalf("redeliver once enabled: %d %s, %d calls", status, w.Data, recv.calls.Load())
		}

		// A finished delivery of a disabled hook is refused too, and stays as it was: not queued
		// again behind the pause.
		setEnabled(false)
		delivered := one()
		if status, w := c.do("POST", redeliver, ""); status != 409 || w.Message != refused {
			t.Fatalf("redeliver of a delivered delivery of a disabled hook: %d %q, want 409 %q", status, w.Message, refused)
		}
		if got := one(); recv.calls.Load() != 1 || !got.sameState(delivered) {
			t.Fatalf("after the refused redelivery: %d calls, %+v, want 1 and %+v", recv.calls.Load(), got, delivered)
		}
	})
}

// deliveryWithAttempts is a delivery as the API shows it.
type deliveryWithAttempts struct {
	storage.Delivery
	Attempts []storage.Attempt `json:"attemptLog"`
}

// sameState reports whether d is in the state of before: nothing was claimed, attempted or
// rescheduled in between.
func (d deliveryWithAttempts) sameState(before deliveryWithAttempts) bool {
	return d.Status == before.Status && d.Paused == before.Paused && d.Delivery.Attempts == before.Delivery.Attempts &&
		len(d.Attempts) == len(before.Attempts) && d.NextAttemptAt.Equal(before.NextAttemptAt) &&
		d.UpdatedAt.Equal(before.UpdatedAt) && d.LastError == before.LastError
}

// newIdleDispatchServer is newDispatchServer with the dispatcher's workers not started: what is
// queued stays pending, and each attempt is a redelivery the test makes, answered when made.
func newIdleDispatchServer(t *testing.T, db *storage.DB) client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := dispatcher.NewRegistry(context.Background(), db, log)
	if err != nil {
		t.Fatal(err)
	}
	disp := dispatcher.New(db, reg, log, dispatcher.Settings{Version: "test"})
	srv := httptest.NewServer(openapitest.Handler(t, api.New(api.Deps{DB: db, Hooks: reg, Dispatcher: disp,
		AdminTokens: []string{adminToken}, Log: log})))
	t.Cleanup(func() {
		srv.Close()
		disp.Stop(context.Background())
	})
	return client{t: t, base: srv.URL, tok: adminToken}
}

// A receiver's modifiedValue that is not a string is taken as JSON arguments on pre_tool_use, but
// user_message and pre_scheduled_task replace a text: an object there is an answer hookd cannot
// use, which the hook's failureMode decides, not the object's JSON put in the user's place.
func TestModifiedValueNotAStringForATextPoint(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		recv := newReceiver(t, `{"decision": "modify", "modifiedValue": {"amount": 2}}`)
		for _, h := range []string{
			`{"hookName": "input", "hookType": "user_message", "dispatchConfig": {"url": "` + recv.URL + `", "failureMode": "DENY"}}`,
			`{"hookName": "task", "hookType": "pre_scheduled_task", "dispatchConfig": {"url": "` + recv.URL + `", "failureMode": "DENY"}}`,
			`{"hookName": "args", "hookType": "pre_tool_use", "dispatchConfig": {"url": "` + recv.URL + `", "failureMode": "DENY"}}`,
		} {
			if status, w := c.do("POST", "/api/hooks", h); status != 201 {
				t.Fatal(w.Message)
			}
		}
		for _, tc := range []struct{ typ, ctx, decision, modified, logged string }{
			{"user_message", `{"userInput": "hello"}`, "deny", "", "modifiedValue: must be a string, the new input of user_message, not an object"},
			{"pre_scheduled_task", `{"taskId": 9001}`, "deny", "", "modifiedValue: must be a string, the new input of pre_scheduled_task, not an object"},
			{"pre_tool_use", `{"toolName": "t", "arguments": {"amount": 5}}`, "modify", `{"amount": 2}`, ""},
		} {
			status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "`+tc.typ+`", "context": `+tc.ctx+`}`)
			var dec struct {
				Decision      string
				ModifiedValue *string
				DecisionID    string
			}
			json.Unmarshal(w.Data, &dec)
			if status != 200 || dec.Decision != tc.decision || deref(dec.ModifiedValue) != tc.modified {
				t.Fatalf("%s: %d %s", tc.typ, status, w.Data)
			}
			rows := getPage[storage.Decision](t, c, "/api/decisions?decisionId="+dec.DecisionID)
			if len(rows.Items) != 1 || !strings.Contains(rows.Items[0].Error, tc.logged) || rows.Items[0].FromFailureMode != (tc.logged != "") {
				t.Fatalf("%s: logged %+v", tc.typ, rows.Items)
			}
		}
	})
}

// A pre_tool_use modify's value is the tool's new arguments, which are a JSON object: a receiver's
// "5", "null", "\"x\"" or "[1]", or a policy's '5', is the invalid modify a value that is not JSON
// is (a 502, recorded as error, whatever the failureMode), where it was taken as the arguments
// and the tool ran with 5 or null.
func TestModifiedArgumentsNotAnObject(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		for i, tc := range []struct{ answer, policyValue, problem string }{
			{answer: `"5"`, problem: "is a number, not a JSON object of arguments"},
			{answer: `"null"`, problem: "is null, not a JSON object of arguments"},
			{answer: `"true"`, problem: "is a boolean, not a JSON object of arguments"},
			{answer: `"\"x\""`, problem: "is a string, not a JSON object of arguments"},
			{answer: `[1]`, problem: "is an array, not a JSON object of arguments"},
			{policyValue: `'5'`, problem: "is a number, not a JSON object of arguments"},
			{policyValue: `'null'`, problem: "is null, not a JSON object of arguments"},
			{answer: `"{\"amount\": 2}"`},
			{policyValue: `'{"amount": 2}'`},
		} {
			agent := itoa(int64(7000 + i))
			hook := `{"hookName": "h` + agent + `", "hookType": "pre_tool_use", "agentId": ` + agent + `, `
			if tc.policyValue != "" {
				hook += `"dispatchType": "policy", "policyConfig": {"rules": [{"name": "m", "when": "true", "decision": "modify", "modifiedValue": ` +
					strconv.Quote(tc.policyValue) + `}]}}`
			} else {
				recv := newReceiver(t, `{"decision": "modify", "modifiedValue": `+tc.answer+`}`)
				hook += `"dispatchConfig": {"url": "` + recv.URL + `", "failureMode": "ALLOW"}}`
			}
			status, w := c.do("POST", "/api/hooks", hook)
			var made struct{ ID int64 }
			if json.Unmarshal(w.Data, &made); status != 201 {
				t.Fatal(hook, w.Message)
			}
			status, w = c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "agentId": `+agent+
				`, "context": {"toolName": "t", "arguments": {"amount": 5}}}`)
			rows := getPage[storage.Decision](t, c, "/api/decisions?hookId="+itoa(made.ID))
			if tc.problem == "" {
				if status != 200 || !strings.Contains(string(w.Data), `"modifiedValue":"{\"amount\": 2}"`) {
					t.Errorf("%s%s: %d %s %s", tc.answer, tc.policyValue, status, w.Message, w.Data)
				}
				continue
			}
			if status != http.StatusBadGateway || !strings.Contains(w.Message, tc.problem) {
				t.Errorf("%s%s: %d %q %s, want 502 …%s…", tc.answer, tc.policyValue, status, w.Message, w.Data, tc.problem)
			}
			if len(rows.Items) != 1 || rows.Items[0].Outcome != storage.OutcomeError || !strings.Contains(rows.Items[0].Error, tc.problem) ||
				rows.Items[0].FromFailureMode {
				t.Errorf("%s%s: logged %+v", tc.answer, tc.policyValue, rows.Items)
			}
		}
	})
}

// The decision stream's cursor names a row the log has: ?after= past the newest row streamed
// nothing, without a word, until the log grew past it (and then from there, the rows between never
// shown). It is a 400 naming what was sent. Sent both, ?after= and Last-Event-ID give the newer:
// an EventSource opened with ?after= sends the last id it got when it reconnects.
func TestDecisionStreamCursorChecked(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c, _ := newDispatchServer(t, db)
		if status, w := c.do("POST", "/api/hooks", `{"hookName": "p", "hookType": "user_message", "dispatchType": "policy", "policyConfig": {"rules": [{"name": "a", "when": "true", "decision": "allow"}]}}`); status != 201 {
			t.Fatal(w.Message)
		}
		for range 3 {
			if status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "user_message", "context": {"userInput": "hi"}}`); status != 200 {
				t.Fatal(w.Message)
			}
		}
		last := getPage[storage.Decision](t, c, "/api/decisions?limit=1").Items[0].ID
		stream := func(query, lastEventID string) (*http.Response, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/decisions/stream"+query, nil)
			req.Header.Set("Authorization", "Bearer "+c.tok)
			if lastEventID != "" {
				req.Header.Set("Last-Event-ID", lastEventID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			if resp.StatusCode != http.StatusOK {
				var w wrapped
				json.NewDecoder(resp.Body).Decode(&w)
				return resp, w.Message
			}
			return resp, ""
		}
		for _, tc := range []struct{ query, header, msg string }{
			{"?after=99999", "", "after: 99999 is beyond the newest decision row (" + itoa(last) + ")"},
			{"?after=" + itoa(last+1), "", "after: " + itoa(last+1) + " is beyond the newest decision row"},
			{"", "99999", "Last-Event-ID: 99999 is beyond the newest decision row (" + itoa(last) + ")"},
			{"?after=1", "x", "Last-Event-ID: must be the id of a decision row"},
		} {
			resp, msg := stream(tc.query, tc.header)
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(msg, tc.msg) {
				t.Errorf("%s (Last-Event-ID %q): %d %q, want 400 %s…", tc.query, tc.header, resp.StatusCode, msg, tc.msg)
			}
		}
		// The same cursor both ways, the newer of two, and the newest row itself, are taken: the
		// rows after it come.
		for _, tc := range []struct{ query, header, first string }{
			{"?after=" + itoa(last-1), itoa(last - 1), "id: " + itoa(last)},
			{"?after=" + itoa(last-2), itoa(last - 1), "id: " + itoa(last)},
			{"?after=" + itoa(last-1), itoa(last - 2), "id: " + itoa(last)},
			{"?after=" + itoa(last-2), "", "id: " + itoa(last-1)},
		} {
			resp, msg := stream(tc.query, tc.header)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s (Last-Event-ID %q): %d %s", tc.query, tc.header, resp.StatusCode, msg)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.HasPrefix(sc.Text(), "id: ") {
			}
			if sc.Text() != tc.first {
				t.Errorf("%s (Last-Event-ID %q): first %q, want %q", tc.query, tc.header, sc.Text(), tc.first)
			}
		}
		if resp, msg := stream("?after="+itoa(last), ""); resp.StatusCode != http.StatusOK {
			t.Errorf("after the newest row: %d %s", resp.StatusCode, msg)
		}
	})
}
