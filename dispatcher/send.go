package dispatcher

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/hookd/hookd/signing"
)

// Response bodies are read up to this size; the rest is discarded unread.
const maxResponseBody = 64 << 10

// sender performs one HTTP exchange with a receiver: it renders the envelope, signs it, adds the
// auth headers, and reads a bounded response. Retrying is not its business.
type sender struct {
	client    *http.Client // guarded transport, redirects not followed
	userAgent string
	tokens    tokenCache
}

// attempt is the outcome of one exchange.
type attempt struct {
	body       []byte // the exact bytes sent
	status     int    // 0 when no response arrived
	respBody   []byte
	retryAfter time.Duration
	latency    time.Duration
	err        error // set when no response arrived, or the request could not be made
}

func newSender(transport http.RoundTripper, version string) *sender {
	return &sender{
		client: &http.Client{
			Transport: transport,
			// A redirect is an answer, not an instruction: 3xx is final, and following it could
			// lead past the SSRF guard's intent.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		userAgent: "hookd/" + version,
	}
}

// send posts env to h's receiver, stamping dispatchedAt with now and signing the exact bytes.
func (s *sender) send(ctx context.Context, h *Hook, env *Envelope) attempt {
	now := time.Now()
	env.DispatchedAt = now.UnixMilli()
	body, err := json.Marshal(env)
	if err != nil {
		return attempt{err: fmt.Errorf("encode envelope: %w", err)}
	}
	a := s.post(ctx, h, env, body, now, false)
	if a.status == http.StatusUnauthorized && h.DispatchConfig.Auth != nil && h.DispatchConfig.Auth.Type == AuthCustomHTTPToken {
		// The cached token may have been revoked early: fetch a fresh one and try once more.
		s.tokens.forget(h)
		a = s.post(ctx, h, env, body, now, true)
	}
	return a
}

func (s *sender) post(ctx context.Context, h *Hook, env *Envelope, body []byte, now time.Time, refetched bool) attempt {
	a := attempt{body: body}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.DispatchConfig.URL, bytes.NewReader(body))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	if env.TraceID != nil {
		req.Header.Set("X-Request-Id", *env.TraceID)
	}
	if err := sign(req.Header, h, env.EventID, now, body); err != nil {
		a.err = err
		return a
	}
	if err := s.authorize(ctx, req.Header, h); err != nil {
		a.err = err
		return a
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		a.latency = time.Since(start)
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.respBody, err = io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	a.latency = time.Since(start)
	a.status = resp.StatusCode
	a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if err != nil && a.status/100 == 2 {
		a.err = fmt.Errorf("read response: %w", err)
	}
	return a
}

// sign adds the signature headers of the hook's scheme; a hook without a secret is not signed.
func sign(hdr http.Header, h *Hook, eventID string, now time.Time, body []byte) error {
	secret := h.Secret()
	if secret == "" {
		return nil
	}
	if h.DispatchConfig.SignatureScheme == SchemeStandard {
		sig, err := signing.SignStandard(secret, eventID, now, body)
		if err != nil {
			return fmt.Errorf("sign: %w", err)
		}
		hdr.Set(signing.HeaderStdID, eventID)
		hdr.Set(signing.HeaderStdTimestamp, strconv.FormatInt(now.Unix(), 10))
		hdr.Set(signing.HeaderStdSignature, sig)
		return nil
	}
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	hdr.Set(signing.HeaderTimestamp, ts)
	hdr.Set(signing.HeaderSignature, signing.Sign(secret, ts, body))
	return nil
}

// authorize adds the headers of the hook's auth type.
func (s *sender) authorize(ctx context.Context, hdr http.Header, h *Hook) error {
	a := h.DispatchConfig.Auth
	if a == nil {
		return nil
	}
	switch a.Type {
	case AuthAPIKey:
		hdr.Set(a.Header, a.Credential)
	case AuthBearer:
		hdr.Set("Authorization", strings.TrimSpace(a.Prefix+" "+a.Credential))
	case AuthBasic:
		cred := a.Credential
		if cred == "" {
			cred = base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		}
		hdr.Set("Authorization", "Basic "+cred)
	case AuthCustom:
		for k, v := range a.Headers {
			hdr.Set(k, v)
		}
	case AuthCustomHTTPToken:
		tok, err := s.tokens.get(ctx, s.client, h)
		if err != nil {
			return err
		}
		f := a.TokenFetchConfig
		hdr.Set(f.Header, strings.TrimSpace(f.Prefix+" "+tok))
	}
	return nil
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// tokenCache holds CUSTOM_HTTP_TOKEN tokens per hook until they expire.
type tokenCache struct {
	mu sync.Mutex
	m  map[int64]cachedToken
}

type cachedToken struct {
	fingerprint string // the fetch config it came from: a changed hook fetches anew
	token       string
	expires     time.Time // zero: until a 401 says otherwise
}

// TokenFetchError is a failure to obtain a CUSTOM_HTTP_TOKEN token; no request was sent.
type TokenFetchError struct{ Err error }

func (e *TokenFetchError) Error() string { return "token fetch: " + e.Err.Error() }
func (e *TokenFetchError) Unwrap() error { return e.Err }

func (c *tokenCache) forget(h *Hook) {
	c.mu.Lock()
	delete(c.m, h.ID)
	c.mu.Unlock()
}

func (c *tokenCache) get(ctx context.Context, client *http.Client, h *Hook) (string, error) {
	f := h.DispatchConfig.Auth.TokenFetchConfig
	fp, _ := json.Marshal(f)
	c.mu.Lock()
	t, ok := c.m[h.ID]
	c.mu.Unlock()
	if ok && t.fingerprint == string(fp) && (t.expires.IsZero() || time.Now().Before(t.expires)) {
		return t.token, nil
	}
	tok, expiresIn, err := fetchToken(ctx, client, f)
	if err != nil {
		return "", &TokenFetchError{Err: err}
	}
	t = cachedToken{fingerprint: string(fp), token: tok}
	if expiresIn > 0 {
		// Renew a little early so a token does not expire in flight.
		t.expires = time.Now().Add(expiresIn - min(expiresIn/10, 30*time.Second))
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[int64]cachedToken{}
	}
	c.m[h.ID] = t
	c.mu.Unlock()
	return tok, nil
}

func fetchToken(ctx context.Context, client *http.Client, f *TokenFetch) (string, time.Duration, error) {
	var body io.Reader
	if f.Body != "" {
		body = strings.NewReader(f.Body)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, f.Method, f.URL, body)
	if err != nil {
		return "", 0, err
	}
	for k, v := range f.Headers {
		req.Header.Set(k, v)
	}
	if f.Body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	// A token endpoint may blip; two quick retries, bounded by the hook's own deadline.
	rc := retryablehttp.NewClient()
	rc.HTTPClient = client
	rc.RetryMax = 2
	rc.RetryWaitMin, rc.RetryWaitMax = 100*time.Millisecond, 500*time.Millisecond
	rc.Logger = nil
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	resp, err := rc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode/100 != 2 {
		return "", 0, fmt.Errorf("token endpoint answered %d", resp.StatusCode)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", 0, errors.New("token endpoint answered no JSON")
	}
	tok, _ := lookupPath(doc, f.TokenPath).(string)
	if tok == "" {
		return "", 0, fmt.Errorf("token endpoint answer has no string at %q", f.TokenPath)
	}
	var expiresIn time.Duration
	if f.ExpiresInPath != "" {
		switch v := lookupPath(doc, f.ExpiresInPath).(type) {
		case float64:
			expiresIn = time.Duration(v * float64(time.Second))
		case string:
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				expiresIn = time.Duration(n * float64(time.Second))
			}
		}
	}
	return tok, expiresIn, nil
}

// lookupPath follows a dotted path ("data.token") through decoded JSON objects.
func lookupPath(doc any, path string) any {
	for _, key := range strings.Split(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[key]
	}
	return doc
}
