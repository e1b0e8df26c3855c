package snapshot

import (
	"errors"
	"strings"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// newestAfterCrash returns the seq of the newest snapshot a power loss on
// m leaves in dir, requiring it to read back whole with want's records
// (prev's for the older one), or 0 when there is none.
func newestAfterCrash(t *testing.T, m *vfs.MemFS, dir string, prev, want [][]byte, what string) uint64 {
	t.Helper()
	c := m.CrashClone()
	infos, err := ListFS(c, dir)
	if err != nil {
		t.Fatalf("%s: list: %v", what, err)
	}
	if len(infos) == 0 {
		return 0
	}
	var got [][]byte
	seq, _, err := ReadFS(c, infos[0].Path, func(rec []byte) error {
		got = append(got, append([]byte(nil), rec...))
		return nil
	})
	if err != nil {
		t.Fatalf("%s: the newest snapshot after a power loss does not read: %v", what, err)
	}
	exp := want
	if seq == 10 {
		exp = prev
	}
	if !equalRecords(got, exp) {
		t.Fatalf("%s: snapshot %d after a power loss holds other records", what, seq)
	}
	return seq
}

// TestWriteFailsAtEveryOperation fails each file operation of a Write in
// turn on the strict memory file system: Write must report it, a power
// loss must leave either the older snapshot or the new one whole, and a
// Write that returned nil must survive a power loss. It covers the points
// the named failpoints mark and every operation between them.
func TestWriteFailsAtEveryOperation(t *testing.T) {
	t.Parallel()
	const dir = "/snap"
	prev, recs := makeRecords(30, 40), makeRecords(50, 100)
	setup := func() *vfs.MemFS {
		m := vfs.NewMem()
		if err := m.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"/", dir} {
			f, _ := m.Open(d)
			f.Sync()
			f.Close()
		}
		if _, err := Write(dir, 10, Options{FS: m}, fillWith(prev)); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := setup()
	count := errorfs.NewOnIndex(0, func(errorfs.Op) bool { return true })
	if _, err := Write(dir, 20, Options{FS: errorfs.Wrap(m, count)}, fillWith(recs)); err != nil {
		t.Fatal(err)
	}
	if got := newestAfterCrash(t, m, dir, prev, recs, "no failure"); got != 20 {
		t.Fatalf("a Write that returned nil left snapshot %d after a power loss, want 20", got)
	}
	total := count.Count()
	for n := 1; n <= total; n++ {
		m := setup()
		inj := errorfs.NewOnIndex(n, func(errorfs.Op) bool { return true })
		_, err := Write(dir, 20, Options{FS: errorfs.Wrap(m, inj)}, fillWith(recs))
		op, _ := inj.Hit()
		what := "failing " + op.Kind.String() + " " + op.Path
		// Removing the temporary file after a failure is best effort.
		if err == nil && !(op.Kind == errorfs.OpRemove && strings.HasSuffix(op.Path, tmpExt)) {
			t.Fatalf("%s: Write returned nil", what)
		}
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("%s: Write returned %v", what, err)
		}
		if got := newestAfterCrash(t, m, dir, prev, recs, what); got != 10 && got != 20 {
			t.Fatalf("%s: snapshot %d after a power loss", what, got)
		}
		if err := RemoveTempFS(m, dir); err != nil {
			t.Fatalf("%s: RemoveTemp: %v", what, err)
		}
		if ents, _ := m.ReadDir(dir); len(ents) > 2 {
			t.Fatalf("%s: %d files left after RemoveTemp", what, len(ents))
		}
	}
	t.Logf("%d operations failed in turn", total)
}
