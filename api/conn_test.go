package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// failsafe bounds every wait of these tests; the limits under test are far shorter, so only a
// connection the server never closes runs into it.
const failsafe = 30 * time.Second

// serveLimited runs api.NewServer with d on a real TCP listener; wrap, when set, adjusts each
// accepted connection.
func serveLimited(t *testing.T, d api.Deps, maxConns int, wrap func(net.Conn) net.Conn) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = &adjustListener{Listener: ln, adjust: wrap}
	}
	srv := api.NewServer(d)
	go srv.Serve(api.LimitListener(ln, maxConns))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

type adjustListener struct {
	net.Listener
	adjust func(net.Conn) net.Conn
}

func (l *adjustListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.adjust(c), nil
}

// noticedConn tells closed the peer's address when the server closes it.
type noticedConn struct {
	net.Conn
	closed chan<- string
}

func (c *noticedConn) Close() error {
	c.closed <- c.RemoteAddr().String()
	return c.Conn.Close()
}

// closedByServer reads c until the server closes it and reports whether it did before the
// failsafe (a read timeout means the connection was still open).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(failsafe))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true // EOF (io.Copy's nil) or a reset
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnectionLimits: an idle keep-alive connection, a body trickling in and headers trickling
// in are each closed after their (shrunk) timeout; oversized headers get 431; a cap on
// connections holds the next one until one closes.
func TestConnectionLimits(t *testing.T) {
	db := storagetest.SQLite(t)
	env := agenttest.New(t, db, agenttest.Options{Script: askScript})
	lim := api.Limits{ReadTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond, MaxHeaderBytes: 8 << 10}
	d := api.Deps{DB: db, Hooks: env.Hooks, Dispatcher: env.Dispatcher, Runtime: env.Runtime, Workspaces: env.Workspaces,
		LoopbackOnly: true, Log: agenttest.Quiet(), Limits: lim}
	addr := serveLimited(t, d, 0, nil)

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t, addr)
		start := time.Now()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", err, resp)
		}
		resp.Body.Close()
		if !closedByServer(t, c) {
			t.Fatal("idle connection still open")
		}
		if el := time.Since(start); el < lim.IdleTimeout {
			t.Fatalf("closed after %v, before the idle timeout", el)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, "POST /api/hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"hookName\":")
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(failsafe))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a trickling body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("status %d, want 408", resp.StatusCode)
		}
		if !closedByServer(t, c) {
			t.Fatal("connection with a trickling body still open")
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
		if !closedByServer(t, c) {
			t.Fatal("connection with trickling headers still open")
		}
	})
	t.Run("header size", func(t *testing.T) {
		c := dial(t, addr)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("big headers: %v %v", err, resp)
		}
	})
	t.Run("max connections", func(t *testing.T) {
		long := d
		long.Limits.IdleTimeout = failsafe // the held connections stay while the third waits
		capped := serveLimited(t, long, 2, nil)
		get := func(c net.Conn, br *bufio.Reader, wait time.Duration) (*http.Response, error) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			_ = c.SetReadDeadline(time.Now().Add(wait))
			return http.ReadResponse(br, nil)
		}
		var held []net.Conn
		for range 2 {
			c := dial(t, capped)
			if resp, err := get(c, bufio.NewReader(c), failsafe); err != nil || resp.StatusCode != 200 {
				t.Fatalf("within the cap: %v %v", err, resp)
			}
			held = append(held, c)
		}
		third := dial(t, capped)
		br := bufio.NewReader(third)
		if resp, err := get(third, br, 300*time.Millisecond); err == nil {
			t.Fatalf("a third connection was served beside two: %d", resp.StatusCode)
		}
		held[0].Close()
		_ = third.SetReadDeadline(time.Now().Add(failsafe))
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("after one closed: %v %v", err, resp)
		}
	})
}

