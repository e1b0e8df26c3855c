package engine_test

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/surface.txt from the package as it is")

const enginePath = "github.com/docketdb/docket/engine"

// storagePkgs are the packages whose types the public API of engine must
// not show: they are how the engine stores its state, not what it offers,
// and free to change. TestSurface fails on any exported identifier whose
// declaration mentions one of them, or whose name is a failpoint.
var storagePkgs = []string{
	"github.com/docketdb/docket/internal/index",
	"github.com/docketdb/docket/internal/snapshot",
	"github.com/docketdb/docket/internal/vlog",
	"github.com/docketdb/docket/wal",
}

// TestSurface lists every exported identifier of engine (types, their
// exported fields and methods, funcs, vars, consts) with its type and the
// packages its declaration mentions, and compares the list with
// testdata/surface.txt: a change of the public API shows in its diff.
// Regenerate with go test -run TestSurface ./engine/ -update.
func TestSurface(t *testing.T) {
	t.Parallel()
	entries := surface(t)
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.line())
		b.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "surface.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSurface ./engine/ -update)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the public API of engine differs from %s; if the change is meant, run go test -run TestSurface ./engine/ -update and review the diff\n%s",
			golden, lineDiff(string(want), got))
	}

	for _, e := range entries {
		if e.storage() {
			t.Errorf("%s shows storage in the public API of engine: %s", e.name, e.line())
		}
	}
}

// entry is one exported identifier: kind (const, var, func, type, field,
// method), name (T.F for a field or method of T), its type as declared
// and the packages other than engine that the type mentions.
type entry struct {
	kind, name, typ string
	pkgs            []string
}

func (e entry) line() string {
	s := e.kind + " " + e.name + " " + e.typ
	if len(e.pkgs) > 0 {
		s += "  [" + strings.Join(e.pkgs, " ") + "]"
	}
	return s
}

func (e entry) storage() bool {
	if strings.Contains(strings.ToLower(e.name), "failpoint") {
		return true
	}
	for _, p := range e.pkgs {
		if slices.Contains(storagePkgs, p) {
			return true
		}
	}
	return false
}

// surface type-checks the package in this directory from source and
// returns its exported identifiers, sorted by name and kind.
func surface(t *testing.T) []entry {
	t.Helper()
	bp, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: exportImporter(t, fset, bp.Imports)}
	pkg, err := conf.Check(enginePath, fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	qual := func(p *types.Package) string {
		if p.Path() == enginePath {
			return ""
		}
		return p.Name()
	}
	var out []entry
	add := func(kind, name string, typ string, ts ...types.Type) {
		set := map[string]bool{}
		for _, t := range ts {
			mentions(t, set, map[types.Type]bool{})
		}
		delete(set, enginePath)
		pkgs := make([]string, 0, len(set))
		for p := range set {
			pkgs = append(pkgs, p)
		}
		sort.Strings(pkgs)
		out = append(out, entry{kind: kind, name: name, typ: typ, pkgs: pkgs})
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const", name, types.TypeString(obj.Type(), qual), obj.Type())
		case *types.Var:
			add("var", name, types.TypeString(obj.Type(), qual), obj.Type())
		case *types.Func:
			add("func", name, types.TypeString(obj.Type(), qual), obj.Type())
		case *types.TypeName:
			typ := obj.Type()
			if obj.IsAlias() {
				add("type", name, "= "+types.TypeString(types.Unalias(typ), qual), typ)
			}
			switch u := typ.Underlying().(type) {
			case *types.Struct:
				if !obj.IsAlias() {
					add("type", name, "struct", nil)
				}
				for i := range u.NumFields() {
					f := u.Field(i)
					if f.Exported() {
						add("field", name+"."+f.Name(), types.TypeString(f.Type(), qual), f.Type())
					}
				}
			case *types.Interface:
				if !obj.IsAlias() {
					add("type", name, "interface", nil)
				}
			default:
				if !obj.IsAlias() {
					add("type", name, types.TypeString(u, qual), u)
				}
			}
			// The method set of *T holds T's and the promoted ones.
			ms := types.NewMethodSet(types.NewPointer(typ))
			if types.IsInterface(typ) {
				ms = types.NewMethodSet(typ)
			}
			for i := range ms.Len() {
				m := ms.At(i).Obj()
				if m.Exported() {
					add("method", name+"."+m.Name(), types.TypeString(m.Type(), qual), m.Type())
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// exportImporter imports the packages paths and their dependencies from
// their export data, which one go list builds or finds in the build cache:
// type-checking them all from source took seconds.
func exportImporter(t *testing.T, fset *token.FileSet, paths []string) types.Importer {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		exports[path] = file
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("go list gave no export data for %q", path)
		}
		return os.Open(file)
	})
}

// mentions adds to set the path of every package whose named type t
// mentions, without looking inside named types (their own declarations
// list what they mention).
func mentions(t types.Type, set map[string]bool, seen map[types.Type]bool) {
	if t == nil || seen[t] {
		return
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		if p := t.Obj().Pkg(); p != nil {
			set[p.Path()] = true
		}
		mentions(types.Unalias(t), set, seen)
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil {
			set[p.Path()] = true
		}
		for a := range t.TypeArgs().Types() {
			mentions(a, set, seen)
		}
	case *types.Pointer:
		mentions(t.Elem(), set, seen)
	case *types.Slice:
		mentions(t.Elem(), set, seen)
	case *types.Array:
		mentions(t.Elem(), set, seen)
	case *types.Chan:
		mentions(t.Elem(), set, seen)
	case *types.Map:
		mentions(t.Key(), set, seen)
		mentions(t.Elem(), set, seen)
	case *types.Signature:
		for v := range t.Params().Variables() {
			mentions(v.Type(), set, seen)
		}
		for v := range t.Results().Variables() {
			mentions(v.Type(), set, seen)
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				mentions(f.Type(), set, seen)
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				mentions(m.Type(), set, seen)
			}
		}
		for e := range t.EmbeddedTypes() {
			mentions(e, set, seen)
		}
	case *types.TypeParam:
		mentions(t.Constraint(), set, seen)
	case *types.Union:
		for i := range t.Len() {
			mentions(t.Term(i).Type(), set, seen)
		}
	case *types.Basic, *types.Tuple:
	default:
		panic(fmt.Sprintf("surface: type %T not handled", t))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w := strings.Split(want, "\n")
	g := strings.Split(got, "\n")
	in := func(lines []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range lines {
			m[l] = true
		}
		return m
	}
	wm, gm := in(w), in(g)
	var b strings.Builder
	for _, l := range w {
		if !gm[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if !wm[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
