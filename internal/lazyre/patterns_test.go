package lazyre

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestEveryPatternOfTheModuleCompiles finds every lazyre.New of a literal in the module's
// sources and compiles it, so that a pattern added anywhere is checked by the tests even
// before its package lists it in its own TestRegexpsCompile.
func TestEveryPatternOfTheModuleCompiles(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "New" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "lazyre" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			expr, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
				return true
			}
			found++
			if _, err := regexp.Compile(expr); err != nil {
				t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// loopbot's packages held 23 when they moved here; finding none means the walk missed
	// the sources, and the check above proved nothing.
	if found < 20 {
		t.Errorf("found %d lazyre.New patterns in the module, want the 23 or more there are", found)
	}
}