// TestStuckStreamReaderIsDropped: one client follows a run's stream and stops reading; the run
// goes on to the end, a second subscriber gets every frame of it meanwhile, and the stuck client
// is disconnected after sse.writeTimeout.
func TestStuckStreamReaderIsDropped(t *testing.T) {
	db := storagetest.SQLite(t)
	big := strings.Repeat("一段很长的回答。", 40000) // about 1 MB of text in 100-rune deltas
	script := `{"scripts":[{"match":"","steps":[
	  {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},
	  {"text":"` + big + `","chunkSize":100}]}]}`
	env := agenttest.New(t, db, agenttest.Options{Script: script, Config: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
	d := api.Deps{DB: db, Hooks: env.Hooks, Dispatcher: env.Dispatcher, Runtime: env.Runtime, Workspaces: env.Workspaces,
		LoopbackOnly: true, Log: agenttest.Quiet(), Heartbeat: 10 * time.Millisecond,
		Limits: api.Limits{SSEWriteTimeout: 300 * time.Millisecond}}
	// Small socket buffers on the server's side, so a client that stops reading stalls its
	// stream's writes after a few kilobytes rather than a few megabytes.
	closed := make(chan string, 64)
	addr := serveLimited(t, d, 0, func(c net.Conn) net.Conn {
		c.(*net.TCPConn).SetWriteBuffer(4 << 10)
		return &noticedConn{Conn: c, closed: closed}
	})
	base := "http://" + addr

	// The second subscriber starts the run and reads normally.
	req, _ := http.NewRequest("POST", base+"/api/agent/run/stream", strings.NewReader(`{"sessionId":"s","userInput":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("start: %v %v", err, resp)
	}
	defer resp.Body.Close()
	frames := bufio.NewScanner(resp.Body)
	frames.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() (string, map[string]any) {
		for frames.Scan() {
			line, ok := strings.CutPrefix(frames.Text(), "data: ")
			if !ok {
				continue
			}
			var f struct {
				EventType string
				Data      map[string]any
			}
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatalf("frame: %v", err)
			}
			return f.EventType, f.Data
		}
		t.Fatalf("stream ended: %v", frames.Err())
		return "", nil
	}
	var requestID, askID string
	for askID == "" {
		switch typ, data := next(); typ {
		case "SESSION_CREATED":
			requestID = data["requestId"].(string)
		case "PERMISSION_ASK":
			askID = data["askId"].(string)
		}
	}

	// The stuck client: a tiny receive window, follows the run, never reads.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	stuck, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	io.WriteString(stuck, "GET /api/agent/run/stream?requestId="+requestID+"&lastEventId=0 HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")

	// The run goes on: approve, and the second subscriber reads it to the end.
	reply, _ := http.NewRequest("POST", base+"/api/agent/permission/reply", strings.NewReader(`{"askId":"`+askID+`","approved":true}`))
	reply.Header.Set("Content-Type", "application/json")
	rr, err := http.DefaultClient.Do(reply)
	if err != nil || rr.StatusCode != 200 {
		t.Fatalf("reply: %v %v", err, rr)
	}
	rr.Body.Close()
	text := 0
	for {
		typ, data := next()
		if typ == "TEXT_DELTA" {
			text += len(data["text"].(string))
		}
		if typ == "MESSAGE_COMPLETED" {
			break
		}
	}
	if text != len(big) {
		t.Fatalf("second subscriber got %d bytes of text, want %d", text, len(big))
	}
	if st, err := env.Runtime.Run(context.Background(), "local", requestID); err != nil || st.Status != storage.RunCompleted {
		t.Fatalf("run: %+v %v", st, err)
	}
	// The server drops the stuck client (it has read nothing all along).
	timeout := time.After(failsafe)
	for dropped := false; !dropped; {
		select {
		case a := <-closed:
			dropped = a == stuck.LocalAddr().String()
		case <-timeout:
			t.Fatal("the stuck reader's stream is still open")
		}
	}
	if !closedByServer(t, stuck) {
		t.Fatal("the stuck reader's connection is still open")
	}
}
