package dispatcher

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/policy"
)

// HookType is a lifecycle point a hook can be registered on.
type HookType string

const (
	UserMessage       HookType = "user_message"
	PreToolUse        HookType = "pre_tool_use"
	PreScheduledTask  HookType = "pre_scheduled_task"
	PostToolUse       HookType = "post_tool_use"
	SessionStart      HookType = "session_start"
	AgentCompletion   HookType = "agent_completion"
	PostLLMCall       HookType = "post_llm_call"
	PostScheduledTask HookType = "post_scheduled_task"
)

// HookTypes lists every hook type, interceptive ones first.
var HookTypes = []HookType{UserMessage, PreToolUse, PreScheduledTask,
	PostToolUse, SessionStart, AgentCompletion, PostLLMCall, PostScheduledTask}

// Valid reports whether t is one of the eight hook types.
func (t HookType) Valid() bool {
	for _, v := range HookTypes {
		if v == t {
			return true
		}
	}
	return false
}

// Interceptive reports whether the point waits for allow / deny / modify.
func (t HookType) Interceptive() bool {
	return t == UserMessage || t == PreToolUse || t == PreScheduledTask
}

// ToolScoped reports whether toolNameMatch applies to the type.
func (t HookType) ToolScoped() bool { return t == PreToolUse || t == PostToolUse }

// Failure modes of interceptive hooks.
const (
	FailOpen   = "ALLOW"
	FailClosed = "DENY"
)

// Dispatch types: a webhook asks a receiver, a policy evaluates CEL rules in-process.
const (
	DispatchWebhook = "webhook"
	DispatchPolicy  = "policy"
)

// Signature schemes.
const (
	SchemeHookd    = "hookd"
	SchemeStandard = "standard"
)

// Masked is what every response shows in place of a secret.
const Masked = "***"

// Hook is a registered hook, in the shape of the admin API.
type Hook struct {
	ID             int64          `json:"id,omitempty"`
	HookName       string         `json:"hookName"`
	HookType       HookType       `json:"hookType"`
	AgentID        *int64         `json:"agentId"`
	ToolNameMatch  string         `json:"toolNameMatch,omitempty"`
	Priority       int            `json:"priority"`
	Enabled        *bool          `json:"enabled,omitempty" strict:"nonnull"`
	DispatchType   string         `json:"dispatchType,omitempty" strict:"nonempty"`
	DispatchConfig DispatchConfig `json:"dispatchConfig"`
	// ManagedBy marks a hook that `hookd hooks apply` keeps in step with hook files: apply
	// deletes the hooks of its mark that the files no longer hold, and no others.
	ManagedBy string `json:"managedBy,omitempty"`
	// PolicyConfig holds the rules of a dispatchType "policy" hook (docs/policies.md).
	PolicyConfig *policy.Config `json:"policyConfig,omitempty"`
	CreatedAt    *time.Time     `json:"createdAt,omitempty"`
	UpdatedAt    *time.Time     `json:"updatedAt,omitempty"`
	// SecretUnreadable (output only) says the stored secrets open with no configured master key.
	SecretUnreadable bool `json:"secretUnreadable,omitempty"`
	// receiverNotes are what the registry found of the receivers when it checked this hook for a
	// write (a name that does not resolve now), for Notes to tell whoever wrote it.
	receiverNotes []string
}

// MaxToolNameMatch bounds a toolNameMatch expression (a hook's, a permission rule's), in bytes.
const MaxToolNameMatch = 64 << 10

// CheckToolNameMatch checks expr, a toolNameMatch expression that selects tools by name (a hook's,
// a permission rule's tool_name): bounded, parsed, and naming no tool "".
func CheckToolNameMatch(expr string) error {
	if len(expr) > MaxToolNameMatch {
		// Compiled at every registry reload, on every replica, and a rule at every tool call: a
		// megabyte of regex took a second.
		return fmt.Errorf("is %d bytes long; at most %d are accepted (a list of a thousand tool names fits)", len(expr), MaxToolNameMatch)
	}
	m, err := hookdtype.ParseNameMatch(expr)
	if err != nil {
		return err
	}
	if m.EmptyName() {
		// No tool is named "": it would govern nothing, or not the tools it meant.
		return fmt.Errorf("%q lists an empty name, which no tool has; separate the names with single |s (for every tool, write \"*\")", expr)
	}
	return nil
}

