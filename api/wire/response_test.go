package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
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

// TestOKJSONAsData: OKJSON writes what c.Data of its bytes writes: status, every header, body;
// twice in a row, its buffer reused.
func TestOKJSONAsData(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, data := range []string{`{"decision":"allow"}`, `null`, `"` + strings.Repeat("x", 5000) + `"`} {
		for range 2 {
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			c, _ := gin.CreateTestContext(want)
			c.Data(http.StatusOK, "application/json; charset=utf-8",
				[]byte(`{"success":true,"httpStatusCode":200,"data":`+data+`,"message":"success"}`))
			c, _ = gin.CreateTestContext(got)
			OKJSON(c, http.StatusOK, rawJSON(data))
			if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
				t.Fatalf("got %d %v %q, want %d %v %q", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

// TestDataAsGin: Data writes what gin's c.Data writes: status, every header, body; over a
// Content-Type already set too.
func TestDataAsGin(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, body := range []string{"", "{}", `{"decision":"block","reason":"` + strings.Repeat("é", 300) + `"}`} {
		for _, preset := range []string{"", "text/plain"} {
			for _, status := range []int{200, 400} {
				want, got := httptest.NewRecorder(), httptest.NewRecorder()
				for _, w := range []*httptest.ResponseRecorder{want, got} {
					if preset != "" {
						w.Header().Set("Content-Type", preset)
					}
				}
				c, _ := gin.CreateTestContext(want)
				c.Data(status, "application/json", []byte(body))
				c, _ = gin.CreateTestContext(got)
				Data(c, status, []string{"application/json"}, []byte(body))
				if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
					t.Fatalf("got %d %v %q, want %d %v %q", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
				}
			}
		}
	}
}

// TestFailErrStatus: an error from below is answered by its kind, never by its text; the
// dispatcher stopping (a decision cut short by the shutdown, an Observe refused) is a 503 to retry.
func TestFailErrStatus(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, c := range []struct {
		err  error
		want int
	}{
		{hookdtype.Invalid("context.toolName", "is required"), http.StatusBadRequest},
		{fmt.Errorf("hook 7: %w", storage.ErrNotFound), http.StatusNotFound},
		{dispatcher.ErrStopped, http.StatusServiceUnavailable},
		{&dispatcher.StoppedError{HookName: "gate"}, http.StatusServiceUnavailable},
		{errors.New("disk full"), http.StatusInternalServerError},
	} {
		w := httptest.NewRecorder()
		ctx, _ := gin.CreateTestContext(w)
		FailErr(ctx, c.err)
		if w.Code != c.want || strings.Contains(w.Body.String(), "disk full") {
			t.Errorf("%v: %d %s, want %d", c.err, w.Code, w.Body, c.want)
		}
	}
}
