package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSendAttachment(t *testing.T) {
	ws := newWorkspace(t)
	env := Env{SessionID: 1, Workspace: ws}
	s := NewSendAttachment()
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{0xff, 0x00}, 100)...)
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "out", "report.pdf"), pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	res := run(t, s, env, `{"path":"/workspace/out/report.pdf"}`)
	if res.IsError || len(res.Sent) != 1 || len(res.Files) != 0 || len(res.Data) != 0 {
		t.Fatalf("send: %+v", res)
	}
	got := res.Sent[0]
	if got.Path != "out/report.pdf" || got.NameOf() != "report.pdf" || got.MediaType != "application/pdf" ||
		got.Size != int64(len(pdf)) || !bytes.Equal(got.Bytes, pdf) {
		t.Fatalf("sent %+v", got.File)
	}
	if res.Text != "sent out/report.pdf (application/pdf, 209 bytes) to the user" {
		t.Fatalf("text %q", res.Text)
	}
	// A text file without a known extension is sniffed, not refused.
	if err := os.WriteFile(filepath.Join(ws, "NOTES"), []byte("plain words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, env, `{"path":"NOTES"}`); res.IsError || res.Sent[0].MediaType != "text/plain" {
		t.Fatalf("text: %+v", res)
	}

	if err := os.WriteFile(filepath.Join(ws, "big.bin"), make([]byte, MaxSendBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"path":"big.bin"}`:        "big.bin is too large to send",
		`{"path":"missing.txt"}`:    "missing.txt does not exist",
		`{"path":"out"}`:            "out is a directory",
		`{"path":"../etc/passwd"}`:  "escapes the workspace",
		`{"path":""}`:               "path is required",
		`{"file":"out/report.pdf"}`: `arguments.file: unknown field`,
	} {
		res := run(t, s, env, args)
		if !res.IsError || len(res.Sent) != 0 || !strings.Contains(res.Text, want) {
			t.Errorf("%s: %+v (want %q)", args, res, want)
		}
	}
	if !s.Spec().ReadOnly || s.Spec().Subject != "path" {
		t.Fatalf("spec %+v", s.Spec())
	}
}
