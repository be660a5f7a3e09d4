// Package api serves hookd over HTTP: the admin REST API and, in sub-packages, one chat dialect
// each. Handlers decode, call the package that owns the logic, and encode.
package api

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/agents"
	"github.com/hookd/hookd/api/agui"
	"github.com/hookd/hookd/api/aisdk"
	"github.com/hookd/hookd/api/harness"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/api/volo"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/console"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/scheduler"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/tracing"
)

// MaxBodyBytes caps every request body; larger ones get 413.
const MaxBodyBytes = 1 << 20

// Deps is what the HTTP layer calls into.
type Deps struct {
	DB          *storage.DB
	Hooks       *dispatcher.Registry
	Dispatcher  *dispatcher.Dispatcher
	Scheduler   *scheduler.Scheduler // nil: /api/tasks answers 503
	AdminTokens []string
	// LoopbackOnly is true when the daemon listens on loopback. Only there, and only with no admin
	// token and no API key (development mode), is the admin API open and do chat callers name
	// themselves.
	LoopbackOnly bool
	Log          *slog.Logger

	// The chat dialects.
	Runtime *agent.Runtime
	// Keys identifies chat callers; nil is development mode, which holds only as said above:
	// elsewhere every chat route requires one of the keys.
	Keys *wire.Keys
	// ChatDisabled serves no chat route at all (auth.chat: disabled).
	ChatDisabled bool
	// AllowedOrigins may call a development-mode daemon from a browser besides its own origin.
	AllowedOrigins []string
	// Limits bound connections (NewServer) and request bodies and stream writes (New).
	Limits Limits

	Workspaces *tools.Workspaces
	Heartbeat  time.Duration

	// Metrics is served at /metrics (admin auth); the HTTP layer adds its own to it.
	Metrics *prometheus.Registry

	// ConsoleTTL is how long a console session lasts (console.DefaultTTL when zero).
	ConsoleTTL time.Duration
}

// New builds the HTTP handler.
func New(d Deps) http.Handler { return newEngine(d) }

