package commands_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/svc/engine/commands"
)

const (
	module   = "github.com/svc/engine"
	rootDir  = ".."
	specFile = "../schema/openapi.yaml"
)

// Every code the source answers is in the table, with the status it is
// answered with where the source states one, and every code in the table is
// answered somewhere.
func TestEveryAnsweredCodeIsInTheTable(t *testing.T) {
	sites, err := scanCodes(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) == 0 {
		t.Fatal("the scan found no error codes; is it reading the module?")
	}
	table := commands.Codes()
	used := map[string]bool{}
	allStated := map[string]bool{}        // every site of the code states its status
	answered := map[string]map[int]bool{} // code: the statuses its sites state
	for _, s := range sites {
		if !used[s.code] {
			used[s.code], allStated[s.code], answered[s.code] = true, true, map[int]bool{}
		}
		allStated[s.code] = allStated[s.code] && s.status > 0
		answered[s.code][s.status] = true
		info, ok := table[s.code]
		if !ok {
			t.Errorf("error code %q used at %s is missing from the catalogue (commands/codes.json)", s.code, s.pos)
			continue
		}
		if s.status == -1 {
			t.Errorf("error code %q at %s is answered with a net/http status missing from statuses in commands/codes_test.go: add it", s.code, s.pos)
			continue
		}
		if s.status != 0 && !slices.Contains(info.Status, s.status) {
			t.Errorf("error code %q is answered with %d at %s; commands.Codes lists %v for it", s.code, s.status, s.pos, info.Status)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(table)) {
		info := table[code]
		if !used[code] {
			t.Errorf("commands.Codes lists %q, which no source file answers: remove it", code)
			continue
		}
		if !allStated[code] {
			continue
		}
		for _, st := range info.Status {
			if !answered[code][st] {
				t.Errorf("commands.Codes lists status %d for %q, which no source file answers it with", st, code)
			}
		}
	}
}

// Every params key a source file sends with a code is one the catalogue
// lists for it (commands/codes.json, params), so docs/codes.md tells a
// client what to read.
func TestEveryParamSentIsInTheCatalogue(t *testing.T) {
	sites, err := scanCodes(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sites {
		spec, ok := commands.Lookup(commands.Code(s.code))
		if !ok {
			continue // TestEveryAnsweredCodeIsInTheTable names it
		}
		for _, k := range s.params {
			n++
			if !slices.Contains(spec.Params, k) {
				t.Errorf("%s sends params.%s with %s; the catalogue lists %v for it: add it to commands/codes.json", s.pos, k, s.code, spec.Params)
			}
		}
	}
	if n == 0 {
		t.Fatal("the scan found no params; is it reading the sites?")
	}
}

// schema/openapi.yaml's ErrorCode enum names exactly the codes of the table,
// the error bodies' code refers to it, and the document is valid OpenAPI.
func TestTheOpenAPIErrorCodeEnumMatchesTheTable(t *testing.T) {
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("openapi: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			msg := e.Message + ": " + e.Reason
			for _, se := range e.SchemaValidationErrors {
				msg += " | " + se.FieldPath + " " + se.Reason
			}
			t.Errorf("openapi.yaml is not valid OpenAPI: %s", msg)
		}
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	schemas := m.Model.Components.Schemas
	ec, ok := schemas.Get("ErrorCode")
	if !ok {
		t.Fatal("openapi.yaml has no components.schemas.ErrorCode")
	}
	enum := map[string]bool{}
	for _, n := range ec.Schema().Enum {
		if enum[n.Value] {
			t.Errorf("ErrorCode enum lists %q twice", n.Value)
		}
		enum[n.Value] = true
	}
	table := commands.Codes()
	for _, code := range slices.Sorted(maps.Keys(table)) {
		if !enum[code] {
			t.Errorf("commands.Codes lists %q, which openapi.yaml's ErrorCode enum does not", code)
		}
	}
	for code := range enum {
		if _, ok := table[code]; !ok {
			t.Errorf("openapi.yaml's ErrorCode enum lists %q, which commands.Codes does not", code)
		}
	}
	er, ok := schemas.Get("ErrorResponse")
	if !ok {
		t.Fatal("openapi.yaml has no components.schemas.ErrorResponse")
	}
	code, ok := er.Schema().Properties.Get("code")
	if !ok || code.GetReference() != "#/components/schemas/ErrorCode" {
		t.Errorf("ErrorResponse.code must be {$ref: '#/components/schemas/ErrorCode'}")
	}
}

// site is one place the source answers an error code.
type site struct {
	code   string
	status int      // 0: not stated at the site
	params []string // the keys of params, where the site states them as a map literal
	pos    string
}

// coder is a function with a string parameter named code: a call's argument
// at codeArg is an error code; its status is the argument at statusArg (a
// parameter named status), or fixed when the body states one.
type coder struct {
	codeArg, statusArg int // statusArg -1: none
	fixed              int
}

// scanCodes parses every non-test Go file of the module under root and
// returns the error codes it answers: the code argument of a call to a
// function with a code parameter (commands.Refuse, httpx.Errorf, a package's
// own helper), the Code field of an ...Error or ...Refusal literal and the
// "code" key of a map literal. A code given as a package-level constant is
// resolved; one computed at run time is not a stable code and is skipped.
func scanCodes(root string) ([]site, error) {
	type file struct {
		pkg  string
		rel  string
		ast  *ast.File
		imps map[string]string
	}
	fset := token.NewFileSet()
	var files []file
	err := eachSource(root, fset, func(rel string, f *ast.File) error {
		pkg := module
		if dir := path.Dir(rel); dir != "." {
			pkg += "/" + dir
		}
		imps := map[string]string{}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			name := path.Base(ip)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imps[name] = ip
		}
		files = append(files, file{pkg: pkg, rel: rel, ast: f, imps: imps})
		return nil
	})
	if err != nil {
		return nil, err
	}

	consts := map[string]string{}  // pkg.Name: value of a string constant
	aliases := map[string]string{} // pkg.Name: the constant it is defined as
	coders := map[string]coder{}   // pkg.Func, or pkg.(method).Name
	for _, f := range files {
		for _, decl := range f.ast.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok != token.CONST {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						if s, ok := stringLit(vs.Values[i]); ok {
							consts[f.pkg+"."+name.Name] = s
						}
						switch v := vs.Values[i].(type) {
						case *ast.Ident: // another constant of the package
							aliases[f.pkg+"."+name.Name] = f.pkg + "." + v.Name
						case *ast.SelectorExpr: // commands.CodeInternalError
							if x, ok := v.X.(*ast.Ident); ok && f.imps[x.Name] != "" {
								aliases[f.pkg+"."+name.Name] = f.imps[x.Name] + "." + v.Sel.Name
							}
						}
					}
				}
			case *ast.FuncDecl:
				c, ok := coderOf(d)
				if !ok {
					continue
				}
				key := f.pkg + "." + d.Name.Name
				if d.Recv != nil {
					key = f.pkg + ".(method)." + d.Name.Name
				}
				coders[key] = c
			}
		}
	}

	for range len(aliases) { // a chain of aliases resolves in as many rounds
		for k, v := range aliases {
			if s, ok := consts[v]; ok {
				consts[k] = s
			}
		}
	}

	var sites []site
	for _, f := range files {
		str := func(e ast.Expr) (string, bool) {
			if s, ok := stringLit(e); ok {
				return s, true
			}
			switch e := e.(type) {
			case *ast.Ident:
				s, ok := consts[f.pkg+"."+e.Name]
				return s, ok
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); ok {
					s, ok := consts[f.imps[x.Name]+"."+e.Sel.Name]
					return s, ok
				}
			}
			return "", false
		}
		status := func(e ast.Expr) int { return httpStatus(e, f.imps) }
		add := func(code string, st int, at token.Pos, params ...ast.Expr) {
			if code == "" { // no code: a plain 500
				return
			}
			p := fset.Position(at)
			sites = append(sites, site{code: code, status: st, params: mapKeys(params...), pos: fmt.Sprintf("%s:%d", f.rel, p.Line)})
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				var key string
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					key = f.pkg + "." + fn.Name
				case *ast.SelectorExpr:
					if x, ok := fn.X.(*ast.Ident); ok && f.imps[x.Name] != "" {
						key = f.imps[x.Name] + "." + fn.Sel.Name
					} else {
						key = f.pkg + ".(method)." + fn.Sel.Name
					}
				}
				c, ok := coders[key]
				if !ok || c.codeArg >= len(n.Args) {
					return true
				}
				code, ok := str(n.Args[c.codeArg])
				if !ok {
					return true
				}
				st := c.fixed
				if c.statusArg >= 0 && c.statusArg < len(n.Args) {
					st = status(n.Args[c.statusArg])
				}
				add(code, st, n.Args[c.codeArg].Pos(), n.Args...)
			case *ast.CompositeLit:
				if _, isMap := n.Type.(*ast.MapType); isMap {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, _ := stringLit(kv.Key); k == "code" {
								if code, ok := str(kv.Value); ok {
									add(code, 0, kv.Value.Pos())
								}
							}
						}
					}
					return true
				}
				if !isErrorType(n.Type) {
					return true
				}
				var code string
				var st int
				var at token.Pos
				var params ast.Expr
				for _, el := range n.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					switch k, _ := kv.Key.(*ast.Ident); {
					case k == nil:
					case k.Name == "Code":
						if s, ok := str(kv.Value); ok {
							code, at = s, kv.Value.Pos()
						}
					case k.Name == "Status":
						st = status(kv.Value)
					case k.Name == "Params":
						params = kv.Value
					}
				}
				if at.IsValid() {
					add(code, st, at, params)
				}
			}
			return true
		})
	}
	sort.Slice(sites, func(i, j int) bool { return sites[i].pos < sites[j].pos })
	return sites, nil
}

