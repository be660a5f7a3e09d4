// Package apibench holds what the HTTP benchmarks of the api packages share: operations timed one
// after another in each iteration over the same client (so that load from elsewhere on the
// machine falls on all of them alike), their percentiles, and the baselines a decision is
// measured against — a bare loopback round trip and a bare commit of one decision row.
package apibench

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
)

// Op is one timed operation.
type Op struct {
	Name string // the metric prefix: "bare", "batched", …
	Do   func() error
	lat  []time.Duration
}

// Run warms every op once, then runs them one after another b.N times, and reports each one's
// p50 and p99 in µs.
func Run(b *testing.B, ops []*Op) {
	b.Helper()
	for _, op := range ops {
		if err := op.Do(); err != nil {
			b.Fatalf("%s: %v", op.Name, err)
		}
		op.lat = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for range b.N {
		for _, op := range ops {
			start := time.Now()
			err := op.Do()
			op.lat = append(op.lat, time.Since(start))
			if err != nil {
				b.Fatalf("%s: %v", op.Name, err)
			}
		}
	}
	b.StopTimer()
	for _, op := range ops {
		slices.Sort(op.lat)
		b.ReportMetric(micros(op.P(0.50)), op.Name+"-p50-µs")
		b.ReportMetric(micros(op.P(0.99)), op.Name+"-p99-µs")
	}
}

// P is the nearest-rank q-quantile of the op's latencies (after Run).
func (op *Op) P(q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(op.lat)))) - 1
	return op.lat[min(max(i, 0), len(op.lat)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// ReportRatio reports a's p50 over base's.
func ReportRatio(b *testing.B, a, base *Op, unit string) {
	b.ReportMetric(float64(a.P(0.5))/float64(base.P(0.5)), unit)
}

// ReportOver reports how far a's p50 is above the sum of the others' p50s, in µs.
func ReportOver(b *testing.B, a *Op, unit string, sum ...*Op) {
	over := a.P(0.5)
	for _, op := range sum {
		over -= op.P(0.5)
	}
	b.ReportMetric(micros(over), unit)
}

// Client is the one client every op of a benchmark posts with: keep-alive, a few idle
// connections per host.
func Client() *http.Client { return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}} }

// Post is an op that posts body to url with the headers given and wants status back; the answer is
// read whole.
func Post(client *http.Client, url string, body []byte, status int, header ...string) func() error {
	return func() error {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return send(client, req, status)
	}
}

// Get is an op that gets url and wants status back; the answer is read whole.
func Get(client *http.Client, url string, status int) func() error {
	return func() error {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		return send(client, req, status)
	}
}

func send(client *http.Client, req *http.Request, status int) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		return &statusError{resp.StatusCode, out}
	}
	return nil
}

type statusError struct {
	status int
	body   []byte
}

func (e *statusError) Error() string { return http.StatusText(e.status) + ": " + string(e.body) }

// Bare is the baseline server: a trivial handler that reads the body and answers status with
// answer (Content-Type application/json when there is one).
func Bare(b *testing.B, status int, answer []byte) *httptest.Server {
	return BareDoing(b, status, answer, nil)
}

// BareDoing is Bare running work (when not nil) before it answers: with a Commit, the trivial
// handler of a sync decision. On this VM a handler that blocks in an fsync is woken, and wakes its
// client, more slowly than one that does not, so "bare + commit" measured apart understates what a
// round trip holding a commit costs; this measures it whole.
func BareDoing(b *testing.B, status int, answer []byte, work func() error) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if work != nil {
			if err := work(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		if len(answer) > 0 {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// Commit is the op of one bare commit of a decision row like the ones a decision writes, through
// the decision log's storage call, on db: what decisions.durability sync waits for.
func Commit(db *storage.DB, hookName, toolName string) func() error {
	principal, session := int64(1001), int64(10001)
	row := storage.Decision{DecisionID: "bench", EventID: "bench", HookID: 1, HookName: hookName, HookType: "pre_tool_use",
		SessionID: &session, PrincipalID: &principal, ToolName: toolName, ToolCallID: "call_1",
		SubjectHash: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", Outcome: "allow"}
	return func() error {
		r := row
		r.CreatedAt = time.Now()
		return db.InsertDecisions(context.Background(), []storage.Decision{r})
	}
}
