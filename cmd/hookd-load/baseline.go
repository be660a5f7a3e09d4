package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// baselineCommand is the hidden sub-command streams runs as a child process: a bare net/http SSE
// server, so that its RSS is measured on its own exactly like the daemon's.
const baselineCommand = "sse-baseline"

// runBaselineServer serves GET /stream (an SSE stream that writes a heartbeat comment every
// -heartbeat and nothing else) and GET /open (the number of streams open now).
func runBaselineServer(ctx context.Context, args []string) error {
	fs := newFlags(baselineCommand, "A bare net/http SSE server (the streams baseline).")
	listen := fs.String("listen", "127.0.0.1:0", "address")
	heartbeat := fs.Duration("heartbeat", 5*time.Second, "heartbeat interval")
	fs.Parse(args)

	var open atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		open.Add(1)
		defer open.Add(-1)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if rc.Flush() != nil {
			return
		}
		t := time.NewTicker(*heartbeat)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
		}
	})
	mux.HandleFunc("GET /open", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, open.Load()) })
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
