package hookdtype

import (
	"net/url"
	"strings"
)

// RedactURL is the URL raw as output, logs and stored errors may show it: a userinfo password and
// every query value replaced by "***", the parameter names kept (`?client_secret=***`), the rest
// as written. A receiver, a token endpoint, a model server or a collector may take its key in
// its URL, and an error quoting the URL would otherwise carry it. A URL with neither comes back
// unchanged.
func RedactURL(raw string) string {
	head, query, hasQuery := strings.Cut(raw, "?")
	var frag string
	if !hasQuery {
		head, frag, _ = strings.Cut(head, "#")
		if frag != "" {
			frag = "#" + frag
		}
	}
	if i := strings.Index(head, "://"); i >= 0 {
		auth := head[i+3:]
		if j := strings.IndexByte(auth, '/'); j >= 0 {
			auth = auth[:j]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			if user, _, ok := strings.Cut(auth[:at], ":"); ok {
				head = head[:i+3] + user + ":***" + head[i+3+at:]
			}
		}
	}
	if !hasQuery {
		return head + frag
	}
	query, frag, _ = strings.Cut(query, "#")
	if frag != "" {
		frag = "#***"
	}
	parts := strings.Split(query, "&")
	for i, kv := range parts {
		if k, _, ok := strings.Cut(kv, "="); ok {
			parts[i] = k + "=***"
		}
	}
	return head + "?" + strings.Join(parts, "&") + frag
}

// RedactedURL is RedactURL of u.
func RedactedURL(u *url.URL) string { return RedactURL(u.String()) }

// URLSecrets are what RedactURL hides of raw — the userinfo password and the query values, each
// as written and decoded — so that a message from below quoting the URL in a form of its own
// (a client's error, an upstream's error page) can be scrubbed of them with ScrubSecrets. Values
// shorter than four bytes (?v=1) are left out: replacing them everywhere would garble the
// message, and a *url.Error is redacted whole with RedactURL instead.
func URLSecrets(raw string) []string {
	var out []string
	add := func(s string, unescape func(string) (string, error)) {
		if len(s) < 4 || s == "***" {
			return
		}
		out = append(out, s)
		if d, err := unescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	head, query, _ := strings.Cut(raw, "?")
	if i := strings.Index(head, "://"); i >= 0 {
		auth := head[i+3:]
		if j := strings.IndexByte(auth, '/'); j >= 0 {
			auth = auth[:j]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(auth[:at], ":"); ok {
				add(pw, url.PathUnescape)
			}
		}
	}
	query, _, _ = strings.Cut(query, "#")
	for _, kv := range strings.Split(query, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			add(v, url.QueryUnescape)
		}
	}
	return out
}
