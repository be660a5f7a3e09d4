package storage

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"
)

// A TSID is a time-sorted 64-bit id: 42 bits of milliseconds since tsidEpoch, then 22 bits of
// node (10) and counter (12). Text form: 13 characters of Crockford base32, so ids sort the same
// as text and as numbers. eventId and requestId are TSIDs.
const (
	tsidNodeBits    = 10
	tsidCounterBits = 12
	crockford       = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

var tsidEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

type tsidGen struct {
	mu      sync.Mutex
	node    uint64
	lastMs  int64
	counter uint64
}

// The node bits are random per process: replicas sharing one database then collide only if two
// pick the same node and mint in the same millisecond past a random counter start.
var defaultGen = func() *tsidGen {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &tsidGen{node: binary.BigEndian.Uint64(b[:]) & (1<<tsidNodeBits - 1)}
}()

// NewTSID returns a new id, strictly increasing within this process.
func NewTSID() int64 { return defaultGen.next(time.Now()) }

// NewTSIDString is NewTSID in its 13-character text form.
func NewTSIDString() string { return FormatTSID(NewTSID()) }

func (g *tsidGen) next(now time.Time) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := now.UnixMilli() - tsidEpoch
	if ms > g.lastMs {
		g.lastMs = ms
		// Start low in the counter space so a burst within one millisecond rarely overflows. The
		// start needs no secrecy, only spread: the runtime's generator, not a system call per ms.
		g.counter = mrand.Uint64() & (1<<(tsidCounterBits-2) - 1)
	} else {
		g.counter++
		if g.counter >= 1<<tsidCounterBits { // counter spent: borrow the next millisecond
			g.lastMs++
			g.counter = 0
		}
	}
	return g.lastMs<<(tsidNodeBits+tsidCounterBits) | int64(g.node<<tsidCounterBits|g.counter)
}

// FormatTSID renders id as 13 Crockford base32 characters.
func FormatTSID(id int64) string {
	var out [13]byte
	n := uint64(id)
	for i := 12; i >= 0; i-- {
		out[i] = crockford[n&31]
		n >>= 5
	}
	return string(out[:])
}

// ParseTSID reads the 13-character form (case-insensitive).
func ParseTSID(s string) (int64, error) {
	if len(s) != 13 {
		return 0, errors.New("tsid: want 13 characters")
	}
	var n uint64
	for i, c := range strings.ToUpper(s) {
		v := strings.IndexRune(crockford, c)
		if v < 0 || (i == 0 && v > 15) {
			return 0, errors.New("tsid: invalid character")
		}
		n = n<<5 | uint64(v)
	}
	return int64(n), nil
}
