package dispatcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/tracing"
)

// Response bodies are read up to this size; the rest is discarded unread. An interceptive answer
// is what ends within it (trailing whitespace past it aside); one that does not end there is a
// failure saying so (failureMode), not the parse error of its first part.
const maxResponseBody = 64 << 10

// sender performs one HTTP exchange with a receiver: it renders the envelope, signs it, adds the
// auth headers, and reads a bounded response. Retrying is not its business.
type sender struct {
	transport http.RoundTripper // the guarded transport, the client's
	client    *http.Client      // guarded transport, redirects not followed
	userAgent []string          // the User-Agent header's value
	tokens    tokenCache
}

// attempt is the outcome of one exchange.
type attempt struct {
	body     []byte // the exact bytes sent
	status   int    // 0 when no response arrived
	respBody []byte
	bodyOver bool // the response body went on past maxResponseBody: respBody is its start
	// sent are the credentials the request carried, to be scrubbed from what of the answer is
	// kept or shown (scrubEcho); the answer itself is decided on as it came.
	sent       []string
	retryAfter time.Duration
	latency    time.Duration
	err        error // set when no response arrived, or the request could not be made
}

func newSender(transport http.RoundTripper, version string) *sender {
	if transport == nil {
		transport = http.DefaultTransport // what the client would use
	}
	return &sender{
		transport: transport,
		client: &http.Client{
			Transport: transport,
			// A redirect is an answer, not an instruction: 3xx is final, and following it could
			// lead past the SSRF guard's intent.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		userAgent: []string{"hookd/" + version},
	}
}

// hookWire is what a hook's requests need, prepared once per registry snapshot: its signer (nil
// when it does not sign) and its URL parsed as http.NewRequest parses it (nil when it does not
// parse: the request then fails as it always did).
type hookWire struct {
	signer *signer
	url    *url.URL
	host   string
}

func newHookWire(h *Hook) *hookWire {
	w := &hookWire{signer: newSigner(h)}
	if tmpl, err := http.NewRequest(http.MethodPost, h.DispatchConfig.URL, nil); err == nil {
		w.url, w.host = tmpl.URL, tmpl.Host
	}
	return w
}

// send posts env to h's receiver, stamping dispatchedAt with now (the time the call began) and
// signing the exact bytes. w is h's from the registry snapshot, nil when there is none at hand.
func (s *sender) send(ctx context.Context, h *Hook, w *hookWire, env *Envelope, now time.Time) attempt {
	env.DispatchedAt = now.UnixMilli()
	body, err := encodeEnvelope(env)
	if err != nil {
		return attempt{err: fmt.Errorf("encode envelope: %w", err)}
	}
	a := s.post(ctx, h, w, env, body, now, false)
	if a.status == http.StatusUnauthorized && h.DispatchConfig.Auth != nil && h.DispatchConfig.Auth.Type == AuthCustomHTTPToken {
		// The cached token may have been revoked early: fetch a fresh one and try once more.
		s.tokens.forget(h)
		a = s.post(ctx, h, w, env, body, now, true)
	}
	return a
}

var jsonContentType = []string{"application/json"}

// post makes one exchange; its latency counts from now, or for a second try (refetched) from when
// it begins.
func (s *sender) post(ctx context.Context, h *Hook, w *hookWire, env *Envelope, body []byte, now time.Time, refetched bool) attempt {
	a := attempt{body: body}
	req, err := newPost(ctx, h, w, body)
	if err != nil {
		a.err = err
		return a
	}
	var sg *signer
	if w != nil {
		sg = w.signer
	}
	// Set under their canonical names; the value slices of the constant ones are shared (nothing
	// writes to a request's header values).
	req.Header["Content-Type"] = jsonContentType
	req.Header["User-Agent"] = s.userAgent
	if env.TraceID != nil {
		req.Header["X-Request-Id"] = []string{*env.TraceID}
	}
	tracing.Inject(ctx, req.Header)
	if err := sign(req.Header, h, sg, env.EventID, now, body); err != nil {
		a.err = err
		return a
	}
	sent, err := s.authorize(ctx, req.Header, h)
	if err != nil {
		a.err = err
		return a
	}
	a.sent = sent
	start := now
	if refetched {
		start = time.Now()
	}
	x := exchangeOf(ctx) // an operator's probe records what was sent and answered
	x.request(req, body)
	resp, err := s.do(req)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() == context.DeadlineExceeded {
			// The few transport paths that report their context's Err see the cancellation
			// that callDeadlines' deadline caused; with context.WithDeadline they would have
			// seen DeadlineExceeded, and so do we.
			err = &url.Error{Op: "Post", URL: hookdtype.RedactedURL(req.URL), Err: context.DeadlineExceeded}
		}
		a.latency = time.Since(start)
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.respBody, err = readBody(resp.Body, resp.ContentLength)
	if err == nil && len(a.respBody) == maxResponseBody {
		var one [1]byte
		n, _ := io.ReadFull(resp.Body, one[:])
		a.bodyOver = n == 1
	}
	end := time.Now()
	a.latency = end.Sub(start)
	a.status = resp.StatusCode
	if v := resp.Header.Get("Retry-After"); v != "" {
		a.retryAfter = parseRetryAfter(v, end)
	}
	if err != nil && a.status/100 == 2 {
		a.err = fmt.Errorf("read response: %w", err)
	}
	x.response(a.status, scrubHeaders(resp.Header, sent), scrubEcho(a.respBody, sent))
	return a
}

// minEchoed is the shortest credential scrubbed from what a receiver answers: a shorter one (a
// CUSTOM header X-Tenant: 7) would erase unrelated text and hides little.
const minEchoed = 4

// scrubEcho is a receiver's answer with every credential the request carried (sent: the values
// authorize set) replaced by "***", for keeping or showing: a receiver that echoes its request
// headers in an error page would otherwise have the hook's credential stored with the attempt
// and shown by the API. Never for deciding: a credential that happens to read "deny" must not
// turn the answer into an unknown decision. b is not modified.
func scrubEcho(body []byte, sent []string) []byte {
	for _, v := range sent {
		if len(v) >= minEchoed && bytes.Contains(body, []byte(v)) {
			body = bytes.ReplaceAll(body, []byte(v), []byte(Masked))
		}
	}
	return body
}

// scrubHeaders is scrubEcho for the answer's headers (shown by a probe).
func scrubHeaders(h http.Header, sent []string) http.Header {
	if len(sent) == 0 {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out[k] = append(out[k], string(scrubEcho([]byte(v), sent)))
		}
	}
	return out
}

