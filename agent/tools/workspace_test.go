package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkspacesDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ws")
	w := NewWorkspaces(root)
	dir, err := w.Dir(42)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "42"); dir != want {
		t.Fatalf("Dir = %s, want %s", dir, want)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("workspace: %v %v", fi, err)
	}
	if again, err := w.Dir(42); err != nil || again != dir {
		t.Fatalf("second Dir = %s, %v", again, err)
	}
	if _, err := w.Dir(-1); err == nil {
		t.Fatal("negative session ID accepted")
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "7")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Dir(7); err == nil {
		t.Fatal("a symlink as workspace accepted")
	}
	if _, err := NewWorkspaces("").Dir(1); err == nil {
		t.Fatal("empty root accepted")
	}
}

// newWorkspace returns a workspace with tasks.md, notes/a.md, a symlink to /etc and a symlink
// inside the workspace.
func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "tasks.md"), "hello world\n")
	mustWrite(t, filepath.Join(ws, "notes", "a.md"), "a\n")
	for link, target := range map[string]string{
		"etc":        "/etc",
		"notes-link": "notes",
		"abs-inside": filepath.Join(ws, "notes"),
		"dangling":   filepath.Join(t.TempDir(), "missing", "file"),
		"up":         "..",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolvePath(t *testing.T) {
	ws := newWorkspace(t)
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, rel, abs string // abs relative to the resolved workspace
	}{
		{"tasks.md", "tasks.md", "tasks.md"},
		{"./tasks.md", "tasks.md", "tasks.md"},
		{"  tasks.md\n", "tasks.md", "tasks.md"},
		{"/workspace/tasks.md", "tasks.md", "tasks.md"},
		{"/workspace//notes/./a.md", "notes/a.md", "notes/a.md"},
		{"/workspace", ".", "."},
		{"/workspace/", ".", "."},
		{"", ".", "."},
		{".", ".", "."},
		{"notes/../tasks.md", "tasks.md", "tasks.md"},
		{"/workspace/notes/../tasks.md", "tasks.md", "tasks.md"},
		{"new/dir/file.txt", "new/dir/file.txt", "new/dir/file.txt"},
		{"notes-link/a.md", "notes-link/a.md", "notes/a.md"},
		{"abs-inside/new.md", "abs-inside/new.md", "notes/new.md"},
		{filepath.Join(ws, "tasks.md"), "tasks.md", "tasks.md"},
		{filepath.Join(real, "notes"), "notes", "notes"},
	} {
		t.Run(c.in, func(t *testing.T) {
			p, err := ResolvePath(ws, c.in)
			if err != nil {
				t.Fatalf("ResolvePath(%q): %v", c.in, err)
			}
			if p.Rel != c.rel || p.Abs != filepath.Join(real, c.abs) {
				t.Fatalf("ResolvePath(%q) = %q %q, want %q %q", c.in, p.Rel, p.Abs, c.rel, filepath.Join(real, c.abs))
			}
		})
	}
}

func TestResolvePathRefusesEscapes(t *testing.T) {
	ws := newWorkspace(t)
	for _, c := range []struct{ in, msg string }{
		{"../x", "escapes the workspace"},
		{"..", "escapes the workspace"},
		{"a/../../x", "escapes the workspace"},
		{"/workspace/../etc/passwd", "escapes the workspace"},
		{"/etc/passwd", "outside the workspace"},
		{"/workspacex/a", "outside the workspace"},
		{filepath.Dir(ws), "outside the workspace"},
		{"etc", "outside the workspace through a symbolic link"},
		{"etc/passwd", "outside the workspace through a symbolic link"},
		{"/workspace/etc/passwd", "outside the workspace through a symbolic link"},
		{"etc/new-file", "outside the workspace through a symbolic link"},
		{"up/x", "outside the workspace through a symbolic link"},
		{"dangling", "symbolic link that points nowhere"},
		{"dangling/x", "symbolic link that points nowhere"},
		{"tasks.md/x", "not a directory"},
		{"a\x00b", "NUL"},
	} {
		t.Run(c.in, func(t *testing.T) {
			p, err := ResolvePath(ws, c.in)
			if err == nil {
				t.Fatalf("ResolvePath(%q) = %+v, want refusal", c.in, p)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("ResolvePath(%q): %q does not say %q", c.in, err, c.msg)
			}
		})
	}
	if _, err := ResolvePath("", "a"); err == nil {
		t.Fatal("empty workspace accepted")
	}
}
