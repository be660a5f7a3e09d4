package storage

import (
	"testing"
	"time"
)

func TestTSIDVector(t *testing.T) {
	const n, s = int64(122390644586507544), "03CPHMJ76HV8R"
	if got := FormatTSID(n); got != s {
		t.Fatalf("FormatTSID(%d) = %s, want %s", n, got, s)
	}
	if got, err := ParseTSID(s); err != nil || got != n {
		t.Fatalf("ParseTSID(%s) = %d, %v", s, got, err)
	}
	if _, err := ParseTSID("ZZZZZZZZZZZZZ"); err == nil {
		t.Fatal("overflowing first character accepted")
	}
	if _, err := ParseTSID("03CPHMJ76HV8"); err == nil {
		t.Fatal("short id accepted")
	}
}

func TestTSIDMonotonicAndTimed(t *testing.T) {
	g := &tsidGen{node: 5}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	prev := int64(0)
	// 10,000 ids in one millisecond overflow the counter twice and must still increase.
	for i := 0; i < 10000; i++ {
		id := g.next(now)
		if id <= prev {
			t.Fatalf("id %d not above %d at %d", id, prev, i)
		}
		if FormatTSID(id) <= FormatTSID(prev) {
			t.Fatalf("text form does not sort")
		}
		prev = id
	}
	first := g.next(now.Add(time.Hour))
	ms := first >> 22
	if want := now.Add(time.Hour).UnixMilli() - tsidEpoch; ms != want {
		t.Fatalf("time bits %d, want %d", ms, want)
	}
	if node := (first >> 12) & 1023; node != 5 {
		t.Fatalf("node bits %d", node)
	}
}
