//go:build race

package agent

// raceEnabled shortens the longest loops of the tests under the race detector, which makes each
// step of a run many times slower; the plain test run keeps their full length.
const raceEnabled = true
