package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/svc/engine/events"
	evacct "github.com/svc/engine/events/account"
	evch "github.com/svc/engine/events/challenge"
	evfirm "github.com/svc/engine/events/firm"
	evorg "github.com/svc/engine/events/org"
	evplan "github.com/svc/engine/events/plan"
	evtenant "github.com/svc/engine/events/tenant"
)

// Every registered event type has a case in its aggregate's Apply (a type
// switch in the aggregate's package): an event Apply ignores would make a
// replay rebuild a state other than the live one. Events the aggregate does
// not own are listed with the reason.
func TestEveryRegisteredEventHasAnApplyCase(t *testing.T) {
	for _, agg := range []struct {
		dir, events string
		reg         events.Registry
		notOwned    map[string]string
	}{
		{"account", "github.com/svc/engine/events/account", evacct.Registry(), map[string]string{
			"Reconciled": "a marker that a reconciliation's commit holds a complete snapshot: the observations beside it carry the state, so Apply has nothing of its own to fold",
		}},
		{"tenant", "github.com/svc/engine/events/tenant", evtenant.Registry(), nil},
		{"org", "github.com/svc/engine/events/org", evorg.Registry(), nil},
		{"plan", "github.com/svc/engine/events/plan", evplan.Registry(), nil},
		{"account", "github.com/svc/engine/events/challenge", evch.Registry(), map[string]string{
			"ProgramPublished": "a program's event: engine/challenge's ApplyProgram",
			"Enrolled":         "an enrollment's event: engine/challenge's ApplyEnrollments",
			"StatusRecorded":   "an enrollment's event: engine/challenge's ApplyEnrollments",
			"StageIssued":      "an enrollment's event: engine/challenge's ApplyEnrollments",
		}},
		{"challenge", "github.com/svc/engine/events/challenge", evch.Registry(), map[string]string{
			"EvaluationBound":         "an account's event: engine/account's applyEval",
			"EvaluationStarted":       "an account's event: engine/account's applyEval",
			"EvaluationDayClosed":     "an account's event: engine/account's applyEval",
			"EvaluationPassed":        "an account's event: engine/account's applyEval",
			"EvaluationWeekendClosed": "an account's event: engine/account's applyEval",
		}},
		{"firm", "github.com/svc/engine/events/firm", evfirm.Registry(), map[string]string{
			"DeliveryAttempted": "the webhook delivery ledger (evt.webhook.*): folded by projections and the webhook reactor, not the firm aggregate",
			"DeliveryStarted":   "the webhook delivery ledger (evt.webhook.*): engine/webhook's applyLedger, not the firm aggregate",
		}},
	} {
		cases := switchCases(t, agg.dir, agg.events)
		for name, f := range agg.reg {
			ev, err := f.Decode([]byte("{}"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			typ := reflect.TypeOf(ev).Name()
			if !cases[typ] && agg.notOwned[typ] == "" {
				t.Errorf("%s (%s) has no case in engine/%s's Apply", typ, name, agg.dir)
			}
		}
	}
}

// switchCases lists the types of path's package named in the cases of type
// switches in the non-test files of dir.
func switchCases(t *testing.T, dir, path string) map[string]bool {
	out := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		alias := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == path {
				alias = filepath.Base(p)
				if imp.Name != nil {
					alias = imp.Name.Name
				}
			}
		}
		if alias == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sw, ok := n.(*ast.TypeSwitchStmt)
			if !ok {
				return true
			}
			for _, c := range sw.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if sel, ok := e.(*ast.SelectorExpr); ok {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == alias {
							out[sel.Sel.Name] = true
						}
					}
				}
			}
			return true
		})
	}
	return out
}
