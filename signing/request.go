package signing

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// defaultMaxBody is the body limit VerifyRequest applies when maxBody <= 0.
const defaultMaxBody = 1 << 20 // 1 MiB

// VerifyRequest is the one call a net/http receiver needs. It reads the body
// of r (at most maxBody bytes; maxBody <= 0 means 1 MiB), checks the
// signature with the current time, and returns the body only if it is
// authentic. On error it returns a nil body, so unverified content cannot be
// used by mistake.
//
// The scheme is chosen by the headers present: X-Webhook-Signature selects
// the hookd scheme (Verify, secret used as-is as the HMAC key),
// webhook-signature selects Standard Webhooks (VerifyStandard, secret
// "whsec_<base64>"). If both are present the hookd scheme is used. A request
// with neither gets ErrMissingHeader; a body
// over the limit gets ErrBodyTooLarge.
//
// r.Body is consumed. Answer 401 on ErrSignatureMismatch and similar, and
// 413 on ErrBodyTooLarge if you want to be precise; see the package example.
func VerifyRequest(r *http.Request, secret string, tolerance time.Duration, maxBody int64) ([]byte, error) {
	hookd := r.Header.Get(HeaderSignature) != ""
	standard := r.Header.Get(HeaderStdSignature) != ""
	if !hookd && !standard {
		return nil, fmt.Errorf("neither %s nor %s: %w", HeaderSignature, HeaderStdSignature, ErrMissingHeader)
	}

	body, err := readBounded(r.Body, maxBody)
	if err != nil {
		return nil, err
	}

	now := time.Now()
	if hookd {
		err = Verify(secret, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body, tolerance, now)
	} else {
		err = VerifyStandard(secret, r.Header.Get(HeaderStdID), r.Header.Get(HeaderStdTimestamp),
			r.Header.Get(HeaderStdSignature), body, tolerance, now)
	}
	if err != nil {
		return nil, err
	}
	return body, nil
}

// readBounded reads all of rc, failing with ErrBodyTooLarge past max bytes.
func readBounded(rc io.ReadCloser, max int64) ([]byte, error) {
	if rc == nil || rc == http.NoBody {
		return []byte{}, nil
	}
	if max <= 0 {
		max = defaultMaxBody
	}
	limit := max
	if limit < math.MaxInt64 {
		limit++ // one byte more than allowed tells "too large" from "exactly max"
	}
	body, err := io.ReadAll(io.LimitReader(rc, limit))
	if err != nil {
		return nil, fmt.Errorf("signing: reading body: %w", err)
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("more than %d bytes: %w", max, ErrBodyTooLarge)
	}
	return body, nil
}