func newEngine(d Deps) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	if d.Keys == nil {
		d.Keys = wire.NewKeys(nil)
	}
	dev := d.LoopbackOnly && len(d.AdminTokens) == 0 && d.Keys.Development()
	lim := d.Limits.withDefaults()
	r.Use(recoverer(d.Log), privateAnswers, tracing.Middleware(), browserSafe(dev, d.AllowedOrigins), readBody(lim.ReadTimeout),
		streams(lim.SSEWriteTimeout, d.Metrics), logErrors(d.Log))
	r.NoRoute(func(c *gin.Context) {
		if d.ChatDisabled && isChatRoute(c.Request.URL.Path) {
			wire.Fail(c, http.StatusNotFound, "the chat APIs are off on this daemon (auth.chat: disabled)")
			return
		}
		wire.Fail(c, http.StatusNotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		wire.Fail(c, http.StatusMethodNotAllowed, "method %s not allowed on %s", c.Request.Method, c.Request.URL.Path)
	})

	r.GET("/healthz", wire.NoQuery, func(c *gin.Context) { wire.OK(c, http.StatusOK, gin.H{"status": "alive"}) })
	r.GET("/readyz", wire.NoQuery, func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		if err := d.DB.Ping(ctx); err != nil {
			d.Log.WarnContext(ctx, "readiness: database unreachable", "err", err)
			wire.Fail(c, http.StatusServiceUnavailable, "database unreachable")
			return
		}
		if err := d.DB.CheckWritable(ctx); err != nil {
			d.Log.WarnContext(ctx, "readiness: database refuses writes", "err", err)
			wire.Fail(c, http.StatusServiceUnavailable, "database refuses writes")
			return
		}
		wire.OK(c, http.StatusOK, gin.H{"status": "ready", "database": string(d.DB.Dialect())})
	})

	if !dev {
		d.Keys = d.Keys.Required()
	}
	if !d.ChatDisabled {
		harness.Register(r, harness.Deps{Runtime: d.Runtime, Keys: d.Keys, Log: d.Log})
		volo.Register(r, volo.Deps{Runtime: d.Runtime, Keys: d.Keys, Log: d.Log, Heartbeat: d.Heartbeat})
		platform.Register(r, platform.Deps{Runtime: d.Runtime, Workspaces: d.Workspaces, Keys: d.Keys,
			Heartbeat: d.Heartbeat, Log: d.Log})
		agui.Register(r, agui.Deps{Runtime: d.Runtime, Keys: d.Keys, Log: d.Log, Heartbeat: d.Heartbeat})
		aisdk.Register(r, aisdk.Deps{Runtime: d.Runtime, Keys: d.Keys, Log: d.Log, Heartbeat: d.Heartbeat})
	}
	agents.Register(r, agents.Deps{Dispatcher: d.Dispatcher, Keys: d.Keys, Log: d.Log, Metrics: d.Metrics})

	sessions := console.NewSessions(d.DB, d.AdminTokens, d.Keys.Reviewers(), dev, d.ConsoleTTL)
	console.Register(r, sessions)

	r.GET("/api/openapi.json", wire.NoQuery, serveOpenAPI)
	admin := r.Group("/api", adminAuth(d.AdminTokens, dev, sessions), wire.GetTakesNoBody)
	h := hooksAPI{reg: d.Hooks}
	admin.POST("/hooks", h.create)
	admin.GET("/hooks", h.list)
	admin.GET("/hooks/:id", h.get)
	admin.PUT("/hooks/:id", h.replace)
	admin.DELETE("/hooks/:id", wire.NoBody, h.delete)
	da := dispatchAPI{d: d.Dispatcher, db: d.DB}
	admin.POST("/hooks/dispatch", da.dispatch)
	admin.POST("/hooks/:id/test", wire.NoBody, da.probe)
	admin.POST("/policies/evaluate", policiesAPI{reg: d.Hooks}.evaluate)
	admin.GET("/deliveries", da.deliveries)
	admin.POST("/deliveries/:id/redeliver", wire.NoBody, da.redeliver)
	admin.DELETE("/deliveries/:id", wire.NoBody, da.deleteDelivery)
	admin.DELETE("/deliveries", wire.NoBody, da.purgeDeliveries)
	admin.GET("/decisions", da.decisions)
	admin.GET("/decisions/verify", da.verifyDecisions)
	admin.GET("/breakers", da.breakers)
	if d.Metrics != nil {
		metrics := promhttp.HandlerFor(d.Metrics, promhttp.HandlerOpts{})
		r.GET("/metrics", adminAuth(d.AdminTokens, dev, sessions), gin.WrapH(metrics))
	}
	ra := rulesAPI{db: d.DB}
	admin.GET("/rules", ra.list)
	admin.POST("/rules", ra.add)
	admin.DELETE("/rules/:id", wire.NoBody, ra.revoke)
	ta := tasksAPI{s: d.Scheduler}
	admin.POST("/tasks", ta.create)
	admin.GET("/tasks", ta.list)
	admin.GET("/tasks/:id", ta.get)
	admin.PUT("/tasks/:id", ta.replace)
	admin.DELETE("/tasks/:id", wire.NoBody, ta.delete)
	admin.POST("/tasks/:id/run", wire.NoBody, ta.run)
	admin.GET("/tasks/:id/runs", ta.runs)
	ov := overviewAPI{db: d.DB, d: d.Dispatcher}
	admin.GET("/stats/overview", ov.get)
	aa := approvalsAPI{rt: d.Runtime, db: d.DB, heartbeat: d.Heartbeat}
	admin.GET("/approvals", aa.list)
	admin.GET("/approvals/stream", aa.stream)
	admin.POST("/approvals/:askId", aa.answer)
	admin.POST("/users/:userId/sessions/:sessionKey/events", sessionEventsAPI{rt: d.Runtime}.push)
	dl := decisionLogAPI{db: d.DB, heartbeat: d.Heartbeat}
	admin.GET("/decisions/stream", dl.stream)
	return r
}

// consoleIdentity is the gin key of the console session a request came with.
const consoleIdentity = "hookd.console"