// DispatchConfig says where and how a hook's events are sent.
type DispatchConfig struct {
	URL        string `json:"url,omitempty"` // webhooks only
	TimeoutMs  int    `json:"timeoutMs,omitempty" strict:"nonempty"`
	MaxRetries *int   `json:"maxRetries,omitempty" strict:"nonnull"` // 0 is no fast retry
	// SigningSecret is tri-state on update: nil or "***" keeps, "" clears, a value replaces.
	SigningSecret   *string `json:"signingSecret,omitempty"`
	FailureMode     string  `json:"failureMode,omitempty" strict:"nonempty"`
	SignatureScheme string  `json:"signatureScheme,omitempty" strict:"nonempty"`
	Auth            *Auth   `json:"auth,omitempty"`
}

// Auth is how requests to the receiver authenticate (FinxHttpAuth).
type Auth struct {
	Type string `json:"type"`
	// Header (API_KEY, default X-API-Key) and Prefix (BEARER, default Bearer) are refused sent
	// empty: "" would read as "none" but take the default. An Authorization header with no
	// prefix is API_KEY with header Authorization.
	Header           string            `json:"header,omitempty" strict:"nonempty"`
	Credential       string            `json:"credential,omitempty"`
	Prefix           string            `json:"prefix,omitempty" strict:"nonempty"`
	Username         string            `json:"username,omitempty"`
	Password         string            `json:"password,omitempty"`
	Headers          map[string]string `json:"headers,omitempty"`
	TokenFetchConfig *TokenFetch       `json:"tokenFetchConfig,omitempty"`
}

