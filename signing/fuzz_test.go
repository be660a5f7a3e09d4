package signing_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
)

// FuzzVerify feeds arbitrary header values to Verify and VerifyStandard. Both
// must return (never panic), every failure must wrap exactly one sentinel and
// never echo the secret, and a success must mean the header really is the
// signature of that content.
func FuzzVerify(f *testing.F) {
	const secret = "fuzz-secret-do-not-print"
	stdSecret := "whsec_" + "ZnV6ei1zZWNyZXQtZG8tbm90LXByaW50" // base64("fuzz-secret-do-not-print")
	now := time.UnixMilli(1700000000000)
	nowTS := itoa(now.UnixMilli())
	body := []byte(`{"eventId":"e1"}`)

	f.Add(nowTS, signing.Sign(secret, nowTS, body), body)
	f.Add(nowTS, "sha512="+strings.Repeat("0", 128), body)
	f.Add(nowTS, "md5=00", body)
	f.Add("", "", []byte(nil))
	f.Add("abc", "=", []byte("x"))
	f.Add("9223372036854775807", "sha256=", body)
	f.Add("99999999999999999999999", "sha256==", body)
	f.Add(itoa(now.Unix()), "v1,AAAA v2,BBBB", body)
	f.Add(itoa(now.Unix()), "v1,\xff\xfe v1a,", body)

	f.Fuzz(func(t *testing.T, ts, sig string, b []byte) {
		err := signing.Verify(secret, ts, sig, b, 0, now)
		if err == nil {
			alg, _, _ := strings.Cut(sig, "=")
			if alg == "sha256" && !strings.EqualFold(sig, signing.Sign(secret, ts, b)) {
				t.Fatalf("Verify accepted %q for ts %q, which is not Sign's output", sig, ts)
			}
			if alg != "sha256" && alg != "sha512" {
				t.Fatalf("Verify accepted algorithm %q", alg)
			}
		} else {
			checkFuzzError(t, err, secret)
		}

		err = signing.VerifyStandard(stdSecret, "msg_1", ts, sig, b, 0, now)
		if err == nil {
			if !hasStandardSignature(sig, []byte("fuzz-secret-do-not-print"), "msg_1", ts, b) {
				t.Fatalf("VerifyStandard accepted %q for ts %q without a matching v1 entry", sig, ts)
			}
		} else {
			checkFuzzError(t, err, "ZnV6ei1zZWNyZXQtZG8tbm90LXByaW50")
		}
	})
}

// hasStandardSignature recomputes the Standard Webhooks signature with plain
// crypto/hmac and looks for it among the v1 entries of header.
func hasStandardSignature(header string, key []byte, id, ts string, body []byte) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, f := range strings.Fields(header) {
		v, enc, _ := strings.Cut(f, ",")
		got, err := base64.StdEncoding.DecodeString(enc)
		if v == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func checkFuzzError(t *testing.T, err error, secret string) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d sentinels, want 1", err, n)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error %q contains the secret", err)
	}
}
