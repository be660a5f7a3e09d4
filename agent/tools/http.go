package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/hookd/hookd/dispatcher/netguard"
)

const (
	// MaxResponseBytes caps the response body http_request returns.
	MaxResponseBytes = 256 << 10
	// MaxRedirects is how many redirects http_request follows; the next redirect response is
	// returned as it is.
	MaxRedirects = 5
	// defaultHTTPTimeout bounds a request when the client has no Timeout.
	defaultHTTPTimeout = 60 * time.Second
)

var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// responseHeaders are the response headers http_request shows.
var responseHeaders = []string{"Content-Type", "Content-Length", "Location", "Retry-After", "WWW-Authenticate"}

// HTTPRequest is the http_request tool.
type HTTPRequest struct {
	client *http.Client
}

// NewHTTPRequest returns the http_request tool sending through client. hookd passes a client
// whose transport is the SSRF guard's (netguard.Guard.Transport), which refuses private and
// internal addresses, redirects included. A nil client gets such a transport with the default
// policy. The client is not modified: each call uses a copy that follows at most MaxRedirects
// redirects (after the client's own CheckRedirect, if any) and, when the client has no Timeout,
// gives up after 60 seconds.
func NewHTTPRequest(client *http.Client) *HTTPRequest {
	if client == nil {
		client = &http.Client{Transport: netguard.New(netguard.Policy{}).Transport()}
	}
	return &HTTPRequest{client: client}
}

// Spec implements Tool.
func (*HTTPRequest) Spec() Spec {
	return Spec{
		Name:        NameHTTPRequest,
		Description: "Send an HTTP request to a public http(s) URL and return the status line, the main response headers and the body (at most 256 KiB).",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "Absolute http or https URL."},
    "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "description": "HTTP method (default GET)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Request headers."},
    "body": {"type": "string", "description": "Request body."}
  },
  "required": ["url"],
  "additionalProperties": false
}`),
		ReadOnly: false, // it can POST
		Subject:  "url",
	}
}

// Run implements Tool.
func (h *HTTPRequest) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	var a struct {
		URL     string            `json:"url"`
		Method  string            `json:"method"`
		Headers map[string]string `json:"headers"`
		Body    *string           `json:"body"`
	}
	if err := decodeArgs(NameHTTPRequest, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	method := strings.ToUpper(strings.TrimSpace(a.Method))
	if method == "" {
		method = http.MethodGet
	}
	if !httpMethods[method] {
		return errorResult("method %q is not supported (use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS)", a.Method), nil
	}
	u, err := url.Parse(strings.TrimSpace(a.URL))
	switch {
	case strings.TrimSpace(a.URL) == "":
		return errorResult("url is required"), nil
	case err != nil:
		return errorResult("url %q is not valid: %v", a.URL, errors.Unwrap(err)), nil
	case u.Scheme != "http" && u.Scheme != "https":
		return errorResult("url %q must be an absolute http:// or https:// URL", a.URL), nil
	case u.Host == "":
		return errorResult("url %q has no host", a.URL), nil
	}

	var body io.Reader
	if a.Body != nil {
		body = strings.NewReader(*a.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return errorResult("cannot build the request: %v", err), nil
	}
	req.Header.Set("User-Agent", "hookd-agent")
	for k, v := range a.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}

	// A copy of the client per call: the redirect count is per call.
	c := *h.client
	if c.Timeout == 0 {
		c.Timeout = defaultHTTPTimeout
	}
	redirects, stopped := 0, false
	inner := h.client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > MaxRedirects {
			stopped = true
			return http.ErrUseLastResponse
		}
		if inner != nil {
			if err := inner(req, via); err != nil {
				return err
			}
		}
		redirects = len(via)
		return nil
	}

	resp, err := c.Do(req)
	if err != nil {
		return requestFailure(ctx, "request", err)
	}
	defer resp.Body.Close()

	var b strings.Builder
	if redirects > 0 {
		fmt.Fprintf(&b, "[followed %d redirect(s) to %s]\n", redirects, resp.Request.URL)
	}
	if stopped {
		fmt.Fprintf(&b, "[stopped after %d redirects; this is the next redirect response]\n", MaxRedirects)
	}
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
	for _, k := range responseHeaders {
		for _, v := range resp.Header.Values(k) {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	res := Result{IsError: resp.StatusCode >= 400}

	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	truncated := len(data) > MaxResponseBytes
	if truncated {
		data = utf8Prefix(data, MaxResponseBytes)
	}
	if len(data) == 0 {
		if err != nil {
			fmt.Fprintf(&b, "\n[reading the body failed: %v]", requestError(err))
		}
		res.Text = strings.TrimSuffix(b.String(), "\n")
		return res, nil
	}
	b.WriteByte('\n')
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !looksLikeText(data, !truncated) || strings.HasPrefix(media, "image/") && media != "image/svg+xml" {
		if media == "" || strings.HasPrefix(media, "text/") {
			media = mediaType(u.Path, data)
		}
		if truncated {
			fmt.Fprintf(&b, "[binary body (%s), more than %s: not shown]", media, formatSize(MaxResponseBytes))
		} else {
			name := path.Base(resp.Request.URL.Path)
			if name == "/" || name == "." {
				name = "response"
			}
			res.Data = []Data{{Name: name, MediaType: media, Bytes: data}}
			fmt.Fprintf(&b, "[binary body (%s, %d bytes), attached as data]", media, len(data))
		}
	} else {
		b.Write(data)
		if truncated {
			fmt.Fprintf(&b, "\n[body truncated: the first %s are shown]", formatSize(MaxResponseBytes))
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "\n[reading the body failed: %v]", requestError(err))
	}
	res.Text = b.String()
	return res, nil
}

// requestFailure is the result of a request that got no response: the run's own end, the SSRF
// guard's refusal, or a failure; what names the request (request, search) for the model.
func requestFailure(ctx context.Context, what string, err error) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &blocked):
		return errorResult("%s refused: %s; requests to private, loopback and other internal addresses are not allowed", what, blocked), nil
	case errors.Is(err, netguard.ErrBlocked):
		return errorResult("%s refused: %s; requests to private, loopback and other internal addresses are not allowed", what, requestError(err)), nil
	}
	return errorResult("%s failed: %s", what, requestError(err)), nil
}

// requestError drops the *url.Error wrapper's method and URL (the model knows them) when it
// has one.
func requestError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
