package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
)

// doctorSetup is a database with one hook (a signing secret sealed under key) whose receiver is
// on loopback; it returns the database URL.
func doctorSetup(t *testing.T, dir string, key []byte) string {
	t.Helper()
	dbURL := "sqlite:" + filepath.Join(dir, "hookd.db")
	db, err := storage.Open(context.Background(), dbURL, storage.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := dispatcher.NewRegistry(context.Background(), db, nil) // no guard: any receiver
	if err != nil {
		t.Fatal(err)
	}
	var h dispatcher.Hook
	json.Unmarshal([]byte(`{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"http://127.0.0.1:9/h","signingSecret":"s3cr3t"}}`), &h)
	if _, err := reg.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return dbURL
}

// doctorSetupEdited is doctorSetup in a directory of its own, the database then changed behind
// hookd's back by one statement that must change one row; it returns the config's path.
func doctorSetupEdited(t *testing.T, key []byte, extra, statement string) string {
	t.Helper()
	d := t.TempDir()
	u := doctorSetup(t, d, key)
	db, err := sql.Open("sqlite3", "file:"+strings.TrimPrefix(u, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.Exec(statement); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows changed", statement, n)
	}
	return doctorConfig(t, d, u, key, extra)
}

func doctorConfig(t *testing.T, dir, dbURL string, key []byte, extra string) string {
	t.Helper()
	return writeConfig(t, dir, fmt.Sprintf("database: %s\nmasterKey: %s\n%s", dbURL, base64.StdEncoding.EncodeToString(key), extra))
}

func TestDoctor(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	dir := t.TempDir()
	dbURL := doctorSetup(t, dir, key)
	private := "webhooks: {allowPrivateNetworks: true}\n"

	out, _, code := hookd(t, nil, "doctor", "--config", doctorConfig(t, dir, dbURL, key, private))
	if code != 0 {
		t.Fatalf("healthy setup: exit %d\n%s", code, out)
	}
	for _, want := range []string{"ok    config", "ok    database", "schema version", "ok    masterKey  masterKey (sealing) opens the sealed secrets of hooks [1]",
		"ok    hook 1", "no problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("healthy setup: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("doctor printed a secret:\n%s", out)
	}

	broken := []struct {
		name string
		cfg  func(t *testing.T) string
		want string
	}{
		{"wrong key", func(t *testing.T) string {
			return doctorConfig(t, t.TempDir(), dbURL, []byte("ffffffffffffffffffffffffffffffff"), private)
		}, "FAIL  masterKey  no configured key opens the sealed secrets of hooks [1]: they call no receiver until a PUT sets their secrets again"},
		{"private receiver", func(t *testing.T) string {
			return doctorConfig(t, t.TempDir(), dbURL, key, "")
		}, "FAIL  hook 1     gate: receiver 127.0.0.1:9"},
		{"config", func(t *testing.T) string {
			return doctorConfig(t, t.TempDir(), dbURL, key, "webhooks: {retry: {jitter: 2}}\n")
		}, "FAIL  config     "},
		{"hook stored before a rule", func(t *testing.T) string {
			// A receiver written as 127.1, which registration refuses now (the daemon would look it
			// up as a name); stored as it was before.
			return doctorSetupEdited(t, key, private, `UPDATE hooks SET doc = REPLACE(doc, '127.0.0.1:9', '127.1:9') WHERE id = 1`)
		}, `FAIL  hook 1     gate: stored before a rule it breaks: dispatchConfig.url: "127.1" is neither a host name`},
		{"newer schema", func(t *testing.T) string {
			return doctorSetupEdited(t, key, private, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from a newer hookd', 0)`)
		}, fmt.Sprintf("FAIL  schema     version 9999 is newer than this binary's %d", storage.KnownSchemaVersion())},
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			out, _, code := hookd(t, nil, "doctor", "--config", b.cfg(t))
			if code != 1 || !strings.Contains(out, b.want) {
				t.Fatalf("exit %d, want 1 and %q in\n%s", code, b.want, out)
			}
		})
	}

	// The shell tool as serve would build it: sandboxed (where this machine makes the sandbox), or
	// noted when it runs commands without one.
	shell := private + "agent: {shell: {enabled: true}}\n"
	out, _, code = hookd(t, nil, "doctor", "--config", doctorConfig(t, t.TempDir(), dbURL, key, shell))
	if want := "ok    shell      shell_execute commands run sandboxed"; code != 0 || !strings.Contains(out, want) {
		if !strings.Contains(out, "FAIL  shell      agent.shell.sandbox: namespaces: shell_execute commands cannot run in the sandbox") {
			t.Fatalf("shell: exit %d, want 0 and %q in\n%s", code, want, out)
		}
		t.Logf("this machine refuses the sandbox, as doctor says:\n%s", out)
	}
	if strings.Contains(out, "agent.shell.network is host") {
		t.Errorf("shell: the default network noted as the host's:\n%s", out)
	}
	out, _, code = hookd(t, nil, "doctor", "--config", doctorConfig(t, t.TempDir(), dbURL, key,
		private+"agent: {shell: {enabled: true, network: host}}\n"))
	if want := "note  shell      agent.shell.network is host"; !strings.Contains(out, want) && !strings.Contains(out, "FAIL  shell") {
		t.Errorf("shell on the host's network: exit %d, want %q in\n%s", code, want, out)
	}
	out, _, code = hookd(t, nil, "doctor", "--config", doctorConfig(t, t.TempDir(), dbURL, key,
		private+"agent: {shell: {enabled: true, sandbox: none}}\n"))
	if want := "note  shell      agent.shell.sandbox is none"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("shell unsandboxed: exit %d, want 0 and %q in\n%s", code, want, out)
	}

	// A toolNameMatch that looks like a glob is valid (matched exactly) and noted, not failed.
	globbed := doctorSetupEdited(t, key, private, `UPDATE hooks SET doc = json_set(doc, '$.toolNameMatch', 'transfer*') WHERE id = 1`)
	out, _, code = hookd(t, nil, "doctor", "--config", globbed)
	if want := `note  hook 1     gate: toolNameMatch: "transfer*" is matched as that exact tool name, not as a glob`; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("glob-like toolNameMatch: exit %d, want 0 and %q in\n%s", code, want, out)
	}

	// A database not created yet is not a problem: serve creates it. Doctor creates nothing.
	fresh := t.TempDir()
	out, _, code = hookd(t, nil, "doctor", "--config", doctorConfig(t, fresh, "sqlite:"+filepath.Join(fresh, "new.db"), key, ""))
	if code != 0 || !strings.Contains(out, "has no schema yet") {
		t.Fatalf("fresh setup: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(fresh, "new.db")); !os.IsNotExist(err) {
		t.Fatalf("doctor created the database: %v", err)
	}
}

