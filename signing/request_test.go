package signing_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
)

func hookdRequest(secret string, at time.Time, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	ts := itoa(at.UnixMilli())
	r.Header.Set(signing.HeaderTimestamp, ts)
	r.Header.Set(signing.HeaderSignature, signing.Sign(secret, ts, body))
	return r
}

func standardRequest(t *testing.T, secret, id string, at time.Time, body []byte) *http.Request {
	t.Helper()
	sig, err := signing.SignStandard(secret, id, at, body)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	r.Header.Set(signing.HeaderStdID, id)
	r.Header.Set(signing.HeaderStdTimestamp, itoa(at.Unix()))
	r.Header.Set(signing.HeaderStdSignature, sig)
	return r
}

func TestVerifyRequestHookd(t *testing.T) {
	const secret = "hookd-test-secret"
	body := []byte(`{"eventId":"e1"}`)

	got, err := signing.VerifyRequest(hookdRequest(secret, time.Now(), body), secret, 0, 0)
	if err != nil {
		t.Fatalf("valid request: %v", err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("body = %q, want %q", got, body)
	}

	r := hookdRequest(secret, time.Now(), body)
	r.Body = io.NopCloser(strings.NewReader(`{"eventId":"e2"}`))
	if got, err := signing.VerifyRequest(r, secret, 0, 0); !errors.Is(err, signing.ErrSignatureMismatch) || got != nil {
		t.Fatalf("tampered body: (%q, %v), want (nil, ErrSignatureMismatch)", got, err)
	}

	stale := hookdRequest(secret, time.Now().Add(-6*time.Minute), body)
	if _, err := signing.VerifyRequest(stale, secret, 0, 0); !errors.Is(err, signing.ErrTimestampOutOfWindow) {
		t.Fatalf("stale: %v, want ErrTimestampOutOfWindow", err)
	}
	stale = hookdRequest(secret, time.Now().Add(-6*time.Minute), body)
	if _, err := signing.VerifyRequest(stale, secret, 10*time.Minute, 0); err != nil {
		t.Fatalf("stale with 10m tolerance: %v", err)
	}
}

func TestVerifyRequestStandard(t *testing.T) {
	secret := signing.NewStandardSecret()
	body := []byte(`{"eventId":"e1"}`)
	got, err := signing.VerifyRequest(standardRequest(t, secret, "e1", time.Now(), body), secret, 0, 0)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("valid request: (%q, %v)", got, err)
	}

	r := standardRequest(t, secret, "e1", time.Now(), body)
	r.Header.Set(signing.HeaderStdID, "e2")
	if _, err := signing.VerifyRequest(r, secret, 0, 0); !errors.Is(err, signing.ErrSignatureMismatch) {
		t.Fatalf("changed id: %v, want ErrSignatureMismatch", err)
	}

	r = standardRequest(t, secret, "e1", time.Now(), body)
	r.Header.Del(signing.HeaderStdID)
	if _, err := signing.VerifyRequest(r, secret, 0, 0); !errors.Is(err, signing.ErrMissingHeader) {
		t.Fatalf("missing id: %v, want ErrMissingHeader", err)
	}
}

func TestVerifyRequestNoSignatureHeaders(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader("{}"))
	r.Header.Set(signing.HeaderTimestamp, itoa(time.Now().UnixMilli()))
	if _, err := signing.VerifyRequest(r, "s", 0, 0); !errors.Is(err, signing.ErrMissingHeader) {
		t.Fatalf("err = %v, want ErrMissingHeader", err)
	}
}

func TestVerifyRequestBodyLimit(t *testing.T) {
	const secret = "hookd-test-secret"
	body := bytes.Repeat([]byte("a"), 100)

	if _, err := signing.VerifyRequest(hookdRequest(secret, time.Now(), body), secret, 0, 100); err != nil {
		t.Fatalf("body of exactly maxBody: %v", err)
	}
	got, err := signing.VerifyRequest(hookdRequest(secret, time.Now(), body), secret, 0, 99)
	if !errors.Is(err, signing.ErrBodyTooLarge) || got != nil {
		t.Fatalf("body over maxBody: (%d bytes, %v), want (nil, ErrBodyTooLarge)", len(got), err)
	}

	// maxBody <= 0 means 1 MiB.
	big := bytes.Repeat([]byte("a"), 1<<20+1)
	if _, err := signing.VerifyRequest(hookdRequest(secret, time.Now(), big), secret, 0, 0); !errors.Is(err, signing.ErrBodyTooLarge) {
		t.Fatalf("default limit: %v, want ErrBodyTooLarge", err)
	}
	if _, err := signing.VerifyRequest(hookdRequest(secret, time.Now(), big[:1<<20]), secret, 0, -1); err != nil {
		t.Fatalf("1 MiB body with default limit: %v", err)
	}
}

func TestVerifyRequestEmptyBody(t *testing.T) {
	const secret = "hookd-test-secret"
	r := hookdRequest(secret, time.Now(), nil)
	r.Body = http.NoBody
	got, err := signing.VerifyRequest(r, secret, 0, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty body: (%q, %v)", got, err)
	}
}
