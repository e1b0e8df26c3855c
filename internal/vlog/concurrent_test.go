package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// gate parks the first read of one file once armed, until released.
type gate struct {
	kind    errorfs.OpKind
	path    string // "" for any
	armed   atomic.Bool
	parked  chan struct{}
	release chan struct{}
}

func newGate(path string) *gate { return newGateOn(errorfs.OpRead, path) }

func newGateOn(kind errorfs.OpKind, path string) *gate {
	return &gate{kind: kind, path: path, parked: make(chan struct{}), release: make(chan struct{})}
}

// gates asks each gate in turn.
type gates []*gate

func (gs gates) MaybeError(op errorfs.Op) error {
	for _, g := range gs {
		g.MaybeError(op)
	}
	return nil
}

func (g *gate) MaybeError(op errorfs.Op) error {
	if op.Kind == g.kind && (g.path == "" || op.Path == g.path) && g.armed.CompareAndSwap(true, false) {
		close(g.parked)
		<-g.release
	}
	return nil
}

// TestRemoveWaitsForRead: a Remove of a file a Read is reading waits for
// it; the Read returns the right bytes, Reads begun after Remove fail with
// ErrMissing, and the file goes once the Read ends.
func TestRemoveWaitsForRead(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	g := newGate(dir + "/" + fileName(0))
	l := open(t, errorfs.Wrap(m, g), 600)
	defer l.Close()
	es := appendN(t, l, 1, 20)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if es[1].ref.File != 0 || es[len(es)-1].ref.File == 0 {
		t.Fatal("want file 0 old")
	}
	waiting := make(chan struct{})
	l.removeWaiting = func(uint32) { close(waiting) }

	g.armed.Store(true)
	readDone := make(chan error)
	go func() {
		got, err := l.Read(es[0].ref, es[0].owner, kindOf(es[0].owner), nil)
		if err == nil && !bytes.Equal(got, value(es[0].owner)) {
			err = errors.New("wrong bytes")
		}
		readDone <- err
	}()
	<-g.parked
	removeDone := make(chan error, 1)
	go func() { removeDone <- l.Remove(0) }()
	select {
	case <-waiting:
	case err := <-removeDone:
		t.Fatalf("Remove returned %v during a Read of the file", err)
	}
	if _, ok := m.Files(dir)[fileName(0)]; !ok {
		t.Fatal("file removed during a Read")
	}
	if _, err := l.Read(es[1].ref, es[1].owner, kindOf(es[1].owner), nil); !errors.Is(err, ErrMissing) {
		t.Fatalf("Read begun after Remove: %v, want ErrMissing", err)
	}
	close(g.release)
	if err := <-readDone; err != nil {
		t.Fatalf("Read during Remove: %v", err)
	}
	if err := <-removeDone; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Files(dir)[fileName(0)]; ok {
		t.Fatal("file still there after Remove")
	}
	for _, fi := range l.Files() {
		if fi.Num == 0 {
			t.Fatal("Files lists the removed file")
		}
	}
}

// TestCompactOnline parks Compact in its read of the file it compacts:
// Appends, Syncs and Reads, of that file too, go on meanwhile. Then it
// parks it in the fdatasync of its copies: Appends and Reads go on.
func TestCompactOnline(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	g := newGate(dir + "/" + fileName(1))
	gs := newGateOn(errorfs.OpSync, "")
	l := open(t, errorfs.Wrap(m, gates{g, gs}), 2000)
	defer l.Close()
	e := scene(t, l)
	g.armed.Store(true)
	type result struct {
		moves []Move
		err   error
	}
	done := make(chan result)
	go func() {
		moves, err := l.Compact(1, e.live)
		done <- result{moves, err}
	}()
	<-g.parked
	more := appendN(t, l, 100, 130)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, append(more, e.entries()...)); err != nil {
		t.Fatalf("during Compact: %v", err)
	}
	gs.armed.Store(true)
	close(g.release)
	<-gs.parked
	during := appendN(t, l, 200, 210)
	if err := readBack(l, append(more, e.entries()...)); err != nil {
		t.Fatalf("during Compact's Sync: %v", err)
	}
	close(gs.release)
	res := <-done
	if res.err != nil || len(res.moves) == 0 {
		t.Fatalf("Compact: %d moves, %v", len(res.moves), res.err)
	}
	e.apply(res.moves)
	if err := l.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, append(append(more, during...), e.entries()...)); err != nil {
		t.Fatalf("after Compact: %v", err)
	}
}