// TestDoctorMasterKeys: with several keys configured (masterKeys, or masterKeyFiles) doctor tells
// which key opens which hook's secrets, notes an older key still in use and one no longer needed,
// and fails when a hook's secrets open with none of them.
func TestDoctorMasterKeys(t *testing.T) {
	keyA, keyB, keyC := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32)), []byte(strings.Repeat("c", 32))
	b64 := base64.StdEncoding.EncodeToString
	dir := t.TempDir()
	dbURL := doctorSetup(t, dir, keyA) // hook 1 sealed with A
	db, err := storage.Open(context.Background(), dbURL, storage.Options{Key: keyB})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dispatcher.NewRegistry(context.Background(), db, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var h dispatcher.Hook
	json.Unmarshal([]byte(`{"hookName":"b","hookType":"user_message","dispatchConfig":{"url":"http://127.0.0.1:9/b","signingSecret":"sb"}}`), &h)
	if _, err := reg.Create(context.Background(), h); err != nil { // hook 2 sealed with B
		t.Fatal(err)
	}
	db.Close()
	keyFile := func(name string, key []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b64(key)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fileA, fileB, fileC := keyFile("a.key", keyA), keyFile("b.key", keyB), keyFile("c.key", keyC)
	private := "webhooks: {allowPrivateNetworks: true}\n"
	run := func(keys string) (string, int) {
		cfg := writeConfig(t, dir, fmt.Sprintf("database: %s\n%s\n%s", dbURL, keys, private))
		out, stderr, code := hookd(t, nil, "doctor", "--config", cfg)
		return out + stderr, code
	}

	out, code := run(fmt.Sprintf("masterKeys: [%s, %s, %s]", b64(keyB), b64(keyA), b64(keyC)))
	for _, want := range []string{
		"ok    masterKey  masterKeys[0] (sealing) opens the sealed secrets of hooks [2]",
		"note  masterKey  masterKeys[1] (older) opens the sealed secrets of hooks [1]: hookd keys rotate re-seals them with masterKeys[0]",
		"note  masterKey  masterKeys[2] opens no stored secret: it can be removed",
		"no problems found",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("masterKeys [B, A, C]: exit %d, no %q in\n%s", code, want, out)
		}
	}

	out, code = run(fmt.Sprintf("masterKeyFiles: [%s, %s]", fileC, fileB))
	for _, want := range []string{
		"note  masterKey  masterKeyFiles[1] (" + fileB + ") (older) opens the sealed secrets of hooks [2]",
		"FAIL  masterKey  no configured key opens the sealed secrets of hooks [1]",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("masterKeyFiles [C, B]: exit %d, no %q in\n%s", code, want, out)
		}
	}
	out, code = run(fmt.Sprintf("masterKeyFiles: [%s, %s]", fileA, fileB))
	if code != 0 || !strings.Contains(out, "ok    masterKey  masterKeyFiles[0] ("+fileA+") (sealing) opens the sealed secrets of hooks [1]") {
		t.Errorf("masterKeyFiles [A, B]: exit %d\n%s", code, out)
	}
	for _, k := range [][]byte{keyA, keyB, keyC} {
		if strings.Contains(out, b64(k)) {
			t.Fatalf("doctor printed a key:\n%s", out)
		}
	}
}

