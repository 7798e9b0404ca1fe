package egress_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svc/engine/engine/egress"
)

// fakeDNS answers from a table; a name not in it does not resolve.
type fakeDNS map[string][]string

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	ss, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

var dns = fakeDNS{
	"hooks.example.com":  {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
	"rebind.example.com": {"93.184.216.34", "10.0.0.7"},
	"loop.example.com":   {"127.0.0.1"},
	"meta.example.com":   {"169.254.169.254"},
	"v6loop.example.com": {"::1"},
	"mapped.example.com": {"::ffff:192.168.1.1"},
}

func TestCheckURL(t *testing.T) {
	strict := egress.Policy{Resolver: dns}
	cases := []struct {
		url      string
		p        egress.Policy
		sentinel error // nil: accepted
		rule     string
	}{
		// accepted
		{"https://93.184.216.34/", strict, nil, ""},
		{"https://93.184.216.34:8443/hook?token=x", strict, nil, ""},
		{"https://hooks.example.com/engine", strict, nil, ""},
		{"https://HOOKS.example.com./engine", strict, nil, ""},
		{"https://[2606:2800:220:1:248:1893:25c8:1946]/", strict, nil, ""},
		{"https://no-dns-check.example.org/", egress.Policy{}, nil, ""}, // no resolver: form only
		{"https://127.0.0.1/", egress.Policy{AllowPrivate: true}, nil, ""},
		{"https://localhost:9/", egress.Policy{AllowPrivate: true}, nil, ""},
		{"http://93.184.216.34/a.png", egress.Policy{AllowHTTP: true}, nil, ""},
		// shape
		{"http://example.com/", strict, egress.ErrScheme, "scheme"},
		{"http://example.com/", egress.Policy{AllowPrivate: true}, egress.ErrScheme, "scheme"},
		{"ftp://example.com/", egress.Policy{AllowHTTP: true}, egress.ErrScheme, "scheme"},
		{"file:///etc/passwd", strict, egress.ErrScheme, "scheme"},
		{"gopher://127.0.0.1:25/", strict, egress.ErrScheme, "scheme"},
		{"https:///path", strict, egress.ErrInvalidURL, "url"},
		{"/relative", strict, egress.ErrInvalidURL, "url"},
		{"https://user:pass@hooks.example.com/", strict, egress.ErrUserinfo, "userinfo"},
		{"https://93.184.216.34@127.0.0.1/", strict, egress.ErrUserinfo, "userinfo"},
		{"https://%zz/", strict, egress.ErrInvalidURL, "url"},
		// loopback in every form
		{"https://127.0.0.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://127.0.0.1./", strict, egress.ErrNotPublic, "loopback"},
		{"https://127.8.9.10:8080/", strict, egress.ErrNotPublic, "loopback"},
		{"https://[::1]/", strict, egress.ErrNotPublic, "loopback"},
		{"https://[::ffff:127.0.0.1]/", strict, egress.ErrNotPublic, "loopback"},
		{"https://[::ffff:7f00:1]/", strict, egress.ErrNotPublic, "loopback"},
		{"https://[64:ff9b::7f00:1]/", strict, egress.ErrNotPublic, "loopback"},
		{"https://[2002:7f00:1::]/", strict, egress.ErrNotPublic, "loopback"},
		{"https://127.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://127.0.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://2130706433/", strict, egress.ErrNotPublic, "loopback"},
		{"https://0x7f000001/", strict, egress.ErrNotPublic, "loopback"},
		{"https://0x7f.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://0X7F.0.0.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://0177.0.0.1/", strict, egress.ErrNotPublic, "loopback"},
		{"https://017700000001/", strict, egress.ErrNotPublic, "loopback"},
		{"https://%31%32%37.0.0.1/", strict, egress.ErrInvalidURL, "url"}, // net/url refuses escapes in a host
		{"https://localhost/", strict, egress.ErrHost, "local-name"},
		{"https://LOCALHOST./", strict, egress.ErrHost, "local-name"},
		{"https://api.localhost/", strict, egress.ErrHost, "local-name"},
		{"https://printer.local/", strict, egress.ErrHost, "local-name"},
		{"https://metadata.google.internal/", strict, egress.ErrHost, "local-name"},
		{"https://intranet/", strict, egress.ErrHost, "single-label"},
		{"https://loop.example.com/", strict, egress.ErrNotPublic, "loopback"},
		{"https://v6loop.example.com/", strict, egress.ErrNotPublic, "loopback"},
		// the other ranges
		{"https://10.1.2.3/", strict, egress.ErrNotPublic, "private"},
		{"https://172.16.0.1/", strict, egress.ErrNotPublic, "private"},
		{"https://172.31.255.255/", strict, egress.ErrNotPublic, "private"},
		{"https://192.168.1.1/", strict, egress.ErrNotPublic, "private"},
		{"https://3232235777/", strict, egress.ErrNotPublic, "private"}, // 192.168.1.1
		{"https://[::ffff:10.0.0.1]/", strict, egress.ErrNotPublic, "private"},
		{"https://mapped.example.com/", strict, egress.ErrNotPublic, "private"},
		{"https://rebind.example.com/", strict, egress.ErrNotPublic, "private"}, // one address of several
		{"https://100.64.0.1/", strict, egress.ErrNotPublic, "shared"},
		{"https://100.127.255.254/", strict, egress.ErrNotPublic, "shared"},
		{"https://169.254.169.254/", strict, egress.ErrNotPublic, "link-local"},
		{"https://meta.example.com/", strict, egress.ErrNotPublic, "link-local"},
		{"https://[fe80::1]/", strict, egress.ErrNotPublic, "link-local"},
		{"https://[fe80::1%25eth0]/", strict, egress.ErrNotPublic, "scoped"},
		{"https://[fc00::1]/", strict, egress.ErrNotPublic, "unique-local"},
		{"https://[fd12:3456::1]/", strict, egress.ErrNotPublic, "unique-local"},
		{"https://224.0.0.1/", strict, egress.ErrNotPublic, "multicast"},
		{"https://[ff02::1]/", strict, egress.ErrNotPublic, "multicast"},
		{"https://0.0.0.0/", strict, egress.ErrNotPublic, "unspecified"},
		{"https://0/", strict, egress.ErrNotPublic, "unspecified"},
		{"https://[::]/", strict, egress.ErrNotPublic, "unspecified"},
		{"https://0.1.2.3/", strict, egress.ErrNotPublic, "this-network"},
		{"https://255.255.255.255/", strict, egress.ErrNotPublic, "broadcast"},
		{"https://192.0.2.1/", strict, egress.ErrNotPublic, "documentation"},
		{"https://198.51.100.7/", strict, egress.ErrNotPublic, "documentation"},
		{"https://203.0.113.9/", strict, egress.ErrNotPublic, "documentation"},
		{"https://[2001:db8::1]/", strict, egress.ErrNotPublic, "documentation"},
		{"https://198.18.0.1/", strict, egress.ErrNotPublic, "benchmarking"},
		{"https://240.0.0.1/", strict, egress.ErrNotPublic, "reserved"},
		{"https://192.0.0.8/", strict, egress.ErrNotPublic, "reserved"},
		{"https://[100::1]/", strict, egress.ErrNotPublic, "reserved"},
		{"https://[2001::1]/", strict, egress.ErrNotPublic, "reserved"}, // Teredo
		{"https://[::127.0.0.1]/", strict, egress.ErrNotPublic, "reserved"},
		// odd forms of a public address, and malformed numbers
		{"https://1572395042/", strict, egress.ErrHost, "ipv4-form"}, // 93.184.216.34
		{"https://93.184.55330/", strict, egress.ErrHost, "ipv4-form"},
		{"https://256.1.1.1/", strict, egress.ErrHost, "ipv4-form"},
		{"https://1.2.3.4.5/", strict, egress.ErrHost, "ipv4-form"},
		{"https://08.1.1.1/", strict, egress.ErrHost, "ipv4-form"},
		{"https://4294967296/", strict, egress.ErrHost, "ipv4-form"},
		// names
		{"https://nx.example.com/", strict, egress.ErrUnresolved, "unresolved"},
		{"https://bad_-.exa..mple.com/", strict, egress.ErrHost, "host-syntax"},
		{"https://ⓛocalhost/", strict, egress.ErrHost, "host-syntax"},
	}
	for _, c := range cases {
		err := egress.CheckURL(context.Background(), c.url, c.p)
		if c.sentinel == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.url, err)
			}
			continue
		}
		var e *egress.Error
		if !errors.Is(err, c.sentinel) || !errors.As(err, &e) || e.Rule != c.rule {
			t.Errorf("%s: got %v (rule %q), want %v rule %q", c.url, err, ruleOf(err), c.sentinel, c.rule)
			continue
		}
		if strings.Contains(err.Error(), "user:pass") || strings.Contains(err.Error(), "token") || e.Reason() == "" {
			t.Errorf("%s: message %q", c.url, err)
		}
	}
}

