package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// durableMem returns a strict memory file system whose root is durable.
func durableMem(t *testing.T) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	d, err := m.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	d.Sync()
	d.Close()
	return m
}

// termAfterCrash opens the store on what a power loss on m leaves and
// returns its term, 0 if none.
func termAfterCrash(t *testing.T, m *vfs.MemFS, path, what string) uint64 {
	t.Helper()
	s, err := OpenStableStore(path, StableOptions{FS: m.CrashClone()})
	if err != nil {
		t.Fatalf("%s: open after a power loss: %v", what, err)
	}
	v, err := s.GetUint64([]byte("CurrentTerm"))
	if err != nil && !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestStableStorePowerLoss: a term Set returned for survives a power loss,
// also the first one, in a directory the store created (whose entry in
// its parent must be made durable too).
func TestStableStorePowerLoss(t *testing.T) {
	t.Parallel()
	m := durableMem(t)
	const path = "/node/raft/stable"
	s := openStable(t, path, StableOptions{FS: m})
	for term := uint64(1); term <= 3; term++ {
		if err := s.SetUint64([]byte("CurrentTerm"), term); err != nil {
			t.Fatal(err)
		}
		if got := termAfterCrash(t, m, path, fmt.Sprintf("term %d", term)); got != term {
			t.Fatalf("term %d was stored and a power loss left term %d", term, got)
		}
	}
}

// TestStableStoreFailEveryOperation fails each file operation of a Set in
// turn: the Set reports it, and a power loss then leaves the old term or
// the new one, never a damaged file.
func TestStableStoreFailEveryOperation(t *testing.T) {
	t.Parallel()
	const path = "/node/raft/stable"
	setup := func() *vfs.MemFS {
		m := durableMem(t)
		s := openStable(t, path, StableOptions{FS: m})
		if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := setup()
	count := errorfs.NewOnIndex(0, func(errorfs.Op) bool { return true })
	s := openStable(t, path, StableOptions{FS: errorfs.Wrap(m, count)})
	base := count.Count()
	if err := s.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	total := count.Count()
	for n := base + 1; n <= total; n++ {
		m := setup()
		inj := errorfs.NewOnIndex(n, func(errorfs.Op) bool { return true })
		s := openStable(t, path, StableOptions{FS: errorfs.Wrap(m, inj)})
		err := s.SetUint64([]byte("CurrentTerm"), 2)
		op, _ := inj.Hit()
		what := "failing " + op.Kind.String() + " " + op.Path
		if err == nil && !(op.Kind == errorfs.OpRemove && strings.HasSuffix(op.Path, ".tmp")) {
			t.Fatalf("%s: Set returned nil", what)
		}
		if got := termAfterCrash(t, m, path, what); got != 1 && got != 2 {
			t.Fatalf("%s: term %d after a power loss", what, got)
		}
		if got, _ := s.GetUint64([]byte("CurrentTerm")); err != nil && got != 1 {
			t.Fatalf("%s: a failed Set changed the term in memory to %d", what, got)
		}
	}
	if total-base < 5 {
		t.Fatalf("a Set makes only %d file operations", total-base)
	}
}
