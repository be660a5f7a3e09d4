package signing_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
)

// The first vector in standard.json is the one published with the Standard
// Webhooks reference libraries; reproducing it is what shows that existing
// Standard Webhooks receivers accept what hookd sends.
func TestSignStandardMatchesVectors(t *testing.T) {
	vs := standardVectors(t)
	if vs[0].Signature != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("standard.json must start with the published specification vector, got %q", vs[0].Signature)
	}
	for _, v := range vs {
		got, err := signing.SignStandard(v.Secret, v.ID, v.signedAt(t), []byte(v.Body))
		if err != nil {
			t.Fatalf("%s: SignStandard: %v", v.Name, err)
		}
		if got != v.Signature {
			t.Errorf("%s: SignStandard = %s, want %s", v.Name, got, v.Signature)
		}
	}
}

func TestVerifyStandardAcceptsVectors(t *testing.T) {
	for _, v := range standardVectors(t) {
		if err := signing.VerifyStandard(v.Secret, v.ID, v.Timestamp, v.Signature, []byte(v.Body), 0, v.signedAt(t)); err != nil {
			t.Errorf("%s: VerifyStandard = %v, want nil", v.Name, err)
		}
	}
}

func TestSignStandardDropsSubSecond(t *testing.T) {
	v := standardVectors(t)[0]
	got, err := signing.SignStandard(v.Secret, v.ID, v.signedAt(t).Add(999*time.Millisecond), []byte(v.Body))
	if err != nil || got != v.Signature {
		t.Fatalf("SignStandard = %q, %v; want %q", got, err, v.Signature)
	}
}

func TestSignStandardBadSecret(t *testing.T) {
	for _, secret := range []string{
		"",
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // no whsec_ prefix
		"whsec_",                           // empty key
		"whsec_not base64!",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", // bad padding/length
	} {
		_, err := signing.SignStandard(secret, "id", time.Unix(1, 0), nil)
		if !errors.Is(err, signing.ErrBadSecret) {
			t.Errorf("SignStandard(%q) err = %v, want ErrBadSecret", secret, err)
		}
		if key := strings.TrimPrefix(secret, "whsec_"); key != "" && strings.Contains(err.Error(), key) {
			t.Errorf("error %q contains the secret", err)
		}
	}
}