func ruleOf(err error) string {
	var e *egress.Error
	if errors.As(err, &e) {
		return e.Rule
	}
	return ""
}

func TestRefusalsSayWhatTheHostIs(t *testing.T) {
	for url, want := range map[string]string{
		"https://127.1/":              "host 127.1 is 127.0.0.1, a loopback address",
		"https://[::ffff:10.0.0.1]/":  "host ::ffff:10.0.0.1 is 10.0.0.1, a private address",
		"https://10.0.0.1/":           "host 10.0.0.1 is a private address",
		"https://rebind.example.com/": "host rebind.example.com resolves to a private address", // never which address
		"https://1572395042/":         "host 1572395042 is an IPv4 address in a non-standard form; write it as 93.184.216.34",
	} {
		var e *egress.Error
		if err := egress.CheckURL(context.Background(), url, egress.Policy{Resolver: dns}); !errors.As(err, &e) || e.Reason() != want {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
	}
}

func TestRange(t *testing.T) {
	for s, want := range map[string]string{
		"8.8.8.8": "", "1.1.1.1": "", "2606:4700::1111": "", "100.63.255.255": "", "100.128.0.0": "", "172.32.0.1": "",
		"172.15.255.255": "", "192.169.0.1": "", "::ffff:8.8.8.8": "", "64:ff9b::808:808": "", "2002:808:808::1": "",
		"127.255.255.255": "loopback", "::ffff:169.254.1.1": "link-local", "fec0::1": "site-local", "64:ff9b:1::1": "private",
		"4000::1": "reserved", "3fff::1": "documentation",
	} {
		if got := egress.Range(netip.MustParseAddr(s)); got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
}

// tlsServer is a TLS server on 127.0.0.1 and a TLS config that trusts it.
func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *tls.Config) {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, &tls.Config{RootCAs: pool}
}

// TestDialCheckRefusesWhatANameResolvesTo: the check is made on the address
// dialled, so a name that resolves to loopback is refused at connect time,
// and so is a literal; with AllowPrivate the same server answers.
func TestDialCheckRefusesWhatANameResolvesTo(t *testing.T) {
	var hits atomic.Int32
	srv, tc := tlsServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	u, _ := url.Parse(srv.URL)
	byName := "https://localhost:" + u.Port() + "/"
	c := egress.NewClient(egress.Options{TLS: tc})
	for _, target := range []string{byName, srv.URL} {
		resp, err := c.Get(target)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: answered %d", target, resp.StatusCode)
		}
		var e *egress.Error
		if !errors.Is(err, egress.ErrNotPublic) || !errors.As(err, &e) || e.Rule != "loopback" {
			t.Fatalf("%s: %v", target, err)
		}
	}
	// An injected client is guarded the same way, keeping its TLS settings.
	injected := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	g, err := egress.Guard(injected, egress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := g.Get(byName); !errors.Is(err, egress.ErrNotPublic) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("guarded injected client: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server saw %d requests", n)
	}
	open := egress.NewClient(egress.Options{TLS: tc, AllowPrivate: true})
	resp, err := open.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	g, err = egress.Guard(injected, egress.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = g.Get(srv.URL); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 2 {
		t.Fatalf("hits %d, want 2", n)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var followed atomic.Bool
	srv, tc := tlsServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/next" {
			followed.Store(true)
			return
		}
		http.Redirect(w, r, "/next", http.StatusFound)
	})
	injected := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	g, err := egress.Guard(injected, egress.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*http.Client{egress.NewClient(egress.Options{TLS: tc, AllowPrivate: true}), g} {
		resp, err := c.Get(srv.URL + "/start")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || followed.Load() {
			t.Fatalf("status %d, followed %v", resp.StatusCode, followed.Load())
		}
	}
}

