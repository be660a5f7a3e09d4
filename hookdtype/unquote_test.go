package hookdtype

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzUnquote holds Unquote to encoding/json on any text: the same content where json.Unmarshal
// decodes one string, ok false where it refuses. Run longer with go test -fuzz FuzzUnquote.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"{\"amount\":5000,\"currency\":\"CNY\"}"`, `"a\\b\/c\bd\fe\nf\rg\th"`,
		`"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\uZZZZ"`, `"\u12"`,
		`"\x"`, `"\'"`, "\"\xff\xfe\"", "\"caf\xc3\"", "\"\x01\"", `"abc`, `"abc\"`, `"a"b"`, `"a" `, `abc`, `"`, ``,
		"\"\u2028\u2029\"", `"\\"`, `"\\\""`} {
		f.Add([]byte(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "中", `\"`, `\\`, `\n`, `\u00e9`, `\ud83d`, `\ude00`, "\xff", "\x1f", `"`, `\`, `\u`, "/", " "}
	for range 200 {
		var b bytes.Buffer
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && strings.IndexByte(" \t\r\n", b[len(b)-1]) >= 0 || len(bytes.TrimLeft(b, " \t\r\n")) != len(b) {
			return // json.Unmarshal allows space around the value; Unquote takes the value alone
		}
		var want string
		err := json.Unmarshal(b, &want)
		got, ok := Unquote(b)
		if ok != (err == nil) || got != want {
			t.Fatalf("Unquote(%q) = %q, %v; encoding/json %q, %v", b, got, ok, want, err)
		}
	})
}