func TestVerifyStandard(t *testing.T) {
	spec := standardVectors(t)[0]
	secret, id, body := spec.Secret, spec.ID, []byte(spec.Body)
	now := spec.signedAt(t)
	good := spec.Signature
	other := signing.NewStandardSecret()
	otherSig, err := signing.SignStandard(other, id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) (string, string) {
		sig, err := signing.SignStandard(secret, id, now.Add(d), body)
		if err != nil {
			t.Fatal(err)
		}
		return itoa(now.Add(d).Unix()), sig
	}
	staleTS, staleSig := at(-6 * time.Minute)
	futureTS, futureSig := at(6 * time.Minute)
	edgeTS, edgeSig := at(-5 * time.Minute)
	bogus := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	goodB64 := strings.TrimPrefix(good, "v1,")

	tests := []struct {
		name       string
		secret, id string
		ts, sig    string
		body       []byte
		want       error
	}{
		{name: "valid", secret: secret, id: id, ts: spec.Timestamp, sig: good, body: body},
		{name: "wrong secret", secret: other, id: id, ts: spec.Timestamp, sig: good, body: body, want: signing.ErrSignatureMismatch},
		{name: "secret without whsec_", secret: strings.TrimPrefix(secret, "whsec_"), id: id, ts: spec.Timestamp, sig: good, body: body, want: signing.ErrBadSecret},
		{name: "body changed by one byte", secret: secret, id: id, ts: spec.Timestamp, sig: good, body: []byte(`{"test": 2432232315}`), want: signing.ErrSignatureMismatch},
		{name: "id changed", secret: secret, id: id + "x", ts: spec.Timestamp, sig: good, body: body, want: signing.ErrSignatureMismatch},
		{name: "stale (now-6m)", secret: secret, id: id, ts: staleTS, sig: staleSig, body: body, want: signing.ErrTimestampOutOfWindow},
		{name: "future (now+6m)", secret: secret, id: id, ts: futureTS, sig: futureSig, body: body, want: signing.ErrTimestampOutOfWindow},
		{name: "just inside window (now-5m)", secret: secret, id: id, ts: edgeTS, sig: edgeSig, body: body},
		{name: "multiple signatures, one valid", secret: secret, id: id, ts: spec.Timestamp, sig: bogus + " " + otherSig + " " + good + " " + bogus, body: body},
		{name: "rotation: new key listed first", secret: other, id: id, ts: spec.Timestamp, sig: otherSig + " " + good, body: body},
		{name: "v2 with the right digest is ignored", secret: secret, id: id, ts: spec.Timestamp, sig: "v2," + goodB64, body: body, want: signing.ErrUnknownAlgorithm},
		{name: "v2 ignored, v1 valid", secret: secret, id: id, ts: spec.Timestamp, sig: "v2," + goodB64 + " " + good, body: body},
		{name: "v1a (asymmetric) ignored", secret: secret, id: id, ts: spec.Timestamp, sig: "v1a," + goodB64, body: body, want: signing.ErrUnknownAlgorithm},
		{name: "only wrong v1 signatures", secret: secret, id: id, ts: spec.Timestamp, sig: bogus + " " + bogus, body: body, want: signing.ErrSignatureMismatch},
		{name: "undecodable v1 next to a valid one", secret: secret, id: id, ts: spec.Timestamp, sig: "v1,!!!! " + good, body: body},
		{name: "no comma", secret: secret, id: id, ts: spec.Timestamp, sig: goodB64, body: body, want: signing.ErrMalformedHeader},
		{name: "empty signature", secret: secret, id: id, ts: spec.Timestamp, sig: "", body: body, want: signing.ErrMissingHeader},
		{name: "blank signature", secret: secret, id: id, ts: spec.Timestamp, sig: "   ", body: body, want: signing.ErrMalformedHeader},
		{name: "empty id", secret: secret, id: "", ts: spec.Timestamp, sig: good, body: body, want: signing.ErrMissingHeader},
		{name: "empty timestamp", secret: secret, id: id, ts: "", sig: good, body: body, want: signing.ErrMissingHeader},
		{name: "non-numeric timestamp", secret: secret, id: id, ts: "2021-02-26", sig: good, body: body, want: signing.ErrMalformedHeader},
		{name: "timestamp in milliseconds", secret: secret, id: id, ts: spec.Timestamp + "000", sig: good, body: body, want: signing.ErrTimestampOutOfWindow},
		{name: "largest int64 timestamp", secret: secret, id: id, ts: "9223372036854775807", sig: good, body: body, want: signing.ErrTimestampOutOfWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := signing.VerifyStandard(tc.secret, tc.id, tc.ts, tc.sig, tc.body, 0, now)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("VerifyStandard = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyStandard = %v, want an error wrapping %v", err, tc.want)
			}
			assertOneSentinel(t, err)
			if strings.Contains(err.Error(), strings.TrimPrefix(tc.secret, "whsec_")) {
				t.Fatalf("error %q contains the secret", err)
			}
		})
	}
}

func TestNewStandardSecret(t *testing.T) {
	a, b := signing.NewStandardSecret(), signing.NewStandardSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	for _, s := range []string{a, b} {
		enc, ok := strings.CutPrefix(s, "whsec_")
		if !ok {
			t.Fatalf("%q lacks whsec_ prefix", s)
		}
		key, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if len(key) < 24 || len(key) > 32 {
			t.Fatalf("key is %d bytes, want 24..32", len(key))
		}
	}
	now := time.Now()
	sig, err := signing.SignStandard(a, "evt_1", now, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.VerifyStandard(a, "evt_1", itoa(now.Unix()), sig, []byte("x"), 0, now); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if err := signing.VerifyStandard(b, "evt_1", itoa(now.Unix()), sig, []byte("x"), 0, now); !errors.Is(err, signing.ErrSignatureMismatch) {
		t.Fatalf("other secret: err = %v, want ErrSignatureMismatch", err)
	}
}
