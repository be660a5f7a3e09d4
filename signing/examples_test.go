package signing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
)

// verifierCase is the stdin format of examples/verify/verify.{py,js}.
type verifierCase struct {
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	NowMS   int64             `json:"now_ms"`

	name   string
	accept bool
}

// verifierCases builds, from both vector files, cases the example verifiers
// must accept and tampered ones they must reject.
func verifierCases(t *testing.T) []verifierCase {
	var cases []verifierCase
	for _, v := range hookdVectors(t) {
		now := v.signedAt(t).UnixMilli()
		h := map[string]string{signing.HeaderTimestamp: v.Timestamp, signing.HeaderSignature: v.Signature}
		cases = append(cases,
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body, NowMS: now, name: "hookd " + v.Name, accept: true},
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body + " ", NowMS: now, name: "hookd tampered " + v.Name},
			verifierCase{Secret: v.Secret + "x", Headers: h, Body: v.Body, NowMS: now, name: "hookd wrong secret " + v.Name},
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body, NowMS: now + 6*60*1000, name: "hookd stale " + v.Name},
		)
	}
	first := hookdVectors(t)[0]
	now := first.signedAt(t).UnixMilli()
	for name, sig := range map[string]string{
		"unknown alg md5":  "md5=" + strings.Repeat("0", 32),
		"non-hex digest":   "sha256=" + strings.Repeat("z", 64),
		"no alg prefix":    strings.TrimPrefix(first.Signature, "sha256="),
		"truncated digest": first.Signature[:len(first.Signature)-2],
	} {
		cases = append(cases, verifierCase{Secret: first.Secret, Body: first.Body, NowMS: now, name: "hookd " + name,
			Headers: map[string]string{signing.HeaderTimestamp: first.Timestamp, signing.HeaderSignature: sig}})
	}
	// Lower-case header names, as Node and many frameworks present them.
	cases = append(cases, verifierCase{Secret: first.Secret, Body: first.Body, NowMS: now, name: "hookd lower-case headers", accept: true,
		Headers: map[string]string{"x-webhook-timestamp": first.Timestamp, "x-webhook-signature": first.Signature}})

	for _, v := range standardVectors(t) {
		now := v.signedAt(t).UnixMilli()
		h := map[string]string{signing.HeaderStdID: v.ID, signing.HeaderStdTimestamp: v.Timestamp, signing.HeaderStdSignature: v.Signature}
		rotated := map[string]string{signing.HeaderStdID: v.ID, signing.HeaderStdTimestamp: v.Timestamp,
			signing.HeaderStdSignature: "v2,AAAA v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + v.Signature}
		v2only := map[string]string{signing.HeaderStdID: v.ID, signing.HeaderStdTimestamp: v.Timestamp,
			signing.HeaderStdSignature: "v2," + strings.TrimPrefix(v.Signature, "v1,")}
		cases = append(cases,
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body, NowMS: now, name: "standard " + v.Name, accept: true},
			verifierCase{Secret: v.Secret, Headers: rotated, Body: v.Body, NowMS: now, name: "standard rotated " + v.Name, accept: true},
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body + " ", NowMS: now, name: "standard tampered " + v.Name},
			verifierCase{Secret: v.Secret, Headers: v2only, Body: v.Body, NowMS: now, name: "standard v2 only " + v.Name},
			verifierCase{Secret: v.Secret, Headers: h, Body: v.Body, NowMS: now - 6*60*1000, name: "standard future " + v.Name},
		)
	}
	return cases
}

func TestExampleVerifiers(t *testing.T) {
	for _, tc := range []struct{ interpreter, script string }{
		{"python3", "../examples/verify/verify.py"},
		{"node", "../examples/verify/verify.js"},
	} {
		t.Run(tc.interpreter, func(t *testing.T) {
			path, err := exec.LookPath(tc.interpreter)
			if err != nil {
				t.Skipf("%s not installed, cannot run %s: %v", tc.interpreter, tc.script, err)
			}
			cases := verifierCases(t)

			// First confirm the Go package agrees with every expectation, so a
			// wrong case cannot make the scripts look broken (or fine).
			for _, c := range cases {
				if got := goAccepts(c); got != c.accept {
					t.Fatalf("test case %q: Go accepts=%v, want %v", c.name, got, c.accept)
				}
			}

			input, err := json.Marshal(cases)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, path, tc.script)
			cmd.Stdin = bytes.NewReader(input)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
				t.Fatalf("running %s: %v\n%s", tc.script, err, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Fatalf("%s wrote to stderr:\n%s", tc.script, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if len(lines) != len(cases) {
				t.Fatalf("%s printed %d lines for %d cases:\n%s", tc.script, len(lines), len(cases), out)
			}
			for i, c := range cases {
				accepted := lines[i] == "ok"
				if !accepted && !strings.HasPrefix(lines[i], "rejected: ") {
					t.Errorf("%s: unexpected output %q", c.name, lines[i])
				} else if accepted != c.accept {
					t.Errorf("%s: %s said %q, want accept=%v", c.name, tc.script, lines[i], c.accept)
				}
			}
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit status %d with some cases rejected, want 1", code)
			}
		})
	}
}

func goAccepts(c verifierCase) bool {
	now := time.UnixMilli(c.NowMS)
	h := func(name string) string {
		for k, v := range c.Headers {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
	if h(signing.HeaderStdSignature) != "" {
		return signing.VerifyStandard(c.Secret, h(signing.HeaderStdID), h(signing.HeaderStdTimestamp),
			h(signing.HeaderStdSignature), []byte(c.Body), 0, now) == nil
	}
	return signing.Verify(c.Secret, h(signing.HeaderTimestamp), h(signing.HeaderSignature), []byte(c.Body), 0, now) == nil
}

// TestReceiverGuideQuotesExamples keeps the snippets in docs/receivers.md
// identical to the tested example code.
func TestReceiverGuideQuotesExamples(t *testing.T) {
	guide, err := os.ReadFile("../docs/receivers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"../examples/verify/verify.py", "../examples/verify/verify.js"} {
		src, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		s := string(src)
		begin := strings.Index(s, "// --- begin verify ---\n")
		end := strings.Index(s, "// --- end verify ---")
		if strings.HasSuffix(script, ".py") {
			begin = strings.Index(s, "# --- begin verify ---\n")
			end = strings.Index(s, "# --- end verify ---")
		}
		if begin < 0 || end < begin {
			t.Fatalf("%s: begin/end verify markers not found", script)
		}
		snippet := s[strings.Index(s[begin:], "\n")+begin+1 : end]
		if !strings.Contains(string(guide), snippet) {
			t.Errorf("docs/receivers.md does not contain the verify section of %s verbatim", script)
		}
	}
}
