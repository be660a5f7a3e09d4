package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadScript makes every run call workspace_write_file; with agent.toolDefault ask the run pauses
// at the permission ask (MESSAGE_SUSPENDED) and stays suspended until agent.askTimeout.
const loadScript = `{"scripts": [{"match": "*", "steps": [
  {"toolCalls": [{"name": "workspace_write_file", "arguments": {"path": "load.txt", "content": "x"}}],
   "usage": {"inputTokens": 10, "outputTokens": 5}},
  {"text": "done", "usage": {"inputTokens": 10, "outputTokens": 1}}]}]}`

func runStreams(ctx context.Context, args []string) error {
	fs := newFlags("streams", `Starts hookd (SQLite, sse.heartbeat -heartbeat, agent.toolDefault ask), suspends one run at a
permission ask, then holds -n idle streams GET /api/agent/run/stream?requestId=…&lastEventId=<last>
until every stream saw a heartbeat, and reads the daemon's VmRSS before and after. The same is done
against a bare net/http SSE server (a child process of this tool) as the baseline. CPU is the
process's user+system time over the -hold window of idleness.`)
	n := fs.Int("n", 1000, "concurrent streams (the issue's figure: 10000)")
	heartbeat := fs.Duration("heartbeat", 5*time.Second, "sse.heartbeat of both servers")
	hold := fs.Duration("hold", 20*time.Second, "idle window, after every stream saw a heartbeat, over which CPU and RSS are read")
	dialers := fs.Int("dialers", 64, "connections opened at once while ramping up")
	bin := fs.String("hookd", "", "hookd binary (default: build ./cmd/hookd into the temp dir)")
	baseline := fs.Bool("baseline", true, "measure the bare Go SSE server too")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole command")
	fs.Parse(args)
	if *n < 1 || *hold < time.Second || *heartbeat < time.Second || *dialers < 1 {
		return errors.New("streams: want -n ≥ 1, -hold ≥ 1s, -heartbeat ≥ 1s (hookd's minimum) and -dialers ≥ 1")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// Each process holds n sockets (the client side here, the server side in the child).
	dir, daemonBin, cleanup, err := prepare(ctx, "streams", *bin, uint64(*n)+4096)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("streams: %d idle SSE streams, heartbeat %s, idle window %s — %s\n", *n, *heartbeat, *hold, machine())

	var results []streamResult
	if *baseline {
		r, err := baselineStreams(ctx, dir, *n, *heartbeat, *hold, *dialers)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		results = append(results, r)
	}
	r, err := daemonStreams(ctx, daemonBin, dir, *n, *heartbeat, *hold, *dialers)
	if err != nil {
		return fmt.Errorf("hookd: %w", err)
	}
	results = append(results, r)

	fmt.Println()
	rows := [][]string{}
	for _, r := range results {
		rows = append(rows, []string{r.name, commas(int64(r.n)), mb(r.before), mb(r.after), fmt.Sprintf("%.1f KB", r.perStream()),
			fmt.Sprintf("%.0f–%.0f KB", r.perStreamAt(r.rssMin), r.perStreamAt(r.rssMax)),
			fmt.Sprintf("%.1f%%", r.cpuPct()), fmt.Sprintf("%.0f µs", r.cpuPerStream()), r.ramp.Round(10 * time.Millisecond).String(),
			mb(r.afterClose)})
	}
	table(os.Stdout, []string{"server", "streams", "RSS before", "RSS with streams", "per stream", "over the window", "CPU idle (of 1 core)",
		"CPU/stream/s", "ramp-up", "RSS after close"}, rows)
	if len(results) == 2 && results[0].perStream() > 0 {
		fmt.Printf("\nhookd ÷ bare per stream: %.2f×\n", results[1].perStream()/results[0].perStream())
	}
	d := results[len(results)-1]
	if d.metricsBefore != nil && d.metricsAfter != nil {
		per := func(k string) string {
			return fmt.Sprintf("%.1f KB", (d.metricsAfter[k]-d.metricsBefore[k])/float64(d.n)/1024)
		}
		fmt.Printf("hookd per stream, from its /metrics: heap in use %s, stacks %s, goroutines %.1f\n",
			per("go_memstats_heap_inuse_bytes"), per("go_memstats_stack_inuse_bytes"),
			(d.metricsAfter["go_goroutines"]-d.metricsBefore["go_goroutines"])/float64(d.n))
	}
	return nil
}

// streamResult is one server's figures.
type streamResult struct {
	name                        string
	n                           int
	before, after, afterClose   int64 // VmRSS kB
	rssMin, rssMax              int64 // over the idle window
	cpu                         time.Duration
	window                      time.Duration
	ramp                        time.Duration
	metricsBefore, metricsAfter map[string]float64
}

func (r streamResult) perStream() float64 { return r.perStreamAt(r.after) }

// perStreamAt is (rss − before) / n in KB.
func (r streamResult) perStreamAt(rss int64) float64 { return float64(rss-r.before) / float64(r.n) }
func (r streamResult) cpuPct() float64               { return 100 * r.cpu.Seconds() / r.window.Seconds() }

// cpuPerStream is CPU µs per stream per second of idleness.
func (r streamResult) cpuPerStream() float64 {
	return r.cpu.Seconds() * 1e6 / r.window.Seconds() / float64(r.n)
}

// streamTarget is what holdStreams connects to.
type streamTarget struct {
	name    string
	pid     int
	addr    string // host:port
	path    string // request target, with its query
	metrics func() map[string]float64
	// open returns the server's count of open streams, to see them all closed at the end.
	open func() (int, error)
}

func baselineStreams(ctx context.Context, dir string, n int, hb, hold time.Duration, dialers int) (streamResult, error) {
	self, err := os.Executable()
	if err != nil {
		return streamResult{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return streamResult{}, err
	}
	p, err := startProc(dir, "baseline", self, baselineCommand, "-listen", addr, "-heartbeat", hb.String())
	if err != nil {
		return streamResult{}, err
	}
	defer p.stop(5 * time.Second)
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/open"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 200 || !p.alive() {
			return streamResult{}, fmt.Errorf("baseline server did not start\n%s", p.tail())
		}
		time.Sleep(25 * time.Millisecond)
	}
	return holdStreams(ctx, streamTarget{name: "bare net/http SSE", pid: p.pid(), addr: addr, path: "/stream",
		open: func() (int, error) { return getInt(base + "/open") }}, n, hb, hold, dialers)
}