// mapKeys returns the string keys of the map literals among es.
func mapKeys(es ...ast.Expr) []string {
	var keys []string
	for _, e := range es {
		cl, ok := e.(*ast.CompositeLit)
		if !ok {
			continue
		}
		if _, isMap := cl.Type.(*ast.MapType); !isMap {
			continue
		}
		for _, el := range cl.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if k, ok := stringLit(kv.Key); ok {
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// coderOf reports whether fn takes a parameter named code (a string or a
// commands.Code), where, and where its status comes from.
func coderOf(fn *ast.FuncDecl) (coder, bool) {
	c := coder{codeArg: -1, statusArg: -1}
	i := 0
	for _, field := range fn.Type.Params.List {
		typ, _ := field.Type.(*ast.Ident)
		if sel, ok := field.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" {
			typ = sel.Sel // commands.Code
		}
		names := field.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, name := range names {
			switch {
			case name.Name == "code" && typ != nil && (typ.Name == "string" || typ.Name == "Code"):
				c.codeArg = i
			case name.Name == "status" && typ != nil && typ.Name == "int":
				c.statusArg = i
			}
			i++
		}
	}
	if c.codeArg < 0 {
		return c, false
	}
	if c.statusArg < 0 && fn.Body != nil {
		// A helper that fixes the status: the literal that carries the code
		// parameter states it.
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isErrorType(cl.Type) {
				return true
			}
			var carries bool
			var st ast.Expr
			for _, el := range cl.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok {
						if v, ok := kv.Value.(*ast.Ident); ok && k.Name == "Code" && v.Name == "code" {
							carries = true
						}
						if k.Name == "Status" {
							st = kv.Value
						}
					}
				}
			}
			if carries && st != nil {
				c.fixed = httpStatus(st, map[string]string{"http": "net/http"})
			}
			return true
		})
	}
	return c, true
}