// newPost is http.NewRequestWithContext(ctx, "POST", h's URL, bytes.NewReader(body)), with the
// URL parsed once per registry snapshot (w) rather than on every request.
func newPost(ctx context.Context, h *Hook, w *hookWire, body []byte) (*http.Request, error) {
	if w == nil || w.url == nil || len(body) == 0 {
		return http.NewRequestWithContext(ctx, http.MethodPost, h.DispatchConfig.URL, bytes.NewReader(body))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", nil)
	if err != nil {
		return nil, err
	}
	u := *w.url
	req.URL, req.Host = &u, w.host
	req.ContentLength = int64(len(body))
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req, nil
}

// do is what s.client.Do does with a request of post, without the client's bookkeeping for
// following redirects (which it never follows): the transport's round trip, with the client's
// checks and its errors, a *url.Error wrapping what the transport said.
func (s *sender) do(req *http.Request) (*http.Response, error) {
	uerr := func(err error) error {
		return &url.Error{Op: "Post", URL: hookdtype.RedactedURL(req.URL), Err: err}
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		// Never so for a registered hook (its URL may not carry credentials); as the client does.
		password, _ := u.Password()
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password)))
	}
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		return nil, uerr(err)
	}
	if resp == nil {
		return nil, uerr(fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", s.transport))
	}
	if resp.Body == nil {
		if resp.ContentLength > 0 {
			return nil, uerr(fmt.Errorf("http: RoundTripper implementation (%T) returned a *Response with content length %d but a nil Body", s.transport, resp.ContentLength))
		}
		resp.Body = io.NopCloser(strings.NewReader(""))
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		// The client would read the Location before its CheckRedirect declines to follow it.
		if loc := resp.Header.Get("Location"); loc != "" {
			if _, err := req.URL.Parse(loc); err != nil {
				resp.Body.Close()
				return nil, uerr(fmt.Errorf("failed to parse Location header %q: %v", loc, err))
			}
		}
	}
	return resp, nil
}

// readBody reads up to maxResponseBody bytes of a response body (the rest is left unread), as
// io.ReadAll(io.LimitReader(r, maxResponseBody)) does, in a buffer sized by the Content-Length
// when there is one.
func readBody(r io.Reader, contentLength int64) ([]byte, error) {
	size := 512
	if contentLength >= 0 && contentLength < maxResponseBody {
		size = int(contentLength) + 1 // room to see the end without growing
	}
	b := make([]byte, 0, size)
	for len(b) < maxResponseBody {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
		n, err := r.Read(b[len(b):min(cap(b), maxResponseBody)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// authorize adds the headers of the hook's auth type.
func (s *sender) authorize(ctx context.Context, hdr http.Header, h *Hook) (sent []string, err error) {
	a := h.DispatchConfig.Auth
	if a == nil {
		return nil, nil
	}
	switch a.Type {
	case AuthAPIKey:
		hdr.Set(a.Header, a.Credential)
		return []string{a.Credential}, nil
	case AuthBearer:
		hdr.Set("Authorization", strings.TrimSpace(a.Prefix+" "+a.Credential))
		return []string{a.Credential}, nil
	case AuthBasic:
		cred := a.Credential
		if cred == "" {
			cred = base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password))
		}
		hdr.Set("Authorization", "Basic "+cred)
		return []string{cred, a.Password}, nil
	case AuthCustom:
		for k, v := range a.Headers {
			hdr.Set(k, v)
			sent = append(sent, v)
		}
		return sent, nil
	case AuthCustomHTTPToken:
		tok, err := s.tokens.get(ctx, s.client, h)
		if err != nil {
			return nil, err
		}
		f := a.TokenFetchConfig
		hdr.Set(f.Header, strings.TrimSpace(f.Prefix+" "+tok))
		return []string{tok}, nil
	}
	return nil, nil
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
		if ue, ok := errors.AsType[*url.Error](err); ok {
			// The client's error quotes the URL with its query: a client_secret put there.
			ue.URL = hookdtype.RedactedURL(req.URL)
		}
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
	if f.ExpiresInPath == "" {
		return tok, 0, nil // kept until a 401 says otherwise
	}
	var secs float64
	switch v := lookupPath(doc, f.ExpiresInPath).(type) {
	case float64:
		secs = v
	case string:
		secs, _ = strconv.ParseFloat(v, 64)
	}
	if !(secs > 0) {
		// A path that finds no lifetime (a typo, the endpoint's other name for it) would keep the
		// token for good: a receiver that refuses an expired one with a 403 would fail every call.
		return "", 0, fmt.Errorf("token endpoint answer has no positive number of seconds at %q (expiresInPath)", f.ExpiresInPath)
	}
	return tok, time.Duration(secs * float64(time.Second)), nil
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
