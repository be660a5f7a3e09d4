// Package netguard is the SSRF guard for every outbound webhook call.
//
// A Guard resolves the target host itself, checks every resolved address
// against the blocked ranges, and then dials the checked IP literal, so the
// address that was checked is the address that is connected (no DNS-rebinding
// window). As defence in depth, the dialer's Control hook re-checks the actual
// remote address right before connect(2).
//
// Blocked by default: loopback, RFC1918 private, link-local (including cloud
// metadata endpoints such as 169.254.169.254), CGNAT 100.64.0.0/10, a few
// other non-global IPv4 special-purpose ranges (192.0.0.0/24, 198.18.0.0/15,
// 240.0.0.0/4), unspecified (0.0.0.0/8, ::), multicast, broadcast, IPv6
// unique-local fc00::/7, link-local fe80::/10 and deprecated site-local
// fec0::/10, the NAT64 local-use prefix 64:ff9b:1::/48, and every IPv6 form
// that embeds a blocked IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
// IPv4-compatible (::a.b.c.d), SIIT IPv4-translated (::ffff:0:a.b.c.d),
// NAT64 (64:ff9b::/96 and 64:ff9b:1::/48, IPv4 in the last 32 bits), 6to4
// (2002::/16, IPv4 in bits 16..48) and Teredo (2001::/32, obfuscated client
// IPv4 in the last 32 bits).
//
// Policy decisions:
//   - Unspecified, multicast and broadcast addresses are never allowed, not
//     even by AllowPrivateNetworks or an AllowCIDRs entry: they are never a
//     valid unicast receiver, and 0.0.0.0 reaches the local host on Linux.
//   - AllowPrivateNetworks allows loopback, private, link-local, CGNAT, ULA,
//     site-local, NAT64 local-use and the other special-purpose ranges (tests
//     and local receivers need loopback) — but NOT the cloud metadata
//     endpoints (169.254.169.254, 169.254.170.2, 100.100.100.200,
//     fd00:ec2::254): exposing instance credentials to any hook author needs
//     an explicit AllowCIDRs entry.
//   - AllowCIDRs allows exactly the listed prefixes. Each checked form is
//     matched on its own: an IPv4-mapped address is checked (and matched) in
//     its unmapped IPv4 form, and an address embedding IPv4 is allowed only if
//     the embedded IPv4 is public or itself listed; allowing e.g.
//     64:ff9b::/96 does not allow NAT64 to a private IPv4.
//   - If a hostname resolves to several addresses and any of them is blocked,
//     the whole dial is refused (a receiver never legitimately mixes public
//     and internal addresses; a rebinding attacker does).
//
// Limitation: within 64:ff9b:1::/48 only the /96 layout (IPv4 in the last 32
// bits, what DNS64 synthesises in practice) is decoded; the whole /48 is
// blocked by default anyway because it is not globally reachable (RFC 8215).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrBlocked is wrapped by every refusal; errors.Is(err, ErrBlocked) works on
// errors from Check, DialContext and an http.Client using Transport.
var ErrBlocked = errors.New("netguard: address not allowed")

// Policy says which otherwise blocked addresses may be dialed.
type Policy struct {
	// AllowPrivateNetworks allows loopback, RFC1918, link-local, CGNAT, ULA
	// and the other non-global unicast ranges (not cloud metadata endpoints,
	// not unspecified/multicast/broadcast). Meant for tests and on-premises
	// receivers; prefer narrow AllowCIDRs in production.
	AllowPrivateNetworks bool
	// AllowCIDRs allows exactly these prefixes (IPv4 prefixes also match the
	// IPv4-mapped IPv6 form). Unspecified/multicast/broadcast stay blocked.
	AllowCIDRs []netip.Prefix
}

// BlockedError describes a refusal. It unwraps to ErrBlocked.
type BlockedError struct {
	Host     string     // hostname that resolved to Addr, if any
	Addr     netip.Addr // the address that was checked
	Embedded netip.Addr // the IPv4 embedded in Addr that is blocked, if that is the reason
	Form     string     // how Embedded is embedded: "IPv4-mapped", "NAT64", "6to4", "Teredo", ...
	Range    string     // the blocked range, e.g. "private (RFC1918)"
	// AllowedBy says which part of the Policy would allow the address.
	AllowedBy Allowance
}

