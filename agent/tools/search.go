package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/hookd/hookd/dispatcher/netguard"
	"github.com/hookd/hookd/hookdtype"
)

const (
	// NameWebSearch is the web_search tool, offered when a search backend is configured.
	NameWebSearch = "web_search"
	// DefaultSearchResults is how many results web_search returns when the call names no limit.
	DefaultSearchResults = 5
	// MaxSearchResults caps the limit a call may ask for.
	MaxSearchResults = 20
	// maxSearchBody caps the backend's answer read.
	maxSearchBody = 2 << 20
	// maxSnippet caps one result's snippet, in bytes.
	maxSnippet = 1000
)

// SearchResult is one web_search hit. The tool's output is a JSON array of them, which is also
// what the VOLO WEB_SEARCH frame shows.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// WebSearch is the web_search tool. It asks a SearXNG-style JSON search API
// (GET <backend>?q=<query>&format=json answering {"results": [{"title", "url", "content"}]}),
// the format of the most common self-hosted metasearch engine, also spoken by its forks and
// proxies.
type WebSearch struct {
	backend *url.URL
	client  *http.Client
	// secrets are the backend URL's query values and password (a key it takes there), scrubbed
	// from every error the tool gives: the model and the chat see those.
	secrets []string
}

// NewWebSearch returns the web_search tool asking the backend at rawURL through client. hookd
// passes the same SSRF-guarded client as http_request's, so a backend on a private address needs
// the same egress allowance (webhooks.allowPrivateNetworks or allowCIDRs). A nil client gets the
// guard with the default policy. The URL must be absolute http(s); a query it has is kept (an
// engine or language selection), with q and format set by each call.
func NewWebSearch(rawURL string, client *http.Client) (*WebSearch, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("web search url %q must be an absolute http:// or https:// URL", hookdtype.RedactURL(rawURL))
	}
	if client == nil {
		client = &http.Client{Transport: netguard.New(netguard.Policy{}).Transport()}
	}
	if client.Timeout == 0 {
		c := *client
		c.Timeout = defaultHTTPTimeout
		client = &c
	}
	return &WebSearch{backend: u, client: client, secrets: hookdtype.URLSecrets(rawURL)}, nil
}

// Spec implements Tool.
func (*WebSearch) Spec() Spec {
	return Spec{
		Name:        NameWebSearch,
		Description: "Search the web. Returns a JSON array of results, each {title, url, snippet}; fetch a page with http_request to read it.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "What to search for."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Results to return (default 5)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`),
		ReadOnly: true,
		Subject:  "query",
	}
}

// Run implements Tool.
func (s *WebSearch) Run(ctx context.Context, env Env, args json.RawMessage) (Result, error) {
	res, err := s.search(ctx, args)
	if res.IsError {
		res.Text = hookdtype.ScrubSecrets(res.Text, s.secrets)
	}
	return res, err
}

func (s *WebSearch) search(ctx context.Context, args json.RawMessage) (Result, error) {
	var a struct {
		Query string `json:"query"`
		Limit *int   `json:"limit"`
	}
	if err := decodeArgs(NameWebSearch, args, &a); err != nil {
		return errorResult("%v", err), nil
	}
	query := strings.TrimSpace(a.Query)
	limit := DefaultSearchResults
	switch {
	case query == "":
		return errorResult("query is required"), nil
	case a.Limit != nil && (*a.Limit < 1 || *a.Limit > MaxSearchResults):
		return errorResult("limit %d must be between 1 and %d", *a.Limit, MaxSearchResults), nil
	case a.Limit != nil:
		limit = *a.Limit
	}
	u := *s.backend
	q := u.Query()
	q.Set("q", query)
	q.Set("format", "json")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return errorResult("cannot build the request: %v", err), nil
	}
	req.Header.Set("User-Agent", "hookd-agent")
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return requestFailure(ctx, "search", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearchBody+1))
	switch {
	case err != nil:
		return errorResult("search failed: reading the answer: %s", requestError(err)), nil
	case resp.StatusCode != http.StatusOK:
		return errorResult("search failed: the search backend answered %s", resp.Status), nil
	case len(body) > maxSearchBody:
		return errorResult("search failed: the search backend's answer is larger than %s", formatSize(maxSearchBody)), nil
	}
	var answer struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Results == nil {
		return errorResult("search failed: the search backend's answer is not a JSON object with results (want SearXNG's format=json)"), nil
	}
	hits := make([]SearchResult, 0, min(limit, len(answer.Results)))
	for _, r := range answer.Results {
		if len(hits) == limit {
			break
		}
		if r.URL == "" {
			continue
		}
		hits = append(hits, SearchResult{Title: strings.TrimSpace(r.Title), URL: r.URL,
			Snippet: string(utf8Prefix([]byte(strings.TrimSpace(r.Content)), maxSnippet))})
	}
	out, _ := json.Marshal(hits)
	return Result{Text: string(out)}, nil
}

// ParseSearchResults reads a web_search output back (the VOLO WEB_SEARCH frame shows it); it
// reports false for an output that is not one (an error text).
func ParseSearchResults(output string) ([]SearchResult, bool) {
	var hits []SearchResult
	if !utf8.ValidString(output) || json.Unmarshal([]byte(output), &hits) != nil || hits == nil {
		return nil, false
	}
	return hits, true
}
