package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, tool Tool, env Env, args string) Result {
	t.Helper()
	res, err := tool.Run(context.Background(), env, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: runtime error %v", tool.Spec().Name, args, err)
	}
	return res
}

func argsJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteFile(t *testing.T) {
	ws := newWorkspace(t)
	env := Env{SessionID: 1, Workspace: ws}
	w := NewWriteFile()

	res := run(t, w, env, `{"path":"/workspace/todo.md","content":"hello world\n"}`)
	if res.IsError || res.Text != "wrote 12 bytes to todo.md" {
		t.Fatalf("write: %+v", res)
	}
	if len(res.Files) != 1 || res.Files[0] != (File{Path: "todo.md", Size: 12, Created: true}) {
		t.Fatalf("files: %+v", res.Files)
	}
	res = run(t, w, env, `{"path":"todo.md","content":"bye\n"}`)
	if res.IsError || res.Files[0] != (File{Path: "todo.md", Size: 4, Created: false}) {
		t.Fatalf("overwrite: %+v", res)
	}
	res = run(t, w, env, `{"path":"todo.md","content":"more\n","append":true}`)
	if res.IsError || res.Text != "appended 5 bytes to todo.md (now 9 bytes)" || res.Files[0].Size != 9 || res.Files[0].Created {
		t.Fatalf("append: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "todo.md")); string(b) != "bye\nmore\n" {
		t.Fatalf("content %q", b)
	}
	res = run(t, w, env, `{"path":"deep/er/x.txt","content":""}`)
	if res.IsError || res.Files[0] != (File{Path: "deep/er/x.txt", Size: 0, Created: true}) {
		t.Fatalf("nested: %+v", res)
	}
	if fi, err := os.Stat(filepath.Join(ws, "deep", "er")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created dir: %v %v", fi, err)
	}
	// Through a symlink inside the workspace: the link's path is reported.
	res = run(t, w, env, `{"path":"notes-link/b.md","content":"b"}`)
	if res.IsError || res.Files[0].Path != "notes-link/b.md" {
		t.Fatalf("via link: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes", "b.md")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ args, msg string }{
		{`{"path":"../x","content":"x"}`, "escapes the workspace"},
		{`{"path":"a/../../x","content":"x"}`, "escapes the workspace"},
		{`{"path":"/etc/passwd","content":"x"}`, "outside the workspace"},
		{`{"path":"etc/hookd-test","content":"x"}`, "outside the workspace"},
		{`{"path":"dangling","content":"x"}`, "points nowhere"},
		{`{"path":"notes","content":"x"}`, "is a directory"},
		{`{"path":"notes/","content":"x"}`, "names a directory"},
		{`{"path":"/workspace","content":"x"}`, "the workspace itself"},
		{`{"path":"a.md"}`, "content is required"},
		{`{"content":"x"}`, "path is required"},
		{`{"file_path":"a.md","content":"x"}`, `arguments.file_path: unknown field`},
		{`{"path":"a.md","content":"x","append":"yes"}`, "invalid arguments for workspace_write_file"},
		// What the hooks and rules read is what runs: a path that the checks never saw (a key in
		// another case, a key sent twice) is refused, not written.
		{`{"path":"notes.md","content":"x","Path":"secret.md"}`, `arguments.Path: unknown field (did you mean "path"?)`},
		{`{"path":"notes.md","content":"x","path":"secret.md"}`, `arguments.path: appears twice`},
	} {
		res := run(t, w, env, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.msg) {
			t.Errorf("%s: %+v, want an error saying %q", c.args, res, c.msg)
		}
	}
	if _, err := os.Stat("/etc/hookd-test"); err == nil {
		t.Fatal("wrote through the /etc symlink")
	}
	if _, err := os.Stat(filepath.Join(ws, "secret.md")); err == nil {
		t.Fatal("wrote the path no check saw")
	}

	if _, err := w.Run(context.Background(), Env{}, json.RawMessage(`{"path":"a","content":""}`)); err == nil {
		t.Fatal("no runtime error without a workspace")
	}
}

// png is a 1x1 PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func TestReadFile(t *testing.T) {
	ws := newWorkspace(t)
	env := Env{Workspace: ws}
	r := NewReadFile()
	var lines strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	mustWrite(t, filepath.Join(ws, "ten.txt"), lines.String())
	mustWrite(t, filepath.Join(ws, "noeol.txt"), "a\nb")
	mustWrite(t, filepath.Join(ws, "empty.txt"), "")
	mustWrite(t, filepath.Join(ws, "pic.png"), string(png))
	mustWrite(t, filepath.Join(ws, "image.jpg"), "not really a jpeg, but the name says image")
	mustWrite(t, filepath.Join(ws, "blob"), "abc\xff\xfe\x00def")
	mustWrite(t, filepath.Join(ws, "draw.svg"), `<svg xmlns="http://www.w3.org/2000/svg"/>`)

	for _, c := range []struct{ args, want string }{
		{`{"path":"tasks.md"}`, "hello world\n"},
		{`{"path":"/workspace/notes/a.md"}`, "a\n"},
		{`{"path":"notes-link/a.md"}`, "a\n"},
		{`{"path":"ten.txt","offset":9}`, "line 9\nline 10\n"},
		{`{"path":"ten.txt","offset":2,"limit":2}`, "line 2\nline 3\n\n[more lines follow; continue with offset=4]"},
		{`{"path":"ten.txt","limit":10}`, lines.String()},
		{`{"path":"noeol.txt","offset":2}`, "b"},
		{`{"path":"empty.txt"}`, "(empty.txt is empty)"},
		{`{"path":"draw.svg"}`, `<svg xmlns="http://www.w3.org/2000/svg"/>`},
	} {
		res := run(t, r, env, c.args)
		if res.IsError || res.Text != c.want {
			t.Errorf("%s: %+v, want %q", c.args, res, c.want)
		}
	}

	for _, c := range []struct{ args, msg string }{
		{`{"path":"ten.txt","offset":11}`, "offset 11 is past the end of ten.txt (10 lines)"},
		{`{"path":"missing.txt"}`, "missing.txt does not exist"},
		{`{"path":"notes"}`, "is a directory; use workspace_list_files"},
		{`{"path":"../x"}`, "escapes the workspace"},
		{`{"path":"a/../../x"}`, "escapes the workspace"},
		{`{"path":"/etc/passwd"}`, "outside the workspace"},
		{`{"path":"etc/passwd"}`, "outside the workspace through a symbolic link"},
		{`{"path":"ten.txt","offset":-1}`, "offset must be 1 or more"},
		{`{}`, "path is required"},
	} {
		res := run(t, r, env, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.msg) {
			t.Errorf("%s: %+v, want an error saying %q", c.args, res, c.msg)
		}
	}

	for _, c := range []struct{ path, media string }{
		{"pic.png", "image/png"},
		{"image.jpg", "image/jpeg"},
		{"blob", "application/octet-stream"},
	} {
		res := run(t, r, env, argsJSON(t, map[string]string{"path": c.path}))
		raw, _ := os.ReadFile(filepath.Join(ws, c.path))
		if res.IsError || len(res.Data) != 1 || res.Data[0].MediaType != c.media || !bytes.Equal(res.Data[0].Bytes, raw) ||
			res.Data[0].Name != c.path || !strings.Contains(res.Text, "binary file ("+c.media) {
			t.Errorf("%s: %+v", c.path, res)
		}
	}
}

