package dispatcher

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hookd/hookd/signing"
)

// TestSignerMatchesPackageSigning: the pooled signer of the registry snapshot writes the same
// headers as package signing, for both schemes, call after call on the same pooled states.
func TestSignerMatchesPackageSigning(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	key := make([]byte, 32)
	for i := range 300 {
		h := &Hook{HookName: "h"}
		var secret string
		if i%2 == 0 {
			secret = randString(r, 6) + "s"
		} else {
			for j := range key {
				key[j] = byte(r.Uint32())
			}
			secret = "whsec_" + base64.StdEncoding.EncodeToString(key[:1+r.IntN(len(key))])
			h.DispatchConfig.SignatureScheme = SchemeStandard
		}
		h.DispatchConfig.SigningSecret = &secret
		s := newSigner(h)
		if s == nil {
			t.Fatalf("no signer for secret %q", secret)
		}
		for range 5 {
			body := []byte(randJSON(r, 0))
			eventID := "e" + randString(r, 20) // longer ones do not fit the scratch space
			now := time.UnixMilli(r.Int64N(1 << 42))
			got, want := http.Header{}, http.Header{}
			if err := sign(got, h, s, eventID, now, body); err != nil {
				t.Fatal(err)
			}
			if err := signSlow(want, h, eventID, now, body); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("headers %v, package signing's %v", got, want)
			}
			for k := range want {
				if got.Get(k) != want.Get(k) || len(got[k]) != 1 {
					t.Fatalf("%s: %q, package signing's %q", k, got[k], want[k])
				}
			}
			if h.DispatchConfig.SignatureScheme == SchemeStandard {
				if err := signing.VerifyStandard(secret, got.Get(signing.HeaderStdID), got.Get(signing.HeaderStdTimestamp),
					got.Get(signing.HeaderStdSignature), body, time.Hour<<20, now); err != nil {
					t.Fatal(err)
				}
			} else if err := signing.Verify(secret, got.Get(signing.HeaderTimestamp), got.Get(signing.HeaderSignature),
				body, time.Minute, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	// No secret: no signer, no headers. A standard secret that does not decode: no signer, and
	// signing reports it as it always did.
	if newSigner(&Hook{}) != nil {
		t.Error("a signer for a hook without a secret")
	}
	bad := "whsec_not base64"
	h := &Hook{DispatchConfig: DispatchConfig{SigningSecret: &bad, SignatureScheme: SchemeStandard}}
	if newSigner(h) != nil {
		t.Error("a signer for an undecodable standard secret")
	}
	if err := sign(http.Header{}, h, nil, "e", time.Now(), nil); !errors.Is(err, signing.ErrBadSecret) {
		t.Errorf("undecodable standard secret: %v", err)
	}
}

// TestReadBodyMatchesReadAll: readBody returns what io.ReadAll(io.LimitReader(…)) returns,
// whatever the Content-Length says and however the reader splits its reads.
func TestReadBodyMatchesReadAll(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	sizes := []int{0, 1, 20, 511, 512, 513, 4096, maxResponseBody - 1, maxResponseBody, maxResponseBody + 1, 3 * maxResponseBody}
	for _, n := range sizes {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(r.Uint32())
		}
		for _, hint := range []int64{-1, 0, int64(n), int64(n) + 5, int64(max(n-5, 0)), 1 << 40} {
			for _, wrap := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader,
			} {
				want, wantErr := io.ReadAll(io.LimitReader(wrap(bytes.NewReader(body)), maxResponseBody))
				got, err := readBody(wrap(bytes.NewReader(body)), hint)
				if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) {
					t.Fatalf("size %d hint %d: %d bytes %v, io.ReadAll %d bytes %v", n, hint, len(got), err, len(want), wantErr)
				}
			}
		}
	}
	boom := errors.New("boom")
	got, err := readBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), -1)
	if string(got) != "abc" || !errors.Is(err, boom) {
		t.Errorf("read error: %q %v", got, err)
	}
}

