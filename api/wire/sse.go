package wire

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// SSE writes server-sent events to one response, each flushed as it is written, so a client
// sees every event when it happens. It is safe for concurrent use (a heartbeat goroutine and the
// event loop may share it).
type SSE struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
	// DataPrefix is "data: " by default; the Harness dialect writes "data:" as its document does.
	DataPrefix string
}

// StartSSE sends the event-stream headers (status 200) and lifts the server's write deadline: a
// stream lasts as long as its run.
func StartSSE(w http.ResponseWriter, extra http.Header) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	for k, v := range extra {
		h[k] = v
	}
	s := &SSE{w: w, rc: http.NewResponseController(w), DataPrefix: "data: "}
	_ = s.rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	_ = s.rc.Flush()
	return s
}

// Event writes one event: an `id:` line when id is set, an `event:` line when name is set, and
// the data (one `data:` line per line of it). It writes straight into the response's buffer:
// idle streams send a heartbeat each every few seconds, and that should make no garbage.
func (s *SSE) Event(id, name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := errWriter{w: s.w}
	if id != "" {
		w.str("id: ")
		w.str(id)
		w.str("\n")
	}
	if name != "" {
		w.str("event: ")
		w.str(name)
		w.str("\n")
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		w.str(s.DataPrefix)
		w.bytes(line)
		w.str("\n")
		if !more {
			break
		}
		data = rest
	}
	w.str("\n")
	if w.err != nil {
		return w.err
	}
	return s.rc.Flush()
}

// Comment writes an SSE comment line (": text"), which clients ignore; a keep-alive.
func (s *SSE) Comment(text string) error { return s.write([]byte(": " + text + "\n\n")) }

// Raw writes bytes as they are (the JSON-array form of a stream) and flushes.
func (s *SSE) Raw(b []byte) error { return s.write(b) }

func (s *SSE) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// errWriter keeps the first error of a series of writes.
type errWriter struct {
	w   http.ResponseWriter
	err error
}

func (e *errWriter) str(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func (e *errWriter) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// StartStream is StartSSE for a plain streamed body of another content type (a JSON array
// written as it grows).
func StartStream(w http.ResponseWriter, contentType string) *SSE {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	s := &SSE{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	_ = s.rc.Flush()
	return s
}
