package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// DefaultShellTimeout is ShellConfig.Timeout when it is zero.
	DefaultShellTimeout = 2 * time.Minute
	// DefaultShellMaxOutput is ShellConfig.MaxOutput when it is zero.
	DefaultShellMaxOutput = 64 << 10

	shellPath = "/bin/sh"
	shellPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// maxProgressLine is the longest piece of a line passed to Env.Progress at once.
	maxProgressLine = 4 << 10
	// pipeGrace is how long the output is read on after the command's process group was killed,
	// for a process that left the group (setsid) and still holds the output open.
	pipeGrace = 2 * time.Second
)

// ShellConfig configures shell_execute.
type ShellConfig struct {
	// Timeout is the default and the longest run time of one command (a call's timeoutSeconds
	// may only shorten it); 0 means DefaultShellTimeout.
	Timeout time.Duration
	// MaxOutput caps the output (stdout and stderr together) a call returns, in bytes; 0 means
	// DefaultShellMaxOutput. Past it the beginning and the end are kept and the middle is
	// replaced by a note.
	MaxOutput int
	// Sandbox, when set, runs every command where it cannot see the paths the daemon keeps from
	// it (sandbox_linux.go); nil runs it with the daemon's view of the file system.
	Sandbox *Sandbox
}

// Sandbox says how a command is kept from what the daemon keeps: its data, the other sessions'
// workspaces, its config and keys.
type Sandbox struct {
	// Exe is the daemon's binary, which runs SandboxMain when its first argument is SandboxCommand.
	Exe string
	// Hide are the absolute paths a command must not see: directories (covered, the session's
	// own workspace mounted back inside) and files.
	Hide []string
	// HostNetwork leaves a command the daemon's network: its API on loopback and every address
	// the daemon reaches. Otherwise a command has a network of its own, with only a loopback.
	HostNetwork bool
}

// Shell is the shell_execute tool.
type Shell struct {
	timeout   time.Duration
	maxOutput int
	sandbox   *Sandbox
}

// NewShell returns the shell_execute tool.
func NewShell(cfg ShellConfig) *Shell {
	s := &Shell{timeout: cfg.Timeout, maxOutput: cfg.MaxOutput, sandbox: cfg.Sandbox}
	if s.timeout <= 0 {
		s.timeout = DefaultShellTimeout
	}
	if s.maxOutput <= 0 {
		s.maxOutput = DefaultShellMaxOutput
	}
	return s
}

// Spec implements Tool.
func (s *Shell) Spec() Spec {
	desc := "Run a shell command (/bin/sh -c) in the workspace directory and return its combined stdout and stderr and its exit code; processes it leaves in the background are killed when it ends."
	if s.sandbox != nil {
		desc += " Its /tmp is its own, empty at its start and gone at its end: keep what a later command needs in the workspace."
	}
	return Spec{
		Name:        NameShell,
		Description: desc,
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command line."},
    "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0, "description": "Kill the command after this many seconds (default and maximum: ` + strconv.FormatFloat(s.timeout.Seconds(), 'f', -1, 64) + `)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
		Subject: "command",
	}
}