// TestConcurrent runs appends with syncs, reads and compaction with
// removal at once (go test -race): every read returns its value, or
// ErrMissing for a ref whose file was removed after the engine moved it,
// in which case the new ref reads back.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 3000)
	defer l.Close()
	e := scene(t, l)
	// safe is the file below which every record's commit was applied:
	// only those files are compacted (see Compact).
	var safe atomic.Uint32
	safe.Store(l.Head())
	advanced := make(chan struct{}, 1)
	var compacted atomic.Int32
	rounds := 40
	if testing.Short() {
		rounds = 15
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	stop := make(chan struct{})
	wg.Add(3)
	go func() { // the committer: new values, synced, then published
		defer wg.Done()
		defer close(advanced)
		for i := range rounds {
			var es []entry
			for o := uint64(1000 + 10*i); o < uint64(1010+10*i); o++ {
				r, err := l.Append(o, kindOf(o), value(o))
				if err != nil {
					errs <- err
					return
				}
				es = append(es, entry{o, r})
			}
			if err := l.Sync(); err != nil {
				errs <- err
				return
			}
			e.mu.Lock()
			for _, en := range es {
				e.refs[en.owner] = en.ref
			}
			e.mu.Unlock()
			// Every append so far is applied; later ones go to the
			// last file or after it.
			safe.Store(es[len(es)-1].ref.File)
			select {
			case advanced <- struct{}{}:
			default:
			}
		}
	}()
	go func() { // a reader of everything
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for owner, r := range e.snapshot() {
				for {
					got, err := l.Read(r, owner, kindOf(owner), nil)
					if errors.Is(err, ErrMissing) {
						e.mu.Lock()
						moved := e.refs[owner]
						e.mu.Unlock()
						if moved != r {
							r = moved
							continue
						}
					}
					if err == nil && !bytes.Equal(got, value(owner)) {
						err = errors.New("wrong bytes")
					}
					if err != nil {
						errs <- fmt.Errorf("owner %d at %v: %w", owner, r, err)
						return
					}
					break
				}
			}
		}
	}()
	go func() { // the compactor, until the committer is done
		defer wg.Done()
		defer close(stop)
		for range advanced {
			for _, fi := range l.Files() {
				if fi.Num >= safe.Load() {
					break
				}
				if err := compactAndRemove(l, e, fi.Num); err != nil {
					errs <- fmt.Errorf("compacting %d: %w", fi.Num, err)
					return
				}
				compacted.Add(1)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := readBack(l, e.entries()); err != nil {
		t.Fatal(err)
	}
	if compacted.Load() == 0 {
		t.Fatal("nothing compacted")
	}
	t.Logf("%d files compacted", compacted.Load())
}

// TestCloseWaitsForRead: Close lets a running Read finish; calls after it
// fail with ErrClosed.
func TestCloseWaitsForRead(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	g := newGate(dir + "/" + fileName(0))
	l := open(t, errorfs.Wrap(m, g), 0)
	es := appendN(t, l, 1, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	readDone := make(chan error)
	go func() {
		got, err := l.Read(es[0].ref, es[0].owner, kindOf(es[0].owner), nil)
		if err == nil && !bytes.Equal(got, value(es[0].owner)) {
			err = errors.New("wrong bytes")
		}
		readDone <- err
	}()
	<-g.parked
	closeDone := make(chan error)
	go func() { closeDone <- l.Close() }()
	close(g.release)
	if err := <-readDone; err != nil {
		t.Fatalf("Read during Close: %v", err)
	}
	if err := <-closeDone; err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(es[1].ref, es[1].owner, kindOf(es[1].owner), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
}

// TestCloseDuringCompact: a Close while Compact is reading its file ends
// the Compact with ErrClosed, and both return.
func TestCloseDuringCompact(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	g := newGate(dir + "/" + fileName(1))
	l := open(t, errorfs.Wrap(m, g), 2000)
	e := scene(t, l)
	waiting := make(chan struct{})
	l.closeWaiting = func() { close(waiting) }
	g.armed.Store(true)
	done := make(chan error)
	go func() {
		_, err := l.Compact(1, e.live)
		done <- err
	}()
	<-g.parked
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	select {
	case <-waiting:
	case err := <-closed:
		t.Fatalf("Close returned %v during a Compact", err)
	}
	close(g.release)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact during Close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestCloseDuringRemove: a Remove waiting for a Read when Close comes
// gives up with ErrClosed and leaves the file; Close returns cleanly.
func TestCloseDuringRemove(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	g := newGate(dir + "/" + fileName(0))
	l := open(t, errorfs.Wrap(m, g), 600)
	es := appendN(t, l, 1, 20)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	removeWaiting, closeWaiting := make(chan struct{}), make(chan struct{})
	l.removeWaiting = func(uint32) { close(removeWaiting) }
	l.closeWaiting = func() { close(closeWaiting) }
	g.armed.Store(true)
	readDone := make(chan error)
	go func() {
		_, err := l.Read(es[0].ref, es[0].owner, kindOf(es[0].owner), nil)
		readDone <- err
	}()
	<-g.parked
	removeDone, closeDone := make(chan error), make(chan error)
	go func() { removeDone <- l.Remove(0) }()
	<-removeWaiting
	go func() { closeDone <- l.Close() }()
	<-closeWaiting
	close(g.release)
	if err := <-readDone; err != nil {
		t.Fatalf("Read: %v", err)
	}
	if err := <-removeDone; !errors.Is(err, ErrClosed) {
		t.Fatalf("Remove when Close came: %v, want ErrClosed", err)
	}
	if err := <-closeDone; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := m.Files(dir)[fileName(0)]; !ok {
		t.Fatal("file removed after Close")
	}
}
