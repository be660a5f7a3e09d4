package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
)

// CookieName is the console's session cookie: HttpOnly, SameSite=Strict, scoped to the daemon.
const CookieName = "hookd_console"

// CSRFHeader carries the session's CSRF token on every write a cookie authenticates.
const CSRFHeader = "X-CSRF-Token"

// DefaultTTL is how long a console session lasts when the config does not say.
const DefaultTTL = 8 * time.Hour

// Roles of a console session.
const (
	RoleAdmin    = "admin"
	RoleReviewer = "reviewer"
)

// Identity is who a console session belongs to. Reviewers see only the approvals of Reviews.
type Identity struct {
	Role    string   `json:"role"`
	Subject string   `json:"subject"`
	Reviews []string `json:"reviews,omitempty"`
	// CSRF is the token every write of this session must carry in X-CSRF-Token.
	CSRF      string    `json:"csrfToken"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Errors of sign-in and of a cookie's check.
var (
	ErrBadCredential = errors.New("not an admin token or a reviewer key")
	ErrNoSession     = errors.New("no console session: sign in at /console/")
	ErrCSRF          = errors.New("a console write must carry the session's " + CSRFHeader + " header")
)

// Sessions signs console users in and recognises their cookie. The session itself lives in the
// database (only a hash of the cookie's token), so a sign-out ends it on every replica; the CSRF
// token is derived from the cookie's token and never stored.
type Sessions struct {
	db          *storage.DB
	adminTokens [][]byte
	reviewers   []wire.APIKey
	dev         bool
	ttl         time.Duration
	now         func() time.Time
	// recheck is how often Hold looks for a sign-out it was not told of (another replica's).
	recheck time.Duration
}

// RecheckEvery is how often a request held open by a console session (a stream) checks that the
// session still stands, for sign-outs on other replicas: one in this process ends it at once.
const RecheckEvery = 10 * time.Second

// NewSessions takes the admin tokens and the API keys (of which only reviewer keys may sign in).
// dev is development mode (loopback, no credentials at all): an empty sign-in is the admin then.
func NewSessions(db *storage.DB, adminTokens []string, keys []wire.APIKey, dev bool, ttl time.Duration) *Sessions {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	s := &Sessions{db: db, dev: dev, ttl: ttl, now: time.Now, recheck: RecheckEvery}
	for _, t := range adminTokens {
		s.adminTokens = append(s.adminTokens, []byte(t))
	}
	for _, k := range keys {
		if k.Role == wire.RoleReviewer {
			s.reviewers = append(s.reviewers, k)
		}
	}
	return s
}

// SignIn exchanges an admin token or a reviewer key for a new session; it returns the cookie's
// token and the identity.
func (s *Sessions) SignIn(ctx context.Context, credential string) (string, Identity, error) {
	id, ok := s.identify(credential)
	if !ok {
		return "", Identity{}, ErrBadCredential
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Identity{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now()
	id.ExpiresAt = now.Add(s.ttl).Truncate(time.Millisecond)
	id.CSRF = csrfOf(token)
	err := s.db.AddConsoleSession(ctx, storage.ConsoleSession{TokenHash: hashOf(token), Credential: credentialMAC(token, credential),
		Role: id.Role, Subject: id.Subject, Reviews: id.Reviews, ExpiresAt: id.ExpiresAt, CreatedAt: now})
	if err != nil {
		return "", Identity{}, err
	}
	return token, id, nil
}

// identify matches a credential against every admin token and reviewer key, in constant time.
func (s *Sessions) identify(credential string) (Identity, bool) {
	if credential == "" {
		return Identity{Role: RoleAdmin, Subject: "local"}, s.dev
	}
	got := []byte(credential)
	var id Identity
	found := 0
	for _, t := range s.adminTokens {
		if subtle.ConstantTimeCompare(got, t) == 1 {
			found, id = 1, Identity{Role: RoleAdmin, Subject: "admin"}
		}
	}
	for _, k := range s.reviewers {
		if subtle.ConstantTimeCompare(got, []byte(k.Key)) == 1 {
			found, id = 1, Identity{Role: RoleReviewer, Subject: k.UserID, Reviews: k.Reviews}
		}
	}
	return id, found == 1
}

// current is the identity of the configured credential that a session of token was signed in
// with (mac, credentialMAC's), and whether one still is: every candidate is tried, in constant
// time each.
func (s *Sessions) current(token string, mac []byte) (Identity, bool) {
	var id Identity
	found := 0
	try := func(credential string, as Identity) {
		if hmac.Equal(credentialMAC(token, credential), mac) {
			found, id = 1, as
		}
	}
	if s.dev {
		try("", Identity{Role: RoleAdmin, Subject: "local"})
	}
	for _, t := range s.adminTokens {
		try(string(t), Identity{Role: RoleAdmin, Subject: "admin"})
	}
	for _, k := range s.reviewers {
		try(k.Key, Identity{Role: RoleReviewer, Subject: k.UserID, Reviews: k.Reviews})
	}
	return id, found == 1
}

// Check returns the identity of r's session cookie. A write (any method but GET, HEAD, OPTIONS)
// must also carry the session's CSRF token: a page elsewhere can make the browser send the
// cookie, but it cannot read the token.
func (s *Sessions) Check(r *http.Request) (Identity, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Identity{}, ErrNoSession
	}
	row, err := s.db.ConsoleSession(r.Context(), hashOf(c.Value), s.now())
	if errors.Is(err, storage.ErrNotFound) {
		return Identity{}, ErrNoSession
	}
	if err != nil {
		return Identity{}, err
	}
	// The session is as good as the credential it was signed in with, now: a token rotated out of
	// adminTokens, a reviewer key removed, development mode left, ends it; a reviewer's reviews
	// are the key's as configured now.
	id, current := s.current(c.Value, row.Credential)
	if !current || id.Role != row.Role || id.Subject != row.Subject {
		return Identity{}, ErrNoSession
	}
	id.CSRF, id.ExpiresAt = csrfOf(c.Value), row.ExpiresAt
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(CSRFHeader)), []byte(id.CSRF)) != 1 {
			return Identity{}, ErrCSRF
		}
	}
	return id, nil
}

// Hold is r's context bound to the session Check found (id): it ends when the session does, at
// its expiry or when it is signed out, so that a stream a session opened does not outlive it.
// The caller must call the CancelFunc when the request is done.
func (s *Sessions) Hold(r *http.Request, id Identity) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(r.Context(), id.ExpiresAt)
	c, err := r.Cookie(CookieName)
	if err != nil {
		cancel() // Check found none: hold nothing open
		return ctx, cancel
	}
	hash := hashOf(c.Value)
	go func() {
		tick := time.NewTicker(s.recheck)
		defer tick.Stop()
		// Check has just read the session: read again only when a sign-out may have ended it
		// (announced here, or another replica's, found by the tick; so is one that fell between
		// Check and this).
		changed := s.db.Changed(storage.TopicConsoleSessions)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-tick.C:
			}
			changed = s.db.Changed(storage.TopicConsoleSessions) // taken before the read: none falls between
			if _, err := s.db.ConsoleSession(ctx, hash, s.now()); errors.Is(err, storage.ErrNotFound) {
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}

// SignOut ends the session of r's cookie, if any.
func (s *Sessions) SignOut(ctx context.Context, r *http.Request) error {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	return s.db.DeleteConsoleSession(ctx, hashOf(c.Value))
}

// cookie is the session cookie for token (an empty token and maxAge < 0 clear it).
func (s *Sessions) cookie(token string, maxAge int, secure bool) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: token, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteStrictMode}
}

func hashOf(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// credentialMAC identifies the credential a session of token was signed in with. Keyed by the
// token, which the database does not hold, it tells nothing of the credential to whoever reads
// the table.
func credentialMAC(token, credential string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hookd console credential\x00"))
	m.Write([]byte(credential))
	return m.Sum(nil)
}

// csrfOf derives the session's CSRF token from its cookie token, so it needs no storage.
func csrfOf(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hookd console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
