package cluster

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

// The crash sweeps of the LogStore: the same damage the wal and the
// engine's log are swept with (a cut at every byte an append wrote, a flip
// of every bit, a failure at every failpoint hit), through the LogStore,
// checked against a model of the entries it must hold. -short runs a
// sample of each sweep; the full run (.ci/run) runs them all.

var (
	lsCutEvery = flag.Int("logstore-cut-every", 0,
		"TestLogStoreCutAtEveryByte cuts at every Nth byte (default 1, 37 with -short)")
	lsFlipEvery = flag.Int("logstore-flip-every", 0,
		"TestLogStoreBitFlips flips every Nth bit (default 7, which flips a bit of every byte, 61 with -short)")
)

// every returns the flag's value, or def, or short with -short.
func every(v, def, short int) int {
	switch {
	case v > 0:
		return v
	case testing.Short():
		return short
	}
	return def
}

// lsSegment is small, so the workload spans many segments and truncations
// cross them.
const lsSegment = 256

// lsEntry is entry i as written by version v of the log (a rewritten
// suffix is a later version), with data of varied length.
func lsEntry(i uint64, v int) *raft.Log {
	data := bytes.Repeat([]byte{byte(i), byte(v)}, int(i*37+uint64(v)*11)%40/2)
	return &raft.Log{Index: i, Term: uint64(v), Type: raft.LogCommand, Data: append(fmt.Appendf(nil, "%d/%d:", i, v), data...)}
}

func lsEntries(from, to uint64, v int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, lsEntry(i, v))
	}
	return out
}

// lsOp is one call of the workload: StoreLogs(store), or DeleteRange(min,
// max) when store is nil.
type lsOp struct {
	store    []*raft.Log
	min, max uint64
}

// lsWorkload appends in batches of every size, compacts the front,
// replaces a conflicting suffix with a later term, jumps past a gap (a
// snapshot install), empties the log and starts again elsewhere.
func lsWorkload() []lsOp {
	return []lsOp{
		{store: lsEntries(1, 1, 1)},
		{store: lsEntries(2, 6, 1)},
		{store: lsEntries(7, 24, 1)},
		{min: 1, max: 3},
		{store: lsEntries(25, 34, 1)},
		{min: 31, max: 34},
		{store: lsEntries(31, 40, 2)},
		{min: 4, max: 28},
		{store: lsEntries(60, 70, 3)},
		{store: lsEntries(71, 80, 3)},
		{min: 60, max: 80},
		{store: lsEntries(100, 115, 4)},
		{min: 112, max: 115},
		{store: lsEntries(112, 120, 5)},
	}
}

// lsModel is what a LogStore holds: a contiguous run of entries.
type lsModel struct {
	first, last uint64 // 0, 0 when empty
	e           map[uint64]*raft.Log
}

func (m lsModel) clone() lsModel {
	c := lsModel{first: m.first, last: m.last, e: map[uint64]*raft.Log{}}
	for i, e := range m.e {
		c.e[i] = e
	}
	return c
}

// keep returns m cut to first..last (empty when first > last).
func (m lsModel) keep(first, last uint64) lsModel {
	c := lsModel{e: map[uint64]*raft.Log{}}
	if m.last == 0 || first > last {
		return c
	}
	first, last = max(first, m.first), min(last, m.last)
	if first > last {
		return c
	}
	c.first, c.last = first, last
	for i := first; i <= last; i++ {
		c.e[i] = m.e[i]
	}
	return c
}

// with returns m with entries es appended, or, when they do not follow,
// replacing everything (the LogStore's reset after a snapshot).
func (m lsModel) with(es []*raft.Log) lsModel {
	c := m.clone()
	if len(es) == 0 {
		return c
	}
	if m.last == 0 || es[0].Index != m.last+1 {
		c = lsModel{first: es[0].Index, e: map[uint64]*raft.Log{}}
	}
	for _, e := range es {
		c.e[e.Index] = e
		c.last = e.Index
	}
	return c
}

func (m lsModel) apply(op lsOp) lsModel {
	if op.store != nil {
		return m.with(op.store)
	}
	switch {
	case m.last == 0 || op.max < m.first || op.min > m.last:
		return m.clone()
	case op.min <= m.first:
		return m.keep(op.max+1, m.last)
	}
	return m.keep(m.first, op.min-1)
}

