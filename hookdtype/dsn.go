package hookdtype

import (
	"net/url"
	"strings"
)

// dsnPasswordParams are the query parameters that carry a password in a database URL: libpq's
// and pgx's password and sslpassword, and go-sqlite3's _auth_pass.
var dsnPasswordParams = []string{"password", "sslpassword", "_auth_pass"}

// DSNSecrets returns the passwords a database URL carries — its userinfo password and the
// password query parameters — each as written and decoded, so that a message quoting the URL in
// either form can be scrubbed of them.
func DSNSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	head, query, _ := strings.Cut(raw, "?")
	if at := strings.LastIndex(head, "@"); at >= 0 {
		if i := strings.Index(head, "://"); i >= 0 && i < at {
			if _, pw, ok := strings.Cut(head[i+3:at], ":"); ok {
				add(pw)
				if d, err := url.PathUnescape(pw); err == nil && d != pw {
					add(d)
				}
			}
		}
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		for _, p := range dsnPasswordParams {
			if k == p {
				add(v)
				if d, err := url.QueryUnescape(v); err == nil && d != v {
					add(d)
				}
			}
		}
	}
	return out
}

// RedactDSN returns the database URL raw with every password (userinfo and query parameter)
// replaced by "***". A URL that does not parse is not quoted at all: it may hold a password in a
// form this cannot find.
func RedactDSN(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable database URL)"
	}
	// url.URL would escape "***"; mark the spots with a placeholder and swap it in after.
	const placeholder = "hookd-redacted-7f3c"
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), placeholder)
		}
	}
	q := u.Query()
	changed := false
	for _, p := range dsnPasswordParams {
		if q.Has(p) {
			q.Set(p, placeholder)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return ScrubSecrets(strings.ReplaceAll(u.String(), placeholder, "***"), DSNSecrets(raw))
}

// ScrubSecrets replaces every occurrence of each secret in s by "***": for messages from below
// (a driver's error) that may quote a URL in a form of their own.
func ScrubSecrets(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return s
}