// TestSenderDoMatchesClient: sender.do, which skips http.Client, answers as the client (with its
// CheckRedirect) answers: the same responses, the same errors.
func TestSenderDoMatchesClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		case "/bad-location":
			w.Header().Set("Location", "http://[::1")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/no-location":
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	s := newSender(nil, "test")
	expired, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	for _, c := range []struct {
		url string
		ctx context.Context
	}{
		{srv.URL + "/", context.Background()},
		{srv.URL + "/redirect", context.Background()},
		{srv.URL + "/bad-location", context.Background()},
		{srv.URL + "/no-location", context.Background()},
		{closed, context.Background()},
		{"https://" + strings.TrimPrefix(srv.URL, "http://") + "/", context.Background()}, // TLS to a plaintext server
		{srv.URL + "/", expired},
	} {
		do := func(f func(*http.Request) (*http.Response, error)) (string, error) {
			req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := f(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.Status + " " + resp.Header.Get("Location") + " " + string(b), nil
		}
		got, err := do(s.do)
		want, wantErr := do(s.client.Do)
		if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: %q %v, the client's %q %v", c.url, got, err, want, wantErr)
		}
		if err != nil && errors.Is(err, context.DeadlineExceeded) != errors.Is(wantErr, context.DeadlineExceeded) {
			t.Errorf("%s: %v and the client's %v differ on DeadlineExceeded", c.url, err, wantErr)
		}
	}
}

func TestParseAnswerFastPath(t *testing.T) {
	for _, body := range []string{`{"decision":"allow"}`, "{\"decision\":\"allow\"}\n", ` {"decision": "allow"} `,
		`{ "decision": "allow" }`, "\r\n\t{\"decision\":\"allow\"}"} {
		got, _, err := parseAnswer([]byte(body), PreToolUse)
		var ans hookAnswer
		if err != nil || got.Decision != Allow || json.Unmarshal([]byte(body), &ans) != nil || ans.Decision != "allow" {
			t.Errorf("%q: %+v %v", body, got, err)
		}
	}
	// Not the literal: decoded as before.
	for body, want := range map[string]string{`{"decision":"ALLOW "}`: Allow, `{"decision":"deny","reason":"x"}`: Deny,
		"\u00a0{\"decision\":\"allow\"}": "", `{"decision":"allow"}x`: ""} {
		got, _, err := parseAnswer([]byte(body), PreToolUse)
		if (want == "") != (err != nil) || got.Decision != want {
			t.Errorf("%q: %+v %v, want %q", body, got, err, want)
		}
	}
}

// TestNewPostMatchesNewRequest: the request built from the snapshot's parsed URL is the one
// http.NewRequestWithContext builds.
func TestNewPostMatchesNewRequest(t *testing.T) {
	ctx := context.WithValue(context.Background(), struct{}{}, 1)
	body := []byte(`{"a":1}`)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "https://example.com:/x?y=1#f", "http://[::1]:9/a%20b",
		"https://user@example.com/p", "http://example.com", "http://exa mple.com/"} {
		h := &Hook{DispatchConfig: DispatchConfig{URL: u}}
		want, wantErr := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		got, err := newPost(ctx, h, newHookWire(h), body)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: %v, NewRequest's %v", u, err, wantErr)
		}
		if err != nil {
			continue
		}
		read := func(r *http.Request) string {
			b, _ := io.ReadAll(r.Body)
			rc, _ := r.GetBody()
			b2, _ := io.ReadAll(rc)
			return string(b) + "|" + string(b2)
		}
		if got.Method != want.Method || got.URL.String() != want.URL.String() || !reflect.DeepEqual(got.URL, want.URL) ||
			got.Host != want.Host || got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor ||
			got.ProtoMinor != want.ProtoMinor || got.ContentLength != want.ContentLength || len(got.Header) != 0 ||
			got.Context() != ctx || read(got) != read(want) || got.Close != want.Close {
			t.Errorf("%s: %+v\nNewRequest: %+v", u, got, want)
		}
	}
}