// adminAuth requires one of the admin tokens as a bearer token, or a console session cookie (with
// its CSRF token on writes). With none configured the admin API is open only in development mode;
// otherwise it is closed. API keys never open it; a reviewer's console session opens only the
// approvals inbox.
func adminAuth(tokens []string, dev bool, sessions *console.Sessions) gin.HandlerFunc {
	want := make([][]byte, len(tokens))
	for i, t := range tokens {
		want[i] = []byte(t)
	}
	return func(c *gin.Context) {
		if _, err := c.Request.Cookie(console.CookieName); err == nil && !strings.HasPrefix(c.GetHeader("Authorization"), "Bearer ") {
			id, err := sessions.Check(c.Request)
			if err != nil {
				sessions.Fail(c, err)
				return
			}
			if id.Role != console.RoleAdmin && !strings.HasPrefix(c.FullPath(), "/api/approvals") {
				wire.Fail(c, http.StatusForbidden, "a reviewer's console session opens the approvals inbox only")
				return
			}
			c.Set(consoleIdentity, id)
			// What the session opens ends with it: a stream is cut at its expiry or sign-out.
			ctx, cancel := sessions.Hold(c.Request, id)
			defer cancel()
			c.Request = c.Request.WithContext(ctx)
			c.Next()
			return
		}
		if len(want) == 0 {
			if dev {
				return
			}
			wire.Fail(c, http.StatusUnauthorized, "admin API disabled: no adminTokens configured")
			return
		}
		got, found := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !found {
			c.Header("WWW-Authenticate", `Bearer realm="hookd-admin"`)
			wire.Fail(c, http.StatusUnauthorized, "admin bearer token required")
			return
		}
		if !tokenIn([]byte(got), want) {
			c.Header("WWW-Authenticate", `Bearer realm="hookd-admin", error="invalid_token"`)
			wire.Fail(c, http.StatusUnauthorized, "the bearer token is not one of the admin tokens")
			return
		}
	}
}

// browserSafe refuses what a web page could make a browser send, wherever no bearer token
// protects the route (development mode) or a cookie authenticates: a write whose body is not
// declared JSON (415; the form and text/plain types need no CORS preflight), a Host that is not a
// loopback name in development mode (421; DNS rebinding), and an Origin other than the daemon's
// own or one of allowed (403; SSE GETs included). A request with a bearer token cannot be forged by
// a page (setting Authorization cross-origin needs a preflight hookd never grants), so it keeps
// any Content-Type (coding agents' hooks may not send one); but in development mode, where no
// bearer is checked, its Host must still be a loopback name.
func browserSafe(dev bool, allowed []string) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := c.Request
		if dev && !loopbackHost(r.Host) {
			// Before the bearer's exemption: development mode checks no bearer, so after DNS
			// rebinding a page, same-origin with the daemon, could send any.
			wire.Fail(c, http.StatusMisdirectedRequest, "Host %q is not this daemon: in development mode it answers loopback names only", r.Host)
			return
		}
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || (!dev && r.Header.Get("Cookie") == "") {
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) && !slices.Contains(allowed, o) {
			wire.Fail(c, http.StatusForbidden, "cross-origin request from %q refused; list it in http.allowedOrigins to allow it", o)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return
		case http.MethodDelete:
			if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
				// No page can send a DELETE as it is: only GET, HEAD and POST go without the
				// preflight this daemon never grants. Without a body there is no type to check.
				return
			}
		}
		if ct := r.Header.Get("Content-Type"); ct == "application/json" {
			return // what ParseMediaType would say, without its map
		} else if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			wire.Fail(c, http.StatusUnsupportedMediaType, "Content-Type: application/json is required on every write")
			return
		}
	}
}

// loopbackHost reports whether a Host header names this machine: localhost (or a name under it)
// or a loopback address, with any port.
func loopbackHost(host string) bool { return plainLoopbackHost(host) || parsedLoopbackHost(host) }

// plainLoopbackHost tells the Hosts local clients send on every request, 127.0.0.1, localhost or
// [::1] with a port, without parsing them (which was most of browserSafe's time). It only ever
// says yes where parsedLoopbackHost does.
func plainLoopbackHost(host string) bool {
	for _, name := range [...]string{"127.0.0.1:", "localhost:", "[::1]:"} {
		if port, ok := strings.CutPrefix(host, name); ok {
			return allDigits(port)
		}
	}
	return false
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parsedLoopbackHost is loopbackHost for any Host.
func parsedLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "."), "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// sameOrigin reports whether origin is the daemon's own, as the request reached it.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

