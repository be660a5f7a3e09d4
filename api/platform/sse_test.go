package platform_test

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// sseEvent is one event as an EventSource would dispatch it (WHATWG HTML §9.2.6), plus whether
// the event's own block carried an id field.
type sseEvent struct {
	Type        string // "message" unless an event field named it
	Data        string
	LastEventID string // the last event ID buffer at dispatch: it persists across events
	HasID       bool   // this block had an id field
}

// sseParser interprets an event stream by the WHATWG rules: lines end in CRLF, LF or CR; a line
// starting with ':' is a comment; "field: value" loses one leading space of the value; data
// lines accumulate with LF between them; an id containing NUL is ignored; a blank line dispatches
// unless the data buffer is empty; an unfinished block at EOF is dropped.
type sseParser struct {
	r        *bufio.Reader
	started  bool
	afterCR  bool // the previous line ended in CR: a LF right after it is part of that ending
	lastID   string
	data     strings.Builder
	hasData  bool
	evType   string
	blockID  bool
	Comments int
	Retry    string
}

func newSSEParser(r io.Reader) *sseParser { return &sseParser{r: bufio.NewReader(r)} }

func (p *sseParser) line() (string, error) {
	var b []byte
	for {
		c, err := p.r.ReadByte()
		if err != nil {
			return "", err // a line cut off by EOF is not a line
		}
		if p.afterCR {
			p.afterCR = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return p.decode(b), nil
		case '\r':
			p.afterCR = true
			return p.decode(b), nil
		}
		b = append(b, c)
	}
}

func (p *sseParser) decode(b []byte) string {
	s := string(b)
	if !p.started {
		p.started = true
		s = strings.TrimPrefix(s, "\uFEFF")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

// Next returns the next dispatched event; io.EOF when the stream ends.
func (p *sseParser) Next() (sseEvent, error) {
	for {
		l, err := p.line()
		if err != nil {
			return sseEvent{}, err
		}
		if l == "" {
			if !p.hasData {
				p.evType, p.blockID = "", false
				continue
			}
			ev := sseEvent{Type: p.evType, Data: strings.TrimSuffix(p.data.String(), "\n"), LastEventID: p.lastID, HasID: p.blockID}
			if ev.Type == "" {
				ev.Type = "message"
			}
			p.data.Reset()
			p.hasData, p.evType, p.blockID = false, "", false
			return ev, nil
		}
		if l[0] == ':' {
			p.Comments++
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			p.evType = value
		case "data":
			p.data.WriteString(value)
			p.data.WriteByte('\n')
			p.hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				p.lastID = value
				p.blockID = true
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				p.Retry = value
			}
		}
	}
}

func TestSSEParser(t *testing.T) {
	in := "\uFEFF: hello\r\n" +
		"id: 1\r\ndata: first\r\ndata:  two spaces\r\n\r\n" +
		"data: no id here\n\n" +
		"event: custom\rid: 2\rdata:x\r\r" +
		"data\n\n" +
		"id\ndata: reset id\n\n" +
		"id: bad\x00id\ndata: kept id\n\n" +
		"retry: 300\nfield-unknown: y\n\n" +
		"data: unfinished"
	p := newSSEParser(strings.NewReader(in))
	want := []sseEvent{
		{Type: "message", Data: "first\n two spaces", LastEventID: "1", HasID: true},
		{Type: "message", Data: "no id here", LastEventID: "1"},
		{Type: "custom", Data: "x", LastEventID: "2", HasID: true},
		{Type: "message", Data: "", LastEventID: "2"},
		{Type: "message", Data: "reset id", LastEventID: "", HasID: true},
		{Type: "message", Data: "kept id", LastEventID: ""},
	}
	for i, w := range want {
		got, err := p.Next()
		if err != nil || got != w {
			t.Fatalf("event %d: %+v %v, want %+v", i, got, err, w)
		}
	}
	if _, err := p.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
	if p.Comments != 1 || p.Retry != "300" {
		t.Fatalf("comments %d retry %q", p.Comments, p.Retry)
	}
}
