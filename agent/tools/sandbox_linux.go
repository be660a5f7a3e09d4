package tools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// The shell's sandbox: the command runs as the daemon's own user, so what keeps one user's shell
// from another user's workspace, the database and the master key is a view of the file system
// without them. The daemon's binary is run again (SandboxCommand) in new user, mount, PID, IPC and
// (unless Sandbox.HostNetwork) network namespaces; there it brings its own loopback up, covers
// /tmp, /var/tmp and /dev/shm with empty file systems of the command's own, every path of
// Sandbox.Hide (a directory with an empty read-only tmpfs, a file with /dev/null), mounts the
// session's workspace back where it was, mounts a /proc of its own namespace (no other
// process, so no daemon's environment, to read), gives up every capability the user namespace gave
// it, and executes /bin/sh. A mount it made cannot be undone
// without a capability, and one made in a namespace the shell creates itself is locked.

// SandboxCommand is the first argument with which the daemon's binary runs as a command's
// sandbox: main hands such a run to SandboxMain before anything else.
const SandboxCommand = "__shell-sandbox"

// sandboxExitSetup is the exit status of a sandbox that could not be set up: the command did not run.
const sandboxExitSetup = 125

// prepare makes cmd, which runs sh -c line, run it in workspace inside the sandbox instead.
func (s *Sandbox) prepare(cmd *exec.Cmd, workspace, line string) error {
	args := []string{s.Exe, SandboxCommand, workspace}
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	if !s.HostNetwork {
		// Not the daemon's network: its API on loopback, open without a token in development,
		// and the internal addresses the egress guard keeps other tools from.
		flags |= syscall.CLONE_NEWNET
		args = append(args, ownNetwork)
	}
	for _, h := range s.Hide {
		args = append(args, "--hide", h)
	}
	cmd.Path, cmd.Args = s.Exe, append(args, "--", line)
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Cloneflags: flags,
		// Root inside, for the mounts; the sandbox gives its capabilities up before sh starts.
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	}
	return nil
}

// Check runs an empty command in the sandbox, from a workspace of its own under a hidden
// directory: nil, or why no command could run there. Making the namespaces is not enough to know:
// a container may allow them and still refuse the mounts (a /proc with masked paths refuses
// another /proc).
func (s *Sandbox) Check() error {
	dir, err := os.MkdirTemp("", "hookd-sandbox-check")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(shellPath)
	cmd.Dir = ws
	check := &Sandbox{Exe: s.Exe, Hide: append(slices.Clip(s.Hide), dir), HostNetwork: s.HostNetwork}
	if err := check.prepare(cmd, ws, ":"); err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// SandboxMain is the sandbox's side of a run of SandboxCommand: args are what follows it. It
// never returns: it executes the shell, or exits with status 125 saying why it could not.
func SandboxMain(args []string) {
	if err := sandbox(args); err != nil {
		fmt.Fprintf(os.Stderr, "hookd shell sandbox: %v; the command did not run\n", err)
		os.Exit(sandboxExitSetup)
	}
}

// ownNetwork is the argument that tells the sandbox it is in a network namespace of its own.
const ownNetwork = "--own-network"

func sandbox(args []string) error {
	const usage = "usage: " + SandboxCommand + " WORKSPACE [" + ownNetwork + "] [--hide PATH]... -- COMMAND"
	if len(args) < 3 {
		return errors.New(usage)
	}
	workspace, args := args[0], args[1:]
	own := args[0] == ownNetwork
	if own {
		args = args[1:]
	}
	var hide []string
	for len(args) >= 2 && args[0] == "--hide" {
		hide, args = append(hide, args[1]), args[2:]
	}
	if len(args) != 2 || args[0] != "--" {
		return errors.New(usage)
	}
	line := args[1]
	if !filepath.IsAbs(workspace) {
		return fmt.Errorf("the workspace %q is not an absolute path", workspace)
	}
	// The bounding set and no_new_privs are the thread's: the one that executes the shell.
	runtime.LockOSThread()
	if own {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing the loopback up: %w", err)
		}
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	ws, err := os.Open(workspace)
	if err != nil {
		return fmt.Errorf("opening the workspace: %w", err)
	}
	wsInfo, err := ws.Stat()
	if err != nil {
		return fmt.Errorf("opening the workspace: %w", err)
	}
	// The places every process may write are the command's own, empty, so that no session's
	// command reads or plants what another's left there. First: the workspace or a hidden path may
	// be under one of them.
	for _, dir := range privateDirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue // not on this machine: nothing shared there either
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, privateOptions); err != nil {
			return fmt.Errorf("making %s the command's own: %w", dir, err)
		}
	}
	// Each tmpfs is held open to be made read-only at the end, through its root: by then another
	// may cover it, and the workspace may have been placed in it.
	var tmpfs []*os.File
	for _, h := range hide {
		if !filepath.IsAbs(h) {
			return fmt.Errorf("hiding %q: not an absolute path", h)
		}
		st, err := os.Stat(h)
		switch {
		case errors.Is(err, os.ErrNotExist): // nothing to see there (or already covered)
			continue
		case err != nil:
			return fmt.Errorf("hiding %s: %w", h, err)
		case st.IsDir():
			err = syscall.Mount("tmpfs", h, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpfsOptions)
			if err == nil {
				var root *os.File
				root, err = os.Open(h)
				tmpfs = append(tmpfs, root)
			}
		default:
			err = syscall.Mount("/dev/null", h, "", syscall.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hiding %s: %w", h, err)
		}
	}
	// Compared as files, not as paths: a hidden path may lead to the workspace through a
	// symbolic link.
	if st, err := os.Stat(workspace); err != nil || !os.SameFile(st, wsInfo) { // covered: mounted back where it was
		if err := os.MkdirAll(workspace, 0o755); err != nil {
			return fmt.Errorf("placing the workspace: %w", err)
		}
		if err := syscall.Mount(fdPath(ws), workspace, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("placing the workspace: %w", err)
		}
	}
	ws.Close()
	for _, root := range tmpfs {
		if err := syscall.Mount("", fdPath(root), "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, tmpfsOptions); err != nil {
			return fmt.Errorf("making the cover of %s read-only: %w", root.Name(), err)
		}
		root.Close()
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := os.Chdir(workspace); err != nil {
		return fmt.Errorf("entering the workspace: %w", err)
	}
	const prSetNoNewPrivs, prCapbsetDrop = 38, 24
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		return fmt.Errorf("setting no_new_privs: %w", e)
	}
	for c := 0; c < 64; c++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0); e != 0 && e != syscall.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, e)
		}
	}
	if own {
		if err := denyUnixSockets(); err != nil {
			return fmt.Errorf("closing the host's sockets: %w", err)
		}
	}
	return syscall.Exec(shellPath, []string{"sh", "-c", line}, os.Environ())
}

