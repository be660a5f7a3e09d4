// Package console serves the compliance console: a browser app embedded in the binary, and the
// sign-in that turns an admin token or a reviewer key into a session cookie. The app is one more
// client of the admin API: it keeps no state of its own and calls no route the admin API lacks.
package console

import (
	"embed"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/api/wire"
)

//go:embed static
var static embed.FS

// files is the app: index.html, its script, its style sheet. Nothing is fetched from elsewhere.
var files, _ = fs.Sub(static, "static")

// contentSecurity keeps every page to its own origin: no inline script, no outside font, script
// or image, no framing.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Register serves the app under /console/ and the session at /console/session.
func Register(r gin.IRouter, s *Sessions) {
	r.GET("/console", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, "/console/") })
	g := r.Group("/console", headers)
	g.POST("/session", wire.NoQuery, s.signIn)
	g.GET("/session", wire.NoQuery, s.whoami)
	g.DELETE("/session", wire.NoQuery, s.signOut)
	g.GET("/", serveFile("index.html"))
	g.GET("/assets/:name", func(c *gin.Context) { serveFile(path.Join("assets", c.Param("name")))(c) })
}

func headers(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

func serveFile(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			wire.Fail(c, http.StatusNotFound, "no console file %s", name)
			return
		}
		c.Data(http.StatusOK, contentType(name), b)
	}
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

type signInBody struct {
	// Credential is an admin token or a reviewer API key ("" in development mode).
	Credential string `json:"credential"`
}

// maxSignInBytes bounds a sign-in's body, read before anyone is known: a credential is short.
const maxSignInBytes = 4 << 10

func (s *Sessions) signIn(c *gin.Context) {
	// Checked here whatever the request carries: a page of another site could otherwise post a
	// form (text/plain, shaped as JSON) that signs the browser into the page's own session, whose
	// answers would then be made, unknowingly, as the page's reviewer. A JSON type needs the
	// preflight the daemon never grants.
	if mt, _, err := mime.ParseMediaType(c.Request.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		wire.Fail(c, http.StatusUnsupportedMediaType, "Content-Type: application/json is required to sign in")
		return
	}
	var body signInBody
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxSignInBytes)
	if !wire.BindStrict(c, &body) {
		return
	}
	token, id, err := s.SignIn(c.Request.Context(), strings.TrimSpace(body.Credential))
	if errors.Is(err, ErrBadCredential) {
		wire.Fail(c, http.StatusUnauthorized, "credential: %v", err)
		return
	}
	if err != nil {
		wire.FailErr(c, err)
		return
	}
	http.SetCookie(c.Writer, s.cookie(token, int(s.ttl.Seconds()), overHTTPS(c.Request)))
	wire.OK(c, http.StatusCreated, session{Identity: id, SignedIn: true})
}

// whoami tells the app whether it is signed in: a page that has not signed in yet is no error.
func (s *Sessions) whoami(c *gin.Context) {
	id, err := s.Check(c.Request)
	if errors.Is(err, ErrNoSession) {
		wire.OK(c, http.StatusOK, gin.H{"signedIn": false})
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	wire.OK(c, http.StatusOK, session{Identity: id, SignedIn: true})
}

// session is the identity as the app reads it.
type session struct {
	Identity
	SignedIn bool `json:"signedIn"`
}

func (s *Sessions) signOut(c *gin.Context) {
	if _, err := s.Check(c.Request); err != nil && !errors.Is(err, ErrNoSession) {
		s.fail(c, err)
		return
	}
	if err := s.SignOut(c.Request.Context(), c.Request); err != nil {
		wire.FailErr(c, err)
		return
	}
	http.SetCookie(c.Writer, s.cookie("", -1, overHTTPS(c.Request)))
	wire.OK(c, http.StatusOK, gin.H{"signedOut": true})
}

// overHTTPS reports whether the browser reached the console over HTTPS: on a TLS connection of
// its own, or through a proxy that terminated TLS and says so (X-Forwarded-Proto or Forwarded
// proto=https). The cookie is Secure then, so the browser never sends it over plain HTTP; a
// client can only make its own cookie stricter by claiming HTTPS.
func overHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.EqualFold(strings.TrimSpace(p), "https") {
		return true
	}
	first, _, _ := strings.Cut(r.Header.Get("Forwarded"), ",")
	for _, pair := range strings.Split(first, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
		if strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
			return true
		}
	}
	return false
}

// fail answers a session check's error: 401 without a session, 403 for a missing CSRF token.
func (s *Sessions) fail(c *gin.Context, err error) {
	switch {
	case errors.Is(err, ErrNoSession):
		wire.Fail(c, http.StatusUnauthorized, "%v", err)
	case errors.Is(err, ErrCSRF):
		wire.Fail(c, http.StatusForbidden, "%v", err)
	default:
		wire.FailErr(c, err)
	}
}

// Fail is fail for the admin API's middleware.
func (s *Sessions) Fail(c *gin.Context, err error) { s.fail(c, err) }
