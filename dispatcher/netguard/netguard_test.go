package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// teredo builds a Teredo address (server 65.54.227.120) whose obfuscated
// client IPv4 is client.
func teredo(client string) string {
	c := netip.MustParseAddr(client).As4()
	b := [16]byte{0x20, 0x01, 0, 0, 65, 54, 227, 120, 0x80, 0, 0x63, 0xbf, ^c[0], ^c[1], ^c[2], ^c[3]}
	return netip.AddrFrom16(b).String()
}

func TestCheckTable(t *testing.T) {
	const (
		public   = iota // allowed by default
		private         // blocked; allowed by AllowPrivateNetworks and by allowCIDR
		metadata        // blocked; allowed only by allowCIDR
		never           // blocked by every policy
	)
	cases := []struct {
		addr      string
		kind      int
		reason    string // substring of the refusal
		allowCIDR string // AllowCIDRs entry that must allow it (private/metadata)
	}{
		{"127.0.0.1", private, "loopback", "127.0.0.0/8"},
		{"127.255.255.254", private, "loopback", "127.255.255.254/32"},
		{"10.1.2.3", private, "private (RFC1918)", "10.0.0.0/8"},
		{"172.16.0.1", private, "private (RFC1918)", "172.16.0.0/12"},
		{"172.31.255.255", private, "private (RFC1918)", "172.16.0.0/12"},
		{"172.32.0.1", public, "", ""},
		{"192.168.1.1", private, "private (RFC1918)", "192.168.1.0/24"},
		{"169.254.169.254", metadata, "metadata", "169.254.169.254/32"},
		{"169.254.1.1", private, "link-local", "169.254.0.0/16"},
		{"100.64.0.1", private, "CGNAT", "100.64.0.0/10"},
		{"100.127.255.255", private, "CGNAT", "100.64.0.0/10"},
		{"100.128.0.1", public, "", ""},
		{"100.100.100.200", metadata, "metadata", "100.100.100.200/32"},
		{"198.18.0.1", private, "benchmarking", "198.18.0.0/15"},
		{"0.0.0.0", never, "unspecified", ""},
		{"0.1.2.3", never, "unspecified", ""},
		{"::", never, "unspecified", ""},
		{"::1", private, "loopback", "::1/128"},
		{"::ffff:127.0.0.1", private, "loopback", "127.0.0.1/32"},
		{"::ffff:10.0.0.1", private, "private (RFC1918)", "10.0.0.0/8"},
		{"::ffff:8.8.8.8", public, "", ""},
		{"::127.0.0.1", private, "loopback", "127.0.0.0/8"},                  // IPv4-compatible
		{"::ffff:0:a00:1", private, "private (RFC1918)", "10.0.0.0/8"},       // SIIT IPv4-translated
		{"64:ff9b::a9fe:a9fe", metadata, "metadata", "169.254.169.254/32"},   // NAT64 of metadata
		{"64:ff9b::7f00:1", private, "loopback", "127.0.0.0/8"},              // NAT64 of loopback
		{"64:ff9b::808:808", public, "", ""},                                 // NAT64 of public
		{"64:ff9b:1::808:808", private, "NAT64 local-use", "64:ff9b:1::/48"}, // local-use prefix, public v4
		{"2002:7f00:0001::", private, "loopback", "127.0.0.0/8"},             // 6to4 of loopback
		{"2002:a9fe:a9fe::1", metadata, "metadata", "169.254.169.254/32"},    // 6to4 of metadata
		{"2002:0808:0808::", public, "", ""},                                 // 6to4 of public
		{teredo("10.0.0.1"), private, "private (RFC1918)", "10.0.0.0/8"},
		{teredo("8.8.8.8"), public, "", ""},
		{"fe80::1", private, "link-local", "fe80::/10"},
		{"fe80::1%eth0", private, "link-local", "fe80::/10"},
		{"fc00::1", private, "unique local", "fc00::/7"},
		{"fd12::1", private, "unique local", "fd12::/16"},
		{"fd00:ec2::254", metadata, "metadata", "fd00:ec2::254/128"},
		{"fec0::1", private, "site-local", "fec0::/10"},
		{"ff02::1", never, "multicast", ""},
		{"224.0.0.1", never, "multicast", ""},
		{"239.255.255.250", never, "multicast", ""},
		{"255.255.255.255", never, "broadcast", ""},
		{"8.8.8.8", public, "", ""},
		{"1.1.1.1", public, "", ""},
		{"2606:4700::1111", public, "", ""},
		{"2001:4860:4860::8888", public, "", ""},
	}

	def := New(Policy{})
	priv := New(Policy{AllowPrivateNetworks: true})
	everything := New(Policy{AllowPrivateNetworks: true, AllowCIDRs: []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"),
	}})

	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			ip := netip.MustParseAddr(tc.addr)
			err := def.Check(ip)
			if tc.kind == public {
				if err != nil {
					t.Fatalf("default policy refused public %s: %v", ip, err)
				}
				return
			}
			if !errors.Is(err, ErrBlocked) {
				t.Fatalf("default policy: Check(%s) = %v, want ErrBlocked", ip, err)
			}
			var be *BlockedError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), ip.String()) {
				t.Fatalf("error %q should name %s and %q", err, ip, tc.reason)
			}

			privErr := priv.Check(ip)
			switch tc.kind {
			case private:
				if privErr != nil {
					t.Fatalf("AllowPrivateNetworks refused %s: %v", ip, privErr)
				}
			case metadata, never:
				if !errors.Is(privErr, ErrBlocked) {
					t.Fatalf("AllowPrivateNetworks allowed %s (%v)", ip, tc.reason)
				}
			}

			if tc.kind == never {
				if err := everything.Check(ip); !errors.Is(err, ErrBlocked) {
					t.Fatalf("%s must never be allowed, got %v", ip, err)
				}
				return
			}
			// The AllowCIDRs entry allows it, without AllowPrivateNetworks.
			allow, err := ParseCIDRs([]string{tc.allowCIDR})
			if err != nil {
				t.Fatal(err)
			}
			if err := New(Policy{AllowCIDRs: allow}).Check(ip); err != nil {
				t.Fatalf("AllowCIDRs %s refused %s: %v", tc.allowCIDR, ip, err)
			}
			// An unrelated entry does not.
			other := New(Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}})
			if err := other.Check(ip); !errors.Is(err, ErrBlocked) {
				t.Fatalf("unrelated AllowCIDRs allowed %s", ip)
			}
		})
	}
}

