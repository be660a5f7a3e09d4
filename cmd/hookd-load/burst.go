package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func runBurst(ctx context.Context, args []string) error {
	fs := newFlags("burst", `Starts hookd (SQLite) and a local receiver, registers one post_tool_use hook on the receiver, then
POSTs -events observational events to /api/hooks/dispatch from -clients concurrent clients as fast
as they go. The receiver answers 503 with Retry-After (the seconds left) for -fail-for from the
burst's first event, so every event is attempted once and then waits in the outbox; then 200, and
the outbox drains. Make -fail-for longer than the posting takes to have the whole burst queued at
once. The daemon's VmRSS is sampled every -sample until every event was delivered, and -settle
longer.`)
	events := fs.Int("events", 10000, "events in the burst (the issue's figure: 100000)")
	clients := fs.Int("clients", 256, "concurrent POSTing clients")
	failFor := fs.Duration("fail-for", 3*time.Second, "the receiver answers 503 this long from the burst's first event")
	sample := fs.Duration("sample", 500*time.Millisecond, "RSS sampling interval")
	settle := fs.Duration("settle", 3*time.Second, "sampling goes on this long after the last delivery")
	bin := fs.String("hookd", "", "hookd binary (default: build ./cmd/hookd into the temp dir)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole command")
	fs.Parse(args)
	if *events < 1 || *clients < 1 || *failFor < 0 || *sample <= 0 {
		return errors.New("burst: want -events ≥ 1, -clients ≥ 1, -fail-for ≥ 0 and -sample > 0")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// The receiver here may hold observationalInFlight (1024) connections besides the clients'.
	dir, daemonBin, cleanup, err := prepare(ctx, "burst", *bin, uint64(*clients)+4096)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("burst: %s events from %d clients, receiver 503 (Retry-After) for %s then 200 — %s\n", commas(int64(*events)), *clients, *failFor, machine())

	recv := &receiver{seen: map[string]struct{}{}, arrived: make(chan struct{}, 1)}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rsrv := &http.Server{Handler: recv, ReadHeaderTimeout: 10 * time.Second}
	go rsrv.Serve(rl)
	defer rsrv.Close()

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	config := fmt.Sprintf("listen: %s\ndatabase: sqlite:%s\nlog: {level: warn}\nwebhooks: {allowPrivateNetworks: true}\n",
		addr, filepath.Join(dir, "hookd.db"))
	p, base, err := startDaemon(ctx, daemonBin, dir, config)
	if err != nil {
		return err
	}
	defer p.stop(15 * time.Second)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients, MaxIdleConns: *clients}, Timeout: time.Minute}
	hook := fmt.Sprintf(`{"hookName":"load","hookType":"post_tool_use","dispatchConfig":{"url":"http://%s/hook","timeoutMs":5000}}`, rl.Addr())
	if code, body, err := postJSON(ctx, hc, base+"/api/hooks", hook); err != nil || code != 201 {
		return fmt.Errorf("register hook: HTTP %d %s %v", code, body, err)
	}
	// One event first: the hook is matched and delivered, and the daemon's pools are warm.
	if err := dispatchOne(ctx, hc, base, -1); err != nil {
		return err
	}
	if err := recv.await(ctx, 1, p.done); err != nil {
		return fmt.Errorf("first event: %w\n%s", err, p.tail())
	}
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}
	idle, err := rssKB(p.pid())
	if err != nil {
		return err
	}
	metricsURL := base + "/metrics"
	want := int64(*events) + 1 // with the warm-up event

	// The sampler.
	type sampleRow struct {
		at                time.Duration
		rss               int64
		posted, delivered int64
		heap, goroutines  float64
	}
	var (
		samples  []sampleRow
		sampleMu sync.Mutex
		posted   atomic.Int64
	)
	start := time.Now()
	recv.failUntil.Store(start.Add(*failFor).UnixNano())
	cpu0, _ := cpuTime(p.pid())
	// What was queued when the receiver recovered.
	var recoveredPosted, recoveredDelivered atomic.Int64
	recovered := time.AfterFunc(*failFor, func() {
		recoveredPosted.Store(posted.Load())
		recoveredDelivered.Store(recv.delivered.Load() - 1)
	})
	defer recovered.Stop()
	stopSampling := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(*sample)
		defer t.Stop()
		for {
			rss, err := rssKB(p.pid())
			if err != nil {
				return
			}
			m, _ := promValues(metricsURL, "go_memstats_heap_inuse_bytes", "go_goroutines")
			sampleMu.Lock()
			samples = append(samples, sampleRow{at: time.Since(start), rss: rss, posted: posted.Load(),
				delivered: recv.delivered.Load() - 1, heap: m["go_memstats_heap_inuse_bytes"], goroutines: m["go_goroutines"]})
			sampleMu.Unlock()
			select {
			case <-t.C:
			case <-stopSampling:
				return
			}
		}
	}()

	// The burst.
	var next atomic.Int64
	var wg sync.WaitGroup
	lat := make([][]time.Duration, *clients)
	errs := make(chan error, *clients)
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(*events) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := dispatchOne(ctx, hc, base, i); err != nil {
					errs <- err
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
				posted.Add(1)
			}
		}()
	}
	wg.Wait()
	postEnd := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		close(stopSampling)
		return fmt.Errorf("dispatch: %w\n%s", err, p.tail())
	}
	fmt.Printf("burst: %s events accepted in %s; waiting for the outbox to drain …\n", commas(posted.Load()), postEnd.Round(time.Millisecond))

	if err := recv.await(ctx, want, p.done); err != nil {
		close(stopSampling)
		return fmt.Errorf("not drained: %d of %d delivered (%v)\n%s", recv.delivered.Load()-1, *events, err, p.tail())
	}
	drained := time.Duration(recv.lastDelivery.Load() - start.UnixNano())
	cpu1, _ := cpuTime(p.pid())
	sleepCtx(ctx, *settle)
	close(stopSampling)
	<-samplerDone

	// Figures.
	all := slices.Concat(lat...)
	slices.Sort(all)
	var during []int64
	var maxRSS int64
	var maxHeap, maxG float64
	for _, s := range samples {
		if s.at <= drained {
			during = append(during, s.rss)
		}
		maxRSS, maxHeap, maxG = max(maxRSS, s.rss), max(maxHeap, s.heap), max(maxG, s.goroutines)
	}
	slices.Sort(during)
	steady := int64(0)
	if len(during) > 0 {
		steady = during[len(during)/2]
	}
	end := samples[len(samples)-1].rss
	// Peak delivery rate over one second.
	var peak float64
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			if dt := samples[j].at - samples[i].at; dt >= time.Second {
				peak = max(peak, float64(samples[j].delivered-samples[i].delivered)/dt.Seconds())
				break
			}
		}
	}

	// A delivery can reach the receiver before its POST's answer reaches the client: queued is
	// floored at 0.
	fmt.Println("\ntimeline (t from the burst's first POST; queued = accepted − delivered):")
	step := max(1, len(samples)/40)
	rows := [][]string{}
	for i := 0; i < len(samples); i += step {
		s := samples[i]
		rows = append(rows, []string{fmt.Sprintf("%.1f s", s.at.Seconds()), commas(s.posted), commas(s.delivered),
			commas(max(0, s.posted-s.delivered)), mb(s.rss), mb(int64(s.heap / 1024)), fmt.Sprint(int(s.goroutines))})
	}
	table(os.Stdout, []string{"t", "accepted", "delivered", "queued", "RSS", "heap in use", "goroutines"}, rows)

	queuedAtRecovery := recoveredPosted.Load() - recoveredDelivered.Load()
	drainTime := drained - *failFor
	drainRate := "-"
	if drainTime > 0 {
		drainRate = fmt.Sprintf("%s/s (%s events in %s)", commas(int64(float64(int64(*events)-recoveredDelivered.Load())/drainTime.Seconds())),
			commas(int64(*events)-recoveredDelivered.Load()), drainTime.Round(time.Millisecond))
	}
	fmt.Println()
	table(os.Stdout, []string{"figure", "value"}, [][]string{
		{"events accepted (202)", commas(posted.Load())},
		{"POST rate", fmt.Sprintf("%s/s", commas(int64(float64(posted.Load())/postEnd.Seconds())))},
		{"POST latency p50 / p99", ms(percentile(all, 50)) + " / " + ms(percentile(all, 99))},
		{"receiver: 503 answered / duplicates", commas(recv.refused.Load()) + " / " + commas(recv.dups.Load())},
		{"last POST returned after", postEnd.Round(time.Millisecond).String()},
		{"queued when the receiver recovered", fmt.Sprintf("%s (at %s)", commas(queuedAtRecovery), *failFor)},
		{"all delivered after", drained.Round(time.Millisecond).String()},
		{"delivery rate, whole burst", fmt.Sprintf("%s/s", commas(int64(float64(*events)/drained.Seconds())))},
		{"drain rate, receiver recovered to all delivered", drainRate},
		{"peak delivery rate (1 s)", fmt.Sprintf("%s/s", commas(int64(peak)))},
		{"daemon CPU, burst to drained", fmt.Sprintf("%.0f%% of one core", 100*(cpu1-cpu0).Seconds()/drained.Seconds())},
		{"RSS idle before", mb(idle)},
		{"RSS steady (median, burst to drained)", mb(steady)},
		{"RSS max", mb(maxRSS)},
		{"RSS max − steady", mb(maxRSS - steady)},
		{"RSS max − idle before", mb(maxRSS - idle)},
		{"RSS after drain", mb(end)},
		{"heap in use max / goroutines max", fmt.Sprintf("%s / %d", mb(int64(maxHeap/1024)), int(maxG))},
	})
	return nil
}

