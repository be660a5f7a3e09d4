package breaker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// post performs a real webhook-like POST and returns the client error.
func post(t *testing.T, c *http.Client, ctx context.Context, target string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{"event":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// newClient returns a client with its own transport (no connection reuse
// between cases, no environment proxy).
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}
}

// hijackServer accepts the request and drops the connection without
// answering; with reset it aborts the connection (RST) instead of closing it.
func hijackServer(t *testing.T, reset bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if reset {
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestIsNoResponseRealErrors(t *testing.T) {
	ctx := context.Background()

	// Connection refused: a port that was just released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	eofSrv := hijackServer(t, false)
	rstSrv := hijackServer(t, true)

	// Never answers; released at the end of the test so Close does not hang.
	release := make(chan struct{})
	hangSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hangSrv.Close)
	t.Cleanup(func() { close(release) })

	errSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(errSrv.Close)

	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	cases := []struct {
		name  string
		err   func(t *testing.T) error
		want  bool
		check func(t *testing.T, err error) // asserts the error really is of the intended kind
	}{
		{
			name: "connection refused",
			err:  func(t *testing.T) error { return post(t, newClient(5*time.Second), ctx, "http://"+closedAddr+"/") },
			want: true,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("not ECONNREFUSED: %v", err)
				}
			},
		},
		{
			name: "server closes connection without response (EOF)",
			err:  func(t *testing.T) error { return post(t, newClient(5*time.Second), ctx, eofSrv.URL) },
			want: true,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) &&
					!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("not EOF/reset: %v", err)
				}
			},
		},
		{
			name: "server resets connection",
			err:  func(t *testing.T) error { return post(t, newClient(5*time.Second), ctx, rstSrv.URL) },
			want: true,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) &&
					!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("not EOF/reset: %v", err)
				}
			},
		},
		{
			name: "client timeout, server never answers",
			err:  func(t *testing.T) error { return post(t, newClient(100*time.Millisecond), ctx, hangSrv.URL) },
			want: true,
			check: func(t *testing.T, err error) {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Errorf("not a timeout: %v", err)
				}
			},
		},
		{
			name: "context deadline, server never answers",
			err: func(t *testing.T) error {
				ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				return post(t, newClient(0), ctx, hangSrv.URL)
			},
			want: true,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("not DeadlineExceeded: %v", err)
				}
			},
		},
		{
			name: "DNS: unresolvable host",
			err:  func(t *testing.T) error { return post(t, newClient(5*time.Second), ctx, "http://nonexistent.invalid/") },
			want: true,
			check: func(t *testing.T, err error) {
				var dnsErr *net.DNSError
				if !errors.As(err, &dnsErr) {
					t.Errorf("not a DNS error: %T %v", errors.Unwrap(err), err)
				}
			},
		},
		{
			name: "TLS handshake: untrusted certificate",
			err:  func(t *testing.T) error { return post(t, newClient(5*time.Second), ctx, tlsSrv.URL) },
			want: true,
			check: func(t *testing.T, err error) {
				var certErr *tls.CertificateVerificationError
				if !errors.As(err, &certErr) {
					t.Errorf("not a certificate verification error: %v", err)
				}
			},
		},
		{
			name: "TLS handshake: plain HTTP server",
			err: func(t *testing.T) error {
				return post(t, newClient(5*time.Second), ctx, strings.Replace(errSrv.URL, "http://", "https://", 1))
			},
			want: true,
		},
		{
			name: "url.Error wrapping context.DeadlineExceeded",
			err: func(t *testing.T) error {
				return &url.Error{Op: "Post", URL: "https://x.example/", Err: context.DeadlineExceeded}
			},
			want: true,
		},
		{
			name: "wrapped io.ErrUnexpectedEOF",
			err:  func(t *testing.T) error { return fmt.Errorf("deliver: %w", io.ErrUnexpectedEOF) },
			want: true,
		},
		{
			name: "EPIPE in OpError",
			err: func(t *testing.T) error {
				return &url.Error{Op: "Post", URL: "https://x.example/", Err: &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}}
			},
			want: true,
		},
		// Negatives.
		{name: "nil", err: func(t *testing.T) error { return nil }, want: false},
		{
			name: "HTTP 500 response (no error)",
			err: func(t *testing.T) error {
				resp, err := newClient(5*time.Second).Post(errSrv.URL, "application/json", strings.NewReader("{}"))
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusInternalServerError {
					t.Errorf("status = %d", resp.StatusCode)
				}
				return nil
			},
			want: false,
		},
		{
			name: "context canceled by our shutdown",
			err: func(t *testing.T) error {
				ctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(50*time.Millisecond, cancel)
				return post(t, newClient(0), ctx, hangSrv.URL)
			},
			want: false,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("not Canceled: %v", err)
				}
			},
		},
		{name: "plain application error", err: func(t *testing.T) error { return errors.New("hook disabled") }, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if tc.want && err == nil {
				t.Fatal("expected a real error, got nil")
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if got := IsNoResponse(err); got != tc.want {
				t.Fatalf("IsNoResponse(%T: %v) = %v, want %v", err, err, got, tc.want)
			}
		})
	}
}
