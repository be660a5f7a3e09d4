package signing_test

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
)

func TestSignMatchesVectors(t *testing.T) {
	for _, v := range hookdVectors(t) {
		if !strings.HasPrefix(v.Signature, "sha256=") {
			continue // Sign only produces sha256; other algorithms are verify-only.
		}
		if got := signing.Sign(v.Secret, v.Timestamp, []byte(v.Body)); got != v.Signature {
			t.Errorf("%s: Sign = %s, want %s", v.Name, got, v.Signature)
		}
	}
}

func TestVerifyAcceptsVectors(t *testing.T) {
	for _, v := range hookdVectors(t) {
		if err := signing.Verify(v.Secret, v.Timestamp, v.Signature, []byte(v.Body), 0, v.signedAt(t)); err != nil {
			t.Errorf("%s: Verify = %v, want nil", v.Name, err)
		}
	}
}

func TestSignFormat(t *testing.T) {
	got := signing.Sign("k", "1", nil)
	hexPart, ok := strings.CutPrefix(got, "sha256=")
	if !ok || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		t.Fatalf("Sign = %q, want sha256=<64 lowercase hex digits>", got)
	}
}

func TestVerify(t *testing.T) {
	const secret = "hookd-test-secret"
	now := time.UnixMilli(1700000000000)
	body := []byte(`{"eventId":"e1","decision":"allow"}`)
	ts := func(at time.Time) string { return itoa(at.UnixMilli()) }
	nowTS := ts(now)
	good := signing.Sign(secret, nowTS, body)
	goodHex := strings.TrimPrefix(good, "sha256=")

	flipped := append([]byte(nil), body...)
	flipped[len(flipped)-2] ^= 0x01

	at := func(d time.Duration) (string, string) {
		s := ts(now.Add(d))
		return s, signing.Sign(secret, s, body)
	}
	staleTS, staleSig := at(-6 * time.Minute)
	futureTS, futureSig := at(6 * time.Minute)
	oldEdgeTS, oldEdgeSig := at(-signing.DefaultTolerance)
	newEdgeTS, newEdgeSig := at(signing.DefaultTolerance)
	pastEdgeTS, pastEdgeSig := at(-signing.DefaultTolerance - time.Millisecond)

	tests := []struct {
		name      string
		secret    string
		ts, sig   string
		body      []byte
		tolerance time.Duration
		want      error // nil means accepted
	}{
		{"valid", secret, nowTS, good, body, 0, nil},
		{"valid, uppercase hex", secret, nowTS, "sha256=" + strings.ToUpper(goodHex), body, 0, nil},
		{"wrong secret", "other-secret", nowTS, good, body, 0, signing.ErrSignatureMismatch},
		{"empty secret", "", nowTS, good, body, 0, signing.ErrBadSecret},
		{"body changed by one byte", secret, nowTS, good, flipped, 0, signing.ErrSignatureMismatch},
		{"body with a byte appended", secret, nowTS, good, append(append([]byte(nil), body...), ' '), 0, signing.ErrSignatureMismatch},
		{"timestamp changed", secret, ts(now.Add(time.Millisecond)), good, body, 0, signing.ErrSignatureMismatch},
		{"stale (now-6m)", secret, staleTS, staleSig, body, 0, signing.ErrTimestampOutOfWindow},
		{"future (now+6m)", secret, futureTS, futureSig, body, 0, signing.ErrTimestampOutOfWindow},
		{"just inside window (now-5m)", secret, oldEdgeTS, oldEdgeSig, body, 0, nil},
		{"just inside window (now+5m)", secret, newEdgeTS, newEdgeSig, body, 0, nil},
		{"just outside window (now-5m-1ms)", secret, pastEdgeTS, pastEdgeSig, body, 0, signing.ErrTimestampOutOfWindow},
		{"stale within a custom 10m tolerance", secret, staleTS, staleSig, body, 10 * time.Minute, nil},
		{"negative tolerance means default", secret, staleTS, staleSig, body, -time.Hour, signing.ErrTimestampOutOfWindow},
		{"unknown prefix md5=", secret, nowTS, "md5=" + strings.Repeat("0", 32), body, 0, signing.ErrUnknownAlgorithm},
		{"algorithm prefix is case-sensitive", secret, nowTS, "SHA256=" + goodHex, body, 0, signing.ErrUnknownAlgorithm},
		{"sha512= valid", secret, nowTS, sha512Header(secret, nowTS, body), body, 0, nil},
		{"sha512= with sha256 digest", secret, nowTS, "sha512=" + goodHex, body, 0, signing.ErrMalformedHeader},
		{"sha256= with wrong digest", secret, nowTS, "sha256=" + strings.Repeat("ab", 32), body, 0, signing.ErrSignatureMismatch},
		{"empty signature header", secret, nowTS, "", body, 0, signing.ErrMissingHeader},
		{"empty timestamp header", secret, "", good, body, 0, signing.ErrMissingHeader},
		{"signature without =", secret, nowTS, goodHex, body, 0, signing.ErrMalformedHeader},
		{"signature with empty alg", secret, nowTS, "=" + goodHex, body, 0, signing.ErrMalformedHeader},
		{"signature with empty digest", secret, nowTS, "sha256=", body, 0, signing.ErrMalformedHeader},
		{"non-hex digest", secret, nowTS, "sha256=" + strings.Repeat("zz", 32), body, 0, signing.ErrMalformedHeader},
		{"truncated digest", secret, nowTS, good[:len(good)-2], body, 0, signing.ErrMalformedHeader},
		{"two signatures", secret, nowTS, good + " " + good, body, 0, signing.ErrMalformedHeader},
		{"non-numeric timestamp", secret, "17e11", good, body, 0, signing.ErrMalformedHeader},
		{"negative timestamp", secret, "-" + nowTS, good, body, 0, signing.ErrMalformedHeader},
		{"timestamp with sign", secret, "+" + nowTS, good, body, 0, signing.ErrMalformedHeader},
		{"timestamp with spaces", secret, " " + nowTS, good, body, 0, signing.ErrMalformedHeader},
		{"timestamp in seconds", secret, itoa(now.Unix()), signing.Sign(secret, itoa(now.Unix()), body), body, 0, signing.ErrTimestampOutOfWindow},
		{"timestamp overflowing int64", secret, "99999999999999999999", good, body, 0, signing.ErrMalformedHeader},
		{"largest int64 timestamp", secret, "9223372036854775807", good, body, 0, signing.ErrTimestampOutOfWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := signing.Verify(tc.secret, tc.ts, tc.sig, tc.body, tc.tolerance, now)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want an error wrapping %v", err, tc.want)
			}
			assertOneSentinel(t, err)
			if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
				t.Fatalf("error %q contains the secret", err)
			}
		})
	}
}

