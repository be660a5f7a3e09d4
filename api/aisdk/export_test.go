package aisdk

import (
	"testing"
	"time"
)

// SetRecentEnd sets, for one test, how long after its end a run is still replayed.
func SetRecentEnd(t testing.TB, d time.Duration) {
	old := recentEnd
	recentEnd = d
	t.Cleanup(func() { recentEnd = old })
}
