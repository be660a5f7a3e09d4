package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/signing"
)

// The signature headers in their canonical form, so they can be set without canonicalising each
// time.
var (
	hdrTimestamp    = textproto.CanonicalMIMEHeaderKey(signing.HeaderTimestamp)
	hdrSignature    = textproto.CanonicalMIMEHeaderKey(signing.HeaderSignature)
	hdrStdID        = textproto.CanonicalMIMEHeaderKey(signing.HeaderStdID)
	hdrStdTimestamp = textproto.CanonicalMIMEHeaderKey(signing.HeaderStdTimestamp)
	hdrStdSignature = textproto.CanonicalMIMEHeaderKey(signing.HeaderStdSignature)
)

// signer signs with one hook's secret. It computes what package signing computes (the tests
// compare the two), but keeps keyed HMAC states in a pool: hmac.New's key schedule and buffers
// are paid once per secret, not once per request. A registry snapshot holds one signer per hook,
// so a changed secret gets a new signer with the next snapshot.
type signer struct {
	standard bool
	pool     sync.Pool // of *macState
}

// macState is a keyed HMAC with scratch space for one signature.
type macState struct {
	mac     hash.Hash
	scratch [64]byte
	sum     [sha256.Size]byte
}

// newSigner returns the signer of h's secret and scheme; nil when the hook does not sign or its
// standard secret does not decode (sign then goes through package signing, which reports it).
func newSigner(h *Hook) *signer {
	secret := h.Secret()
	if secret == "" {
		return nil
	}
	key := []byte(secret)
	s := &signer{standard: h.DispatchConfig.SignatureScheme == SchemeStandard}
	if s.standard {
		enc, ok := strings.CutPrefix(secret, "whsec_")
		if !ok {
			return nil
		}
		k, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil || len(k) == 0 {
			return nil
		}
		key = k
	}
	s.pool.New = func() any { return &macState{mac: hmac.New(sha256.New, key)} }
	return s
}

// sign adds the signature headers of the hook's scheme; a hook without a secret is not signed. s
// is the hook's signer from the registry snapshot, or nil (package signing does the work).
func sign(hdr http.Header, h *Hook, s *signer, eventID string, now time.Time, body []byte) error {
	if s == nil {
		return signSlow(hdr, h, eventID, now, body)
	}
	m := s.pool.Get().(*macState)
	defer s.pool.Put(m)
	m.mac.Reset()
	// One string holds both header values, and one slice both value lists.
	var vals []string
	if s.standard {
		// HMAC of id.seconds.body; webhook-signature "v1,<base64>".
		pre := append(append(m.scratch[:0], eventID...), '.')
		from := len(pre)
		pre = strconv.AppendInt(pre, now.Unix(), 10)
		ts := pre[from:]
		m.mac.Write(append(pre, '.'))
		m.mac.Write(body)
		m.mac.Sum(m.sum[:0])
		var buf [64]byte // one string of both values is made from it
		out := append(buf[:0], ts...)
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, m.sum[:])
		both := string(out)
		vals = []string{eventID, both[:len(ts)], both[len(ts):]}
		hdr[hdrStdID] = vals[0:1:1]
		hdr[hdrStdTimestamp] = vals[1:2:2]
		hdr[hdrStdSignature] = vals[2:3:3]
		return nil
	}
	// HMAC of timestamp.body; X-Webhook-Signature "sha256=<hex>".
	ts := strconv.AppendInt(m.scratch[:0], now.UnixMilli(), 10)
	n := len(ts)
	m.mac.Write(append(ts, '.'))
	m.mac.Write(body)
	m.mac.Sum(m.sum[:0])
	var buf [96]byte // one string of both values is made from it
	out := append(buf[:0], ts[:n]...)
	out = append(out, "sha256="...)
	out = hex.AppendEncode(out, m.sum[:])
	both := string(out)
	vals = []string{both[:n], both[n:]}
	hdr[hdrTimestamp] = vals[0:1:1]
	hdr[hdrSignature] = vals[1:2:2]
	return nil
}

// signSlow signs through package signing.
func signSlow(hdr http.Header, h *Hook, eventID string, now time.Time, body []byte) error {
	secret := h.Secret()
	if secret == "" {
		return nil
	}
	if h.DispatchConfig.SignatureScheme == SchemeStandard {
		sig, err := signing.SignStandard(secret, eventID, now, body)
		if err != nil {
			return fmt.Errorf("sign: %w", err)
		}
		hdr.Set(signing.HeaderStdID, eventID)
		hdr.Set(signing.HeaderStdTimestamp, strconv.FormatInt(now.Unix(), 10))
		hdr.Set(signing.HeaderStdSignature, sig)
		return nil
	}
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	hdr.Set(signing.HeaderTimestamp, ts)
	hdr.Set(signing.HeaderSignature, signing.Sign(secret, ts, body))
	return nil
}
