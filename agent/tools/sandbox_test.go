package tools

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test binary is the sandbox's binary too, as the daemon's is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SandboxCommand {
		SandboxMain(os.Args[2:])
	}
	os.Exit(m.Run())
}

// sandboxed is a data directory as the daemon lays it out (a database, the master key, two
// sessions' workspaces, the config beside it) and a shell sandboxed from all of it but session
// 1's workspace.
func sandboxed(t *testing.T) (sh *Shell, env Env, data, config string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Sandbox{Exe: exe}).Check(); err != nil {
		t.Skipf("this machine refuses the sandbox (%v): nothing to test", err)
	}
	root := testRoot(t)
	data, config = filepath.Join(root, "data"), filepath.Join(root, "hookd.yaml")
	for path, text := range map[string]string{"hookd.db": "the database", "master.key": "THE-MASTER-KEY",
		"workspaces/1/mine.txt": "mine", "workspaces/2/tasks.md": "secret of another user"} {
		p := filepath.Join(data, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(config, []byte("auth: {adminTokens: [THE-ADMIN-TOKEN]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh = NewShell(ShellConfig{Timeout: 20 * time.Second, Sandbox: &Sandbox{Exe: exe, Hide: []string{data, filepath.Join(data, "workspaces"), config}}})
	env = Env{SessionID: 1, Workspace: filepath.Join(data, "workspaces", "1")}
	return sh, env, data, config
}

// testRoot is a new directory for a daemon's files, outside the directories a sandboxed command
// gets of its own (privateDirs) where this machine allows, as a daemon's data is: under one of
// them, every cover would be under the command's own empty /tmp, and the covers untested.
func testRoot(t *testing.T) string {
	if home, err := os.UserHomeDir(); err == nil && !underPrivate(home) {
		if root, err := os.MkdirTemp(home, ".hookd-sandbox-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(root) })
			return root
		}
	}
	return t.TempDir()
}

// underPrivate reports whether path is in one of privateDirs.
func underPrivate(path string) bool {
	for _, dir := range privateDirs {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}

// A sandboxed command works in its own workspace as before and sees nothing else of the daemon:
// not another session's workspace, the database, the master key, the config, nor the daemon's
// process; and it cannot take the covers off.
func TestShellSandbox(t *testing.T) {
	sh, env, data, config := sandboxed(t)
	res := run(t, sh, env, `{"command":"pwd; cat mine.txt; echo; printf new > made.txt; echo ok"}`)
	if res.IsError || res.Text != env.Workspace+"\nmine\nok\nexit_code=0" {
		t.Fatalf("in its workspace: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(env.Workspace, "made.txt")); err != nil || string(b) != "new" {
		t.Fatalf("a file it wrote: %q %v", b, err)
	}
	for _, cmd := range []string{
		"cat ../2/tasks.md", "ls ../2", "cat " + data + "/master.key", "cat " + data + "/hookd.db", "cat " + config + " | grep TOKEN",
		"umount " + data, "umount " + config, "mount -t proc proc " + data,
		"unshare -U -m -r sh -c 'umount " + data + " && cat " + data + "/master.key'",
		"cat /proc/" + itoa(os.Getpid()) + "/environ",
	} {
		res := run(t, sh, env, `{"command":"`+strings.ReplaceAll(cmd, `"`, `\"`)+`"}`)
		t.Logf("%s → %q", cmd, res.Text)
		if !res.IsError || strings.Contains(res.Text, "secret of another user") || strings.Contains(res.Text, "THE-MASTER-KEY") ||
			strings.Contains(res.Text, "THE-ADMIN-TOKEN") || strings.Contains(res.Text, "the database") {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
	// Under the command's own /tmp the data directory's path is an empty one of its own, where a
	// file may be written, for nobody; elsewhere its cover is read-only.
	if res := run(t, sh, env, `{"command":"touch `+data+`/planted"}`); !res.IsError && !underPrivate(data) {
		t.Errorf("touch in the hidden data directory: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(data, "planted")); err == nil {
		t.Error("a file was planted in the data directory")
	}
	// Its processes are its own: the shell is the first of its namespace.
	if res := run(t, sh, env, `{"command":"echo $$; ls /proc | grep -c '^[0-9]'"}`); res.IsError || !strings.HasPrefix(res.Text, "1\n") {
		t.Errorf("its processes: %+v", res)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// /tmp, /var/tmp and /dev/shm are each command's own: what the machine's processes (another
// session's command among them) left there is not seen, and what a command writes there is gone
// when it ends, never on the machine's.
func TestShellSandboxPrivateTmp(t *testing.T) {
	sh, env, data, _ := sandboxed(t)
	var shared []string
	for _, dir := range privateDirs {
		f, err := os.CreateTemp(dir, "hookd-left-by-another-")
		if err != nil {
			continue // not here, or not writable: nothing to be shared through it
		}
		f.WriteString("secret of another user")
		f.Close()
		t.Cleanup(func() { os.Remove(f.Name()) })
		shared = append(shared, f.Name())
	}
	if len(shared) == 0 {
		t.Skip("none of " + strings.Join(privateDirs[:], ", ") + " is writable here")
	}
	for _, p := range shared {
		if res := run(t, sh, env, `{"command":"cat `+p+`"}`); !res.IsError || strings.Contains(res.Text, "secret") {
			t.Errorf("%s read from the sandbox: %+v", p, res)
		}
		if res := run(t, sh, env, `{"command":"ls -A `+filepath.Dir(p)+`"}`); strings.Contains(res.Text, filepath.Base(p)) {
			t.Errorf("%s listed from the sandbox: %+v", p, res)
		}
	}
	res := run(t, sh, env, `{"command":"f=$(mktemp) && echo kept > $f && cat $f && echo one > /tmp/from-1 && echo one > /var/tmp/from-1 && cat /tmp/from-1"}`)
	if res.IsError || res.Text != "kept\none\nexit_code=0" {
		t.Fatalf("writing its /tmp: %+v", res)
	}
	other := Env{SessionID: 2, Workspace: filepath.Join(data, "workspaces", "2")}
	if res := run(t, sh, other, `{"command":"cat /tmp/from-1 /var/tmp/from-1"}`); !res.IsError || strings.Contains(res.Text, "one") {
		t.Errorf("another session's command reads the first one's /tmp: %+v", res)
	}
	if res := run(t, sh, other, `{"command":"ls -A /tmp /var/tmp"}`); strings.Contains(res.Text, "from-1") {
		t.Errorf("another session's command lists the first one's /tmp: %+v", res)
	}
	for _, p := range []string{"/tmp/from-1", "/var/tmp/from-1"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s written on the machine's own file system", p)
		}
	}
}

// What is hidden is found however Hide names it: a directory before the one that holds it, a
// directory through a symbolic link. The workspace is back in its place, and every cover stays
// read-only.
func TestShellSandboxHideOrderAndLinks(t *testing.T) {
	sh, env, data, _ := sandboxed(t)
	link := filepath.Join(filepath.Dir(data), "data-link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	sh.sandbox.Hide = []string{filepath.Join(data, "workspaces"), link}
	res := run(t, sh, env, `{"command":"cat mine.txt; echo; ls ..; cat `+data+`/master.key; touch ../planted `+data+`/planted"}`)
	t.Logf("%q", res.Text)
	if !strings.HasPrefix(res.Text, "mine\n1\n") || strings.Contains(res.Text, "THE-MASTER-KEY") ||
		!underPrivate(data) && strings.Count(res.Text, "Read-only file system") != 2 {
		t.Errorf("%+v", res)
	}
	for _, p := range []string{filepath.Join(data, "workspaces", "planted"), filepath.Join(data, "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s planted", p)
		}
	}
}

// Check says why no command could run: here, a cover over the root leaves no /proc to mount.
func TestShellSandboxCheck(t *testing.T) {
	sh, env, _, _ := sandboxed(t)
	if err := sh.sandbox.Check(); err != nil {
		t.Fatalf("the sandbox of the other tests: %v", err)
	}
	broken := &Sandbox{Exe: sh.sandbox.Exe, Hide: []string{"/"}}
	if err := broken.Check(); err == nil || !strings.Contains(err.Error(), "the command did not run") {
		t.Errorf("Check with / hidden: %v", err)
	}
	for _, hide := range []string{"relative/path", ""} {
		sh.sandbox.Hide = []string{hide}
		if res := run(t, sh, env, `{"command":"echo ran"}`); !res.IsError || strings.Contains(res.Text, "ran\n") ||
			!strings.Contains(res.Text, "not an absolute path") {
			t.Errorf("Hide %q: %+v", hide, res)
		}
	}
}

// By default a command has a network of its own: the test's listener on 127.0.0.1 is not among
// its sockets, it has no interface but the loopback, and that loopback is up: a command serves and
// reaches itself there, and not the test. With HostNetwork the network is the test's.
func TestShellSandboxNetwork(t *testing.T) {
	sh, env, _, _ := sandboxed(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// How /proc/net/tcp writes the listener's local address.
	listener := fmt.Sprintf("0100007F:%04X", port)
	sockets := argsJSON(t, map[string]string{"command": "cat /proc/net/tcp"})
	if res := run(t, sh, env, sockets); res.IsError || !strings.Contains(res.Text, "local_address") || strings.Contains(res.Text, listener) {
		t.Errorf("the sockets of a command's own network: %+v", res)
	}
	interfaces := argsJSON(t, map[string]string{"command": `sed -n 's/^ *\([^:]*\):.*/\1/p' /proc/net/dev`})
	if res := run(t, sh, env, interfaces); res.IsError || res.Text != "lo\nexit_code=0" {
		t.Errorf("the interfaces of a command's own network: %+v", res)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("no python3 on this machine: the loopback's use is not tried")
	} else {
		probe := fmt.Sprintf(`python3 -c '
import socket
own = socket.create_server(("127.0.0.1", 0))
socket.create_connection(own.getsockname(), 5)
print("own loopback: reached")
try:
    socket.create_connection(("127.0.0.1", %d), 5)
    print("the test: reached")
except OSError as e:
    print("the test:", type(e).__name__)
'`, port)
		if res := run(t, sh, env, argsJSON(t, map[string]string{"command": probe})); res.IsError ||
			res.Text != "own loopback: reached\nthe test: ConnectionRefusedError\nexit_code=0" {
			t.Errorf("the loopback of a command's own network: %+v", res)
		}
	}

	sh.sandbox.HostNetwork = true
	if res := run(t, sh, env, sockets); res.IsError || !strings.Contains(res.Text, listener) {
		t.Errorf("the sockets of the host's network lack the test's listener %s: %+v", listener, res)
	}
}

// A socket of the host's file system is its network too: a database's (PostgreSQL's in
// /run/postgresql, with peer or trust authentication), a container engine's, the bus. With a
// network of its own a command reaches none of them, though it sees their path; it still has
// socket pairs of its own; io_uring, which would make a socket without socket(2), it does not
// have. With HostNetwork it reaches them, as it reaches the host's loopback.
func TestShellSandboxNetworkUnixSockets(t *testing.T) {
	sh, env, _, _ := sandboxed(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on this machine: a socket cannot be tried")
	}
	path := filepath.Join(testRoot(t), "db.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("the database answers"))
			c.Close()
		}
	}()
	probe := argsJSON(t, map[string]string{"command": fmt.Sprintf(`python3 -c '
import socket
a, b = socket.socketpair()
a.send(b"x"); print("pair:", b.recv(1).decode())
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(%q)
    print("host socket:", s.recv(100).decode())
except OSError as e:
    print("host socket:", e.strerror)
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 1, params)
print("io_uring:", os.strerror(ctypes.get_errno()) if fd < 0 else "a ring, which makes sockets past the filter")
'`, path)})
	if res := run(t, sh, env, probe); res.IsError || res.Text != "pair: x\nhost socket: Permission denied\nio_uring: Function not implemented\nexit_code=0" {
		t.Errorf("a socket of the host with a network of its own: %+v", res)
	}
	sh.sandbox.HostNetwork = true
	if res := run(t, sh, env, probe); res.IsError || !strings.Contains(res.Text, "host socket: the database answers") {
		t.Errorf("a socket of the host with the host's network: %+v", res)
	}
}