// receiver answers webhook deliveries: 503 with Retry-After until failUntil, then 200, counting
// distinct eventIds.
type receiver struct {
	failUntil    atomic.Int64 // unix ns
	refused      atomic.Int64
	delivered    atomic.Int64 // distinct eventIds answered 200
	dups         atomic.Int64
	lastDelivery atomic.Int64  // unix ns
	arrived      chan struct{} // capacity 1: a new eventId was answered 200 since the last look
	mu           sync.Mutex
	seen         map[string]struct{}
}

var errDaemonExited = errors.New("the daemon exited")

// await returns once n distinct events were delivered, the context ends or the daemon exits.
func (rc *receiver) await(ctx context.Context, n int64, exited <-chan struct{}) error {
	for rc.delivered.Load() < n {
		select {
		case <-rc.arrived:
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errDaemonExited
		}
	}
	return nil
}

var eventIDKey = []byte(`"eventId":"`)

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	now := time.Now()
	if until := rc.failUntil.Load(); now.UnixNano() < until {
		rc.refused.Add(1)
		secs := (time.Duration(until-now.UnixNano()) + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.Itoa(int(secs)))
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var id string
	if i := bytes.Index(body, eventIDKey); i >= 0 {
		rest := body[i+len(eventIDKey):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			id = string(rest[:j])
		}
	}
	rc.mu.Lock()
	_, dup := rc.seen[id]
	rc.seen[id] = struct{}{}
	rc.mu.Unlock()
	if dup {
		rc.dups.Add(1)
	} else {
		rc.delivered.Add(1)
		rc.lastDelivery.Store(now.UnixNano())
		select {
		case rc.arrived <- struct{}{}:
		default:
		}
	}
	w.WriteHeader(http.StatusOK)
}

// dispatchOne posts one post_tool_use event and checks it was queued for one hook.
func dispatchOne(ctx context.Context, hc *http.Client, base string, i int64) error {
	body := fmt.Sprintf(`{"hookType":"post_tool_use","agentId":1,"context":{"toolName":"workspace_write_file","toolCallId":"call_%d",`+
		`"arguments":{"path":"notes/%d.md","content":"load"},"output":"wrote 4 bytes","succeeded":true,"errorMessage":null,"durationMs":3}}`, i, i)
	code, resp, err := postJSON(ctx, hc, base+"/api/hooks/dispatch", body)
	if err != nil {
		return err
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("POST /api/hooks/dispatch: HTTP %d: %s", code, resp)
	}
	var out struct {
		Data struct {
			EventIDs []string `json:"eventIds"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp, &out); err != nil || len(out.Data.EventIDs) != 1 {
		return fmt.Errorf("POST /api/hooks/dispatch: want one eventId, got %s", resp)
	}
	return nil
}

func postJSON(ctx context.Context, hc *http.Client, u, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