// outcomes lists what a LogStore may hold after op failed or was cut short
// on a store holding m: op not done, done, or (an append) a prefix of it
// done; a truncation is done or not.
func (m lsModel) outcomes(op lsOp) []lsModel {
	out := []lsModel{m, m.apply(op)}
	if op.store != nil {
		base := m
		if m.last == 0 || op.store[0].Index != m.last+1 {
			base = lsModel{e: map[uint64]*raft.Log{}}
			out = append(out, base)
		}
		for j := 1; j < len(op.store); j++ {
			out = append(out, base.with(op.store[:j]))
		}
	}
	return out
}

// held reads what s holds.
func held(t testing.TB, s *LogStore) lsModel {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	m := lsModel{first: first, last: last, e: map[uint64]*raft.Log{}}
	for i := first; last != 0 && i <= last; i++ {
		var e raft.Log
		if err := s.GetLog(i, &e); err != nil {
			t.Fatalf("GetLog(%d) of a store holding %d..%d: %v", i, first, last, err)
		}
		m.e[i] = &e
	}
	return m
}

func (m lsModel) equal(o lsModel) bool {
	if m.first != o.first || m.last != o.last {
		return false
	}
	for i := m.first; m.last != 0 && i <= m.last; i++ {
		if !reflect.DeepEqual(m.e[i], o.e[i]) {
			return false
		}
	}
	return true
}

func (m lsModel) String() string { return fmt.Sprintf("%d..%d", m.first, m.last) }

// lsFS is the file system the sweeps' directories live on: in memory, so
// that the thousands of directories they write and reopen cost no system
// call and no fsync of a real disk.
var lsFS = vfs.NewMem()

var lsSeq atomic.Int64

// lsDir returns the path of a fresh log directory on lsFS, removed after
// the test.
func lsDir(t testing.TB) string {
	t.Helper()
	parent := fmt.Sprintf("/logstore/%d", lsSeq.Add(1))
	t.Cleanup(func() { lsFS.RemoveAll(parent) })
	return parent + "/log"
}

// lsOptions returns the wal options of the sweeps' stores, on lsFS.
func lsOptions(fp func(string) error) wal.Options {
	return wal.Options{SegmentSize: lsSegment, FS: lsFS, Failpoint: fp}
}

// dirImage is a directory's files by name.
type dirImage map[string][]byte

