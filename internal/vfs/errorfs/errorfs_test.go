package errorfs

import (
	"errors"
	"os"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

// TestOnIndex: the nth matching operation fails, once, and only it.
func TestOnIndex(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	inj := NewOnIndex(3, Kinds(OpWrite, OpSync))
	fsys := Wrap(mem, inj)
	f, err := fsys.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil { // 1
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // 2
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("b")); !errors.Is(err, ErrInjected) { // 3
		t.Fatalf("third write or sync: %v, want ErrInjected", err)
	}
	if _, err := f.Write([]byte("c")); err != nil { // 4
		t.Fatal(err)
	}
	if got, _ := vfs.ReadFile(mem, "/f"); string(got) != "ac" {
		t.Fatalf("the failed write was done: %q", got)
	}
	if inj.Count() != 4 {
		t.Fatalf("Count %d, want 4", inj.Count())
	}
	if op, ok := inj.Hit(); !ok || op.Kind != OpWrite || op.Path != "/f" {
		t.Fatalf("Hit %+v %v", op, ok)
	}
	// A directory's sync is told apart from a file's.
	var kinds []OpKind
	spy := Wrap(mem, InjectorFunc(func(op Op) error { kinds = append(kinds, op.Kind); return nil }))
	d, _ := spy.Open("/")
	d.Sync()
	d.Close()
	if err := spy.Rename("/f", "/g"); err != nil {
		t.Fatal(err)
	}
	want := []OpKind{OpOpen, OpDirSync, OpClose, OpRename}
	if len(kinds) != len(want) {
		t.Fatalf("ops %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("ops %v, want %v", kinds, want)
		}
	}
	// A failed rename changes nothing.
	fail := Wrap(mem, NewOnIndex(1, Kinds(OpRename)))
	if err := fail.Rename("/g", "/h"); !errors.Is(err, ErrInjected) {
		t.Fatalf("rename: %v", err)
	}
	if _, err := mem.Stat("/g"); err != nil {
		t.Fatalf("the failed rename moved the file: %v", err)
	}
}
