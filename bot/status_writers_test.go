package bot

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusWrittenInOnePlace type-checks the package and fails on any assignment to the
// Status of a RunRecord or of an agent.State outside the two functions allowed to write
// them: deriveStatus (the record's status follows its state's) and failState (the one place
// the bot ends a state itself). A status set anywhere else could drift from the state.
func TestStatusWrittenInOnePlace(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("github.com/loopbot/loopbot/bot", fset, files, info); err != nil {
		t.Fatalf("type-check: %v", err)
	}
	allowed := map[string]bool{"deriveStatus": true, "failState": true}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || allowed[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range as.Lhs {
					sel, ok := lhs.(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "Status" {
						continue
					}
					typ := info.Types[sel.X].Type
					if p, ok := typ.(*types.Pointer); ok {
						typ = p.Elem()
					}
					switch typ.String() {
					case "github.com/loopbot/loopbot/bot.RunRecord", "github.com/loopbot/loopbot/agent.State":
						t.Errorf("%s: %s sets a run status; only deriveStatus and failState may", fset.Position(as.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
}