func readImage(t testing.TB, dir string) dirImage {
	t.Helper()
	if _, err := lsFS.Stat(dir); err != nil {
		t.Fatal(err)
	}
	im := dirImage(lsFS.Files(dir))
	// The zeros an open log keeps after its tail's records are spare
	// space, not records: the image is the log without them, so that each
	// step only appends to the files.
	rep, err := wal.CheckFromFS(lsFS, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if names := im.names(); rep.Spare > 0 && len(names) > 0 {
		tail := names[len(names)-1]
		im[tail] = im[tail][:int64(len(im[tail]))-rep.Spare]
	}
	return im
}

// put makes dir hold exactly im, writing only the files that differ: the
// sweeps reuse one directory.
func (im dirImage) put(t testing.TB, dir string) {
	t.Helper()
	if err := lsFS.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cur := lsFS.Files(dir)
	for name := range cur {
		if _, ok := im[name]; !ok {
			if err := lsFS.Remove(path.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range im {
		if c, ok := cur[name]; ok && bytes.Equal(c, b) {
			continue
		}
		f, err := lsFS.OpenFile(path.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err == nil {
			_, err = f.Write(b)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (im dirImage) names() []string {
	var out []string
	for n := range im {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// lsStep is one call of the recorded workload with the directory before
// and after it.
type lsStep struct {
	op            lsOp
	before, after lsModel
	from, to      dirImage
}

// recordLS runs the workload on a fresh LogStore, keeping every directory
// image.
func recordLS(t testing.TB) []lsStep {
	t.Helper()
	dir := lsDir(t)
	s := openStore(t, dir, lsOptions(nil))
	defer s.Close()
	m := lsModel{e: map[uint64]*raft.Log{}}
	var steps []lsStep
	for _, op := range lsWorkload() {
		st := lsStep{op: op, before: m, from: readImage(t, dir)}
		var err error
		if op.store != nil {
			err = s.StoreLogs(op.store)
		} else {
			err = s.DeleteRange(op.min, op.max)
		}
		if err != nil {
			t.Fatalf("workload: %v", err)
		}
		m = m.apply(op)
		if got := held(t, s); !got.equal(m) {
			t.Fatalf("workload: the store holds %v, the model %v", got, m)
		}
		st.after, st.to = m, readImage(t, dir)
		steps = append(steps, st)
	}
	return steps
}

// appendSpans returns, in log order, the bytes [from, to) of each file that
// the step from a to b appended, if appending is all it did.
func appendSpans(a, b dirImage) (names []string, from, to []int, ok bool) {
	for n, x := range a {
		if y, found := b[n]; !found || !bytes.HasPrefix(y, x) {
			return nil, nil, nil, false
		}
	}
	for _, n := range b.names() {
		if len(b[n]) > len(a[n]) || a[n] == nil {
			names, from, to = append(names, n), append(from, len(a[n])), append(to, len(b[n]))
		}
	}
	return names, from, to, true
}

// reopenCheck opens dir and requires it to hold one of want; with more
// set it then stores the entries that follow and requires them held across
// a reopen. It returns the outcome held.
func reopenCheck(t *testing.T, dir string, want []lsModel, what string, more bool) lsModel {
	t.Helper()
	s, err := OpenLogStore(dir, lsOptions(nil))
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	got := held(t, s)
	if !slices.ContainsFunc(want, got.equal) {
		s.Close()
		t.Fatalf("%s: the store holds %v, want one of %v", what, got, want)
	}
	if !more {
		s.Close()
		return got
	}
	next := got.last + 1
	if got.last == 0 {
		next = 1000
	}
	es := lsEntries(next, next+4, 9)
	if err := s.StoreLogs(es); err != nil {
		t.Fatalf("%s: store after recovery: %v", what, err)
	}
	s.Close()
	s = openStore(t, dir, lsOptions(nil))
	defer s.Close()
	if after := held(t, s); !after.equal(got.with(es)) {
		t.Fatalf("%s: after recovery and %d more entries the store holds %v, want %v", what, len(es), after, got.with(es))
	}
	return got
}

// TestLogStoreCutAtEveryByte cuts every append of the workload at every
// byte it wrote (the directory as a crash in the middle of StoreLogs
// leaves it) and reopens: the store holds what it held before plus the
// entries written whole before the cut, in order and unchanged; after
// every 8th cut and the last of each append it also takes further entries
// and keeps them across a reopen. With -short, every 37th byte and the
// last of each append.
func TestLogStoreCutAtEveryByte(t *testing.T) {
	step := every(*lsCutEvery, 1, 37)
	dir := lsDir(t)
	cuts := 0
	for i, st := range recordLS(t) {
		names, from, to, ok := appendSpans(st.from, st.to)
		if !ok {
			continue // a truncation: the failpoint sweep covers it
		}
		total := 0
		for k := range names {
			total += to[k] - from[k]
		}
		prev := -1
		for k := 0; k <= total; k++ {
			if k%step != 0 && k != total {
				continue
			}
			im := dirImage{}
			for n, b := range st.from {
				im[n] = b
			}
			left := k
			for j, n := range names {
				take := min(left, to[j]-from[j])
				left -= take
				if take == 0 && from[j] == 0 {
					delete(im, n) // not created yet
					continue
				}
				im[n] = st.to[n][:from[j]+take]
			}
			im.put(t, dir)
			got := reopenCheck(t, dir, st.before.outcomes(st.op), fmt.Sprintf("step %d cut at %d of %d", i, k, total),
				cuts%8 == 0 || k == total)
			n := 0
			if got.last != 0 && got.last >= st.op.store[0].Index {
				n = int(got.last-st.op.store[0].Index) + 1
			}
			if n < prev || k == total && n != len(st.op.store) || k < total && n == len(st.op.store) {
				t.Fatalf("step %d cut at %d of %d: %d of %d entries held (%d at the cut before)", i, k, total, n, len(st.op.store), prev)
			}
			prev = n
			cuts++
		}
	}
	t.Logf("%d cuts", cuts)
}

// TestLogStoreBitFlips flips every bit of every segment of the workload's
// final directory: the store refuses to open (ErrCorrupt) or, for a flip
// in the last record of the last segment, which a torn write looks like,
// opens without that record; it never returns an altered entry. It flips
// every 7th bit, a bit of every byte at a moving position (every bit with
// -logstore-flip-every=1); with -short, every 61st.
func TestLogStoreBitFlips(t *testing.T) {
	step := every(*lsFlipEvery, 7, 61)
	dir := lsDir(t)
	steps := recordLS(t)
	final := steps[len(steps)-1]
	refused, cut := 0, 0
	names := final.to.names()
	for _, name := range names {
		for bit := range len(final.to[name]) * 8 {
			if bit%step != 0 {
				continue
			}
			im := dirImage{}
			for n, b := range final.to {
				im[n] = b
			}
			b := bytes.Clone(final.to[name])
			b[bit/8] ^= 1 << (bit % 8)
			im[name] = b
			what := fmt.Sprintf("%s bit %d", name, bit)
			im.put(t, dir)
			s, err := OpenLogStore(dir, lsOptions(nil))
			if err != nil {
				if !errors.Is(err, wal.ErrCorrupt) {
					t.Fatalf("%s: open: %v, want ErrCorrupt", what, err)
				}
				refused++
				continue
			}
			got := held(t, s)
			s.Close()
			want := final.after.keep(final.after.first, final.after.last-1)
			if name != names[len(names)-1] || !got.equal(want) {
				t.Fatalf("%s: opened holding %v, want a refusal or %v", what, got, want)
			}
			cut++
		}
	}
	t.Logf("%d flips refused, %d cut as a torn last record", refused, cut)
	if refused == 0 {
		t.Fatal("no flip was refused")
	}
}

// lsFailpoints are the wal's failpoints the LogStore's calls pass.
var lsFailpoints = []string{"append.write", "segment.create", "sync", "sync.after", "truncate", "truncate.back", "reset.remove"}

// TestLogStoreFailpoints fails the workload at every hit of every wal
// failpoint: the call fails (the store must then be closed, as raft stops
// on a storage error), and reopening holds what the store held before the
// call, or after it, or, for an append, before it plus a prefix of its
// entries; the store then takes further entries. With -short, the first
// and last hit of each failpoint.
func TestLogStoreFailpoints(t *testing.T) {
	hits := map[string]int{}
	runLS(t, func(name string) error { hits[name]++; return nil }, -1)
	runs := 0
	for _, name := range lsFailpoints {
		if hits[name] == 0 {
			t.Fatalf("the workload never reaches failpoint %s", name)
		}
		for n := 1; n <= hits[name]; n++ {
			if testing.Short() && n != 1 && n != hits[name] {
				continue
			}
			seen := 0
			injected := errors.New("injected")
			fp := func(point string) error {
				if point == name {
					if seen++; seen == n {
						return injected
					}
				}
				return nil
			}
			dir, want, failed := runLS(t, fp, 0)
			if !failed {
				t.Fatalf("%s hit %d: no call failed", name, n)
			}
			reopenCheck(t, dir, want, fmt.Sprintf("%s hit %d", name, n), true)
			runs++
		}
	}
	t.Logf("%d failpoint runs over %v", runs, hits)
}

// runLS runs the workload with failpoint fp until a call fails, and
// returns the directory, the outcomes allowed after the failed call, and
// whether one failed. stopAt < 0 runs it all whatever happens.
func runLS(t *testing.T, fp func(string) error, stopAt int) (string, []lsModel, bool) {
	t.Helper()
	dir := lsDir(t)
	s, err := OpenLogStore(dir, lsOptions(fp))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := lsModel{e: map[uint64]*raft.Log{}}
	for _, op := range lsWorkload() {
		if op.store != nil {
			err = s.StoreLogs(op.store)
		} else {
			err = s.DeleteRange(op.min, op.max)
		}
		if err != nil {
			if stopAt < 0 {
				t.Fatalf("a counting run failed: %v", err)
			}
			return dir, m.outcomes(op), true
		}
		m = m.apply(op)
	}
	return dir, []lsModel{m}, false
}
