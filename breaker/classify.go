package breaker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// IsNoResponse reports whether err means the receiver never produced an HTTP
// response: the only kind of outcome that counts as a breaker failure (and
// that the retry logic treats as "endpoint unreachable").
//
// True for (directly or wrapped, e.g. in *url.Error or *net.OpError):
//   - timeouts: any net.Error whose Timeout() is true (dial, TLS handshake,
//     response-header and http.Client timeouts) and context.DeadlineExceeded;
//   - connection errors: ECONNREFUSED, ECONNRESET, ECONNABORTED, EPIPE,
//     ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN;
//   - the connection closing before a response: io.EOF, io.ErrUnexpectedEOF;
//   - DNS errors (*net.DNSError, including "no such host");
//   - TLS handshake errors: record-header errors, alerts (local or remote),
//     certificate verification failures, an https:// URL answered by a
//     plaintext server, and other "tls: ..." handshake errors that
//     crypto/tls reports as plain strings.
//
// False for nil, for errors that came with (or after) an HTTP response, for
// errors on our side (e.g. a netguard refusal, a malformed request) and for
// context.Canceled: in hookd a cancelled request means our own shutdown or a
// caller giving up, which says nothing about the receiver's health, so it
// must neither trip the breaker nor be retried as an outage. (Acquire's done
// additionally ignores context.Canceled altogether instead of counting it as
// a success.) A timeout that also matches context.Canceled is still a
// timeout and reports true.
//
// Callers must only pass the error of the request itself (client.Do); an
// error while reading a response body happens after the endpoint answered
// and should be reported as nil.
func IsNoResponse(err error) bool {
	if err == nil {
		return false
	}
	// Timeouts first: http.Client's timeout error can also match
	// context.Canceled, and it is still a "no response" failure.
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}

	switch {
	case errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}

	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	return isTLSHandshakeError(err)
}

// IsTLSHandshake reports whether err is a failed TLS handshake (see IsNoResponse).
func IsTLSHandshake(err error) bool { return isTLSHandshakeError(err) }

func isTLSHandshakeError(err error) bool {
	var (
		recErr    tls.RecordHeaderError
		alertErr  tls.AlertError
		certErr   *tls.CertificateVerificationError
		echErr    *tls.ECHRejectionError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		opErr     *net.OpError
	)
	switch {
	case errors.As(err, &recErr), errors.As(err, &alertErr), errors.As(err, &certErr),
		errors.As(err, &echErr), errors.As(err, &unknownCA), errors.As(err, &hostErr),
		errors.As(err, &invalid):
		return true
	case errors.As(err, &opErr) && (opErr.Op == "remote error" || opErr.Op == "local error"):
		// crypto/tls reports alerts as *net.OpError{Op: "remote error"} (sent
		// by the peer) or {Op: "local error"} (sent by us).
		return true
	}
	// net/http replaces the RecordHeaderError of an https:// request answered
	// in plaintext with this bare error; the handshake failed and our request
	// got no HTTP response.
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return true
	}
	// Many handshake failures (e.g. "tls: server selected unsupported
	// protocol version") are plain errors from crypto/tls, returned unwrapped
	// by net/http inside *url.Error; their only marker is the "tls: " prefix.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), "tls: ") {
			return true
		}
	}
	return false
}
