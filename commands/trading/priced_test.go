package trading

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// Every command that carries a Market field is Priced: the engine attaches
// the market to it (engine.prepare) and a bracket's decision reads its marks
// from it (account.marksIn) only through MarketOf, so a command added with a
// Market but no MarketOf would be decided on an empty market.
func TestEveryCommandWithAMarketIsPriced(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	withMarket, priced := map[string]bool{}, map[string]bool{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						if id, ok := fl.Type.(*ast.Ident); ok && id.Name == "Market" && len(fl.Names) == 1 && fl.Names[0].Name == "Market" {
							withMarket[ts.Name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if d.Name.Name != "MarketOf" || d.Recv == nil {
					continue
				}
				if star, ok := d.Recv.List[0].Type.(*ast.StarExpr); ok {
					priced[star.X.(*ast.Ident).Name] = true
				}
			}
		}
	}
	if len(withMarket) == 0 {
		t.Fatal("found no command with a Market field")
	}
	for name := range withMarket {
		if !priced[name] {
			t.Errorf("%s carries a Market but has no MarketOf", name)
		}
	}
	var _ Priced = (*PlaceOrder)(nil)
}