// auditArch is the AUDIT_ARCH_* value seccomp gives the system calls of the daemon's own
// architecture, for those whose socket(2) is a system call of its own (no socketcall).
var auditArch = map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7, "riscv64": 0xc00000f3, "loong64": 0xc0000102}

// denyUnixSockets installs a seccomp filter, inherited by everything the shell starts, that
// refuses socket(AF_UNIX) with EACCES. A socket in the file system is the host's network as much as
// its loopback is (a database's with peer or trust authentication, a container engine's, the
// bus), and a network namespace does not cover it: the covers hide a few paths, not every socket.
// socketpair(2) stays, for a command's own processes. io_uring_setup(2) fails with ENOSYS: a ring
// makes and connects sockets without socket(2), past the filter. A system call of another architecture (a
// 32-bit program, the x32 ABI, whose socketcall(2) hides its domain) fails with ENOSYS. It needs
// no_new_privs, set before.
func denyUnixSockets() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no socket filter for %s", runtime.GOARCH)
	}
	const (
		ld, jeq, jge, ret = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS, syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K,
			syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K, syscall.BPF_RET | syscall.BPF_K
		retAllow, retErrno = 0x7fff0000, 0x00050000
		x32                = 0x40000000 // the x32 ABI's bit in a system call's number on amd64
		ioUringSetup       = 425        // the same number on every architecture
		prSetSeccomp       = 22
		modeFilter         = 2
	)
	// struct seccomp_data: int nr, u32 arch, u64 ip, u64 args[6]; the domain is args[0]'s low
	// half, first on these little-endian machines.
	filter := []syscall.SockFilter{
		/* 0 */ {Code: ld, K: 4},
		/* 1 */ {Code: jeq, K: arch, Jf: 10 - 2}, // another architecture: ENOSYS
		/* 2 */ {Code: ld, K: 0},
		/* 3 */ {Code: jge, K: x32, Jt: 10 - 4}, // x32: ENOSYS
		/* 4 */ {Code: jeq, K: ioUringSetup, Jt: 10 - 5}, // io_uring: ENOSYS
		/* 5 */ {Code: jeq, K: syscall.SYS_SOCKET, Jf: 8 - 6}, // not socket(2): allowed
		/* 6 */ {Code: ld, K: 16},
		/* 7 */ {Code: jeq, K: syscall.AF_UNIX, Jt: 9 - 8},
		/* 8 */ {Code: ret, K: retAllow},
		/* 9 */ {Code: ret, K: retErrno | uint32(syscall.EACCES)},
		/* 10 */ {Code: ret, K: retErrno | uint32(syscall.ENOSYS)},
	}
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, modeFilter, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return e
	}
	return nil
}

// loopbackUp brings up "lo", which a new network namespace has down: a command may still serve
// and reach itself on 127.0.0.1.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: the interface's name, then a union of which the flags are the first field.
	var req struct {
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return e
	}
	req.flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&req))); e != 0 {
		return e
	}
	return nil
}

// privateDirs are the directories every process of the machine may write, which a command gets
// as empty file systems of its own (privateOptions), gone when it ends.
var privateDirs = [...]string{"/tmp", "/var/tmp", "/dev/shm"}

const privateOptions = "size=256m,mode=1777"

// tmpfsOptions are those of the empty file systems that cover hidden directories.
const tmpfsOptions = "size=64k,mode=0755"

// fdPath names the file f has open, for a mount.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }
