// Package egress guards the engine's outbound HTTP (webhook deliveries, the
// news image proxy): a call reaches only the public internet. CheckURL refuses
// a URL a client names before it is stored or fetched; the transport's dial
// check refuses every connection to an address that is not public, whatever a
// name resolved to, so a DNS answer that changes later cannot get through.
// Neither follows a redirect.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sentinels name the kind of rule a URL or an address broke; every refusal is
// an *Error wrapping one of them.
var (
	ErrInvalidURL = errors.New("egress: not an absolute URL with a host")
	ErrScheme     = errors.New("egress: scheme not allowed")
	ErrUserinfo   = errors.New("egress: URL carries userinfo")
	ErrHost       = errors.New("egress: host not allowed") // local or malformed names, odd IPv4 forms
	ErrNotPublic  = errors.New("egress: address not public")
	ErrUnresolved = errors.New("egress: host does not resolve")
	// ErrUnguardable: a client whose transport is not an *http.Transport cannot get the dial check.
	ErrUnguardable = errors.New("egress: transport cannot be guarded")
)

// Error is one refusal. Rule is a stable name of the rule broken ("scheme",
// "userinfo", "local-name", "loopback", "private", ...); Host is the URL's
// host (never its userinfo, path or query); Addr the address refused, when
// one was. Error and Reason never show an address a name resolved to.
type Error struct {
	Err  error
	Rule string
	Host string
	Addr netip.Addr
	msg  string
}

func (e *Error) Error() string { return "egress: " + e.msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Reason is the refusal as a sentence fragment for a client, e.g.
// "host 127.1 is 127.0.0.1, a loopback address".
func (e *Error) Reason() string { return e.msg }

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy shapes CheckURL.
type Policy struct {
	// AllowHTTP accepts http:// as well as https://.
	AllowHTTP bool
	// AllowPrivate lifts the host and address rules (local development and
	// tests): only the URL's shape is checked.
	AllowPrivate bool
	// Resolver resolves a name, every address of which must be public; nil:
	// names are checked by form only and the dial check decides.
	Resolver Resolver
	// ResolveTimeout bounds the lookup; 0: 3 s.
	ResolveTimeout time.Duration
}

// CheckURL checks a URL the engine is asked to call: an absolute http(s) URL
// (https only unless AllowHTTP) with a host and no userinfo, whose host is
// not a local name, not an IPv4 literal in any form but dotted decimal, and
// neither is nor resolves to an address that is not public (see Range).
// A refusal is an *Error.
func CheckURL(ctx context.Context, raw string, p Policy) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return &Error{Err: ErrInvalidURL, Rule: "url", msg: "must be an absolute URL with a host"}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.AllowHTTP {
			return &Error{Err: ErrScheme, Rule: "scheme", msg: "must be an https:// URL"}
		}
	default:
		if p.AllowHTTP {
			return &Error{Err: ErrScheme, Rule: "scheme", msg: "must be an http:// or https:// URL"}
		}
		return &Error{Err: ErrScheme, Rule: "scheme", msg: "must be an https:// URL"}
	}
	if u.User != nil {
		return &Error{Err: ErrUserinfo, Rule: "userinfo", msg: "must not carry a user name or password"}
	}
	host := u.Hostname()
	if host == "" {
		return &Error{Err: ErrInvalidURL, Rule: "url", msg: "must be an absolute URL with a host"}
	}
	if p.AllowPrivate {
		return nil
	}
	return CheckHost(ctx, host, p)
}

