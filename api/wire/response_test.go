package wire

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestOKJSONMatchesOK: OKJSON of json.Marshal(v) writes what OK of v writes, headers included.
func TestOKJSONMatchesOK(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	reason := "<script>&\u2028 大额"
	for _, v := range []any{
		struct {
			Decision string  `json:"decision"`
			Reason   *string `json:"reason"`
		}{"ask", &reason},
		map[string]any{"eventIds": []string{}}, nil, "x",
	} {
		for _, status := range []int{200, 202} {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			c, _ := gin.CreateTestContext(want)
			OK(c, status, v)
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			c, _ = gin.CreateTestContext(got)
			OKJSON(c, status, rawJSON(data))
			if got.Code != want.Code || got.Body.String() != want.Body.String() ||
				got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Fatalf("%v: got %d %s %q, want %d %s %q", v, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

// rawJSON appends JSON already encoded.
type rawJSON []byte

func (r rawJSON) AppendJSON(b []byte) ([]byte, error) { return append(b, r...), nil }