func TestReadFileCap(t *testing.T) {
	ws := t.TempDir()
	env := Env{Workspace: ws}
	// 100 lines of 4 KiB: the cap falls at the start of line 65.
	line := strings.Repeat("é", 2047) + "x\n" // 4096 bytes, multi-byte runes
	mustWrite(t, filepath.Join(ws, "big.txt"), strings.Repeat(line, 100))
	res := run(t, NewReadFile(), env, `{"path":"big.txt"}`)
	want := strings.Repeat(line, 64) + "\n[truncated: output is capped at 256.0 KiB per call; continue with offset=65]"
	if res.IsError || res.Text != want {
		t.Fatalf("capped read: %d bytes, ends %q", len(res.Text), res.Text[len(res.Text)-120:])
	}
	res = run(t, NewReadFile(), env, `{"path":"big.txt","offset":65}`)
	if res.IsError || res.Text != strings.Repeat(line, 36) {
		t.Fatalf("rest: %d bytes", len(res.Text))
	}

	// One 300 KiB line: cut inside the line, at a rune boundary.
	mustWrite(t, filepath.Join(ws, "long.txt"), strings.Repeat("é", 150<<10)+"\nnext\n")
	res = run(t, NewReadFile(), env, `{"path":"long.txt"}`)
	body, note, _ := strings.Cut(res.Text, "\n[truncated")
	if res.IsError || len(body) != MaxReadBytes || !strings.Contains(note, "line 1 was cut; continue with offset=2") {
		t.Fatalf("long line: %d bytes, note %q", len(body), note)
	}
	if !json.Valid([]byte(argsJSON(t, body))) || strings.ContainsRune(body, '\uFFFD') {
		t.Fatal("cut in the middle of a rune")
	}
}

func TestListFiles(t *testing.T) {
	ws := newWorkspace(t)
	env := Env{Workspace: ws}
	l := NewListFiles()
	mustWrite(t, filepath.Join(ws, "b.txt"), "12345")
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}

	res := run(t, l, env, `{}`)
	want := strings.Join([]string{
		"/workspace: 9 entries",
		"abs-inside -> " + filepath.Join(ws, "notes"),
		"b.txt  5 bytes",
		"dangling -> " + mustReadlink(t, filepath.Join(ws, "dangling")),
		"empty/",
		"etc -> /etc",
		"notes/",
		"notes-link -> notes",
		"tasks.md  12 bytes",
		"up -> ..",
	}, "\n")
	if res.IsError || res.Text != want {
		t.Fatalf("list:\n%s\nwant:\n%s", res.Text, want)
	}
	for _, c := range []struct{ args, want string }{
		{`{"path":"notes"}`, "/workspace/notes: 1 entries\na.md  2 bytes"},
		{`{"path":"/workspace/notes-link"}`, "/workspace/notes-link: 1 entries\na.md  2 bytes"},
		{`{"path":"empty"}`, "/workspace/empty: empty directory"},
		{`{"path":"tasks.md"}`, "tasks.md  12 bytes"},
	} {
		res := run(t, l, env, c.args)
		if res.IsError || res.Text != c.want {
			t.Errorf("%s: %+v, want %q", c.args, res, c.want)
		}
	}
	for _, c := range []struct{ args, msg string }{
		{`{"path":"etc"}`, "outside the workspace through a symbolic link"},
		{`{"path":"../"}`, "escapes the workspace"},
		{`{"path":"/etc"}`, "outside the workspace"},
		{`{"path":"nope"}`, "/workspace/nope does not exist"},
	} {
		res := run(t, l, env, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.msg) {
			t.Errorf("%s: %+v, want an error saying %q", c.args, res, c.msg)
		}
	}
}

func mustReadlink(t *testing.T, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
