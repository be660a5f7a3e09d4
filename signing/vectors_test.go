package signing_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"
)

// The vectors are produced by testdata/signing/gen_vectors.py, a separate
// Python implementation, so these tests compare the Go code with a second
// implementation rather than with itself.

type hookdVector struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	Timestamp string `json:"timestamp"` // epoch milliseconds
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

type standardVector struct {
	Name      string `json:"name"`
	Source    string `json:"source"`
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"` // epoch seconds
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

func loadVectors[T any](t *testing.T, name string) []T {
	t.Helper()
	raw, err := os.ReadFile("../testdata/signing/" + name)
	if err != nil {
		t.Fatalf("reading vectors: %v", err)
	}
	var doc struct {
		Vectors []T `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	if len(doc.Vectors) == 0 {
		t.Fatalf("%s has no vectors", name)
	}
	return doc.Vectors
}

func hookdVectors(t *testing.T) []hookdVector { return loadVectors[hookdVector](t, "hookd.json") }

func standardVectors(t *testing.T) []standardVector {
	return loadVectors[standardVector](t, "standard.json")
}

// signedAt is the instant a hookd vector was signed.
func (v hookdVector) signedAt(t *testing.T) time.Time {
	ms, err := strconv.ParseInt(v.Timestamp, 10, 64)
	if err != nil {
		t.Fatalf("vector %q: bad timestamp: %v", v.Name, err)
	}
	return time.UnixMilli(ms)
}

func (v standardVector) signedAt(t *testing.T) time.Time {
	s, err := strconv.ParseInt(v.Timestamp, 10, 64)
	if err != nil {
		t.Fatalf("vector %q: bad timestamp: %v", v.Name, err)
	}
	return time.Unix(s, 0)
}