// Allowance is what would allow a blocked address.
type Allowance uint8

const (
	// ByPrivateOrCIDRs: AllowPrivateNetworks, or an AllowCIDRs entry.
	ByPrivateOrCIDRs Allowance = iota
	// ByCIDRsOnly: only an AllowCIDRs entry (cloud metadata endpoints).
	ByCIDRsOnly
	// Never: nothing (unspecified, multicast, broadcast).
	Never
)

func (e *BlockedError) Error() string {
	var b strings.Builder
	b.WriteString("netguard: ")
	if e.Host != "" {
		b.WriteString(e.Host)
		b.WriteString(" -> ")
	}
	if e.Addr.IsValid() {
		b.WriteString(e.Addr.String())
	} else {
		b.WriteString("invalid address")
	}
	if e.Embedded.IsValid() {
		fmt.Fprintf(&b, " (%s form of %s)", e.Form, e.Embedded)
	}
	b.WriteString(" is ")
	b.WriteString(e.Range)
	return b.String()
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// class is how a blocked range may be allowed.
type class = Allowance

const (
	classPrivate  = ByPrivateOrCIDRs
	classMetadata = ByCIDRsOnly
	classNever    = Never
)

type blockedRange struct {
	prefix netip.Prefix
	name   string
	class  class
}

// blocked is scanned in order; more specific entries come first.
var blocked = func() []blockedRange {
	r := func(p, name string, c class) blockedRange {
		return blockedRange{netip.MustParsePrefix(p), name, c}
	}
	return []blockedRange{
		// IPv4
		r("0.0.0.0/8", "unspecified (0.0.0.0/8)", classNever),
		r("255.255.255.255/32", "broadcast", classNever),
		r("224.0.0.0/4", "multicast (224.0.0.0/4)", classNever),
		r("169.254.169.254/32", "a cloud metadata endpoint", classMetadata),
		r("169.254.170.2/32", "a cloud metadata endpoint (ECS)", classMetadata),
		r("100.100.100.200/32", "a cloud metadata endpoint (Alibaba)", classMetadata),
		r("127.0.0.0/8", "loopback (127.0.0.0/8)", classPrivate),
		r("10.0.0.0/8", "private (RFC1918)", classPrivate),
		r("172.16.0.0/12", "private (RFC1918)", classPrivate),
		r("192.168.0.0/16", "private (RFC1918)", classPrivate),
		r("169.254.0.0/16", "link-local (169.254.0.0/16)", classPrivate),
		r("100.64.0.0/10", "shared address space / CGNAT (100.64.0.0/10)", classPrivate),
		r("192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24)", classPrivate),
		r("198.18.0.0/15", "benchmarking (198.18.0.0/15)", classPrivate),
		r("240.0.0.0/4", "reserved (240.0.0.0/4)", classPrivate),
		// IPv6
		r("::/128", "unspecified (::)", classNever),
		r("ff00::/8", "multicast (ff00::/8)", classNever),
		r("fd00:ec2::254/128", "a cloud metadata endpoint", classMetadata),
		r("::1/128", "loopback (::1)", classPrivate),
		r("fe80::/10", "link-local (fe80::/10)", classPrivate),
		r("fc00::/7", "unique local (fc00::/7)", classPrivate),
		r("fec0::/10", "site-local (fec0::/10)", classPrivate),
		r("64:ff9b:1::/48", "NAT64 local-use (64:ff9b:1::/48)", classPrivate),
	}
}()

var (
	pfxNAT64      = netip.MustParsePrefix("64:ff9b::/96")
	pfxNAT64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	pfx6to4       = netip.MustParsePrefix("2002::/16")
	pfxTeredo     = netip.MustParsePrefix("2001::/32")
	pfxCompat     = netip.MustParsePrefix("::/96")
	pfxSIIT       = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// embeddedIPv4 returns the IPv4 address embedded in the IPv6 address a (which
// must not be IPv4-mapped; callers unmap first) and the name of the form.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, bool) {
	if !a.Is6() {
		return netip.Addr{}, "", false
	}
	b := a.As16()
	last32 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case pfxNAT64.Contains(a), pfxNAT64Local.Contains(a):
		return last32, "NAT64", true
	case pfx6to4.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), "6to4", true
	case pfxTeredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), "Teredo", true
	case pfxSIIT.Contains(a):
		return last32, "IPv4-translated", true
	case pfxCompat.Contains(a):
		// :: and ::1 are the IPv6 unspecified/loopback addresses, not
		// IPv4-compatible ones; they are classified directly.
		if a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
			return netip.Addr{}, "", false
		}
		return last32, "IPv4-compatible", true
	}
	return netip.Addr{}, "", false
}

