package scheduler

import (
	"testing"
	"time"
)

// After a firing (or a missed tick), the next tick is the first after it, unless that one has
// passed too: then the first tick less than the grace late, which fires as usual, else the
// first after now.
func TestNextAfter(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		cron, tick, now, want string
	}{
		// On time: the next tick.
		{"0 9 * * *", "2026-12-07T09:00:00Z", "2026-12-07T09:00:01Z", "2026-12-08T09:00:00Z"},
		// Down over the weekend, back 3 s after Monday's tick: Monday's still fires.
		{"0 9 * * *", "2026-12-04T09:00:00Z", "2026-12-07T09:00:03Z", "2026-12-07T09:00:00Z"},
		// Back 30 s after it: missed with the others, the next is Tuesday's.
		{"0 9 * * *", "2026-12-04T09:00:00Z", "2026-12-07T09:00:30Z", "2026-12-08T09:00:00Z"},
		// Every 20 s, back at :43.01: :40 is 3 s late and fires.
		{"*/20 * * * * *", "2026-12-06T20:37:00Z", "2026-12-06T20:37:43.01Z", "2026-12-06T20:37:40Z"},
		// The tick right after the last is within the grace: it is that one.
		{"*/5 * * * * *", "2026-12-06T20:00:00Z", "2026-12-06T20:00:07Z", "2026-12-06T20:00:05Z"},
	} {
		sched, err := ParseCron(c.cron)
		if err != nil {
			t.Fatal(err)
		}
		if got := nextAfter(sched, at(c.tick), at(c.now), 10*time.Second); !got.Equal(at(c.want)) {
			t.Errorf("%s after %s at %s: %s, want %s", c.cron, c.tick, c.now, got.UTC().Format(time.RFC3339Nano), c.want)
		}
	}
}