// TokenFetch configures CUSTOM_HTTP_TOKEN: a call that trades credentials for a short-lived token.
type TokenFetch struct {
	URL           string            `json:"url"`
	Method        string            `json:"method,omitempty" strict:"nonempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Body          string            `json:"body,omitempty"`
	TokenPath     string            `json:"tokenPath"`
	ExpiresInPath string            `json:"expiresInPath,omitempty"`
	Header        string            `json:"header,omitempty" strict:"nonempty"`
	// Prefix may be sent empty for a header other than Authorization: the token alone.
	Prefix string `json:"prefix,omitempty"`
}

// Auth types.
const (
	AuthNone            = "NONE"
	AuthAPIKey          = "API_KEY"
	AuthBearer          = "BEARER"
	AuthBasic           = "BASIC"
	AuthCustom          = "CUSTOM"
	AuthCustomHTTPToken = "CUSTOM_HTTP_TOKEN"
)

var invalid = hookdtype.Invalid

// Timeout and retry bounds of dispatchConfig.
const (
	MinTimeoutMs                = 100
	MaxTimeoutMs                = 60000
	DefaultInterceptiveTimeout  = 3000
	DefaultObservationalTimeout = 5000
	MaxFastRetries              = 3
	// MaxURLBytes bounds a receiver's URL (and a token endpoint's).
	MaxURLBytes = 2048
)

// Normalize validates h and fills in defaults. It is used on create and on replace (after the
// stored secrets were merged in); the error names the first bad field.
func (h *Hook) Normalize() error {
	h.HookName = strings.TrimSpace(h.HookName)
	if h.HookName == "" {
		return invalid("hookName", "is required")
	}
	if len(h.HookName) > 200 {
		return invalid("hookName", "must be at most 200 bytes")
	}
	if strings.ContainsFunc(h.HookName, unicode.IsControl) {
		// Shown in the decision log, the console and the CLI's tables, where a newline or an
		// escape sequence would pass for other text.
		return invalid("hookName", "must not contain control characters (a newline, a tab, an escape, …)")
	}
	if h.HookType == "" {
		return invalid("hookType", "is required")
	}
	if !h.HookType.Valid() {
		return invalid("hookType", "%q is not one of %v", h.HookType, HookTypes)
	}
	h.ManagedBy = strings.TrimSpace(h.ManagedBy)
	if len(h.ManagedBy) > 100 {
		return invalid("managedBy", "must be at most 100 bytes")
	}
	if h.Priority < math.MinInt32 || h.Priority > math.MaxInt32 {
		// The priority column (and the decision log's) is 32 bits wide on PostgreSQL.
		return invalid("priority", "must be between %d and %d", math.MinInt32, math.MaxInt32)
	}
	if h.AgentID != nil && *h.AgentID <= 0 {
		return invalid("agentId", "must be a positive id, or absent for every agent")
	}
	if h.ToolNameMatch != "" {
		if !h.HookType.ToolScoped() {
			return invalid("toolNameMatch", "only applies to pre_tool_use and post_tool_use")
		}
		if err := CheckToolNameMatch(h.ToolNameMatch); err != nil {
			return invalid("toolNameMatch", "%v", err)
		}
	}
	if h.Enabled == nil {
		t := true
		h.Enabled = &t
	}
	if h.DispatchType == "" {
		h.DispatchType = DispatchWebhook
	}
	switch h.DispatchType {
	case DispatchWebhook:
		if h.PolicyConfig != nil {
			return invalid("policyConfig", "only applies to dispatchType \"policy\"")
		}
		return h.DispatchConfig.normalize(h.HookType)
	case DispatchPolicy:
		if !h.HookType.Interceptive() {
			return invalid("dispatchType", "\"policy\" only applies to the interceptive hook types user_message, pre_tool_use and pre_scheduled_task")
		}
		if h.PolicyConfig == nil {
			return invalid("policyConfig", "is required for dispatchType \"policy\"")
		}
		if h.PolicyConfig.Rules == nil {
			h.PolicyConfig.Rules = []policy.Rule{} // a policy of its default alone: no rules, not null
		}
		if err := h.DispatchConfig.normalizePolicy(); err != nil {
			return err
		}
		p, err := policy.Compile(*h.PolicyConfig, string(h.HookType))
		if err != nil {
			return err
		}
		// Checked at registration, not when a stored hook is loaded: one stored before this check
		// still runs as it did.
		return p.CheckReads(newContext(h.HookType))
	default:
		return invalid("dispatchType", "%q is not one of webhook, policy", h.DispatchType)
	}
}

// normalizePolicy checks the dispatchConfig of a policy hook: only failureMode applies (what an
// evaluation error or a cost overrun decides); anything about a receiver is refused rather than
// stored unused.
func (c *DispatchConfig) normalizePolicy() error {
	for _, f := range []struct {
		name string
		set  bool
	}{{"url", c.URL != ""}, {"timeoutMs", c.TimeoutMs != 0}, {"maxRetries", c.MaxRetries != nil},
		{"signingSecret", c.SigningSecret != nil && *c.SigningSecret != ""},
		{"signatureScheme", c.SignatureScheme != ""}, {"auth", c.Auth != nil}} {
		if f.set {
			return invalid("dispatchConfig."+f.name, "does not apply to a policy hook")
		}
	}
	c.SigningSecret = nil
	return c.normalizeFailureMode()
}

func (c *DispatchConfig) normalizeFailureMode() error {
	c.FailureMode = strings.ToUpper(c.FailureMode)
	if c.FailureMode == "" {
		c.FailureMode = FailOpen
	}
	if c.FailureMode != FailOpen && c.FailureMode != FailClosed {
		return invalid("dispatchConfig.failureMode", "must be ALLOW or DENY")
	}
	return nil
}

func (c *DispatchConfig) normalize(t HookType) error {
	if c.URL == "" {
		return invalid("dispatchConfig.url", "is required")
	}
	if err := checkURL("dispatchConfig.url", c.URL); err != nil {
		return err
	}
	if u, _ := url.Parse(c.URL); u.User != nil {
		return invalid("dispatchConfig.url", "must not carry credentials; use dispatchConfig.auth")
	}
	if c.TimeoutMs == 0 {
		c.TimeoutMs = DefaultObservationalTimeout
		if t.Interceptive() {
			c.TimeoutMs = DefaultInterceptiveTimeout
		}
	}
	if c.TimeoutMs < MinTimeoutMs || c.TimeoutMs > MaxTimeoutMs {
		return invalid("dispatchConfig.timeoutMs", "must be between %d and %d", MinTimeoutMs, MaxTimeoutMs)
	}
	if c.MaxRetries == nil {
		n := MaxFastRetries
		c.MaxRetries = &n
	}
	if *c.MaxRetries < 0 || *c.MaxRetries > MaxFastRetries {
		return invalid("dispatchConfig.maxRetries", "must be between 0 and %d", MaxFastRetries)
	}
	if err := c.normalizeFailureMode(); err != nil {
		return err
	}
	if c.SignatureScheme == "" {
		c.SignatureScheme = SchemeHookd
	}
	if c.SigningSecret != nil && *c.SigningSecret == Masked {
		return invalid("dispatchConfig.signingSecret", "\"***\" is the mask, not a secret")
	}
	switch c.SignatureScheme {
	case SchemeHookd:
	case SchemeStandard:
		if c.SigningSecret != nil && *c.SigningSecret != "" {
			if err := checkStandardSecret(*c.SigningSecret); err != nil {
				return err
			}
		}
	default:
		return invalid("dispatchConfig.signatureScheme", "must be hookd or standard")
	}
	if c.Auth != nil {
		if err := c.Auth.normalize(); err != nil {
			return err
		}
		if c.Auth.Type == AuthNone {
			c.Auth = nil // NONE clears the credential: nothing of it is kept
		}
	}
	return nil
}

func (a *Auth) normalize() error {
	a.Type = strings.ToUpper(a.Type)
	required := func(field, v string) error {
		if strings.TrimSpace(v) == "" {
			return invalid("dispatchConfig.auth."+field, "is required for %s", a.Type)
		}
		if v == Masked {
			return invalid("dispatchConfig.auth."+field, "\"***\" is the mask, not a credential")
		}
		return nil
	}
	// credential is a required value that goes into a header as it is.
	credential := func(field, v string) error {
		if err := required(field, v); err != nil {
			return err
		}
		return checkHeaderValue("dispatchConfig.auth."+field, v)
	}
	if err := a.onlyFieldsOfType(); err != nil {
		return err
	}
	switch a.Type {
	case "":
		return invalid("dispatchConfig.auth.type", "is required")
	case AuthNone:
		return nil
	case AuthAPIKey:
		if a.Header == "" {
			a.Header = "X-API-Key"
		}
		if err := checkSentHeaderName("dispatchConfig.auth.header", a.Header); err != nil {
			return err
		}
		return credential("credential", a.Credential)
	case AuthBearer:
		if a.Prefix == "" {
			a.Prefix = "Bearer"
		}
		if err := checkHeaderValue("dispatchConfig.auth.prefix", a.Prefix); err != nil {
			return err
		}
		return credential("credential", a.Credential)
	case AuthBasic:
		if a.Credential != "" {
			return credential("credential", a.Credential)
		}
		if err := required("username", a.Username); err != nil {
			return err
		}
		if strings.Contains(a.Username, ":") {
			return invalid("dispatchConfig.auth.username", "must not contain \":\" (Basic joins username:password)")
		}
		return required("password", a.Password)
	case AuthCustom:
		if len(a.Headers) == 0 {
			return invalid("dispatchConfig.auth.headers", "needs at least one header for CUSTOM")
		}
		return checkHeaders("dispatchConfig.auth.headers", a.Headers, true)
	case AuthCustomHTTPToken:
		f := a.TokenFetchConfig
		if f == nil {
			return invalid("dispatchConfig.auth.tokenFetchConfig", "is required for CUSTOM_HTTP_TOKEN")
		}
		if err := checkURL("dispatchConfig.auth.tokenFetchConfig.url", f.URL); err != nil {
			return err
		}
		u, _ := url.Parse(f.URL)
		if u.User != nil {
			return invalid("dispatchConfig.auth.tokenFetchConfig.url", "must not carry credentials; send them in the token call's headers or body")
		}
		for k, vs := range u.Query() {
			// GET shows the query's values as "***"; sent back beside a changed URL (or a new
			// auth), they are not the values.
			if slices.Contains(vs, Masked) {
				return invalid("dispatchConfig.auth.tokenFetchConfig.url", "the value of %s: \"***\" is the mask, not a value; send the token URL whole", k)
			}
		}
		if err := checkHeaders("dispatchConfig.auth.tokenFetchConfig.headers", f.Headers, false); err != nil {
			return err
		}
		f.Method = strings.ToUpper(f.Method)
		if f.Method == "" {
			f.Method = "POST"
		}
		if f.Method != "POST" && f.Method != "GET" && f.Method != "PUT" {
			return invalid("dispatchConfig.auth.tokenFetchConfig.method", "must be GET, POST or PUT")
		}
		if f.TokenPath == "" {
			return invalid("dispatchConfig.auth.tokenFetchConfig.tokenPath", "is required")
		}
		if f.Header == "" {
			f.Header = "Authorization"
		}
		if f.Prefix == "" && f.Header == "Authorization" {
			f.Prefix = "Bearer"
		}
		if err := checkSentHeaderName("dispatchConfig.auth.tokenFetchConfig.header", f.Header); err != nil {
			return err
		}
		return checkHeaderValue("dispatchConfig.auth.tokenFetchConfig.prefix", f.Prefix)
	default:
		return invalid("dispatchConfig.auth.type", "%q is not one of NONE, API_KEY, BEARER, BASIC, CUSTOM, CUSTOM_HTTP_TOKEN", a.Type)
	}
}

// authFields are the fields each auth type uses; any other one set would be silently ignored.
var authFields = map[string][]string{
	AuthNone:            {},
	AuthAPIKey:          {"header", "credential"},
	AuthBearer:          {"credential", "prefix"},
	AuthBasic:           {"credential", "username", "password"},
	AuthCustom:          {"headers"},
	AuthCustomHTTPToken: {"tokenFetchConfig"},
}

// onlyFieldsOfType refuses a field the auth type does not use (a BEARER with a header name, a
// NONE with a credential): it would be stored and never sent.
func (a *Auth) onlyFieldsOfType() error {
	uses, known := authFields[a.Type]
	if !known {
		return nil // the type itself is refused below
	}
	set := []struct {
		name string
		set  bool
	}{{"header", a.Header != ""}, {"credential", a.Credential != ""}, {"prefix", a.Prefix != ""},
		{"username", a.Username != ""}, {"password", a.Password != ""}, {"headers", a.Headers != nil},
		{"tokenFetchConfig", a.TokenFetchConfig != nil}}
	for _, f := range set {
		if f.set && !slices.Contains(uses, f.name) {
			if len(uses) == 0 {
				return invalid("dispatchConfig.auth."+f.name, "has no effect for %s, which sends no credential", a.Type)
			}
			return invalid("dispatchConfig.auth."+f.name, "has no effect for %s, which uses %s", a.Type, strings.Join(uses, ", "))
		}
	}
	if a.Type == AuthBasic && a.Credential != "" && (a.Username != "" || a.Password != "") {
		return invalid("dispatchConfig.auth.credential", "BASIC takes either credential (already encoded) or username and password, not both")
	}
	return nil
}

// checkURL refuses what can never be a receiver: no http(s) scheme, no host, a port no TCP
// connection can have, or over MaxURLBytes.
func checkURL(field, raw string) error {
	if len(raw) > MaxURLBytes {
		return invalid(field, "is %d bytes long; at most %d are accepted", len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return invalid(field, "must be an http:// or https:// URL with a host")
	}
	if p := u.Port(); p != "" {
		// url.Parse takes any digits; a dial of port 0 or 99999 fails on every call.
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid(field, "port %s is not a TCP port (1 to 65535)", p)
		}
	}
	if host := u.Hostname(); legacyIPv4(host) {
		return invalid(field, "%q is neither a host name (the last label of one is never a number) nor an IP address as the daemon dials one; write the address in full (a.b.c.d in decimal)", host)
	}
	return nil
}

// legacyIPv4 reports whether host ends in a number but is no IP literal netip reads: IPv4 in one
// of the legacy forms (2130706433, 0x7f.1, 127.1, 0177.0.0.1) that browsers and curl read as an
// address (the WHATWG URL rule) while the daemon's resolver looks them up as names, which never
// resolve. Such a receiver could never be reached as written, nor checked as the address it means.
func legacyIPv4(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	last := strings.TrimSuffix(host, ".")
	last = last[strings.LastIndexByte(last, '.')+1:]
	digits, hex := last, false
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		digits, hex = last[2:], true
	}
	if digits == "" {
		return hex // "0x" alone is the number 0
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !('0' <= c && c <= '9') && !(hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')) {
			return false
		}
	}
	return true
}

// checkStandardSecret refuses a Standard Webhooks secret every signature would fail with.
func checkStandardSecret(secret string) error {
	const field, want = "dispatchConfig.signingSecret", "the standard scheme needs whsec_ followed by the key in base64"
	enc, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return invalid(field, "%s; this secret does not start with whsec_", want)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	switch {
	case err != nil:
		return invalid(field, "%s; the part after whsec_ is not base64: %v", want, err)
	case len(key) == 0:
		return invalid(field, "%s; the key is empty", want)
	}
	return nil
}

// checkHeaders checks the names and values of headers the hook sends; required: they are
// CUSTOM's, sent on every call (each is a credential that must be set, and may not be a header
// hookd sets itself); otherwise they go to the token endpoint, whose request is the hook's to shape.
func checkHeaders(field string, h map[string]string, required bool) error {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	check := checkHeaderName
	if required {
		check = checkSentHeaderName
	}
	for i, k := range names {
		if err := check(field+"."+k, k); err != nil {
			return err
		}
		// Header names are case-insensitive: X-A and x-a are one header, and one of the two
		// values would be sent, a different one from call to call.
		for _, other := range names[:i] {
			if strings.EqualFold(other, k) {
				return invalid(field+"."+k, "is the header %s again (header names ignore case); send it once", other)
			}
		}
		v := h[k]
		switch {
		case required && strings.TrimSpace(v) == "":
			return invalid(field+"."+k, "needs a value")
		case v == Masked:
			return invalid(field+"."+k, "\"***\" is the mask, not a credential")
		}
		if err := checkHeaderValue(field+"."+k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkHeaderName refuses what is not an HTTP field name (a token, RFC 9110 §5.1).
func checkHeaderName(field, name string) error {
	if name == "" {
		return invalid(field, "is not a header name: it is empty")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return invalid(field, "%q is not a header name: %q is not allowed in one", name, name[i])
		}
	}
	return nil
}

// ownHeaders are the headers hookd sets on every call to a receiver (the body's type, hookd's
// name and version, the trace, the signature of either scheme), and those HTTP frames the request with, in canonical form.
// An auth header of one of these names would overwrite hookd's (every signature then fails) or
// be dropped unsent. The encodings are HTTP's too: an Accept-Encoding of the hook's own stops the
// transport from decoding a compressed answer, which hookd then cannot read (a deny read as a
// failure, and so as the failureMode); a Content-Encoding would misdescribe the plain JSON body.
var ownHeaders = []string{"Content-Type", "User-Agent", "X-Request-Id", "Traceparent", "Tracestate",
	"X-Webhook-Timestamp", "X-Webhook-Signature", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature",
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade",
	"Proxy-Connection", "Accept-Encoding", "Content-Encoding", "Expect"}

// checkSentHeaderName is checkHeaderName for a header the hook adds to its calls to the receiver:
// it may not be one of hookd's own.
func checkSentHeaderName(field, name string) error {
	if err := checkHeaderName(field, name); err != nil {
		return err
	}
	if slices.Contains(ownHeaders, textproto.CanonicalMIMEHeaderKey(name)) {
		return invalid(field, "%q is a header hookd sets itself on every call; name another", name)
	}
	return nil
}

// checkHeaderValue refuses a header value with control characters: a CR or LF would end the
// header (or start a new one), and net/http refuses to send such a value at all.
func checkHeaderValue(field, v string) error {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return invalid(field, "must not contain control characters (CR, LF, …); found %q at byte %d", b, i)
		}
	}
	return nil
}

func isTokenChar(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// Secret returns the signing secret, "" when the hook does not sign.
func (h *Hook) Secret() string {
	if h.DispatchConfig.SigningSecret == nil {
		return ""
	}
	return *h.DispatchConfig.SigningSecret
}

// MergeSecrets applies the one update rule of secrets and credentials to a replacement (the rule
// the source document gives for signingSecret):
//
//	signingSecret absent or "***"   keeps the stored secret     auth absent (or null)        keeps the stored auth
//	signingSecret new value         replaces it                 auth of a type, new values   replaces it
//	signingSecret ""                clears it (no signing)      auth {"type": "NONE"}        clears it
//
// Within an auth of the stored type, a credential sent back as "***" (as GET shows it) keeps its
// stored value, so a hook read with GET can be sent back with PUT unchanged.
//
// The stored auth is kept for the receiver it was given for: a url that moves to another origin
// (scheme, host, port) with the auth left out or any of its credentials sent back as "***" is
// refused, naming auth, rather than handing the old receiver's credential to the new one.
func (h *Hook) MergeSecrets(stored *Hook) error {
	if h.DispatchType == DispatchPolicy {
		return nil // a policy hook has no secrets; one sent is refused by Normalize
	}
	dc := &h.DispatchConfig
	if dc.SigningSecret == nil || *dc.SigningSecret == Masked {
		dc.SigningSecret = stored.DispatchConfig.SigningSecret
	}
	if dc.SigningSecret != nil && *dc.SigningSecret == "" {
		dc.SigningSecret = nil
	}
	if kept := mergeAuth(dc, stored.DispatchConfig.Auth); kept && dc.URL != "" && origin(dc.URL) != origin(stored.DispatchConfig.URL) {
		return invalid("dispatchConfig.auth", "the stored credential is for %s, and dispatchConfig.url now goes to %s: "+
			"send auth again for it, or {\"type\": \"NONE\"} for none", shownOrigin(stored.DispatchConfig.URL), shownOrigin(dc.URL))
	}
	return nil
}

// mergeAuth applies the update rule to dc's auth, old being the stored one; kept says that some
// stored credential is in the result.
func mergeAuth(dc *DispatchConfig, old *Auth) (kept bool) {
	if dc.Auth == nil {
		dc.Auth = old
		return old != nil && old.Type != AuthNone
	}
	a := dc.Auth
	if old == nil || !strings.EqualFold(a.Type, old.Type) {
		return false
	}
	keep := func(v *string, was string) {
		if *v == Masked {
			*v, kept = was, true
		}
	}
	keep(&a.Credential, old.Credential)
	keep(&a.Password, old.Password)
	// A masked header the stored auth lacks stays "***", which Normalize refuses as the mask.
	keepHeaders := func(h, was map[string]string) {
		for k, v := range h {
			if stored, ok := was[k]; ok && v == Masked {
				h[k], kept = stored, true
			}
		}
	}
	keepHeaders(a.Headers, old.Headers)
	if f, of := a.TokenFetchConfig, old.TokenFetchConfig; f != nil && of != nil {
		keep(&f.Body, of.Body)
		keepHeaders(f.Headers, of.Headers)
		if f.URL != of.URL && f.URL == hookdtype.RedactURL(of.URL) {
			f.URL = of.URL // sent back as GET shows it
		}
	}
	return kept
}

// origin is where calls to a receiver URL go: its scheme, host and port, the default port written
// out and the case folded, so that https://A.example and https://a.example:443 are one origin.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// shownOrigin is a receiver URL's origin as written (scheme://host[:port]), for a message.
func shownOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return hookdtype.RedactURL(raw)
	}
	return u.Scheme + "://" + u.Host
}

// Notes are what in h (as stored: normalized) is valid but likely not what was meant, for the
// registration's answer and for hookd doctor: a toolNameMatch name that looks like a glob (the
// document matches it exactly), and a policy that denies or asks but fails open (failureMode
// ALLOW, the default): a rule that cannot be evaluated lets the call through, a deny rule's too.
func (h Hook) Notes() []string {
	notes := slices.Clone(h.receiverNotes)
	if h.HookType.ToolScoped() {
		notes = append(notes, NameMatchNotes("toolNameMatch", "tool name", h.ToolNameMatch)...)
	}
	if pc := h.PolicyConfig; h.DispatchType == DispatchPolicy && pc != nil && h.DispatchConfig.FailureMode == FailOpen && len(pc.Rules) > 0 {
		blocks := func(decision string) bool { return decision == Deny || decision == Ask }
		if blocks(pc.Default) || slices.ContainsFunc(pc.Rules, func(r policy.Rule) bool { return blocks(r.Decision) }) {
			notes = append(notes, "dispatchConfig.failureMode: ALLOW (the default) lets a call through when a rule cannot be evaluated "+
				"(a field read without has(), say), even where a deny rule would have matched; DENY blocks it instead")
		}
	}
	return notes
}

// NameMatchNotes are what in expr, a toolNameMatch expression (field names it, and what it
// matches: a tool name), is valid but likely not what was meant: a name that looks like a glob
// (the document matches it exactly), or a /regex/ with flags after it, as JavaScript writes one,
// which is a name too.
func NameMatchNotes(field, what, expr string) []string {
	m, err := hookdtype.ParseNameMatch(expr)
	if err != nil {
		return nil
	}
	var notes []string
	for _, g := range m.GlobLike() {
		prefix := g[:strings.IndexAny(g, "*?[")]
		notes = append(notes, fmt.Sprintf("%s: %q is matched as that exact %s, not as a glob (toolNameMatch has none); "+
			"a pattern is a /regex/, such as %q", field, g, what, "/^"+regexp.QuoteMeta(prefix)+"/"))
	}
	if e := expr; len(e) > 2 && e[0] == '/' && e[len(e)-1] != '/' {
		if i := strings.LastIndexByte(e, '/'); i > 0 && strings.Trim(e[i+1:], "imsgu") == "" {
			re := e[:i+1] // g and u mean nothing to a name match; i, m and s go inside
			if flags := strings.NewReplacer("g", "", "u", "").Replace(e[i+1:]); flags != "" {
				re = "/(?" + flags + ")" + e[1:i+1]
			}
			notes = append(notes, fmt.Sprintf("%s: %q is matched as that exact %s: a /regex/ takes no flags after it; "+
				"write them inside, such as %q", field, e, what, re))
		}
	}
	return notes
}

// Masked returns a copy of h fit for output: the signing secret and every credential as "***".
func (h Hook) Masked() Hook {
	if h.DispatchConfig.SigningSecret != nil {
		m := Masked
		h.DispatchConfig.SigningSecret = &m
	}
	if a := h.DispatchConfig.Auth; a != nil {
		c := *a
		mask := func(s string) string {
			if s == "" {
				return ""
			}
			return Masked
		}
		c.Credential, c.Password = mask(c.Credential), mask(c.Password)
		c.Headers = maskValues(c.Headers)
		if f := c.TokenFetchConfig; f != nil {
			fc := *f
			fc.Body = mask(fc.Body)
			fc.Headers = maskValues(fc.Headers)
			fc.URL = hookdtype.RedactURL(fc.URL) // a client_secret may ride in its query
			c.TokenFetchConfig = &fc
		}
		h.DispatchConfig.Auth = &c
	}
	return h
}

func maskValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = Masked
	}
	return out
}

// hookSecrets is the part of a hook that is sealed at rest.
type hookSecrets struct {
	SigningSecret *string `json:"signingSecret,omitempty"`
	Auth          *Auth   `json:"auth,omitempty"`
}

// split separates the public document from the secrets for storage.
func (h *Hook) split() (doc, secrets []byte, err error) {
	pub := *h
	pub.ID, pub.CreatedAt, pub.UpdatedAt = 0, nil, nil
	pub.DispatchConfig.SigningSecret, pub.DispatchConfig.Auth = nil, nil
	if doc, err = json.Marshal(pub); err != nil {
		return nil, nil, err
	}
	s := hookSecrets{SigningSecret: h.DispatchConfig.SigningSecret, Auth: h.DispatchConfig.Auth}
	if s.SigningSecret == nil && s.Auth == nil {
		return doc, nil, nil
	}
	secrets, err = json.Marshal(s)
	return doc, secrets, err
}

// join rebuilds a hook from its stored parts.
func join(id int64, doc, secrets []byte, created, updated time.Time) (Hook, error) {
	var h Hook
	if err := json.Unmarshal(doc, &h); err != nil {
		return Hook{}, fmt.Errorf("hook %d: stored document: %w", id, err)
	}
	if len(secrets) > 0 {
		var s hookSecrets
		if err := json.Unmarshal(secrets, &s); err != nil {
			return Hook{}, fmt.Errorf("hook %d: stored secrets: %w", id, err)
		}
		h.DispatchConfig.SigningSecret, h.DispatchConfig.Auth = s.SigningSecret, s.Auth
	}
	h.ID, h.CreatedAt, h.UpdatedAt = id, &created, &updated
	return h, nil
}
