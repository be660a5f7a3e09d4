package hookdtype

import (
	"slices"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example.com/approve", "https://hooks.example.com/approve"},
		{"http://127.0.0.1:8080/h#frag", "http://127.0.0.1:8080/h#frag"},
		{"https://t.example/token?client_secret=s3cr%2Ft&scope=a", "https://t.example/token?client_secret=***&scope=***"},
		{"http://u:p%40ss@host:1/v1?key=k", "http://u:***@host:1/v1?key=***"},
		{"http://user@host/p?debug", "http://user@host/p?debug"},
		{"http://host/p/a@b?x=1#tok", "http://host/p/a@b?x=***#***"},
		{"u:secret@host", "u:secret@host"}, // no scheme: not a URL to take apart (callers refuse it)
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	got := URLSecrets("http://u:p%40ss@host/v1?key=k%2B1z&flag&empty=&v=1")
	if want := []string{"p%40ss", "p@ss", "k%2B1z", "k+1z"}; !slices.Equal(got, want) {
		t.Errorf("URLSecrets = %q, want %q", got, want)
	}
}
