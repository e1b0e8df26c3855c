package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// snippet is one ```go block of the README.
type snippet struct {
	line int // README line of the block's first line of code
	code string
}

func readmeSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	var cur *snippet
	var b strings.Builder
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(l) == "```go":
			cur = &snippet{line: i + 2}
			b.Reset()
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(l + "\n")
		}
	}
	if cur != nil {
		t.Fatalf("README.md: the go block at line %d is not closed", cur.line-1)
	}
	return out
}

// fragmentImports are what a fragment may use without importing it, each
// with a use that keeps it imported when no fragment needs it.
var fragmentImports = [][2]string{
	{"context", "context.Background"}, {"errors", "errors.Is"}, {"fmt", "fmt.Sprint"}, {"os", "os.Getenv"},
	{"time", "time.Second"}, {"github.com/docketdb/docket/engine", "engine.NS"}, {"github.com/docketdb/docket/worker", "worker.New"},
}

// clientImport is the client's import, for fragments that use it.
var clientImport = [2]string{"github.com/docketdb/docket/client", "client.Dial"}

// clientHasDial reports whether package client in the tree at root has its
// Dial function yet: README fragments that use the client compile from then
// on.
func clientHasDial(t *testing.T, root string) bool {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(root, "client", "*.go"))
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "Dial" {
				return true
			}
		}
	}
	return false
}

// fragmentFile turns README fragments into one Go file: each becomes a block
// in a function body that returns an error, with ctx, db and dir in scope
// and send declared, as the README says; the variables a fragment leaves for
// the reader to use next are marked used. //line directives make compile
// errors point at README.md.
func fragmentFile(t *testing.T, frags []snippet, withClient bool) string {
	t.Helper()
	imports := fragmentImports
	if withClient {
		imports = append(imports[:len(imports):len(imports)], clientImport)
	}
	gen := func(uses [][]string) string {
		var b strings.Builder
		b.WriteString("package fragments\n\nimport (\n")
		for _, imp := range imports {
			fmt.Fprintf(&b, "\t%q\n", imp[0])
		}
		b.WriteString(")\n\nvar (\n")
		for _, imp := range imports {
			fmt.Fprintf(&b, "\t_ = %s\n", imp[1])
		}
		b.WriteString(")\n\n")
		b.WriteString("func send(ctx context.Context, payload []byte) error { return nil }\n\n")
		for i, f := range frags {
			fmt.Fprintf(&b, "func fragment%d(ctx context.Context, db *engine.DB, dir string) error {\n\t{\n//line README.md:%d\n%s", i, f.line, f.code)
			if uses != nil {
				for _, name := range uses[i] {
					fmt.Fprintf(&b, "\t_ = %s\n", name)
				}
			}
			b.WriteString("\t}\n\treturn nil\n}\n\n")
		}
		return b.String()
	}
	src := gen(nil)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fragments.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("a README fragment does not parse: %v", err)
	}
	uses := make([][]string, len(frags))
	i := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "fragment") {
			continue
		}
		block := fn.Body.List[0].(*ast.BlockStmt)
		for _, st := range block.List {
			switch s := st.(type) {
			case *ast.AssignStmt:
				if s.Tok == token.DEFINE {
					for _, e := range s.Lhs {
						if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
							uses[i] = append(uses[i], id.Name)
						}
					}
				}
			case *ast.DeclStmt:
				if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, sp := range g.Specs {
						for _, id := range sp.(*ast.ValueSpec).Names {
							if id.Name != "_" {
								uses[i] = append(uses[i], id.Name)
							}
						}
					}
				}
			}
		}
		i++
	}
	return gen(uses)
}