// tokenIn compares got with every token in constant time, so neither a match's position nor a
// common prefix shows in the timing.
func tokenIn(got []byte, tokens [][]byte) bool {
	found := 0
	for _, t := range tokens {
		found |= subtle.ConstantTimeCompare(got, t)
	}
	return found == 1
}

// The values privateAnswers sets, shared (net/http only reads them).
var (
	noStore = []string{"no-store"}
	noSniff = []string{"nosniff"}
)

// privateAnswers keeps every answer out of caches (hooks, decisions, a chat's text: an admin's
// or a user's, never a proxy's or the next browser user's to read back) and tells browsers to
// take it as the type it says, never as a page. Streams say the same (wire.StartSSE).
func privateAnswers(c *gin.Context) {
	h := c.Writer.Header()
	h["Cache-Control"], h["X-Content-Type-Options"] = noStore, noSniff
}

// answersOversized reports whether c's route answers a body over the limit itself (readBody): the
// coding agents' hooks, whose harnesses take an error status for "no objection" (agents' handler).
func answersOversized(c *gin.Context) bool { return c.FullPath() == agents.HookRoute }

func recoverer(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(c.Request.Context(), "handler panic", "method", c.Request.Method, "path", c.FullPath(), "panic", p)
				wire.Fail(c, http.StatusInternalServerError, "internal error")
			}
		}()
		c.Next()
	}
}

func logErrors(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if len(c.Errors) > 0 {
			logRequestErrors(log, c)
		}
	}
}

// logRequestErrors is apart from logErrors, whose frame stays on the stack of every open stream.
func logRequestErrors(log *slog.Logger, c *gin.Context) {
	for _, e := range c.Errors {
		log.ErrorContext(c.Request.Context(), "request failed", "method", c.Request.Method, "path", c.FullPath(), "status", c.Writer.Status(), "err", e.Err)
	}
}

// streams gives a streaming chat route's writer a deadline on every write and flush
// (deadlineWriter), so a client that stops reading is dropped after timeout instead of holding its
// handler forever; and keeps hookd_sse_connections{dialect}, the chat streams open now, in reg.
func streams(timeout time.Duration, reg *prometheus.Registry) gin.HandlerFunc {
	var open *prometheus.GaugeVec
	if reg != nil {
		open = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hookd_sse_connections",
			Help: "Chat API streams open now, by dialect."}, []string{"dialect"})
		reg.MustRegister(open)
	}
	return func(c *gin.Context) {
		dialect := streamDialect(c.Request.Method, c.Request.URL.Path)
		if dialect == "" {
			return
		}
		c.Writer = &deadlineWriter{ResponseWriter: c.Writer, timeout: timeout}
		if open == nil {
			return
		}
		g := open.WithLabelValues(dialect)
		g.Inc()
		defer g.Dec()
		c.Next()
	}
}

// streamDialect names the dialect of a streaming chat route ("" for other routes).
func streamDialect(method, path string) string {
	switch {
	case method == http.MethodPost && path == "/harness/chat":
		return "harness"
	case path == "/api/agent/run/stream":
		return "platform"
	case strings.HasPrefix(path, "/api/agent/chat/volo-ai/") && (strings.HasSuffix(path, "/intent") || strings.HasSuffix(path, "/resume")):
		return "volo"
	case method == http.MethodPost && path == "/ag-ui/run":
		return "agui"
	case path == "/ai-sdk/chat" || strings.HasPrefix(path, "/ai-sdk/chat/") && strings.HasSuffix(path, "/stream"):
		return "aisdk"
	}
	return ""
}

// isChatRoute tells the chat dialects' routes from the admin API's.
func isChatRoute(path string) bool {
	return strings.HasPrefix(path, "/harness/") || strings.HasPrefix(path, "/api/agent/") ||
		strings.HasPrefix(path, "/ag-ui/") || strings.HasPrefix(path, "/ai-sdk/")
}
