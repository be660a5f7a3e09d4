package wire

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each event arrives as written, before the handler writes the next one.
func TestSSEEventFormat(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := StartSSE(w, http.Header{"X-Request-Id": {"r1"}})
		_ = s.Event("7", "message", []byte("line one\nline two"))
		<-next
		s.DataPrefix = "data:"
		_ = s.Event("", "", []byte(`{"a":1}`))
		_ = s.Comment("ping")
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" || resp.Header.Get("X-Request-Id") != "r1" {
		t.Fatalf("headers: %v", resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	first := ""
	for !strings.HasSuffix(first, "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("first event: %q, %v", first, err)
		}
		first += line
	}
	if want := "id: 7\nevent: message\ndata: line one\ndata: line two\n\n"; first != want {
		t.Fatalf("first event %q, want %q", first, want)
	}
	close(next)
	rest, _ := io.ReadAll(br)
	if want := "data:{\"a\":1}\n\n: ping\n\n"; string(rest) != want {
		t.Fatalf("rest %q, want %q", rest, want)
	}
}
