package gateway_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The gateway talks to the command side only through package engine (its one
// door) and to the read side through projections and the market data
// service: no file under gateway/, tests included, imports an aggregate, the
// mailbox, the event-log client or a reactor.
func TestTheGatewayGoesThroughTheEnginesDoor(t *testing.T) {
	forbidden := []string{"account", "mailbox", "eventlog", "risk", "webhook", "paper", "firm", "tenant", "org", "plan", "venue", "idem"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			inner, ok := strings.CutPrefix(p, "github.com/svc/engine/engine/")
			if !ok {
				continue
			}
			for _, bad := range forbidden {
				if inner == bad || strings.HasPrefix(inner, bad+"/") {
					t.Errorf("%s imports %s: go through package engine", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