func TestCheckErrorMessages(t *testing.T) {
	g := New(Policy{})
	for addr, want := range map[string]string{
		"10.0.0.1":           "netguard: 10.0.0.1 is private (RFC1918)",
		"::ffff:10.0.0.1":    "netguard: ::ffff:10.0.0.1 (IPv4-mapped form of 10.0.0.1) is private (RFC1918)",
		"2002:7f00:1::":      "netguard: 2002:7f00:1:: (6to4 form of 127.0.0.1) is loopback (127.0.0.0/8)",
		"64:ff9b::a9fe:a9fe": "netguard: 64:ff9b::a9fe:a9fe (NAT64 form of 169.254.169.254) is a cloud metadata endpoint",
	} {
		if err := g.Check(netip.MustParseAddr(addr)); err == nil || err.Error() != want {
			t.Errorf("Check(%s) = %v, want %q", addr, err, want)
		}
	}
	if err := g.Check(netip.Addr{}); !errors.Is(err, ErrBlocked) {
		t.Errorf("zero Addr: %v, want ErrBlocked", err)
	}
}

func TestAllowCIDRsAreNarrow(t *testing.T) {
	allow, err := ParseCIDRs([]string{"10.0.0.0/8", " ::ffff:192.168.7.0/120 ", "64:ff9b::/96", "64:ff9b:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	if got := allow[1].String(); got != "192.168.7.0/24" {
		t.Fatalf("mapped prefix normalized to %s, want 192.168.7.0/24", got)
	}
	g := New(Policy{AllowCIDRs: allow})
	for _, ok := range []string{"10.9.9.9", "::ffff:10.9.9.9", "192.168.7.20", "::ffff:192.168.7.20", "64:ff9b::a00:1", "64:ff9b:1::808:808"} {
		if err := g.Check(netip.MustParseAddr(ok)); err != nil {
			t.Errorf("%s should be allowed: %v", ok, err)
		}
	}
	// Allowing the NAT64 prefixes does not allow NAT64 to blocked IPv4.
	for _, bad := range []string{"192.168.1.1", "127.0.0.1", "::1", "64:ff9b::7f00:1", "64:ff9b:1::a9fe:a9fe", "fd00::1"} {
		if err := g.Check(netip.MustParseAddr(bad)); !errors.Is(err, ErrBlocked) {
			t.Errorf("%s should be blocked, got %v", bad, err)
		}
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs([]string{"10.1.2.3/8", "fd00:1::/64", "192.0.2.7", "2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "fd00:1::/64", "192.0.2.7/32", "2001:db8::1/128"}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "not-a-cidr", "", "fe80::1%eth0", "10.0.0/8"} {
		_, err := ParseCIDRs([]string{"10.0.0.0/8", bad})
		if err == nil {
			t.Errorf("ParseCIDRs(%q) succeeded", bad)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) || !strings.Contains(err.Error(), "entry 1") {
			t.Errorf("error %q does not name entry %q", err, bad)
		}
	}
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func newLoopbackServer(t *testing.T) (*httptest.Server, *countingListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Listener.Close()
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl
}

func get(t *testing.T, g *Guard, target string) (string, error) {
	t.Helper()
	tr := g.Transport()
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get(target)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestDialLoopback(t *testing.T) {
	srv, cl := newLoopbackServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	localhostURL := "http://" + net.JoinHostPort("localhost", strconv.Itoa(port)) + "/"

	def := New(Policy{})
	for _, target := range []string{srv.URL, localhostURL} {
		_, err := get(t, def, target)
		if !errors.Is(err, ErrBlocked) {
			t.Fatalf("default guard GET %s: %v, want ErrBlocked", target, err)
		}
		if !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("error should say loopback: %v", err)
		}
	}
	if _, err := get(t, def, localhostURL); err == nil || !strings.Contains(err.Error(), "netguard: localhost -> 127.0.0.1 is loopback") {
		t.Fatalf("hostname refusal should name the host: %v", err)
	}
	if _, err := def.DialContext(context.Background(), "tcp", srv.Listener.Addr().String()); !errors.Is(err, ErrBlocked) {
		t.Fatalf("DialContext: %v, want ErrBlocked", err)
	}
	if n := cl.accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the server through the default guard", n)
	}

	// Allowed by AllowPrivateNetworks (IP literal and hostname) and by an
	// AllowCIDRs entry.
	priv := New(Policy{AllowPrivateNetworks: true})
	for _, target := range []string{srv.URL, localhostURL} {
		body, err := get(t, priv, target)
		if err != nil || body != "ok" {
			t.Fatalf("AllowPrivateNetworks GET %s = %q, %v", target, body, err)
		}
	}
	cidr := New(Policy{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if body, err := get(t, cidr, srv.URL); err != nil || body != "ok" {
		t.Fatalf("AllowCIDRs GET = %q, %v", body, err)
	}
	if n := cl.accepted.Load(); n < 3 {
		t.Fatalf("accepted = %d, want >= 3", n)
	}
}

// The dialer's Control hook refuses a blocked address even if the
// resolve-and-check step were bypassed.
func TestControlHookRechecks(t *testing.T) {
	srv, cl := newLoopbackServer(t)
	g := New(Policy{})
	_, err := g.dialer.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("raw dialer: %v, want ErrBlocked", err)
	}
	if n := cl.accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the server", n)
	}
}

func TestDialErrors(t *testing.T) {
	g := New(Policy{})
	ctx := context.Background()
	if _, err := g.DialContext(ctx, "udp", "8.8.8.8:53"); err == nil || errors.Is(err, ErrBlocked) {
		t.Fatalf("udp: %v, want unsupported-network error", err)
	}
	if _, err := g.DialContext(ctx, "tcp", "no-port"); err == nil {
		t.Fatal("missing port accepted")
	}
	_, err := g.DialContext(ctx, "tcp", "nonexistent.invalid:80")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || errors.Is(err, ErrBlocked) {
		t.Fatalf("unresolvable host: %v, want *net.DNSError", err)
	}
	// Literals are checked before anything is dialed.
	for _, addr := range []string{"[::1]:80", "[::ffff:169.254.169.254]:80", "0.0.0.0:80", "[fe80::1%lo]:80"} {
		if _, err := g.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrBlocked) {
			t.Fatalf("%s: %v, want ErrBlocked", addr, err)
		}
	}
}

func TestTransportSettings(t *testing.T) {
	tr := New(Policy{}).Transport()
	if tr.Proxy != nil || tr.DialContext == nil || tr.DialTLSContext != nil || tr.DialTLS != nil || tr.Dial != nil {
		t.Fatal("transport must dial only through the guard, without proxy")
	}
	if tr.MaxIdleConnsPerHost != 256 || tr.IdleConnTimeout != 90*time.Second ||
		tr.TLSHandshakeTimeout != 10*time.Second || !tr.ForceAttemptHTTP2 {
		t.Fatalf("transport not tuned: %+v", tr)
	}
}

func TestCheckHost(t *testing.T) {
	g := New(Policy{})
	ctx := context.Background()
	for host, want := range map[string]Allowance{"127.0.0.1": ByPrivateOrCIDRs, "localhost": ByPrivateOrCIDRs,
		"169.254.169.254": ByCIDRsOnly, "0.0.0.0": Never, "::ffff:10.0.0.1": ByPrivateOrCIDRs} {
		var b *BlockedError
		if err := g.CheckHost(ctx, host); !errors.As(err, &b) || b.AllowedBy != want {
			t.Errorf("%s: %v, want blocked, allowed by %d", host, err, want)
		}
	}
	if err := g.CheckHost(ctx, "93.184.216.34"); err != nil {
		t.Errorf("public literal: %v", err)
	}
	if err := g.CheckHost(ctx, "receiver.invalid"); err == nil || errors.Is(err, ErrBlocked) {
		t.Errorf("a name that does not resolve: %v, want the resolver's error", err)
	}
	if err := New(Policy{AllowPrivateNetworks: true}).CheckHost(ctx, "localhost"); err != nil {
		t.Errorf("allowPrivateNetworks, localhost: %v", err)
	}
}

// A port RefuseLocalPort names is refused on every address of this host, however it is spelled
// and whatever the policy allows (hookd's own API, to the agent's tools); other ports and other
// hosts' are not.
func TestRefuseLocalPort(t *testing.T) {
	self, selfConns := newLoopbackServer(t)
	other, _ := newLoopbackServer(t)
	port := self.Listener.Addr().(*net.TCPAddr).Port
	g := New(Policy{AllowPrivateNetworks: true})
	g.RefuseLocalPort(uint16(port))
	targets := []string{self.URL, "http://" + net.JoinHostPort("localhost", strconv.Itoa(port)) + "/",
		"http://127.1.2.3:" + strconv.Itoa(port) + "/"}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				targets = append(targets, "http://"+net.JoinHostPort(n.IP.String(), strconv.Itoa(port))+"/")
			}
		}
	}
	for _, target := range targets {
		_, err := get(t, g, target)
		if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "hookd's own API") {
			t.Errorf("GET %s: %v, want refused as hookd's own API", target, err)
		}
	}
	if n := selfConns.accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the refused port", n)
	}
	if body, err := get(t, g, other.URL); err != nil || body != "ok" {
		t.Fatalf("another port: %q, %v", body, err)
	}
	if err := g.checkSelf(netip.MustParseAddrPort("203.0.113.7:" + strconv.Itoa(port))); err != nil {
		t.Fatalf("the same port on another host: %v", err)
	}
}