// isErrorType reports whether a composite literal's type names an error
// value that carries a code: httpx.Error, commands.Refusal, a stream's error.
func isErrorType(t ast.Expr) bool {
	var name string
	switch t := t.(type) {
	case *ast.Ident:
		name = t.Name
	case *ast.SelectorExpr:
		name = t.Sel.Name
	default:
		return false
	}
	return strings.Contains(name, "Error") || strings.Contains(name, "Refusal")
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// httpStatus resolves http.StatusXxx or an integer literal: 0 for anything
// else, -1 for a net/http constant missing from statuses.
func httpStatus(e ast.Expr, imps map[string]string) int {
	switch e := e.(type) {
	case *ast.BasicLit:
		n, _ := strconv.Atoi(e.Value)
		return n
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && imps[x.Name] == "net/http" {
			if st, ok := statuses[e.Sel.Name]; ok {
				return st
			}
			return -1
		}
	}
	return 0
}

// statuses are the net/http status constants error answers use.
var statuses = map[string]int{
	"StatusAccepted":              http.StatusAccepted,
	"StatusBadRequest":            http.StatusBadRequest,
	"StatusUnauthorized":          http.StatusUnauthorized,
	"StatusPaymentRequired":       http.StatusPaymentRequired,
	"StatusForbidden":             http.StatusForbidden,
	"StatusNotFound":              http.StatusNotFound,
	"StatusMethodNotAllowed":      http.StatusMethodNotAllowed,
	"StatusConflict":              http.StatusConflict,
	"StatusGone":                  http.StatusGone,
	"StatusPreconditionFailed":    http.StatusPreconditionFailed,
	"StatusPreconditionRequired":  http.StatusPreconditionRequired,
	"StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge,
	"StatusUnsupportedMediaType":  http.StatusUnsupportedMediaType,
	"StatusUnprocessableEntity":   http.StatusUnprocessableEntity,
	"StatusLocked":                http.StatusLocked,
	"StatusTooManyRequests":       http.StatusTooManyRequests,
	"StatusInternalServerError":   http.StatusInternalServerError,
	"StatusBadGateway":            http.StatusBadGateway,
	"StatusServiceUnavailable":    http.StatusServiceUnavailable,
	"StatusGatewayTimeout":        http.StatusGatewayTimeout,
}
