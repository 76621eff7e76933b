package agent

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// statusWriters are the only functions that may assign a run Status: the moves of the state
// machine (through move) and the constructor; in the bot, the one function that derives a
// record's status from its state; in the store, the write that indexes it.
var statusWriters = map[string]bool{
	"(*github.com/loopbot/loopbot/agent.State).move": true,
	"github.com/loopbot/loopbot/agent.NewState":      true,
	"github.com/loopbot/loopbot/bot.deriveStatus":    true,
	// The store indexes runs by status and takes it from the state it is given, so that no
	// caller can store a record whose index disagrees with its state.
	"(*github.com/loopbot/loopbot/store.tx).PutRun": true,
	// PutRunHead keeps the status the store holds, whatever the head it is given says: it
	// builds the stored values with runWithHead.
	"github.com/loopbot/loopbot/store.runWithHead": true,
	// The PostgreSQL backend does the same, for the same reasons.
	"(*github.com/loopbot/loopbot/store/postgres.tx).PutRun":     true,
	"(*github.com/loopbot/loopbot/store/postgres.tx).PutRunHead": true,
}

// TestStatusWriters type-checks every package of the module and fails on any assignment of an
// agent.Status, or any composite literal that sets one, outside statusWriters. Tests are not
// checked: they build states in every status on purpose.
func TestStatusWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	pkgs := listModule(t)
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	checked := 0
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != "github.com/loopbot/loopbot" || len(p.GoFiles) == 0 || testSupport(p.ImportPath) {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{
			Types:      map[ast.Expr]types.TypeAndValue{},
			Defs:       map[*ast.Ident]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{},
		}
		conf := types.Config{Importer: imp.(types.ImporterFrom)}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		for _, f := range files {
			for _, w := range statusWrites(f, info, p.ImportPath) {
				if !statusWriters[w.fn] {
					t.Errorf("%s: %s assigns a run status; change it through an agent.State method", fset.Position(w.pos), w.fn)
				}
			}
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages; the module listing is wrong", checked)
	}
}

type statusWrite struct {
	pos token.Pos
	fn  string // the enclosing function, as types.Func.FullName prints it
}

// statusWrites finds the assignments to the Status field of a run (agent.State or
// bot.RunRecord) in f, and the keyed composite literals of those types that set it.
func statusWrites(f *ast.File, info *types.Info, pkg string) []statusWrite {
	var out []statusWrite
	for _, d := range f.Decls {
		fn := pkg + ".(package level)"
		if fd, ok := d.(*ast.FuncDecl); ok {
			if obj, ok := info.Defs[fd.Name].(*types.Func); ok {
				fn = obj.FullName()
			}
		}
		ast.Inspect(d, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					sel, ok := ast.Unparen(lhs).(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "Status" {
						continue
					}
					if s := info.Selections[sel]; s != nil && s.Kind() == types.FieldVal && isRun(s.Recv()) {
						out = append(out, statusWrite{lhs.Pos(), fn})
					}
				}
			case *ast.CompositeLit:
				if !isRun(info.TypeOf(n)) {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Status" {
							out = append(out, statusWrite{kv.Pos(), fn})
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// isRun reports whether t is, or points to, one of the types that carry a run's status.
func isRun(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch named.Obj().Pkg().Path() + "." + named.Obj().Name() {
	case "github.com/loopbot/loopbot/agent.State", "github.com/loopbot/loopbot/bot.RunRecord":
		return true
	}
	return false
}

// testSupport reports whether a package only serves tests (storetest, llmtest, slackfake...):
// those build records in every status on purpose, as tests do.
func testSupport(path string) bool {
	return strings.HasSuffix(path, "test") || strings.HasSuffix(path, "fake")
}

type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Path string }
}

// listModule asks the go command for every package of the module and its dependencies, with
// the export data the type checker reads imports from.
func listModule(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Module", "github.com/loopbot/loopbot/...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