// Run implements Tool. The command runs as /bin/sh -c in env.Workspace, in a session and process
// group of its own, with only PATH, HOME (the workspace) and LANG set and no standard input. On
// timeout or cancellation of ctx the whole process group is killed; when the shell exits, what
// is left of its group is killed too. Output lines are passed to env.Progress (without their
// newline, from another goroutine, one call at a time, all before Run returns) as they arrive.
func (s *Shell) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		Command        string  `json:"command"`
		TimeoutSeconds float64 `json:"timeoutSeconds"`
	}
	if err := decodeArgs(NameShell, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ready(ctx, env); err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return errorResult("command is required"), nil
	}
	if a.TimeoutSeconds < 0 {
		return errorResult("timeoutSeconds must be positive"), nil
	}
	timeout := s.timeout
	var notes []string
	if a.TimeoutSeconds > 0 {
		if t := time.Duration(a.TimeoutSeconds * float64(time.Second)); t < timeout {
			timeout = max(t, time.Millisecond)
		} else if t > timeout {
			notes = append(notes, fmt.Sprintf("[timeoutSeconds=%g is above the limit; the timeout is %s]", a.TimeoutSeconds, timeout))
		}
	}

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("shell_execute: %w", err)
	}
	cmd := exec.CommandContext(runCtx, shellPath, "-c", a.Command)
	cmd.Dir = env.Workspace
	cmd.Env = []string{"PATH=" + shellPATH, "HOME=" + env.Workspace, "LANG=C.UTF-8"}
	cmd.Stdout, cmd.Stderr = w, w // one pipe: stdout and stderr interleaved as written
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.sandbox != nil {
		if err := s.sandbox.prepare(cmd, env.Workspace, a.Command); err != nil {
			r.Close()
			w.Close()
			return errorResult("cannot run the command: %v", err), nil
		}
	}
	var killed atomic.Bool // by Cancel: the timeout or ctx
	cmd.Cancel = func() error {
		killed.Store(true)
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return errorResult("cannot run the command: %v", unwrapPathError(err)), nil
	}
	w.Close() // the children hold the write end now

	out := newOutputCapture(s.maxOutput, env.Progress)
	readDone := make(chan error, 1)
	go func() { readDone <- out.readFrom(r) }()

	waitErr := cmd.Wait()
	// Whatever the shell left running in its group (background jobs) goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = r.SetReadDeadline(time.Now().Add(pipeGrace))
	readErr := <-readDone
	r.Close()

	ps := cmd.ProcessState
	if ps == nil {
		return Result{}, fmt.Errorf("shell_execute: %w", waitErr)
	}
	code := ps.ExitCode()
	ws, _ := ps.Sys().(syscall.WaitStatus)
	timedOut := killed.Load() && ctx.Err() == nil

	var b strings.Builder
	b.WriteString(out.String())
	if b.Len() == 0 {
		b.WriteString("(no output)")
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	if errors.Is(readErr, os.ErrDeadlineExceeded) {
		notes = append(notes, "[a process that left the command's process group still holds the output open; stopped reading]")
	}
	switch {
	case timedOut:
		notes = append(notes, fmt.Sprintf("[timed out after %s; the command and its process group were killed]", timeout))
	case ctx.Err() != nil:
		notes = append(notes, "[canceled; the command and its process group were killed]")
	}
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
		if !timedOut && ctx.Err() == nil {
			notes = append(notes, fmt.Sprintf("[terminated by signal %d (%s)]", int(ws.Signal()), ws.Signal()))
		}
	}
	for _, n := range notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "exit_code=%d", code)
	res := Result{Text: b.String(), IsError: code != 0 || timedOut}
	if err := ctx.Err(); err != nil {
		res.IsError = true
		return res, err
	}
	return res, nil
}

// outputCapture keeps the beginning and the end of a command's output, at most max bytes in
// all, and passes complete lines to progress.
type outputCapture struct {
	max, headCap, tailCap int
	head, tail            []byte
	total                 int64

	progress func(string)
	line     []byte // the start of a line not yet passed to progress
	streamed int
	muted    bool // the output passed max; progress gets no more
}

func newOutputCapture(limit int, progress func(string)) *outputCapture {
	head := limit / 2
	return &outputCapture{max: limit, headCap: head, tailCap: limit - head, progress: progress}
}

// readFrom reads r to its end (or an error, such as a deadline) and flushes progress.
func (c *outputCapture) readFrom(r io.Reader) error {
	buf := make([]byte, 32<<10)
	var err error
	for {
		var n int
		n, err = r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
		}
		if err != nil {
			break
		}
	}
	if len(c.line) > 0 {
		c.emit(c.line)
		c.line = c.line[:0]
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func (c *outputCapture) write(p []byte) {
	c.total += int64(len(p))
	rest := p
	if room := c.headCap - len(c.head); room > 0 {
		n := min(room, len(rest))
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		c.tail = append(c.tail, rest...)
		if len(c.tail) > 2*c.tailCap { // keep the last tailCap bytes, amortized
			n := copy(c.tail, c.tail[len(c.tail)-c.tailCap:])
			c.tail = c.tail[:n]
		}
	}
	c.stream(p)
}

// stream passes the complete lines of p (with what came before) to progress.
func (c *outputCapture) stream(p []byte) {
	if c.progress == nil || c.muted {
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.line = append(c.line, p...)
			for len(c.line) >= maxProgressLine && !c.muted {
				part := dropPartialRune(c.line[:maxProgressLine])
				if len(part) == 0 {
					part = c.line[:maxProgressLine]
				}
				c.emit(part)
				c.line = c.line[:copy(c.line, c.line[len(part):])]
			}
			return
		}
		c.line = append(c.line, p[:i]...)
		c.emit(c.line)
		c.line = c.line[:0]
		p = p[i+1:]
	}
}

func (c *outputCapture) emit(line []byte) {
	if c.muted {
		return
	}
	if c.streamed+len(line) > c.max {
		c.muted = true
		c.progress(fmt.Sprintf("[output exceeds %d bytes; the rest is not streamed]", c.max))
		return
	}
	c.streamed += len(line) + 1
	c.progress(strings.TrimSuffix(string(line), "\r"))
}

// String returns the captured output: all of it if it fit, else the beginning, a note and the
// end.
func (c *outputCapture) String() string {
	if c.total <= int64(c.max) {
		return string(c.head) + string(c.tail)
	}
	head := dropPartialRune(c.head)
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	tail = utf8Suffix(tail)
	omitted := c.total - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n[output truncated: %d bytes in all, %d bytes in the middle omitted (limit %d)]\n%s",
		head, c.total, omitted, c.max, tail)
}
