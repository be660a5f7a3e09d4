package wire

import (
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
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
// not silently widen a list, nor may a pair the URL encoding spoils, a parameter given twice, or
// one given empty (a script's ?toolName=$T with T unset): each parameter's absence is what
// means "no filter", so an empty value would read as absent and list everything.
func OnlyQuery(c *gin.Context, allowed ...string) bool {
	return failQuery(c, CheckQuery(c.Request, false, allowed...))
}

// KnownQuery is OnlyQuery for parameters whose empty value means what their absence means (a
// stream's lastEventId=, from the start): an unknown or repeated parameter is still a 400.
func KnownQuery(c *gin.Context, allowed ...string) bool {
	return failQuery(c, CheckQuery(c.Request, true, allowed...))
}

// NoQuery is the middleware of a route that takes no query parameters: a parameter sent to it
// (?agentId=5 on a run, ?userId= on a chat) would be ignored, so it is a 400 naming it.
func NoQuery(c *gin.Context) { failQuery(c, CheckQuery(c.Request, true)) }

// Query is the middleware of a route whose handler reads the query parameters allowed (an empty
// value means what absence means): any other parameter is a 400 naming it.
func Query(allowed ...string) gin.HandlerFunc {
	return func(c *gin.Context) { failQuery(c, CheckQuery(c.Request, true, allowed...)) }
}

func failQuery(c *gin.Context, err error) bool {
	if err != nil {
		FailErr(c, err)
		return false
	}
	return true
}

// CheckQuery is the check of OnlyQuery (emptyOK false) and KnownQuery (emptyOK true) for callers
// that answer in a format of their own: a *hookdtype.ValidationError naming the parameter, or nil.
func CheckQuery(r *http.Request, emptyOK bool, allowed ...string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// What Query() would silently drop: a pair it cannot decode, a filter lost with it.
		return hookdtype.Invalid("query", "%v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) { // the same parameter named each time
		values := q[name]
		if slices.Contains(allowed, name) {
			if len(values) > 1 {
				return hookdtype.Invalid(name, "appears twice; send each query parameter once")
			}
			if values[0] == "" && !emptyOK {
				return hookdtype.Invalid(name, "is empty; leave the parameter out, or give it a value")
			}
			continue
		}
		msg := "unknown query parameter"
		if s := hookdtype.Suggest(name, allowed); s != "" {
			msg += " (did you mean " + strconv.Quote(s) + "?)"
		}
		return hookdtype.Invalid(name, "%s", msg)
	}
	return nil
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

// Cursor is the cursor of the page that follows key: the id, URL, … of the last item of this
// page, in the order of its list.
func Cursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// CursorKey reads a cursor back into its key ("" for the first page), answering 400 for one no
// list gave out.
func CursorKey(c *gin.Context, cursor string) (string, bool) {
	key, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || (cursor != "" && len(key) == 0) {
		Fail(c, http.StatusBadRequest, "cursor: is not a cursor a list gave out; pass its next unchanged")
		return "", false
	}
	return string(key), true
}

// CursorID reads the cursor of a list ordered by id: the id the previous page ended with (0 for
// the first page).
func CursorID(c *gin.Context, cursor string) (int64, bool) {
	key, ok := CursorKey(c, cursor)
	if !ok || key == "" {
		return 0, ok
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil || id <= 0 {
		Fail(c, http.StatusBadRequest, "cursor: is not a cursor a list gave out; pass its next unchanged")
		return 0, false
	}
	return id, true
}

// PageOf cuts items, read one beyond limit, to one page: Next is the cursor after the last item
// kept when there was more.
func PageOf[T any](items []T, limit int, key func(T) string) Page[T] {
	if items == nil {
		items = []T{}
	}
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, Next: Cursor(key(items[limit-1]))}
}

// IDKey is the key of a list ordered by id.
func IDKey(id int64) string { return strconv.FormatInt(id, 10) }
