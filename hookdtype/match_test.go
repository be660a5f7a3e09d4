package hookdtype

import "testing"

func TestNameMatch(t *testing.T) {
	cases := []struct {
		expr, name string
		want       bool
	}{
		{"", "anything", true},
		{" ", "transferFunds", true}, // the document: "*" or blank matches every tool
		{"*", "transferFunds", true},
		{"/^transfer.*/", "transferFunds", true},
		{"/^transfer.*/", "autoTransfer", false},
		{"/Funds/", "transferFunds", true},
		{"/a|b/", "xbx", true},
		{"transferFunds|payOrder", "payOrder", true},
		{"transferFunds|payOrder", "transferFunds", true},
		{"transferFunds|payOrder", "pay", false},
		{"transferFunds | payOrder", "payOrder", true},
		{"transferFunds", "transferFunds", true},
		{"transferFunds", "transferfunds", false},
		{"transfer*", "transferFunds", false},
		{"transfer*", "transfer*", true},
		{"/", "/", true},
		{"//", "x", true},
	}
	for _, c := range cases {
		m, err := ParseNameMatch(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		if got := m.Match(c.name); got != c.want {
			t.Errorf("%q matching %q = %v, want %v", c.expr, c.name, got, c.want)
		}
	}
	if _, err := ParseNameMatch("/(unclosed/"); err == nil {
		t.Error("invalid regex accepted")
	}
}