func classify(a netip.Addr) (blockedRange, bool) {
	for _, r := range blocked {
		if r.prefix.Contains(a) {
			return r, true
		}
	}
	return blockedRange{}, false
}

// ParseCIDRs parses allow-list entries for config validation. Entries may be
// CIDR prefixes ("10.20.0.0/16", "fd00:1::/64") or bare addresses (a single
// host). Prefixes are masked, and IPv4-mapped IPv6 prefixes are converted to
// IPv4. The error names the offending entry.
func ParseCIDRs(s []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(s))
	for i, raw := range s {
		entry := strings.TrimSpace(raw)
		var (
			p   netip.Prefix
			err error
		)
		if strings.Contains(entry, "/") {
			p, err = netip.ParsePrefix(entry)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(entry); err == nil {
				if a.Zone() != "" {
					err = errors.New("zones are not allowed")
				} else {
					p = netip.PrefixFrom(a, a.BitLen())
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("netguard: invalid CIDR %q (entry %d): %w", raw, i, err)
		}
		out = append(out, normalizePrefix(p))
	}
	return out, nil
}

func normalizePrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Guard checks and dials outbound webhook connections. It is safe for
// concurrent use.
type Guard struct {
	allowPrivate bool
	allow        []netip.Prefix
	resolver     *net.Resolver
	dialer       *net.Dialer
	self         atomic.Uint32 // a port of this host no dial reaches (RefuseLocalPort); 0: none
}

// New returns a Guard enforcing p. AllowCIDRs are copied and normalized
// (masked, IPv4-mapped prefixes converted to IPv4); invalid prefixes are
// ignored (validate with ParseCIDRs).
func New(p Policy) *Guard {
	g := &Guard{allowPrivate: p.AllowPrivateNetworks, resolver: net.DefaultResolver}
	for _, pfx := range p.AllowCIDRs {
		if pfx.IsValid() {
			g.allow = append(g.allow, normalizePrefix(pfx))
		}
	}
	g.dialer = &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		// Defence in depth: re-check the address actually being connected.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot parse remote address %q", ErrBlocked, address)
			}
			if err := g.check(ap.Addr(), ""); err != nil {
				return err
			}
			return g.checkSelf(ap)
		},
	}
	return g
}

// RefuseLocalPort refuses from now on every connection to port on an address of this host
// (loopback, unspecified, or one of its interfaces'), whatever the Policy allows: the daemon's
// own listener, which the agent's tools must not reach (in development mode its API takes
// requests from loopback without a token), even where private networks are allowed for them.
func (g *Guard) RefuseLocalPort(port uint16) { g.self.Store(uint32(port)) }

func (g *Guard) checkSelf(ap netip.AddrPort) error {
	port := g.self.Load()
	if port == 0 || uint32(ap.Port()) != port {
		return nil
	}
	a := ap.Addr().Unmap().WithZone("")
	if !a.IsLoopback() && !a.IsUnspecified() && !onThisHost(a) {
		return nil
	}
	return &BlockedError{Addr: ap.Addr(), Range: fmt.Sprintf("this host's port %d, hookd's own API", port), AllowedBy: Never}
}

