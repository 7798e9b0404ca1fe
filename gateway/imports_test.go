package gateway_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/svc/engine/"

// mayImport is one package of this module the gateway may import. Path is
// relative to the module; "x/..." is x and every package under it. A
// TestsOnly entry is open to _test.go files alone.
type mayImport struct {
	Path      string
	TestsOnly bool
	Why       string
}

// gatewayMayImport is every package of this module the gateway (every file
// under gateway/, tests included) may import. Anything else, a new engine
// package above all, is closed to it until a line is added here on purpose.
var gatewayMayImport = []mayImport{
	{Path: "engine", Why: "the engine's one door: commands in, typed results and errors out"},
	{Path: "projections/...", Why: "the read side: read models, frames, their stores"},
	{Path: "commands/...", Why: "the writes the gateway decodes and sends through the door, the code catalogue"},
	{Path: "events/...", Why: "event and principal types the read models and frames are made of"},
	{Path: "domain/...", Why: "pure shared code (the trading calendar, snapshot parts, ...): no I/O, the same on both sides"},
	{Path: "gateway/...", Why: "itself"},
	{Path: "engine/market", Why: "the market data service: catalog, quotes, feed health (a read side of its own)"},
	{Path: "engine/market/bars", Why: "the market data service's candles, served by /api/market bars routes and streams"},
	{Path: "engine/market/spread", Why: "the market data service's spread statistics, served by the market routes"},
	{Path: "engine/market/userfeed", Why: "each trader's futures prices from their own login, served by the market routes (a read side per user)"},
	{Path: "engine/market/news", Why: "the market data service's news and economic calendar, served by the news routes"},
	{Path: "engine/egress", Why: "only its refusal type (*egress.Error, its Rule), which the webhook registration maps to 400 field url; egress imports nothing of ours"},
	{Path: "cmd/engine/app", TestsOnly: true, Why: "black-box tests configure and start the real binary's wiring and drive it over HTTP"},
	{Path: "cmd/engine/app/apptest", TestsOnly: true, Why: "the black-box harness: a started app, requests, WaitFor"},
	{Path: "engine/enginetest", TestsOnly: true, Why: "WaitFor, the module's one wait helper"},
	{Path: "sim/binance", TestsOnly: true, Why: "the exchange simulator black-box tests link provider accounts against"},
	{Path: "sim/tradovate", TestsOnly: true, Why: "the futures provider's simulator black-box tests link a trader's login against"},
	{Path: "engine/mail", TestsOnly: true, Why: "reads the mail the engine wrote to its mail folder, as the user's inbox would, to follow a reset link"},
}

func (m mayImport) allows(inner string, test bool) bool {
	if m.TestsOnly && !test {
		return false
	}
	if root, ok := strings.CutSuffix(m.Path, "/..."); ok {
		return inner == root || strings.HasPrefix(inner, root+"/")
	}
	return inner == m.Path
}

// The gateway talks to the command side only through package engine (its one
// door) and reads through projections and the market data service; every
// package of this module it imports is on gatewayMayImport with a reason.
func TestTheGatewayImportsOnlyWhatItsListAllows(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		test := strings.HasSuffix(path, "_test.go")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			inner, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			if allowedFor(inner, test) {
				continue
			}
			if allowedFor(inner, true) {
				t.Errorf("gateway/%s imports %s, which only the gateway's tests may import", path, p)
				continue
			}
			t.Errorf("gateway/%s imports %s, which is closed to the gateway: send commands and read results through "+
				"package engine (its one door) and read models through projections. If %s is read-side or pure code the "+
				"gateway should use, add it to gatewayMayImport in gateway/imports_test.go with a one-line reason.", path, p, inner)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func allowedFor(inner string, test bool) bool {
	for _, m := range gatewayMayImport {
		if m.allows(inner, test) {
			return true
		}
	}
	return false
}

// Every entry names a package that exists, so a moved or deleted package
// leaves no stale opening for the next one given its name.
func TestTheGatewaysImportListNamesRealPackages(t *testing.T) {
	for _, m := range gatewayMayImport {
		if strings.TrimSpace(m.Why) == "" {
			t.Errorf("gatewayMayImport: %s has no reason", m.Path)
		}
		dir := filepath.Join("..", filepath.FromSlash(strings.TrimSuffix(m.Path, "/...")))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			if _, err := os.Stat(dir); err != nil || !strings.HasSuffix(m.Path, "/...") {
				t.Errorf("gatewayMayImport names %s, which is no package of this module: remove it", m.Path)
			}
		}
	}
}
