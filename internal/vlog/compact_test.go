package vlog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// engine stands for the engine's side: the ref each live owner's value
// is at, with a lock as its commit lock.
type engine struct {
	mu   sync.Mutex
	refs map[uint64]Ref
}

func (e *engine) live(owner uint64, kind Kind, r Ref) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.refs[owner]
	return ok && cur == r && kind == kindOf(owner)
}

// apply points the refs at the copies, as the engine does (durably) once
// Compact returns.
func (e *engine) apply(moves []Move) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range moves {
		if e.refs[m.Owner] == m.Old {
			e.refs[m.Owner] = m.New
		}
	}
}

func (e *engine) snapshot() map[uint64]Ref {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.refs)
}

func (e *engine) entries() []entry {
	var out []entry
	for o, r := range e.snapshot() {
		out = append(out, entry{o, r})
	}
	slices.SortFunc(out, func(a, b entry) int { return int(a.owner) - int(b.owner) })
	return out
}

// scene fills a log in several files, syncs it, and lets every third
// value die; it returns the engine's refs.
func scene(t testing.TB, l *Log) *engine {
	t.Helper()
	l.batch = 600 // Compact syncs several times
	e := &engine{refs: map[uint64]Ref{}}
	for _, en := range appendN(t, l, 0, 60) {
		if en.owner%3 != 0 {
			e.refs[en.owner] = en.ref
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return e
}

// reclaim is what the engine does after reopening: every file no ref
// points into is removed, the others compacted then removed, except the
// head. It fails if a live value is lost on the way.
func reclaim(l *Log, e *engine) error {
	files := l.Files()
	for _, fi := range files[:len(files)-1] {
		used := false
		for _, r := range e.snapshot() {
			used = used || r.File == fi.Num
		}
		if used {
			moves, err := l.Compact(fi.Num, e.live)
			if err != nil {
				return fmt.Errorf("compact %d: %w", fi.Num, err)
			}
			e.apply(moves)
		}
		if err := l.Remove(fi.Num); err != nil {
			return fmt.Errorf("remove %d: %w", fi.Num, err)
		}
	}
	if err := readBack(l, e.entries()); err != nil {
		return fmt.Errorf("after reclaiming: %w", err)
	}
	for _, r := range e.snapshot() {
		if r.File < files[len(files)-1].Num {
			return fmt.Errorf("ref %v in a removed file", r)
		}
	}
	if d, err := l.Check(); err != nil || len(d) > 0 {
		return fmt.Errorf("Check after reclaiming: %v %v", d, err)
	}
	return nil
}

// afterCrash reopens fsys with the engine's refs of that moment: every
// live value reads back, and reclaiming leaves only the live ones.
func afterCrash(fsys vfs.FS, refs map[uint64]Ref) error {
	l, err := Open(dir, Options{FS: fsys, FileSize: 2000})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer l.Close()
	e := &engine{refs: refs}
	if err := readBack(l, e.entries()); err != nil {
		return err
	}
	return reclaim(l, e)
}

// compactTargets are the files compacted: an older one and the head,
// which Compact seals first.
var compactTargets = []struct {
	name string
	pick func(l *Log) uint32
}{
	{"old", func(*Log) uint32 { return 1 }},
	{"head", func(l *Log) uint32 { f := l.Files(); return f[len(f)-1].Num }},
}

// compactAndRemove is the engine's round: compact, point refs at the
// copies, remove.
func compactAndRemove(l *Log, e *engine, n uint32) error {
	moves, err := l.Compact(n, e.live)
	if err != nil {
		return err
	}
	e.apply(moves)
	return l.Remove(n)
}

// TestCompactErrors fails each create, write, sync, directory sync,
// rename and removal of a Compact and Remove in turn: the call fails, and
// after a power loss or a kill every live value reads back and reclaiming
// leaves a sound log.
func TestCompactErrors(t *testing.T) {
	t.Parallel()
	for _, target := range compactTargets {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			for i := 1; ; i++ {
				m := newMem(t)
				var armed atomic.Bool
				idx := errorfs.NewOnIndex(i, errorfs.Kinds(errorfs.OpCreate, errorfs.OpOpen, errorfs.OpWrite,
					errorfs.OpSync, errorfs.OpDirSync, errorfs.OpRename, errorfs.OpRemove))
				fsys := errorfs.Wrap(m, errorfs.InjectorFunc(func(op errorfs.Op) error {
					if !armed.Load() {
						return nil
					}
					return idx.MaybeError(op)
				}))
				l := open(t, fsys, 2000)
				e := scene(t, l)
				armed.Store(true)
				err := compactAndRemove(l, e, target.pick(l))
				armed.Store(false)
				op, hit := idx.Hit()
				if !hit {
					if err != nil {
						t.Fatal(err)
					}
					if i < 4 {
						t.Fatalf("only %d operations to fail", i-1)
					}
					t.Logf("%d failure points", i-1)
					break
				}
				if !errors.Is(err, errorfs.ErrInjected) {
					t.Fatalf("failing %v: %v, want the injected error", op, err)
				}
				for name, fs := range map[string]*vfs.MemFS{"power loss": m.CrashClone(), "kill": m.Clone()} {
					if err := afterCrash(fs, e.snapshot()); err != nil {
						t.Fatalf("failing %s %s, then %s: %v", op.Kind, op.Path, name, err)
					}
				}
				l.Close()
			}
		})
	}
}

// TestCompactPowerLoss takes a power loss before each write, sync,
// creation and removal of a Compact and Remove: every live value reads
// back with the refs the engine held at that moment, and reclaiming
// leaves a sound log.
func TestCompactPowerLoss(t *testing.T) {
	t.Parallel()
	for _, target := range compactTargets {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			m := newMem(t)
			var armed atomic.Bool
			var e *engine
			type point struct {
				op   errorfs.Op
				fs   *vfs.MemFS
				refs map[uint64]Ref
			}
			var points []point
			fsys := errorfs.Wrap(m, errorfs.InjectorFunc(func(op errorfs.Op) error {
				switch op.Kind {
				case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpDirSync, errorfs.OpRename, errorfs.OpRemove:
					if armed.Load() {
						points = append(points, point{op, m.CrashClone(), e.snapshot()})
					}
				}
				return nil
			}))
			l := open(t, fsys, 2000)
			e = scene(t, l)
			armed.Store(true)
			if err := compactAndRemove(l, e, target.pick(l)); err != nil {
				t.Fatal(err)
			}
			armed.Store(false)
			points = append(points, point{errorfs.Op{Path: "the end"}, m.CrashClone(), e.snapshot()})
			if len(points) < 5 {
				t.Fatalf("only %d crash points", len(points))
			}
			for _, p := range points {
				if err := afterCrash(p.fs, p.refs); err != nil {
					t.Fatalf("power loss before %s %s: %v", p.op.Kind, p.op.Path, err)
				}
			}
			l.Close()
		})
	}
}
