package commands_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svc/engine/commands"
)

// stillLiteral lists the files that still spell codes as string literals
// and how many: the list only shrinks. Converting a file means naming the
// constants (commands.CodeRiskLocked) and lowering or removing its line.
var stillLiteral = map[string]int{}

// notCodes are literals that equal a code without being one.
var notCodes = map[string][]string{
	// params.reason of balance_refused: the route's older refusals, named as reasons
	"engine/account/firm.go": {"permission_denied", "invalid_request"},
	// params.reason of invalid_statement: why a statement was refused
	"gateway/connect/statements.go": {"email_unverified"},
}

// No source file spells an error code as a string literal: a refusal names
// a constant of the catalogue (commands/codes.json), so the code, its status
// and its retry rule have one source.
func TestNoCodeIsSpelledOutsideTheCatalogue(t *testing.T) {
	found, err := codeLiterals(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range slices.Sorted(maps.Keys(found)) {
		lits := found[f]
		total += len(lits)
		allowed, listed := stillLiteral[f]
		switch {
		case !listed:
			t.Errorf("%s spells %d codes as string literals; name the constants instead: %s", f, len(lits), strings.Join(lits, ", "))
		case len(lits) > allowed:
			t.Errorf("%s spells %d codes as string literals, more than the %d it still may; name the constants instead: %s", f, len(lits), allowed, strings.Join(lits, ", "))
		case len(lits) < allowed:
			t.Errorf("%s spells %d codes as string literals, fewer than the %d listed: lower its line in stillLiteral (literals_test.go)", f, len(lits), allowed)
		}
	}
	for f := range stillLiteral {
		if _, ok := found[f]; !ok {
			t.Errorf("%s spells no code as a literal any more: remove it from stillLiteral (literals_test.go)", f)
		}
	}
	t.Logf("%d code literals in %d files still to convert", total, len(found))
}

// codeLiterals returns, by file, the string literals of the non-test Go
// files under root that equal a code of the catalogue, with their lines.
func codeLiterals(root string) (map[string][]string, error) {
	table := commands.Codes()
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := eachSource(root, fset, func(rel string, f *ast.File) error {
		if rel == "commands/codes_gen.go" || strings.HasPrefix(rel, "cmd/client/") {
			return nil // generated: the catalogue's constants, the client's from the document
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if _, isCode := table[s]; err != nil || !isCode || slices.Contains(notCodes[rel], s) {
				return true
			}
			found[rel] = append(found[rel], fmt.Sprintf("%s (line %d)", s, fset.Position(lit.Pos()).Line))
			return true
		})
		return nil
	})
	return found, err
}
