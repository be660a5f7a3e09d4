package api

import (
	"math/rand/v2"
	"testing"
)

// TestPlainLoopbackHost: loopbackHost, with its shortcut for the common Hosts, says what parsing
// the Host says, on generated Hosts around the shortcut's forms (ports of digits and not, stray
// colons and brackets, other names and addresses).
func TestPlainLoopbackHost(t *testing.T) {
	heads := []string{"127.0.0.1:", "localhost:", "[::1]:", "127.0.0.1", "localhost", "[::1]", "::1", "[::1", "127.0.0.2", "127.1", "LOCALHOST", "a.localhost",
		"localhost.", "[::ffff:127.0.0.1]", "example.com", "10.0.0.1", "[127.0.0.1]", "", "localhost.evil.com", "0x7f.0.0.1"}
	tails := []string{"", ":", "8080", "0", "9", "]", "[", ":80", "a", ".", "65536", "-1", " ", "%", "\x00"}
	rnd := rand.New(rand.NewPCG(5, 6))
	plain := 0
	for i := range 50000 {
		host := heads[rnd.IntN(len(heads))]
		for range rnd.IntN(4) {
			host += tails[rnd.IntN(len(tails))]
		}
		if got, want := loopbackHost(host), parsedLoopbackHost(host); got != want {
			t.Fatalf("%d: loopbackHost(%q) = %v, parsing says %v", i, host, got, want)
		}
		if plainLoopbackHost(host) {
			plain++
		}
	}
	if plain < 1000 {
		t.Fatalf("the shortcut took %d of 50000 Hosts: they do not exercise it", plain)
	}
}
