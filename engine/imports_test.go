package engine_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/svc/engine/"

// talksHTTP is every package under engine/ whose code (tests aside) may
// import net/http, each with why: the ones that really call or serve over
// HTTP. Aggregates decide in domain terms and the gateway maps their answers
// to HTTP; commands/... never imports net/http.
var talksHTTP = map[string]string{
	"engine/webhook":                      "delivers webhooks: signed HTTPS POSTs to the firms' endpoints",
	"engine/egress":                       "the guarded outbound HTTP client and transport every call to the public internet goes through",
	"engine/market/news":                  "fetches the news and economic-calendar feeds and proxies their images",
	"engine/market/exchange":              "the exchange's public market-data feed (a websocket opened by an HTTP upgrade)",
	"engine/provider/binance":             "the Binance adapter speaks the exchange's REST and user-stream protocol through go-binance",
	"engine/provider/internal/adapterkit": "what both provider adapters share of their HTTP calls and sockets (status and header reading, dialing)",
	"engine/provider/tradovate":           "the Tradovate adapter speaks the API's REST endpoints and its user-data and market-data sockets",
}

// packageFiles is one package's import paths in its non-test files, keyed
// by the file that imports them, parsed whatever their build constraints.
type packageFiles map[string][]string

// load parses the non-test .go files of the module directory dir
// (relative to the module root).
func load(t *testing.T, dir string) packageFiles {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(dir), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := packageFiles{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		rel := filepath.ToSlash(strings.TrimPrefix(name, ".."+string(filepath.Separator)))
		out[rel] = []string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[rel] = append(out[rel], p)
		}
	}
	return out
}

// packagesUnder lists the module directories at and under root that hold
// .go files, skipping testdata and hidden folders.
func packagesUnder(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join("..", root), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
			return filepath.SkipDir
		}
		if gos, _ := filepath.Glob(filepath.Join(path, "*.go")); len(gos) > 0 {
			dirs = append(dirs, filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator))))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func isHTTP(p string) bool { return p == "net/http" || strings.HasPrefix(p, "net/http/") }

// Aggregates know nothing of HTTP: no package under engine/ imports net/http
// (its tests aside) unless it is on talksHTTP, and no package under commands/
// does at all.
func TestOnlyThePackagesThatTalkHTTPImportNetHTTP(t *testing.T) {
	for _, root := range []string{"engine", "commands"} {
		for _, dir := range packagesUnder(t, root) {
			files := load(t, dir)
			for _, file := range slices.Sorted(maps.Keys(files)) {
				if !slices.ContainsFunc(files[file], isHTTP) {
					continue
				}
				if _, ok := talksHTTP[dir]; ok {
					continue
				}
				t.Errorf("%s imports net/http: decide in domain terms (a commands.Refusal, a result, events) and let the gateway "+
					"map them to HTTP. If %s really talks HTTP to an outside system, add it to talksHTTP in engine/imports_test.go "+
					"with a one-line reason.", file, dir)
			}
		}
	}
	for dir := range talksHTTP {
		if gos, _ := filepath.Glob(filepath.Join("..", filepath.FromSlash(dir), "*.go")); len(gos) == 0 {
			t.Errorf("talksHTTP names %s, which is no package of this module: remove it", dir)
		}
	}
}

// doesIO is every package of this module that does I/O, which the account
// aggregate must not reach, directly or through another package.
var doesIO = map[string]string{
	"engine":              "the door: wires the mailboxes, the log and the reactors",
	"engine/eventlog/...": "the event-log client (NATS JetStream)",
	"engine/mailbox/...":  "the goroutines that own live state and append to the log",
	"engine/snapshot/...": "the snapshot bucket's client",
	"engine/cluster/...":  "ownership leases in a key-value bucket",
	"engine/egress/...":   "outbound HTTP",
	"engine/webhook/...":  "webhook delivery",
	"engine/mail/...":     "sends mail (SMTP or files)",
	"engine/provider/*":   "the provider adapters, which talk to the provider (the account takes observations in commands; the port engine/provider is types and pure derivations)",
	"engine/market/...":   "the market data service and its feeds (the account takes its marks and specs in the command)",
	"projections/...":     "read models, some in PostgreSQL (the aggregate decides on its own state)",
	"gateway/...":         "the HTTP side",
	"cmd/...":             "the binaries",
}

// pureOutside is every package outside this module the account aggregate's
// packages may import that is not the standard library: pure libraries.
var pureOutside = []string{
	"github.com/cockroachdb/apd/v3",
	"github.com/oklog/ulid/v2",
	"github.com/tinylib/msgp/msgp",
	"github.com/goccy/go-json",
	"github.com/cespare/xxhash/v2",
}

// ioStd is the standard library's I/O: network, files, processes,
// randomness and the standard logger, none of which a pure Decide or Apply
// uses. Pure parsers (net/url, net/mail, net/netip) are not on it, nor is
// log/slog: a type may implement slog.LogValuer to redact itself without
// logging anything.
var ioStd = []string{"net", "net/http/...", "os/...", "syscall", "database/sql", "crypto/tls", "crypto/rand", "math/rand/...", "log", "log/syslog", "io/ioutil"}

// matches reports whether the package p is pattern: "x/..." is x and every
// package under it, "x/*" every package under x but not x itself.
func matches(pattern, p string) bool {
	if root, ok := strings.CutSuffix(pattern, "/*"); ok {
		return strings.HasPrefix(p, root+"/")
	}
	if root, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == root || strings.HasPrefix(p, root+"/")
	}
	return p == pattern
}

// The account aggregate does no I/O: engine/account and every package of
// this module it imports, directly or not, is off doesIO and imports no I/O
// of the standard library and nothing outside it but pureOutside.
func TestTheAccountAggregateReachesNoIO(t *testing.T) {
	const start = "engine/account"
	via := map[string]string{start: ""} // package -> the package that imported it first
	queue := []string{start}
	chain := func(p string) string {
		links := []string{p}
		for q := via[p]; q != ""; q = via[q] {
			links = append(links, q)
		}
		slices.Reverse(links)
		return strings.Join(links, " -> ")
	}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		for pattern, why := range doesIO {
			if matches(pattern, dir) {
				t.Errorf("%s: %s does I/O (%s); the account aggregate decides on its state and the command alone", chain(dir), dir, why)
			}
		}
		files := load(t, dir)
		if len(files) == 0 {
			t.Errorf("%s: no Go files in %s", chain(dir), dir)
		}
		for _, file := range slices.Sorted(maps.Keys(files)) {
			for _, p := range files[file] {
				if inner, ok := strings.CutPrefix(p, module); ok {
					if _, seen := via[inner]; !seen {
						via[inner] = dir
						queue = append(queue, inner)
					}
					continue
				}
				std := !strings.Contains(strings.Split(p, "/")[0], ".")
				switch {
				case std && slices.ContainsFunc(ioStd, func(pat string) bool { return matches(pat, p) }):
					t.Errorf("%s: %s imports %s, which does I/O; time and ids arrive in the command, nothing leaves the aggregate but events", chain(dir), file, p)
				case !std && !slices.Contains(pureOutside, p):
					t.Errorf("%s: %s imports %s; if it is a pure library, add it to pureOutside in engine/imports_test.go", chain(dir), file, p)
				}
			}
		}
	}
}