// TestDoctorKeyFileAsServe: with no master key configured, doctor says what serve will do with
// the key file in dataDir: one that does not decode, or a dataDir where none can be written,
// fails both, on a new database too; a database that holds no sealed secret gets a generated
// key, and doctor does not call its missing file a problem.
func TestDoctorKeyFileAsServe(t *testing.T) {
	doctorAndServe := func(t *testing.T, dir, cfg string) (string, int, bool) {
		out, stderr, code := hookd(t, nil, "doctor", "--config", cfg)
		serve := exec.Command(binary, "serve", "--config", cfg)
		serve.Dir = dir
		stderrPipe, _ := serve.StderrPipe()
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		listened := false
		sc := bufio.NewScanner(stderrPipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"msg":"listening"`) {
				listened = true
				serve.Process.Signal(syscall.SIGTERM)
			}
		}
		serve.Wait()
		return out + stderr, code, listened
	}
	cases := []struct {
		name, dataDir, keyFile string
		database               func(t *testing.T, dir string) string
		doctor                 int
		want                   string
	}{
		{name: "new database, key file that does not decode", keyFile: "not a key\n", doctor: 1,
			want: "FAIL  masterKey  masterKey file"},
		{name: "new database, dataDir under a file", dataDir: "plain/data", doctor: 1,
			want: "FAIL  masterKey  masterKey file"},
		{name: "new database, no key yet", doctor: 0, want: "note  masterKey  none configured: serve generates"},
		{name: "database without sealed secrets, key file gone", doctor: 0,
			want: "note  masterKey  none configured: serve generates",
			database: func(t *testing.T, dir string) string {
				u := "sqlite:" + filepath.Join(dir, "hookd.db")
				db, err := storage.Open(context.Background(), u, storage.Options{Key: []byte(strings.Repeat("k", 32))})
				if err != nil {
					t.Fatal(err)
				}
				db.Close()
				return u
			}},
		{name: "database with sealed secrets, key file gone", doctor: 1,
			want: "FAIL  masterKey  none configured and no",
			database: func(t *testing.T, dir string) string {
				return doctorSetup(t, dir, []byte(strings.Repeat("k", 32)))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "plain"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			dbURL := "sqlite:" + filepath.Join(dir, "hookd.db")
			if c.database != nil {
				dbURL = c.database(t, dir)
			}
			if c.keyFile != "" {
				if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(c.keyFile), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			body := "listen: 127.0.0.1:0\ndatabase: " + dbURL + "\n"
			if c.dataDir != "" {
				body += "dataDir: " + filepath.Join(dir, c.dataDir) + "\n"
			}
			out, code, listened := doctorAndServe(t, dir, writeConfig(t, dir, body))
			if code != c.doctor || !strings.Contains(out, c.want) {
				t.Errorf("doctor: exit %d, want %d and %q in\n%s", code, c.doctor, c.want, out)
			}
			if listened != (c.doctor == 0) {
				t.Errorf("serve listened: %v; doctor exited %d\n%s", listened, code, out)
			}
		})
	}
}

// TestDoctorModelScript: a model.script serve cannot load (missing, not a script) fails doctor as
// it stops serve; doctor said no problems.
func TestDoctorModelScript(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{filepath.Join(dir, "missing.json"), bad} {
		cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nmodel: {script: "+script+"}\n")
		out, _, code := hookd(t, nil, "doctor", "--config", cfg)
		if code != 1 || !strings.Contains(out, "FAIL  model      model.script: ") {
			t.Errorf("%s: exit %d\n%s", script, code, out)
		}
		serve, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
		if err == nil || !strings.Contains(string(serve), "model.script: ") {
			t.Errorf("%s: serve: %v\n%s", script, err, serve)
		}
	}
}

// TestDoctorListen: a listen address serve cannot bind (one this machine does not have) fails
// doctor as it stops serve; one in use, as by the daemon doctor is run beside, is a note.
func TestDoctorListen(t *testing.T) {
	dir := t.TempDir()
	run := func(listen string) (string, int) {
		cfg := writeConfig(t, dir, "listen: "+listen+"\ndatabase: sqlite:"+filepath.Join(dir, "hookd.db")+"\nauth: {adminTokens: [adm], chat: disabled}\n")
		out, _, code := hookd(t, nil, "doctor", "--config", cfg)
		return out, code
	}
	if out, code := run("192.0.2.1:8080"); code != 1 || !strings.Contains(out, "FAIL  listen     serve cannot listen on 192.0.2.1:8080") {
		t.Errorf("an address this machine lacks: exit %d\n%s", code, out)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if out, code := run(busy.Addr().String()); code != 0 || !strings.Contains(out, "note  listen     "+busy.Addr().String()+" is in use") {
		t.Errorf("a port in use: exit %d\n%s", code, out)
	}
}
