package dispatcher

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

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
	Enabled        *bool          `json:"enabled"`
	DispatchType   string         `json:"dispatchType"`
	DispatchConfig DispatchConfig `json:"dispatchConfig"`
	// PolicyConfig holds the rules of a dispatchType "policy" hook (docs/policies.md).
	PolicyConfig *policy.Config `json:"policyConfig,omitempty"`
	CreatedAt    *time.Time     `json:"createdAt,omitempty"`
	UpdatedAt    *time.Time     `json:"updatedAt,omitempty"`
}

// DispatchConfig says where and how a hook's events are sent.
type DispatchConfig struct {
	URL        string `json:"url,omitempty"` // webhooks only
	TimeoutMs  int    `json:"timeoutMs,omitempty"`
	MaxRetries *int   `json:"maxRetries,omitempty"`
	// SigningSecret is tri-state on update: nil or "***" keeps, "" clears, a value replaces.
	SigningSecret   *string `json:"signingSecret,omitempty"`
	FailureMode     string  `json:"failureMode,omitempty"`
	SignatureScheme string  `json:"signatureScheme,omitempty"`
	Auth            *Auth   `json:"auth,omitempty"`
}

// Auth is how requests to the receiver authenticate (FinxHttpAuth).
type Auth struct {
	Type             string            `json:"type"`
	Header           string            `json:"header,omitempty"`
	Credential       string            `json:"credential,omitempty"`
	Prefix           string            `json:"prefix,omitempty"`
	Username         string            `json:"username,omitempty"`
	Password         string            `json:"password,omitempty"`
	Headers          map[string]string `json:"headers,omitempty"`
	TokenFetchConfig *TokenFetch       `json:"tokenFetchConfig,omitempty"`
}

// TokenFetch configures CUSTOM_HTTP_TOKEN: a call that trades credentials for a short-lived token.
type TokenFetch struct {
	URL           string            `json:"url"`
	Method        string            `json:"method,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Body          string            `json:"body,omitempty"`
	TokenPath     string            `json:"tokenPath"`
	ExpiresInPath string            `json:"expiresInPath,omitempty"`
	Header        string            `json:"header,omitempty"`
	Prefix        string            `json:"prefix,omitempty"`
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
	if h.HookType == "" {
		return invalid("hookType", "is required")
	}
	if !h.HookType.Valid() {
		return invalid("hookType", "%q is not one of %v", h.HookType, HookTypes)
	}
	if h.AgentID != nil && *h.AgentID <= 0 {
		return invalid("agentId", "must be a positive id, or absent for every agent")
	}
	if h.ToolNameMatch != "" {
		if !h.HookType.ToolScoped() {
			return invalid("toolNameMatch", "only applies to pre_tool_use and post_tool_use")
		}
		if _, err := hookdtype.ParseNameMatch(h.ToolNameMatch); err != nil {
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
		if err := h.DispatchConfig.normalizePolicy(); err != nil {
			return err
		}
		_, err := policy.Compile(*h.PolicyConfig, string(h.HookType))
		return err
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
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return invalid("dispatchConfig.url", "is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		return invalid("dispatchConfig.url", "must be an http:// or https:// URL with a host")
	case u.User != nil:
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
	switch c.SignatureScheme {
	case SchemeHookd:
	case SchemeStandard:
		if c.SigningSecret != nil && *c.SigningSecret != "" && !strings.HasPrefix(*c.SigningSecret, "whsec_") {
			return invalid("dispatchConfig.signingSecret", "the standard scheme needs a whsec_<base64> secret")
		}
	default:
		return invalid("dispatchConfig.signatureScheme", "must be hookd or standard")
	}
	if c.SigningSecret != nil && *c.SigningSecret == Masked {
		return invalid("dispatchConfig.signingSecret", "\"***\" is the mask, not a secret")
	}
	if c.Auth != nil {
		return c.Auth.normalize()
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
	switch a.Type {
	case "":
		return invalid("dispatchConfig.auth.type", "is required")
	case AuthNone:
		return nil
	case AuthAPIKey:
		if a.Header == "" {
			a.Header = "X-API-Key"
		}
		return required("credential", a.Credential)
	case AuthBearer:
		if a.Prefix == "" {
			a.Prefix = "Bearer"
		}
		return required("credential", a.Credential)
	case AuthBasic:
		if a.Credential != "" {
			return required("credential", a.Credential)
		}
		if err := required("username", a.Username); err != nil {
			return err
		}
		return required("password", a.Password)
	case AuthCustom:
		if len(a.Headers) == 0 {
			return invalid("dispatchConfig.auth.headers", "needs at least one header for CUSTOM")
		}
		for k, v := range a.Headers {
			if err := required("headers."+k, v); err != nil {
				return err
			}
		}
		return nil
	case AuthCustomHTTPToken:
		f := a.TokenFetchConfig
		if f == nil {
			return invalid("dispatchConfig.auth.tokenFetchConfig", "is required for CUSTOM_HTTP_TOKEN")
		}
		if u, err := url.Parse(f.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return invalid("dispatchConfig.auth.tokenFetchConfig.url", "must be an http:// or https:// URL with a host")
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
		return nil
	default:
		return invalid("dispatchConfig.auth.type", "%q is not one of NONE, API_KEY, BEARER, BASIC, CUSTOM, CUSTOM_HTTP_TOKEN", a.Type)
	}
}

// Secret returns the signing secret, "" when the hook does not sign.
func (h *Hook) Secret() string {
	if h.DispatchConfig.SigningSecret == nil {
		return ""
	}
	return *h.DispatchConfig.SigningSecret
}

// MergeSecrets applies the update rules of the source document to a replacement: a signingSecret
// that is absent or "***" keeps the stored one, "" clears it, a new value replaces it. Auth
// credentials sent back as "***" (as GET shows them) keep the stored values of the same auth type.
func (h *Hook) MergeSecrets(stored *Hook) {
	if h.DispatchType == DispatchPolicy {
		return // a policy hook has no secrets; one sent is refused by Normalize
	}
	dc := &h.DispatchConfig
	if dc.SigningSecret == nil || *dc.SigningSecret == Masked {
		dc.SigningSecret = stored.DispatchConfig.SigningSecret
	}
	if dc.SigningSecret != nil && *dc.SigningSecret == "" {
		dc.SigningSecret = nil
	}
	old := stored.DispatchConfig.Auth
	a := dc.Auth
	if a == nil || old == nil || !strings.EqualFold(a.Type, old.Type) {
		return
	}
	keep := func(v *string, was string) {
		if *v == Masked {
			*v = was
		}
	}
	keep(&a.Credential, old.Credential)
	keep(&a.Password, old.Password)
	for k, v := range a.Headers {
		if v == Masked {
			a.Headers[k] = old.Headers[k]
		}
	}
	if f, of := a.TokenFetchConfig, old.TokenFetchConfig; f != nil && of != nil {
		keep(&f.Body, of.Body)
		for k, v := range f.Headers {
			if v == Masked {
				f.Headers[k] = of.Headers[k]
			}
		}
	}
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
