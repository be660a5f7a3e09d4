package wire

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// APIKey binds a chat API bearer key to one principal. It is a struct so that a key can carry
// more than who it is (its role, the users it reviews, …) without changing its callers.
type APIKey struct {
	Key         string
	UserID      string
	PrincipalID int64
	// Role is RoleUser ("" means the same) or RoleReviewer.
	Role Role
	// Reviews lists the users whose permission asks a reviewer key may answer.
	Reviews []string
	// AgentID (0: none) is the agentId of a coding agent's events sent with this key.
	AgentID int64
}

// Role is what an API key may do beyond acting as its own user.
type Role string

const (
	// RoleUser acts as its own user only.
	RoleUser Role = "user"
	// RoleReviewer also answers the permission asks of the users listed in APIKey.Reviews (a
	// compliance reviewer, or a console signed in with such a key).
	RoleReviewer Role = "reviewer"
)

// Caller is who a chat request comes from.
type Caller struct {
	UserID      string
	PrincipalID *int64 // nil in development mode
	Role        Role
	Reviews     []string
	AgentID     *int64 // the key's agentId, if it has one
	// othersAgents are the agentIds bound to other users' keys: an agent bound to a key is that
	// key's, and a caller whose key has no agent may not act as it.
	othersAgents []int64
}

// OthersAgent reports whether agent is bound to another user's API key, so not c's to name.
func (c Caller) OthersAgent(agent int64) bool { return slices.Contains(c.othersAgents, agent) }

// RunAgent is the agentId a run started by c is decided and recorded as: the key's own when it
// has one, so that a key bound to an agent gets that agent's hooks on every API, and requested
// (a body's agentId) otherwise. A key's caller naming another agent is refused: it would skip
// the hooks of its own agent and be on the record as somebody else; so is a caller without one
// naming the agent of another user's key.
func (c Caller) RunAgent(requested *int64) (*int64, error) {
	switch {
	case c.AgentID == nil && requested != nil && c.OthersAgent(*requested):
		return nil, fmt.Errorf("agentId: %d is the agent of another user's API key", *requested)
	case c.AgentID == nil:
		return requested, nil
	case requested != nil && *requested != *c.AgentID:
		return nil, fmt.Errorf("agentId: %d is not the API key's agent (%d)", *requested, *c.AgentID)
	}
	return c.AgentID, nil
}

// MayAnswerFor reports whether c may answer a permission ask of user: its own, or, for a
// reviewer key, one of the users it reviews. Nobody else answers another user's ask.
func (c Caller) MayAnswerFor(user string) bool {
	if user == c.UserID {
		return true
	}
	return c.Role == RoleReviewer && slices.Contains(c.Reviews, user)
}

// Keys identifies the callers of the chat APIs. In development mode (no key at all, on a daemon
// that listens on loopback with no admin tokens) the caller names itself; otherwise every chat
// request needs one of the keys.
type Keys struct {
	keys []APIKey
	dev  bool
}

// NewKeys takes the configured API keys; with none, the chat APIs run in development mode, where
// the caller names itself. Only a daemon on loopback without any credential may run so: the
// api package turns these Keys into RequireKeys otherwise.
func NewKeys(keys []APIKey) *Keys { return &Keys{keys: keys, dev: len(keys) == 0} }

// RequireKeys takes the configured API keys and requires one on every request, even when there
// are none (then every chat request is refused).
func RequireKeys(keys []APIKey) *Keys { return &Keys{keys: keys} }

// Development reports whether callers name themselves (no keys).
func (k *Keys) Development() bool { return k.dev }

// Reviewers returns the reviewer keys: the console signs reviewers in with them.
func (k *Keys) Reviewers() []APIKey {
	var out []APIKey
	for _, key := range k.keys {
		if key.Role == RoleReviewer {
			out = append(out, key)
		}
	}
	return out
}

// Required returns k requiring a key on every request.
func (k *Keys) Required() *Keys { return RequireKeys(k.keys) }

// Errors of Identify; Status gives their HTTP status.
var (
	ErrUnauthenticated = errors.New("a valid API key is required: Authorization: Bearer <key>")
	ErrNoKeys          = errors.New("a valid API key is required, and none is configured: add auth.apiKeys")
	ErrUserMismatch    = errors.New("userId does not match the API key's user")
)

// Identify returns the caller of r. Outside development mode r needs `Authorization: Bearer
// <key>`, and a bodyUserID or X-User-Id header that differs from the key's user is refused. In
// development mode the caller is bodyUserID, else the X-User-Id header, else "local".
func (k *Keys) Identify(r *http.Request, bodyUserID string) (Caller, error) {
	header := r.Header.Get("X-User-Id")
	if k.dev {
		u := bodyUserID
		if u == "" {
			u = header
		}
		if u == "" {
			u = "local"
		}
		return Caller{UserID: u, Role: RoleUser}, nil
	}
	match, err := k.key(r)
	if err != nil {
		return Caller{}, err
	}
	p := match.PrincipalID
	role := match.Role
	if role == "" {
		role = RoleUser
	}
	c := Caller{UserID: match.UserID, PrincipalID: &p, Role: role, Reviews: match.Reviews}
	if match.AgentID > 0 {
		a := match.AgentID
		c.AgentID = &a
	}
	for _, key := range k.keys {
		if key.AgentID > 0 && key.UserID != match.UserID {
			c.othersAgents = append(c.othersAgents, key.AgentID)
		}
	}
	if (bodyUserID != "" && bodyUserID != match.UserID) || (header != "" && header != match.UserID) ||
		len(r.Header.Values("X-User-Id")) > 1 {
		// The key's own caller comes with the error, for a refusal to be recorded under it.
		return c, ErrUserMismatch
	}
	return c, nil
}

// Authenticate refuses a request without a valid key (outside development mode) before its body
// is read: a handler that reads the body first to learn a userId would do that work for anyone.
func (k *Keys) Authenticate(r *http.Request) error {
	if k.dev {
		return nil
	}
	_, err := k.key(r)
	return err
}

// key is the configured key r's Authorization header carries.
func (k *Keys) key(r *http.Request) (*APIKey, error) {
	if len(k.keys) == 0 {
		return nil, ErrNoKeys
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, ErrUnauthenticated
	}
	var match *APIKey
	for i := range k.keys { // every key compared, in constant time
		if subtle.ConstantTimeCompare([]byte(got), []byte(k.keys[i].Key)) == 1 {
			match = &k.keys[i]
		}
	}
	if match == nil {
		return nil, ErrUnauthenticated
	}
	return match, nil
}

// Status is the HTTP status of an Identify error.
func Status(err error) int {
	if errors.Is(err, ErrUserMismatch) {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}
