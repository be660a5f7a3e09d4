package api

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
)

// Limits bound what one connection may hold. Zero values take the defaults below.
type Limits struct {
	// ReadTimeout is how long a request's body may take to arrive after its headers. It covers
	// every route, streams too, but only until the body is read: a stream lasts as long as its
	// run. (http.Server.ReadTimeout would also cancel a stream's context when it ran out.)
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request in flight.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's headers (431 beyond).
	MaxHeaderBytes int
	// SSEWriteTimeout drops a stream whose client has stopped reading: a write that has not gone
	// out within it fails, and the stream's handler ends. Only that stream waits meanwhile; the run
	// and the other streams do not.
	SSEWriteTimeout time.Duration
}

// The defaults of Limits.
const (
	DefaultReadTimeout     = 30 * time.Second
	DefaultIdleTimeout     = 120 * time.Second
	DefaultMaxHeaderBytes  = 64 << 10
	DefaultSSEWriteTimeout = 30 * time.Second
	// headerTimeout bounds the headers of a request, whatever ReadTimeout says.
	headerTimeout = 10 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.SSEWriteTimeout <= 0 {
		l.SSEWriteTimeout = DefaultSSEWriteTimeout
	}
	return l
}

// NewServer is the daemon's HTTP server for d: the handler of New, and the connection limits of
// d.Limits. The caller adds what belongs to the process (ErrorLog, BaseContext).
func NewServer(d Deps) *http.Server {
	l := d.Limits.withDefaults()
	return &http.Server{
		Handler:           New(d),
		ReadHeaderTimeout: min(headerTimeout, l.ReadTimeout),
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// readBody reads the request body within timeout and hands the handler a copy in memory, so a
// client trickling its body is answered 408 and disconnected, and the deadline is gone before a
// stream starts. It refuses bodies over MaxBodyBytes: at once when Content-Length says so, else
// when the read passes the limit. A route that answers such a body itself (answersOversized) gets
// the bytes up to the limit instead.
func readBody(timeout time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > MaxBodyBytes && !answersOversized(c) {
			wire.Fail(c, http.StatusRequestEntityTooLarge, "request body over %d bytes", MaxBodyBytes)
			return
		}
		if c.Request.Body == nil || c.Request.Body == http.NoBody {
			return // no body, as on a GET: nothing to read, no deadline to set
		}
		rc := http.NewResponseController(c.Writer)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		body, err := readAll(c.Request.Body, c.Request.ContentLength, MaxBodyBytes)
		tooBig, over := errors.AsType[*http.MaxBytesError](err)
		switch {
		case err == nil:
			_ = rc.SetReadDeadline(time.Time{}) // on failure it stays: the server must not wait for the rest
			c.Request.Body = wire.NewBuffered(body)
		case over && answersOversized(c):
			// The rest of the body stays unread: the server closes the connection after the answer
			// (as http.MaxBytesReader would have it), rather than read on to reuse it.
			c.Header("Connection", "close")
			wire.MarkOversized(c, wire.Oversized{Limit: tooBig.Limit, Prefix: body})
			c.Request.Body = wire.NewBuffered(nil)
		case over:
			c.Header("Connection", "close")
			wire.Fail(c, http.StatusRequestEntityTooLarge, "request body over %d bytes", tooBig.Limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.Header("Connection", "close")
			wire.Fail(c, http.StatusRequestTimeout, "request body not received within %s (http.readTimeout)", timeout)
		default: // the client went away
			c.Header("Connection", "close")
			wire.Fail(c, http.StatusBadRequest, "request body: %v", err)
		}
	}
}

// readAll reads r to its end as io.ReadAll(http.MaxBytesReader(w, r, limit)) does: the bytes up
// to limit, and a *http.MaxBytesError past it. It reads into one buffer of a known length's size
// (length < 0 for unknown) instead of growing one from 512 bytes, and allocates no limit reader.
// A length over presizeMax is not taken at its word: the buffer grows as the bytes come, so a
// client cannot have memory held for a body it never sends.
func readAll(r io.Reader, length, limit int64) ([]byte, error) {
	size := int64(512)
	if length > 0 {
		size = min(length, limit, presizeMax) + 1 // one byte more, for the read that finds the end
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := b[len(b):cap(b)]
		if rest := limit + 1 - int64(len(b)); int64(len(room)) > rest {
			room = room[:rest] // one byte past the limit tells a body over it
		}
		n, err := r.Read(room)
		b = b[:len(b)+n]
		switch {
		case int64(len(b)) > limit:
			return b[:limit], &http.MaxBytesError{Limit: limit}
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		}
	}
}

// presizeMax bounds the buffer readAll allocates before any byte of the body has come.
const presizeMax = 64 << 10

// deadlineWriter arms the connection's write deadline before each write and flush.
type deadlineWriter struct {
	gin.ResponseWriter
	timeout time.Duration
}

func (w *deadlineWriter) arm() {
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) WriteString(s string) (int, error) {
	w.arm()
	return w.ResponseWriter.WriteString(s)
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports a failed flush (gin's Flush drops the error), so the stream sees
// its client is gone.
func (w *deadlineWriter) FlushError() error {
	w.arm()
	w.ResponseWriter.WriteHeaderNow()
	var inner http.ResponseWriter = w.ResponseWriter
	if u, ok := inner.(interface{ Unwrap() http.ResponseWriter }); ok {
		inner = u.Unwrap()
	}
	return http.NewResponseController(inner).Flush()
}

// LimitListener accepts at most n connections at once; the next waits in the kernel's backlog
// until one closes. n <= 0 is no cap.
func LimitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
