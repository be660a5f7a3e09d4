package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Header names of the hookd scheme.
const (
	// HeaderTimestamp carries the signing time in epoch milliseconds, as a
	// decimal string. It is part of the signed content, so it cannot be
	// changed without breaking the signature.
	HeaderTimestamp = "X-Webhook-Timestamp"
	// HeaderSignature carries "<alg>=<lowercase hex>", for example
	// "sha256=5257a869...".
	HeaderSignature = "X-Webhook-Signature"
)

// Header names of the Standard Webhooks scheme (https://www.standardwebhooks.com/),
// which a hook can opt into instead of the hookd scheme.
const (
	// HeaderStdID carries the event id; it is the same on every retry.
	HeaderStdID = "webhook-id"
	// HeaderStdTimestamp carries the signing time in epoch seconds.
	HeaderStdTimestamp = "webhook-timestamp"
	// HeaderStdSignature carries one or more space-separated "v1,<base64>"
	// signatures; more than one is sent while a secret is being rotated.
	HeaderStdSignature = "webhook-signature"
)

// DefaultTolerance is how far a signed timestamp may be from the receiver's
// clock, in either direction, before the delivery is refused as a possible
// replay. It is used whenever a tolerance <= 0 is passed.
const DefaultTolerance = 5 * time.Minute

// Sentinel errors. Every verification failure wraps exactly one of them, so
// callers can branch with errors.Is; only an I/O error while VerifyRequest
// reads the body is returned without one. Messages never contain the secret.
var (
	// ErrMissingHeader: a required header is absent or empty.
	ErrMissingHeader = errors.New("signing: missing header")
	// ErrMalformedHeader: a header is present but cannot be parsed
	// (non-numeric timestamp, no "<alg>=" prefix, non-hex digest, wrong length...).
	ErrMalformedHeader = errors.New("signing: malformed header")
	// ErrUnknownAlgorithm: the signature names an algorithm this package
	// does not verify (for example "md5=", or only non-v1 Standard Webhooks
	// signatures).
	ErrUnknownAlgorithm = errors.New("signing: unknown signature algorithm")
	// ErrTimestampOutOfWindow: the signed timestamp is too old or too far in
	// the future; the delivery may be a replay, or a clock is wrong.
	ErrTimestampOutOfWindow = errors.New("signing: timestamp outside the allowed window")
	// ErrSignatureMismatch: the signature does not match the body, timestamp
	// and secret (wrong secret, or content changed in transit).
	ErrSignatureMismatch = errors.New("signing: signature mismatch")
	// ErrBadSecret: the secret is empty or, for Standard Webhooks, not of
	// the form "whsec_<base64>".
	ErrBadSecret = errors.New("signing: bad secret")
	// ErrBodyTooLarge: VerifyRequest read more than maxBody bytes.
	ErrBodyTooLarge = errors.New("signing: body too large")
)

// algorithms maps the prefix of X-Webhook-Signature to its hash. The prefix
// exists so the server can move to another algorithm later; receivers must
// read it rather than assume sha256. sha512 is the documented next one.
var algorithms = map[string]func() hash.Hash{
	"sha256": sha256.New,
	"sha512": sha512.New,
}

// Sign returns the X-Webhook-Signature value for body sent with the given
// X-Webhook-Timestamp value: "sha256=" followed by the lowercase hex
// HMAC-SHA256 of timestamp + "." + body, keyed with the bytes of secret.
//
// body must be the exact bytes put on the wire: re-encoding JSON, even
// equivalently, changes the signature.
func Sign(secret, timestamp string, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(sha256.New, []byte(secret), timestamp+".", body))
}

// Verify checks a delivery signed with the hookd scheme. It returns nil only
// if all of these hold:
//   - secret is not empty;
//   - timestampHeader is a decimal number of epoch milliseconds within
//     tolerance of now, in either direction (tolerance <= 0 means
//     DefaultTolerance; there is deliberately no way to switch the check
//     off, since it is what stops replays);
//   - signatureHeader is "<alg>=<hex>" with a known alg (sha256, sha512);
//   - the digest equals the HMAC of timestampHeader + "." + body, compared
//     in constant time.
//
// now is passed in so receivers and tests control the clock; use time.Now().
// Malformed input of any kind gives an error, never a panic.
func Verify(secret, timestampHeader, signatureHeader string, body []byte, tolerance time.Duration, now time.Time) error {
	if secret == "" {
		return fmt.Errorf("empty secret: %w", ErrBadSecret)
	}
	if timestampHeader == "" {
		return fmt.Errorf("%s: %w", HeaderTimestamp, ErrMissingHeader)
	}
	if signatureHeader == "" {
		return fmt.Errorf("%s: %w", HeaderSignature, ErrMissingHeader)
	}
	ms, err := parseDecimal(timestampHeader)
	if err != nil {
		return fmt.Errorf("%s %q: %w", HeaderTimestamp, clip(timestampHeader), ErrMalformedHeader)
	}

	alg, digestHex, ok := strings.Cut(signatureHeader, "=")
	if !ok || alg == "" {
		return fmt.Errorf("%s: want <alg>=<hex>: %w", HeaderSignature, ErrMalformedHeader)
	}
	newHash, known := algorithms[alg]
	if !known {
		return fmt.Errorf("%s algorithm %q: %w", HeaderSignature, clip(alg), ErrUnknownAlgorithm)
	}
	size := newHash().Size()
	if len(digestHex) != 2*size {
		return fmt.Errorf("%s: %s digest must be %d hex digits, got %d: %w",
			HeaderSignature, alg, 2*size, len(digestHex), ErrMalformedHeader)
	}
	got, err := hex.DecodeString(digestHex)
	if err != nil {
		return fmt.Errorf("%s: digest is not hex: %w", HeaderSignature, ErrMalformedHeader)
	}

	if err := checkWindow(time.UnixMilli(ms), tolerance, now); err != nil {
		return err
	}
	want := mac(newHash, []byte(secret), timestampHeader+".", body)
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%s: %w", HeaderSignature, ErrSignatureMismatch)
	}
	return nil
}

// mac returns the HMAC of prefix + body. Writing the two parts separately
// avoids copying a large body.
func mac(h func() hash.Hash, key []byte, prefix string, body []byte) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// parseDecimal accepts only ASCII digits: no sign, space, or "0x". Besides
// strictness, this keeps the signed content unambiguous: the first "." after
// the timestamp is always the separator.
func parseDecimal(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal number")
		}
	}
	return strconv.ParseInt(s, 10, 64) // fails on overflow
}

// checkWindow rejects a signed time more than tolerance away from now, in
// either direction. The bounds are inclusive. time.Time.Sub saturates, so
// absurd timestamps cannot overflow into the window.
func checkWindow(signed time.Time, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	d := now.Sub(signed)
	switch {
	case d > tolerance:
		return fmt.Errorf("timestamp is %s old, limit %s: %w", d.Round(time.Second), tolerance, ErrTimestampOutOfWindow)
	case d < -tolerance:
		return fmt.Errorf("timestamp is %s in the future, limit %s: %w", (-d).Round(time.Second), tolerance, ErrTimestampOutOfWindow)
	}
	return nil
}

// clip bounds how much of an attacker-supplied header is echoed into an
// error (and so into logs).
func clip(s string) string {
	const max = 32
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