func TestControlChecksTheDialledAddress(t *testing.T) {
	for addr, ok := range map[string]bool{"93.184.216.34:443": true, "[2606:4700::1111]:443": true, "127.0.0.1:443": false,
		"[::1]:443": false, "10.0.0.1:80": false, "[::ffff:192.168.0.1]:443": false, "[fe80::1%eth0]:443": false, "nonsense": false} {
		err := egress.Control(context.Background(), "tcp", addr, nil)
		if (err == nil) != ok || (!ok && !errors.Is(err, egress.ErrNotPublic)) {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

type roundTripper struct{}

func (roundTripper) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("no") }

func TestGuardRefusesATransportItCannotGuard(t *testing.T) {
	if _, err := egress.Guard(&http.Client{Transport: roundTripper{}}, egress.Options{}); !errors.Is(err, egress.ErrUnguardable) {
		t.Fatalf("got %v", err)
	}
	if _, err := egress.Guard(&http.Client{Transport: roundTripper{}}, egress.Options{AllowPrivate: true}); err != nil {
		t.Fatal(err)
	}
}

// A transport made with ResetOnClose closes a connection with a reset when
// a request on it is given up: the provider's end reads ECONNRESET, not the
// end of the stream, so what was left unsent is dropped, never delivered
// afterwards. Without it, the close is an orderly one.
func TestResetOnCloseGivesUpWithAReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset bool
	}{{"reset on close", true}, {"an orderly close", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan error, 1)
			go func() { // a provider that reads the request and never answers
				c, err := ln.Accept()
				if err != nil {
					got <- err
					return
				}
				defer c.Close()
				_, err = io.ReadAll(c)
				got <- err
			}()
			tr := egress.NewTransport(egress.Options{AllowPrivate: true, ResetOnClose: tc.reset})
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/order/placeorder", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := (&http.Client{Transport: tr}).Do(req); err == nil {
				t.Fatal("a request never answered was answered")
			}
			select {
			case err = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection was not closed")
			}
			if reset := errors.Is(err, syscall.ECONNRESET); reset != tc.reset {
				t.Fatalf("the provider's end read %v; want a reset: %v", err, tc.reset)
			}
		})
	}
}