// TestReadmeSnippetsCompile builds every ```go block of README.md against
// this module, in a scratch module that replaces docket with this tree: a
// block that starts with "package" as the whole program it claims to be,
// the others as fragments (see fragmentFile). Outside -short it also runs
// the first program, which must finish promptly.
func TestReadmeSnippetsCompile(t *testing.T) {
	// In parallel with the package's other long tests, which mostly wait
	// on processes and timers while this one builds.
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	snips := readmeSnippets(t, filepath.Join(root, "README.md"))
	if len(snips) == 0 || !strings.HasPrefix(snips[0].code, "package main") {
		t.Fatal("the README's first Go block should be a whole program")
	}
	mod := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module readmecheck\n\ngo 1.24\n\nrequire github.com/docketdb/docket v0.0.0-00010101000000-000000000000\n\nreplace github.com/docketdb/docket => "+root+"\n")
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		write("go.sum", string(sum))
	}
	var frags []snippet
	programs := 0
	withClient := clientHasDial(t, root)
	for _, s := range snips {
		if !withClient && strings.Contains(s.code, "client.") {
			t.Logf("README.md:%d uses package client, which has no Dial yet: not compiled", s.line)
			continue
		}
		if strings.HasPrefix(s.code, "package ") {
			write(fmt.Sprintf("program%d/main.go", programs), fmt.Sprintf("//line README.md:%d\n%s", s.line, s.code))
			programs++
		} else {
			frags = append(frags, s)
		}
	}
	if len(frags) > 0 {
		write("fragments/fragments.go", fragmentFile(t, frags, withClient))
	}
	goCmd := func(ctx context.Context, dir string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
		return cmd
	}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := goCmd(cctx, mod, "vet", "./...").CombinedOutput(); err != nil {
		t.Fatalf("README snippets do not compile:\n%s", out)
	}
	if testing.Short() {
		return
	}
	// The first program runs as it is, in a directory of its own.
	bin := filepath.Join(mod, "program0.bin")
	if out, err := goCmd(cctx, mod, "build", "-o", bin, "./program0").CombinedOutput(); err != nil {
		t.Fatalf("build: %s", out)
	}
	work := t.TempDir()
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	run := exec.CommandContext(rctx, bin)
	run.Dir = work
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	start := time.Now()
	if err := run.Run(); err != nil {
		t.Fatalf("the README program failed after %v: %v\n%s%s", time.Since(start), err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "sent") || time.Since(start) > 10*time.Second {
		t.Fatalf("the README program took %v and printed:\n%s", time.Since(start), stdout.String())
	}
}

func readme(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestReadmeShowsServeHelp: the README's copy of `docket serve -h` is what
// the command prints.
func TestReadmeShowsServeHelp(t *testing.T) {
	text := readme(t)
	start := strings.Index(text, "```text\nusage: docket serve ")
	if start < 0 {
		t.Fatal("the README has no ```text block with the output of docket serve -h")
	}
	block := text[start+len("```text\n"):]
	block = block[:strings.Index(block, "```")]
	_, out, _ := docket(t, "serve", "-h")
	if block != out {
		t.Fatalf("the README's docket serve -h is out of date; it should read:\n%s", out)
	}
}

// TestReadmeListsEveryCommand: the README's command table names every
// command.
func TestReadmeListsEveryCommand(t *testing.T) {
	text := readme(t)
	for _, c := range commands {
		if !strings.Contains(text, "| `"+c.name) {
			t.Errorf("the README's command table does not list %s", c.name)
		}
	}
}

// TestReadmeCurlEnqueue runs the README's curl command against serve on
// loopback and finds the task it enqueued in the directory afterwards.
func TestReadmeCurlEnqueue(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "proto", "docket", "v1")); err != nil {
		t.Skip("the network API's generated code (proto/docket/v1) is not in this tree yet")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	var line string
	for _, l := range strings.Split(readme(t), "\n") {
		if strings.HasPrefix(l, "curl ") && strings.Contains(l, "/docket.v1.Queues/Enqueue") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("no curl enqueue command in the README")
	}
	args := shellSplit(t, line)[1:]
	dir := filepath.Join(t.TempDir(), "data")
	s := serveInProcess(t, "-dir", dir)
	for i, a := range args {
		if rest, ok := strings.CutPrefix(a, "http://127.0.0.1:7070"); ok {
			args[i] = s.base + rest
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, curl, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"id"`) {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	if code := s.shutdown(t); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}
	code, list, errs := docket(t, "inspect", "-dir", dir, "-ns", "acme/prod", "-queue", "emails", "-json")
	if page := decode[pageJSON](t, list); code != 0 || len(page.Tasks) != 1 || !strings.Contains(string(page.Tasks[0].Payload), `"a@b"`) {
		t.Fatalf("the enqueued task: exit %d\n%s%s", code, list, errs)
	}
}