// CheckHost applies CheckURL's host rules to host (a name or an address, IPv6
// without brackets).
func CheckHost(ctx context.Context, host string, p Policy) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return checkLiteral(host, a, "")
	}
	if numeric(h) {
		a, ok := parseAton(h)
		if !ok {
			return &Error{Err: ErrHost, Rule: "ipv4-form", Host: host, msg: fmt.Sprintf("host %s is not a valid IPv4 address", host)}
		}
		if err := checkLiteral(host, a, a.String()); err != nil {
			return err
		}
		return &Error{Err: ErrHost, Rule: "ipv4-form", Host: host, Addr: a,
			msg: fmt.Sprintf("host %s is an IPv4 address in a non-standard form; write it as %s", host, a)}
	}
	if err := checkName(host, h); err != nil {
		return err
	}
	if p.Resolver == nil {
		return nil
	}
	timeout := p.ResolveTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := p.Resolver.LookupNetIP(ctx, "ip", h)
	if err != nil || len(addrs) == 0 {
		return &Error{Err: ErrUnresolved, Rule: "unresolved", Host: host, msg: fmt.Sprintf("host %s does not resolve", host)}
	}
	for _, a := range addrs {
		if name := Range(a); name != "" {
			return &Error{Err: ErrNotPublic, Rule: name, Host: host, Addr: a,
				msg: fmt.Sprintf("host %s resolves to %s", host, phrase(name))}
		}
	}
	return nil
}

// checkLiteral refuses an address literal that is not public; shown is the
// address the literal means, when it is written otherwise.
func checkLiteral(host string, a netip.Addr, shown string) error {
	name := Range(a)
	if name == "" {
		return nil
	}
	msg := fmt.Sprintf("host %s is %s", host, phrase(name))
	if u := a.Unmap(); shown == "" && u != a {
		shown = u.String()
	}
	if shown != "" && shown != host {
		msg = fmt.Sprintf("host %s is %s, %s", host, shown, phrase(name))
	}
	return &Error{Err: ErrNotPublic, Rule: name, Host: host, Addr: a, msg: msg}
}

// localSuffixes are names that never leave the network they are used in.
var localSuffixes = []string{".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".lan"}

func checkName(host, h string) error {
	if h == "localhost" {
		return &Error{Err: ErrHost, Rule: "local-name", Host: host, msg: fmt.Sprintf("host %s is a local name", host)}
	}
	for _, s := range localSuffixes {
		if strings.HasSuffix(h, s) || h == s[1:] {
			return &Error{Err: ErrHost, Rule: "local-name", Host: host, msg: fmt.Sprintf("host %s is a local name", host)}
		}
	}
	if len(h) > 253 {
		return &Error{Err: ErrHost, Rule: "host-syntax", Host: host, msg: "host is longer than 253 characters"}
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return &Error{Err: ErrHost, Rule: "host-syntax", Host: host, msg: fmt.Sprintf("host %s is not a valid domain name", host)}
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return &Error{Err: ErrHost, Rule: "host-syntax", Host: host,
					msg: "host must be an ASCII domain name (punycode for an international one)"}
			}
		}
	}
	if len(labels) < 2 {
		return &Error{Err: ErrHost, Rule: "single-label", Host: host, msg: fmt.Sprintf("host %s is not a fully qualified domain name", host)}
	}
	return nil
}

// numeric reports whether every dot-separated part of h is decimal digits or
// 0x and hex digits: a host inet_aton(3) (and so a system resolver) would read
// as an IPv4 address.
func numeric(h string) bool {
	for _, p := range strings.Split(h, ".") {
		if p == "" {
			return false
		}
		digits, hex := p, false
		if len(p) >= 2 && p[0] == '0' && p[1] == 'x' {
			digits, hex = p[2:], true
		}
		for i := 0; i < len(digits); i++ {
			c := digits[i]
			if !(c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// parseAton reads s by inet_aton(3): one to four parts, each decimal, octal
// (leading 0) or hex (0x); each part but the last is one byte, the last
// fills the bytes left ("127.1" is 127.0.0.1, "2130706433" is 127.0.0.1).
func parseAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var x uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			x |= v << (24 - 8*i)
			continue
		}
		if v >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		x |= v
	}
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}), true
}

type named struct {
	p    netip.Prefix
	rule string
}

func pfx(s, rule string) named { return named{netip.MustParsePrefix(s), rule} }

