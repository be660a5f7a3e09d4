package hookdtype

import (
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://hookd:pw-1@db:5432/hookd?sslmode=disable", "postgres://hookd:***@db:5432/hookd?sslmode=disable"},
		{"postgres://hookd@db/hookd?password=pw-2&sslmode=disable", "postgres://hookd@db/hookd?password=***&sslmode=disable"},
		{"postgresql://h:p%40ss@db/x?sslpassword=pw-3", "postgresql://h:***@db/x?sslpassword=***"},
		{"sqlite:./data/hookd.db?_auth_user=u&_auth_pass=pw-4", "sqlite:./data/hookd.db?_auth_pass=***&_auth_user=u"},
		{"postgres://u:pw-5@db:notaport/x?password=pw-6", "(unparsable database URL)"},
		{"sqlite:./data/hookd.db", "sqlite:./data/hookd.db"},
	}
	for _, tt := range tests {
		if got := RedactDSN(tt.in); got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	secrets := DSNSecrets("postgres://h:p%40ss@db/x?password=a%26b&sslpassword=c")
	for _, want := range []string{"p%40ss", "p@ss", "a%26b", "a&b", "c"} {
		if !strings.Contains(strings.Join(secrets, "\n")+"\n", want+"\n") {
			t.Errorf("DSNSecrets misses %q: %q", want, secrets)
		}
	}
}