// onThisHost reports whether a is an address of one of this host's interfaces.
func onThisHost(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refused, as hookd's own API may be there
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// Check returns nil if ip may be dialed, or a *BlockedError (wrapping
// ErrBlocked) naming the range that blocks it.
func (g *Guard) Check(ip netip.Addr) error { return g.check(ip, "") }

func (g *Guard) check(ip netip.Addr, host string) error {
	if !ip.IsValid() {
		return &BlockedError{Host: host, Range: "not a valid IP address", AllowedBy: Never}
	}
	bare := ip.WithZone("") // netip.Prefix.Contains never matches zoned addresses
	// An IPv4-mapped address is dialed as its IPv4 address.
	if bare.Is4In6() {
		v4 := bare.Unmap()
		if r, ok := classify(v4); ok && !g.allows(v4, r.class) {
			return &BlockedError{Host: host, Addr: ip, Embedded: v4, Form: "IPv4-mapped", Range: r.name, AllowedBy: r.class}
		}
		return nil
	}
	if r, ok := classify(bare); ok && !g.allows(bare, r.class) {
		return &BlockedError{Host: host, Addr: ip, Range: r.name, AllowedBy: r.class}
	}
	if v4, form, ok := embeddedIPv4(bare); ok {
		if r, ok := classify(v4); ok && !g.allows(v4, r.class) {
			return &BlockedError{Host: host, Addr: ip, Embedded: v4, Form: form, Range: r.name, AllowedBy: r.class}
		}
	}
	return nil
}

func (g *Guard) allows(a netip.Addr, c class) bool {
	switch c {
	case classNever:
		return false
	case classPrivate:
		if g.allowPrivate {
			return true
		}
	}
	for _, p := range g.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// DialContext resolves addr's host, checks every resolved address, and dials
// the checked IP literals in order until one connects. It refuses the whole
// dial if any resolved address is blocked. Use it as
// http.Transport.DialContext (Transport does this). Only "tcp", "tcp4" and
// "tcp6" are supported. Resolution failures are returned as *net.OpError
// wrapping the *net.DNSError.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNetwork string
	switch network {
	case "tcp":
		ipNetwork = "ip"
	case "tcp4":
		ipNetwork = "ip4"
	case "tcp6":
		ipNetwork = "ip6"
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("netguard: unsupported network %q", network)}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}

	ips, err := g.resolve(ctx, ipNetwork, host)
	var blocked *BlockedError
	if errors.As(err, &blocked) {
		return nil, err
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}

	var firstErr error
	for _, ip := range ips {
		// Dial the literal that was checked; IPv4-mapped results (the Go
		// resolver returns them for /etc/hosts entries) are dialed as IPv4.
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// CheckHost checks host as a dial to it would be checked now: an IP literal as it is, a name by
// every address it resolves to (one blocked address refuses the whole dial). It returns a
// *BlockedError for a host that would be refused, the resolver's error when the name does not
// resolve now, and nil otherwise. Registration uses it to refuse receivers that can never be
// reached; the dial checks again, since a name may resolve elsewhere later.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	_, err := g.resolve(ctx, "ip", host)
	return err
}

// resolve returns the addresses of host (a literal or a name), each checked; the first blocked
// one is a *BlockedError.
func (g *Guard) resolve(ctx context.Context, ipNetwork, host string) ([]netip.Addr, error) {
	var ips []netip.Addr
	if ip, perr := netip.ParseAddr(host); perr == nil {
		ips = []netip.Addr{ip}
		host = "" // a literal: nothing to add to error messages
	} else {
		var err error
		ips, err = g.resolver.LookupNetIP(ctx, ipNetwork, host)
		if err != nil {
			return nil, err
		}
		// The Go resolver returns IPv4 answers from /etc/hosts as
		// IPv4-mapped addresses; report and dial them as plain IPv4.
		for i := range ips {
			ips[i] = ips[i].Unmap()
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	for _, ip := range ips {
		if err := g.check(ip, host); err != nil {
			return nil, err
		}
	}
	return ips, nil
}

// Transport returns a new http.Transport tuned for webhook delivery that
// dials only through g. Proxy is nil on purpose (a proxy would bypass the
// guard: the proxy, not us, would resolve and connect to the target).
// Redirects followed by an http.Client are dialed through the guard too.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}
