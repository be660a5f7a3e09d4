// Command hookd-load puts hookd under load on this machine and prints what it measured as small
// tables. Each sub-command starts what it needs (a daemon on a throwaway SQLite file, a local
// receiver, a bare SSE server as the baseline), talks to it over loopback only, is bounded in time
// by -timeout and removes its temp directory at the end.
//
//	hookd-load streams [-n 1000] [-heartbeat 5s] [-hold 20s]   idle SSE streams: daemon RSS per stream vs a bare Go SSE server
//	hookd-load burst   [-events 10000] [-clients 256]          observational burst: daemon RSS while the outbox queues and drains
//	hookd-load backlog [-sizes 10000,100000] [-claims 200]     ClaimDeliveries latency against the pending backlog (SQLite; PostgreSQL too with HOOKD_TEST_POSTGRES_DSN)
//
// The defaults are modest (make load); docs/benchmarks.md ("Load") gives the full sizes and the
// figures. streams and burst build cmd/hookd into the temp directory unless -hookd names a binary.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage: hookd-load <streams|burst|backlog> [flags]

  streams   hold N idle SSE streams on a suspended run; daemon RSS per stream against a bare Go SSE server
  burst     POST a burst of observational events; sample the daemon's RSS while the outbox queues and drains
  backlog   time ClaimDeliveries(n) at growing pending backlogs (SQLite; PostgreSQL when HOOKD_TEST_POSTGRES_DSN is set)

hookd-load <command> -h lists a command's flags.
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	// SIGPIPE too: output piped into `head` that went away must not skip the clean-up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "streams":
		err = runStreams(ctx, args)
	case "burst":
		err = runBurst(ctx, args)
	case "backlog":
		err = runBacklog(ctx, args)
	case baselineCommand: // the bare SSE server, started by streams as a child process
		err = runBaselineServer(ctx, args)
	case "-h", "--help", "help":
		usage()
		return
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookd-load:", err)
		stop()
		os.Exit(1)
	}
}

// raiseNofile lifts RLIMIT_NOFILE to at least want (the hard limit too when allowed: root). The
// processes this tool starts inherit the limit. It returns the soft limit in force.
func raiseNofile(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	next := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		// Not allowed to raise the hard limit: take what it allows.
		next = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
			return lim.Cur, err
		}
	}
	if next.Cur < want {
		return next.Cur, fmt.Errorf("RLIMIT_NOFILE is %d, %d needed: raise the hard limit (ulimit -Hn) or run as root", next.Cur, want)
	}
	return next.Cur, nil
}

// rssKB reads VmRSS (kB) of a process from /proc.
func rssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cpuTime reads the user+system CPU time a process used so far (/proc/PID/stat, in clock ticks of
// 1/100 s, USER_HZ on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it follow its closing ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the hookd module: pass -hookd PATH")
		}
		dir = parent
	}
}

// prepare readies a sub-command that runs the daemon: it raises RLIMIT_NOFILE to nofile (the
// children inherit it), makes a temp directory and finds the hookd binary (daemonBinary). cleanup
// removes the directory.
func prepare(ctx context.Context, name, named string, nofile uint64) (dir, bin string, cleanup func(), err error) {
	if _, err := raiseNofile(nofile); err != nil {
		return "", "", nil, err
	}
	if dir, err = os.MkdirTemp("", "hookd-load-"+name); err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if bin, err = daemonBinary(ctx, named, dir); err != nil {
		cleanup()
		return "", "", nil, err
	}
	return dir, bin, cleanup, nil
}

// daemonBinary returns the hookd binary to run: the one named, or cmd/hookd built into dir.
func daemonBinary(ctx context.Context, named, dir string) (string, error) {
	if named != "" {
		if _, err := os.Stat(named); err != nil {
			return "", fmt.Errorf("-hookd: %w (make build writes bin/hookd)", err)
		}
		return filepath.Abs(named)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hookd")
	fmt.Println("building cmd/hookd …")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/hookd")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/hookd: %w", err)
	}
	return out, nil
}

// proc is a child process of this tool with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// startProc starts a child that dies with this tool, its output going to dir/<name>.log.
func startProc(dir, name string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Pdeathsig follows the thread that started the child: keep that thread alive.
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// stop asks the process to end (SIGTERM) and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// tail returns the last lines of the process's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return p.name + " log:\n  " + strings.Join(lines, "\n  ")
}

// startDaemon writes config into dir and starts `hookd serve` on it; it returns once /readyz
// answers 200.
func startDaemon(ctx context.Context, bin, dir, config string) (*proc, string, error) {
	cfg := filepath.Join(dir, "hookd.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, "", err
	}
	var listen string
	for _, line := range strings.Split(config, "\n") {
		if v, ok := strings.CutPrefix(line, "listen: "); ok {
			listen = strings.TrimSpace(v)
		}
	}
	p, err := startProc(dir, "hookd", bin, "serve", "--config", cfg)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, base, nil
			}
		}
		if !p.alive() || time.Now().After(deadline) || ctx.Err() != nil {
			p.stop(5 * time.Second)
			return nil, "", fmt.Errorf("hookd did not become ready\n%s", p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promValues scrapes a Prometheus text endpoint for the named series (exact names with their
// labels as printed, e.g. `hookd_sse_connections{dialect="platform"}`).
func promValues(url string, names ...string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !slices.Contains(names, line[:i]) {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// table prints rows under a header, aligned.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}

// percentile returns the p-th percentile (0..100, nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func mb(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

func ms(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	}
}

// commas formats an integer with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// newFlags makes a sub-command's flag set with a usage line.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hookd-load %s [flags]\n\n%s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// machine prints what the figures depend on.
func machine() string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s %s/%s, load average %s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}