// v4Ranges are the IPv4 ranges that are not public (the IANA special-purpose
// registry), most specific first.
var v4Ranges = []named{
	pfx("255.255.255.255/32", "broadcast"),
	pfx("0.0.0.0/32", "unspecified"),
	pfx("0.0.0.0/8", "this-network"),
	pfx("10.0.0.0/8", "private"),
	pfx("100.64.0.0/10", "shared"),
	pfx("127.0.0.0/8", "loopback"),
	pfx("169.254.0.0/16", "link-local"),
	pfx("172.16.0.0/12", "private"),
	pfx("192.0.0.0/24", "reserved"),
	pfx("192.0.2.0/24", "documentation"),
	pfx("192.31.196.0/24", "reserved"),
	pfx("192.52.193.0/24", "reserved"),
	pfx("192.88.99.0/24", "reserved"),
	pfx("192.168.0.0/16", "private"),
	pfx("192.175.48.0/24", "reserved"),
	pfx("198.18.0.0/15", "benchmarking"),
	pfx("198.51.100.0/24", "documentation"),
	pfx("203.0.113.0/24", "documentation"),
	pfx("224.0.0.0/4", "multicast"),
	pfx("240.0.0.0/4", "reserved"),
}

// v6Ranges are the IPv6 ranges inside 2000::/3 (or special below it) that
// are not public; anything else outside 2000::/3 is reserved.
var v6Ranges = []named{
	pfx("::/128", "unspecified"),
	pfx("::1/128", "loopback"),
	pfx("64:ff9b:1::/48", "private"),
	pfx("100::/64", "reserved"),
	pfx("2001:db8::/32", "documentation"),
	pfx("2001::/23", "reserved"),
	pfx("3fff::/20", "documentation"),
	pfx("5f00::/16", "reserved"),
	pfx("fc00::/7", "unique-local"),
	pfx("fe80::/10", "link-local"),
	pfx("fec0::/10", "site-local"),
	pfx("ff00::/8", "multicast"),
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	global6 = netip.MustParsePrefix("2000::/3")
)

// Range names the non-public range that holds a, or "" when a is a public
// unicast address. The names: loopback, private (RFC 1918, NAT64 local use),
// shared (CGNAT 100.64/10), link-local, unique-local, site-local, multicast,
// unspecified, this-network (0/8), broadcast, documentation, benchmarking,
// reserved, scoped (an address with a zone), invalid. An IPv4 address
// embedded in IPv6 (mapped, NAT64, 6to4) is judged as that IPv4 address.
func Range(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	if a.Zone() != "" {
		return "scoped"
	}
	a = a.Unmap()
	if a.Is4() {
		for _, r := range v4Ranges {
			if r.p.Contains(a) {
				return r.rule
			}
		}
		return ""
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return Range(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(a):
		return Range(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, r := range v6Ranges {
		if r.p.Contains(a) {
			return r.rule
		}
	}
	if !global6.Contains(a) {
		return "reserved"
	}
	return ""
}

// phrase is a range name as a client reads it: "a loopback address".
func phrase(rule string) string {
	switch rule {
	case "shared":
		return "a shared (CGNAT, 100.64.0.0/10) address"
	case "this-network":
		return "a this-network (0.0.0.0/8) address"
	case "unspecified", "invalid":
		return "an " + rule + " address"
	case "scoped":
		return "a scoped (zoned) address"
	}
	return "a " + rule + " address"
}

// CheckAddr is the dial check of one address: nil when a is public, else an
// *Error wrapping ErrNotPublic.
func CheckAddr(a netip.Addr) error {
	name := Range(a)
	if name == "" {
		return nil
	}
	return &Error{Err: ErrNotPublic, Rule: name, Addr: a, msg: fmt.Sprintf("address %s is %s", a, phrase(name))}
}

// Control is a net.Dialer ControlContext that refuses a connection to an
// address that is not public: it sees the address actually dialled, after
// resolution.
func Control(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Error{Err: ErrNotPublic, Rule: "invalid", msg: fmt.Sprintf("%s address %q is not an IP address and port", network, address)}
	}
	return CheckAddr(ap.Addr())
}

// Options shape an egress client.
type Options struct {
	// AllowPrivate drops the dial check (local development and tests).
	AllowPrivate bool
	// TLS is the client's TLS configuration (cloned); nil: system roots.
	TLS *tls.Config
	// Timeout bounds a whole exchange; 0: 30 s.
	Timeout time.Duration
	// MaxIdleConnsPerHost; 0: net/http's default.
	MaxIdleConnsPerHost int
	// ResetOnClose closes every connection with a reset (SO_LINGER 0) and
	// speaks HTTP/1.1 only, where a request given up (its context ended)
	// closes its connection (HTTP/2 would only end the stream, its frames
	// still on their way): what is still unsent then is dropped, never
	// delivered later by the kernel's retransmissions. For a provider
	// without a receive window, it is what bounds when a request given up
	// can still arrive.
	ResetOnClose bool
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 30 * time.Second
	}
	return o.Timeout
}

// dialer is the guarded dialer: the dial check unless AllowPrivate.
func (o Options) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: min(10*time.Second, o.timeout()), KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		d.ControlContext = Control
	}
	return d
}

