package wire

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/hookdtype"
)

// Paging bounds every list endpoint shares.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Page is the data of every list answer: one page of items and the cursor of the next page,
// absent on the last one. A client passes next back as ?cursor= unchanged; it is opaque.
type Page[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next,omitempty"`
}

// OnlyQuery answers 400 naming the first query parameter that is not in allowed (with a "did you
// mean" when one is close), and reports whether every parameter is known. A typo in a filter must
// not silently widen a list.
func OnlyQuery(c *gin.Context, allowed ...string) bool {
	for name := range c.Request.URL.Query() {
		if slices.Contains(allowed, name) {
			continue
		}
		msg := "unknown query parameter"
		if s := hookdtype.Suggest(name, allowed); s != "" {
			msg += " (did you mean " + strconv.Quote(s) + "?)"
		}
		Fail(c, http.StatusBadRequest, "%s: %s", name, msg)
		return false
	}
	return true
}

// PageQuery reads ?cursor= and ?limit= (DefaultLimit when absent; 400 above MaxLimit or below 1).
func PageQuery(c *gin.Context) (cursor string, limit int, ok bool) {
	limit = DefaultLimit
	if s, found := c.GetQuery("limit"); found {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			Fail(c, http.StatusBadRequest, "limit: must be an integer from 1 to %d", MaxLimit)
			return "", 0, false
		}
		limit = n
	}
	return c.Query("cursor"), limit, true
}
