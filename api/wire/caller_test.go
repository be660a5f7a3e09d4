package wire

import "testing"

func TestRunAgent(t *testing.T) {
	five, six := int64(5001), int64(5002)
	for _, c := range []struct {
		key, asked, want *int64
		refused          bool
	}{
		{nil, nil, nil, false},
		{nil, &six, &six, false},
		{&five, nil, &five, false},
		{&five, &five, &five, false},
		{&five, &six, nil, true},
	} {
		got, err := Caller{AgentID: c.key}.RunAgent(c.asked)
		if (err != nil) != c.refused || (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("key %v asked %v: %v %v", c.key, c.asked, got, err)
		}
	}
}