// NewTransport is a transport whose every connection passes the dial check
// (unless AllowPrivate). It uses no proxy: a proxy would dial on the
// caller's behalf, past the check.
func NewTransport(o Options) *http.Transport {
	dial := o.dialer().DialContext
	if o.ResetOnClose {
		dial = resetOnClose(dial)
	}
	t := &http.Transport{
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    o.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  o.timeout(),
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if o.TLS != nil {
		t.TLSClientConfig = o.TLS.Clone()
	}
	if o.ResetOnClose {
		t.ForceAttemptHTTP2 = false
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no HTTP/2
	}
	return t
}

// resetOnClose wraps dial so that each TCP connection it makes is closed
// with a reset, its unsent data dropped (SO_LINGER 0).
func resetOnClose(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			if err := tc.SetLinger(0); err != nil {
				_ = c.Close()
				return nil, err
			}
		}
		return c, nil
	}
}

// NewClient is a client over NewTransport that follows no redirect (a 3xx
// is the answer) and gives up after Timeout.
func NewClient(o Options) *http.Client {
	return &http.Client{Transport: NewTransport(o), Timeout: o.timeout(), CheckRedirect: noRedirect}
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Guard returns a copy of c that follows no redirect and, unless
// AllowPrivate, whose every dial passes the dial check: c's transport is
// cloned (its TLS settings and pool sizes kept) with the guarded dialer, no
// proxy and no custom TLS dialer. c nil: NewClient(o). A transport that is
// not an *http.Transport is refused with ErrUnguardable unless AllowPrivate
// (then it is kept as it is). c's Timeout is kept when set, else Timeout.
func Guard(c *http.Client, o Options) (*http.Client, error) {
	if c == nil {
		return NewClient(o), nil
	}
	g := *c
	g.CheckRedirect = noRedirect
	if g.Timeout <= 0 {
		g.Timeout = o.timeout()
	}
	switch t := c.Transport.(type) {
	case nil:
		g.Transport = NewTransport(o)
	case *http.Transport:
		if o.AllowPrivate {
			break
		}
		t = t.Clone()
		t.Proxy, t.OnProxyConnectResponse, t.GetProxyConnectHeader = nil, nil, nil
		t.DialTLSContext, t.DialTLS = nil, nil // a TLS dialer would dial past the check
		t.DialContext = o.dialer().DialContext
		g.Transport = t
	default:
		if !o.AllowPrivate {
			return nil, fmt.Errorf("%w: %T is not an *http.Transport", ErrUnguardable, c.Transport)
		}
	}
	return &g, nil
}
