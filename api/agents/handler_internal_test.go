package agents

import (
	"net/textproto"
	"testing"
)

// The headers hookd reads are named in canonical form, as oneHeader looks them up.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, name := range []string{AgentIDHeader, ToolEventsHeader} {
		if textproto.CanonicalMIMEHeaderKey(name) != name {
			t.Errorf("%s is not in canonical form", name)
		}
	}
}