// TestVerifyFixedHeaderStrings uses literal headers (not produced by Sign)
// so that a bug shared by Sign and Verify cannot hide.
func TestVerifyFixedHeaderStrings(t *testing.T) {
	v := hookdVectors(t)[0]
	now := v.signedAt(t)
	err := signing.Verify(v.Secret, v.Timestamp, v.Signature, []byte(v.Body), 0, now)
	if err != nil {
		t.Fatalf("vector %q rejected: %v", v.Name, err)
	}
	// The same signature presented as sha512 is an unknown-length digest.
	alt := "sha512=" + strings.TrimPrefix(v.Signature, "sha256=")
	if err := signing.Verify(v.Secret, v.Timestamp, alt, []byte(v.Body), 0, now); !errors.Is(err, signing.ErrMalformedHeader) {
		t.Fatalf("sha256 digest labelled sha512: err = %v, want ErrMalformedHeader", err)
	}
}

var sentinels = []error{
	signing.ErrMissingHeader, signing.ErrMalformedHeader, signing.ErrUnknownAlgorithm,
	signing.ErrTimestampOutOfWindow, signing.ErrSignatureMismatch, signing.ErrBadSecret,
	signing.ErrBodyTooLarge,
}

// assertOneSentinel checks the documented promise that each error wraps
// exactly one sentinel.
func assertOneSentinel(t *testing.T, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d sentinels, want exactly 1", err, n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sha512Header signs with plain crypto/hmac, as a future server would with
// "sha512=": the package must already accept it.
func sha512Header(secret, ts string, body []byte) string {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "sha512=" + hex.EncodeToString(m.Sum(nil))
}
