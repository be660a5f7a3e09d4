package api

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"
	"testing/iotest"
)

// TestReadAllAsMaxBytesReader: readAll gives what io.ReadAll of an http.MaxBytesReader gives (the
// bytes and the error, its message too), on generated bodies around the limit, with or without a
// length, its own or a wrong one, small or past presizeMax, read in pieces of any size, ending in
// an error or not.
func TestReadAllAsMaxBytesReader(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	errGone := errors.New("connection reset")
	for i := range 20000 {
		limit := int64(rnd.IntN(2000))
		if i%500 == 0 { // past the length readAll takes at its word
			limit = presizeMax + int64(rnd.IntN(presizeMax))
		}
		size := max(0, int(limit)+rnd.IntN(40)-20)
		if rnd.IntN(4) == 0 {
			size = rnd.IntN(int(limit) + 1000)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rnd.IntN(256))
		}
		length := int64(size)
		switch rnd.IntN(4) {
		case 0:
			length = -1
		case 1:
			length = int64(rnd.IntN(int(limit) + 1000))
		}
		var end error
		switch rnd.IntN(3) {
		case 0:
			end = errGone
		case 1:
			end = os.ErrDeadlineExceeded
		}
		mode := rnd.IntN(4)
		body := func() io.Reader {
			var r io.Reader = bytes.NewReader(data)
			if end != nil {
				r = io.MultiReader(r, iotest.ErrReader(end))
			}
			switch mode {
			case 1:
				r = iotest.OneByteReader(r)
			case 2:
				r = iotest.HalfReader(r)
			case 3:
				r = iotest.DataErrReader(r)
			}
			return r
		}
		want, wantErr := io.ReadAll(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(body()), limit))
		got, err := readAll(body(), length, limit)
		if !bytes.Equal(got, want) || !reflect.DeepEqual(err, wantErr) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("case %d (size %d, length %d, limit %d, mode %d, end %v): got %d bytes, %v; want %d bytes, %v",
				i, size, length, limit, mode, end, len(got), err, len(want), wantErr)
		}
	}
}