func daemonStreams(ctx context.Context, bin, dir string, n int, hb, hold time.Duration, dialers int) (streamResult, error) {
	addr, err := freeAddr()
	if err != nil {
		return streamResult{}, err
	}
	script := filepath.Join(dir, "load-script.json")
	if err := os.WriteFile(script, []byte(loadScript), 0o600); err != nil {
		return streamResult{}, err
	}
	config := fmt.Sprintf(`listen: %s
database: sqlite:%s
log: {level: warn}
sse: {heartbeat: %s}
model: {provider: scripted, script: %s}
agent: {toolDefault: ask, askTimeout: 24h}
`, addr, filepath.Join(dir, "hookd.db"), hb, script)
	p, base, err := startDaemon(ctx, bin, dir, config)
	if err != nil {
		return streamResult{}, err
	}
	defer p.stop(15 * time.Second)

	requestID, last, err := suspendedRun(ctx, base)
	if err != nil {
		return streamResult{}, fmt.Errorf("%w\n%s", err, p.tail())
	}
	fmt.Printf("hookd: run %s suspended at a permission ask, last event id %s\n", requestID, last)
	const gauge = `hookd_sse_connections{dialect="platform"}`
	metrics := func() map[string]float64 {
		m, _ := promValues(base+"/metrics", "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", gauge)
		return m
	}
	q := url.Values{"requestId": {requestID}, "lastEventId": {last}}
	r, err := holdStreams(ctx, streamTarget{name: "hookd", pid: p.pid(), addr: strings.TrimPrefix(base, "http://"),
		path: "/api/agent/run/stream?" + q.Encode(), metrics: metrics,
		open: func() (int, error) {
			m, err := promValues(base+"/metrics", gauge)
			return int(m[gauge]), err
		}}, n, hb, hold, dialers)
	if err != nil && p.alive() {
		return r, err
	}
	if err != nil {
		return r, fmt.Errorf("%w\n%s", err, p.tail())
	}
	return r, nil
}

// suspendedRun starts a run that pauses at a permission ask and returns its requestId and the SSE
// id of its last frame (MESSAGE_SUSPENDED).
func suspendedRun(ctx context.Context, base string) (requestID, last string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/agent/run/stream", strings.NewReader(`{"userInput":"write a file"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", "", fmt.Errorf("start run: HTTP %d: %s", resp.StatusCode, b)
	}
	requestID = resp.Header.Get("X-Request-Id")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var f struct{ EventType string }
		json.Unmarshal([]byte(data), &f)
		switch f.EventType {
		case "MESSAGE_SUSPENDED":
			return requestID, id, nil
		case "MESSAGE_COMPLETED", "MESSAGE_FAILED":
			return "", "", fmt.Errorf("the run ended (%s) instead of pausing at an ask", f.EventType)
		}
	}
	return "", "", fmt.Errorf("the stream ended before MESSAGE_SUSPENDED: %v", sc.Err())
}

