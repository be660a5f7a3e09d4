package wire

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// APIKey binds a chat API bearer key to one principal.
type APIKey struct {
	Key         string
	UserID      string
	PrincipalID int64
}

// Caller is who a chat request comes from.
type Caller struct {
	UserID      string
	PrincipalID *int64
}

// Keys identifies the callers of the chat APIs.
type Keys struct{ keys []APIKey }

// NewKeys takes the configured API keys; with none, the chat APIs run in the loopback-only
// development mode.
func NewKeys(keys []APIKey) *Keys { return &Keys{keys: keys} }

// Errors of Identify; Status gives their HTTP status.
var (
	ErrUnauthenticated = errors.New("a valid API key is required: Authorization: Bearer <key>")
	ErrUserMismatch    = errors.New("userId does not match the API key's user")
)

// Identify returns the caller of r. With keys configured, r needs `Authorization: Bearer <key>`,
// and a bodyUserID that differs from the key's user is refused. Without keys the caller is
// bodyUserID, else the X-User-Id header, else "local".
func (k *Keys) Identify(r *http.Request, bodyUserID string) (Caller, error) {
	if len(k.keys) == 0 {
		u := bodyUserID
		if u == "" {
			u = r.Header.Get("X-User-Id")
		}
		if u == "" {
			u = "local"
		}
		return Caller{UserID: u}, nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Caller{}, ErrUnauthenticated
	}
	var match *APIKey
	for i := range k.keys { // every key compared, in constant time
		if subtle.ConstantTimeCompare([]byte(got), []byte(k.keys[i].Key)) == 1 {
			match = &k.keys[i]
		}
	}
	if match == nil {
		return Caller{}, ErrUnauthenticated
	}
	if bodyUserID != "" && bodyUserID != match.UserID {
		return Caller{}, ErrUserMismatch
	}
	p := match.PrincipalID
	return Caller{UserID: match.UserID, PrincipalID: &p}, nil
}

// Status is the HTTP status of an Identify error.
func Status(err error) int {
	if errors.Is(err, ErrUserMismatch) {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}
