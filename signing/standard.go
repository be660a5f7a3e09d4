package signing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// standardSecretPrefix marks a Standard Webhooks secret; the HMAC key is the
// base64 (standard alphabet, padded) text after it.
const standardSecretPrefix = "whsec_"

// standardSecretBytes is the size of keys made by NewStandardSecret: the
// output size of SHA-256, the most an HMAC-SHA256 key usefully holds.
const standardSecretBytes = 32

// NewStandardSecret returns a fresh random Standard Webhooks secret,
// "whsec_" followed by the base64 of 32 bytes from crypto/rand.
func NewStandardSecret() string {
	key := make([]byte, standardSecretBytes)
	rand.Read(key) // never fails (crypto/rand since Go 1.24)
	return standardSecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// standardKey decodes a "whsec_<base64>" secret into the HMAC key.
func standardKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, standardSecretPrefix)
	if !ok {
		return nil, fmt.Errorf("standard webhooks secret must start with %q: %w", standardSecretPrefix, ErrBadSecret)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("standard webhooks secret is not %s<base64>: %w", standardSecretPrefix, ErrBadSecret)
	}
	return key, nil
}

// standardMAC is HMAC-SHA256 over id + "." + seconds + "." + body.
func standardMAC(key []byte, id, seconds string, body []byte) []byte {
	return mac(sha256.New, key, id+"."+seconds+".", body)
}

// SignStandard returns a webhook-signature value, "v1,<base64>", for body
// sent with webhook-id id and webhook-timestamp ts (whole seconds; the
// sub-second part of ts is dropped, as it is on the wire). The secret must
// be "whsec_<base64>"; otherwise the error wraps ErrBadSecret.
func SignStandard(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	sum := standardMAC(key, id, strconv.FormatInt(ts.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum), nil
}

// VerifyStandard checks a delivery signed with the Standard Webhooks scheme.
// It returns nil only if secret is "whsec_<base64>", id is not empty,
// timestampHeader is decimal epoch seconds within tolerance of now (either
// direction; tolerance <= 0 means DefaultTolerance), and at least one of the
// space-separated "v1,<base64>" entries of signatureHeader matches.
//
// Several entries are allowed so a secret can be rotated: the sender signs
// with old and new keys for a while, and any one valid v1 signature is
// enough. Entries with another version (such as "v1a," or "v2,") are
// ignored. If no v1 entry is present the error wraps ErrUnknownAlgorithm;
// if v1 entries are present but none match, ErrSignatureMismatch.
func VerifyStandard(secret, id, timestampHeader, signatureHeader string, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := standardKey(secret)
	if err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%s: %w", HeaderStdID, ErrMissingHeader)
	case timestampHeader == "":
		return fmt.Errorf("%s: %w", HeaderStdTimestamp, ErrMissingHeader)
	case signatureHeader == "":
		return fmt.Errorf("%s: %w", HeaderStdSignature, ErrMissingHeader)
	}
	secs, err := parseDecimal(timestampHeader)
	if err != nil {
		return fmt.Errorf("%s %q: %w", HeaderStdTimestamp, clip(timestampHeader), ErrMalformedHeader)
	}

	var v1 [][]byte
	wellFormed := false
	for _, entry := range strings.Fields(signatureHeader) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			continue
		}
		wellFormed = true
		if version != "v1" {
			continue
		}
		// An undecodable v1 entry is kept as "present but not matching"
		// rather than failing the whole header: another entry may be valid.
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			b = nil
		}
		v1 = append(v1, b)
	}
	switch {
	case !wellFormed:
		return fmt.Errorf("%s: want v1,<base64>: %w", HeaderStdSignature, ErrMalformedHeader)
	case len(v1) == 0:
		return fmt.Errorf("%s: no v1 signature: %w", HeaderStdSignature, ErrUnknownAlgorithm)
	}

	// Clamp absurd values (still far in the future) so time.Unix cannot
	// overflow; the window check then rejects them as future timestamps.
	const maxSeconds = 1 << 40
	if secs > maxSeconds {
		secs = maxSeconds
	}
	if err := checkWindow(time.Unix(secs, 0), tolerance, now); err != nil {
		return err
	}
	want := standardMAC(key, id, timestampHeader, body)
	for _, got := range v1 {
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%s: %w", HeaderStdSignature, ErrSignatureMismatch)
}