// client is one open stream.
type client struct {
	conn   net.Conn
	beats  atomic.Int32
	frames atomic.Int32 // frames other than heartbeats (none expected)
}

// holdStreams measures one server: RSS before, n streams opened, every stream's first heartbeat,
// an idle window (CPU, RSS), then the streams closed.
func holdStreams(ctx context.Context, t streamTarget, n int, hb, hold time.Duration, dialers int) (streamResult, error) {
	res := streamResult{name: t.name, n: n}
	time.Sleep(2 * time.Second) // let start-up work settle
	var err error
	if res.before, err = rssKB(t.pid); err != nil {
		return res, err
	}
	if t.metrics != nil {
		res.metricsBefore = t.metrics()
	}

	clients := make([]*client, n)
	var mu sync.Mutex
	var firstErr error
	var failed atomic.Int32
	var wg sync.WaitGroup
	next := atomic.Int64{}
	start := time.Now()
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := openStream(ctx, t.addr, t.path)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				clients[i] = c
			}
		}()
	}
	wg.Wait()
	res.ramp = time.Since(start)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.conn.Close()
			}
		}
	}()
	if f := failed.Load(); f > 0 {
		return res, fmt.Errorf("%d of %d streams failed to open; first: %v", f, n, firstErr)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	fmt.Printf("%s (pid %d): %d streams open in %s; waiting for a heartbeat on each …\n", t.name, t.pid, n, res.ramp.Round(time.Millisecond))

	// Every stream's heartbeat ticker started when it was opened.
	deadline := time.Now().Add(3*hb + 10*time.Second)
	for {
		waiting := 0
		for _, c := range clients {
			if c.beats.Load() == 0 {
				waiting++
			}
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("%d of %d streams saw no heartbeat within %s of the ramp-up", waiting, n, 3*hb+10*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// One more period, so that every stream's ticker has fired at least once more, then the window.
	if err := sleepCtx(ctx, hb); err != nil {
		return res, err
	}
	cpu0, _ := cpuTime(t.pid)
	w0 := time.Now()
	res.rssMin = 1 << 62
	for time.Since(w0) < hold {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return res, err
		}
		rss, err := rssKB(t.pid)
		if err != nil {
			return res, err
		}
		res.rssMin, res.rssMax, res.after = min(res.rssMin, rss), max(res.rssMax, rss), rss
	}
	cpu1, _ := cpuTime(t.pid)
	res.cpu, res.window = cpu1-cpu0, time.Since(w0)
	if t.metrics != nil {
		res.metricsAfter = t.metrics()
	}
	frames, beats := 0, 0
	for _, c := range clients {
		frames += int(c.frames.Load())
		beats += int(c.beats.Load())
	}
	fmt.Printf("%s: idle window %s: RSS %s (min %s, max %s), CPU %s = %.1f%% of one core; %d heartbeats received in all, %d other frames\n",
		t.name, res.window.Round(time.Millisecond), mb(res.after), mb(res.rssMin), mb(res.rssMax), res.cpu, res.cpuPct(), beats, frames)

	for _, c := range clients {
		c.conn.Close()
	}
	for i := 0; ; i++ {
		open, err := t.open()
		if err == nil && open == 0 {
			break
		}
		if i > 100 {
			fmt.Printf("%s: %d streams still open 10 s after the clients left\n", t.name, open)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	res.afterClose, _ = rssKB(t.pid)
	return res, nil
}

// openStream sends the GET by hand (one connection per stream, no client pooling) and returns once
// the 200 header arrived; a goroutine then reads the stream and counts heartbeats.
func openStream(ctx context.Context, addr, path string) (*client, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, addr); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 2048)
	status, err := br.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200") {
		conn.Close()
		return nil, fmt.Errorf("GET %s: %s", path, strings.TrimSpace(status))
	}
	for { // the header ends with an empty line
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, err
		}
		if line == "\r\n" {
			break
		}
	}
	conn.SetDeadline(time.Time{})
	c := &client{conn: conn}
	go func() {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
			switch {
			case bytes.HasPrefix(line, []byte(": heartbeat")), bytes.Contains(line, []byte(`"HEARTBEAT"`)):
				c.beats.Add(1)
			case bytes.HasPrefix(line, []byte("data:")):
				c.frames.Add(1)
			}
		}
	}()
	return c, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func getInt(u string) (int, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v int
	_, err = fmt.Fscan(resp.Body, &v)
	return v, err
}
