//go:build linux

package fuzz

import (
	"bytes"
	"errors"
	"flag"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/docketdb/docket/engine"
)

var flipEvery = flag.Int("flip-every", 2, "TestBitFlips flips a bit in every Nth byte of every log segment and snapshot (1: every byte; 8 under the race detector unless set)")

// flipBase is a data directory to damage: a log over several segments, two
// snapshots, and records after the newest.
type flipBase struct {
	rec  *recording
	img  image
	last uint64 // the batch the undamaged directory recovers to
}

var (
	flipMu   sync.Mutex
	flipImgs = map[byte]*flipBase{}
)

// sharedFlipBase returns the damage base of configuration cfg (see
// crashConfigs), built once.
func sharedFlipBase(tb testing.TB, cfg byte) *flipBase {
	flipMu.Lock()
	defer flipMu.Unlock()
	if b, ok := flipImgs[cfg]; ok {
		if b == nil {
			tb.Fatal("building the damage base failed")
		}
		return b
	}
	flipImgs[cfg] = nil
	{
		o := recordOptions{seed: 42, ops: 100, segBytes: 600, weights: crashWorkload, cfg: cfg, lean: true}
		rec := record(tb, o)
		r := rec.r
		// Two checkpoints, with work after each, so that there is a fallback
		// snapshot and log to replay after the newest.
		var tail []byte
		work := [][]byte{
			ins(opEnqueue, 0, 0, 0, 1), ins(opClaim, 4, 0, 2, 1), ins(opKV, 0, 0x00), ins(opEnqueue, 1, 0x10, 0x01, 1),
			ins(opComplete, 0, 0), ins(opBatch, 0x0c, 1, 2, 3, 4), ins(opClaim, 4, 1, 2, 2), ins(opFail, 0, 0),
		}
		tail = append(tail, ins(opCheckpoint)...)
		for i := range 16 {
			tail = append(tail, work[i%len(work)]...)
		}
		tail = append(tail, ins(opCheckpoint)...)
		for i := range 12 {
			tail = append(tail, work[(i+3)%len(work)]...)
		}
		r.run(&program{data: tail}, len(tail)/opSize)
		img := capture(tb, r.dir)
		// The newest segment must hold records, so that flips in its last
		// record meet the torn-tail rule.
		for i := 0; i < 10; i++ {
			if _, starts := img.tailEntries(); len(starts) > 0 {
				break
			}
			r.run(&program{data: ins(opEnqueue, 0, 0, 0, 1)}, 1)
			img = capture(tb, r.dir)
		}
		if len(img.snapshots()) < 2 || len(img.segments()) < 2 {
			tb.Fatalf("the damage base has %d snapshots and %d segments", len(img.snapshots()), len(img.segments()))
		}
		last, _ := img.lastSeq()
		if last != r.m.Seq {
			tb.Fatalf("damage base: image ends at %d, model at %d", last, r.m.Seq)
		}
		if cfg&0x10 != 0 && len(img.valueFiles()) == 0 {
			tb.Fatal("the damage base has no value log")
		}
		flipImgs[cfg] = &flipBase{rec: rec, img: img, last: last}
	}
	return flipImgs[cfg]
}

// checkValueFlip flips one bit of value log file at off and reopens. Open
// reads no value and must succeed. When the flip hit a record the state
// refers to, Check must fail with ErrCorrupt naming the file and offset,
// Verify must fail, and a read must either fail or return the model's
// bytes, never others; when no task refers to the record, all must be as
// before. It reports which.
func (b *flipBase) checkValueFlip(t testing.TB, dir, file string, off int, bit uint) string {
	t.Helper()
	im := b.img.clone()
	data := bytes.Clone(im[file])
	data[off] ^= 1 << (bit % 8)
	im[file] = data
	im.materialize(t, dir)
	what := file + " with bit " + strconv.Itoa(int(bit%8)) + " of byte " + strconv.Itoa(off) + " flipped"
	opts := engine.Options{Clock: engine.NewManualClock(t0), SnapshotBytes: -1, Logger: quiet}
	b.rec.cfg.Apply(&opts)
	cseq, cerr := checkDir(dir)
	db, err := openDB(dir, opts)
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer db.Close()
	v, rerr := readView(db)
	verr := db.Verify()
	if rerr == nil {
		if d := Diff(v.String(), b.rec.views[b.last]); d != "" {
			t.Fatalf("%s: read back a state the model never had: %s", what, d)
		}
	}
	if cerr == nil {
		if rerr != nil || verr != nil || cseq != b.last {
			t.Fatalf("%s: Check finds no lost value (batch %d), but read says %v and Verify %v", what, cseq, rerr, verr)
		}
		return "no task refers to it"
	}
	if !errors.Is(cerr, engine.ErrCorrupt) || !strings.Contains(cerr.Error(), filepath.Base(file)) || !strings.Contains(cerr.Error(), "offset") {
		t.Fatalf("%s: check: %v, want ErrCorrupt naming the file and offset", what, cerr)
	}
	if !errors.Is(verr, engine.ErrCorrupt) {
		t.Fatalf("%s: Check says %v, Verify %v", what, cerr, verr)
	}
	if rerr == nil {
		return "lost, not read"
	}
	return "lost, read refused"
}

// checkFlip flips one bit of file at off and reopens: Open must refuse with
// ErrCorrupt naming the file and the offset, or recover the model's state
// after some batch - all of them, or all but the last if the flip hit the
// last record (indistinguishable from a torn write). It reports which.
func (b *flipBase) checkFlip(t testing.TB, dir, file string, off int, bit uint) string {
	t.Helper()
	im := b.img.clone()
	data := bytes.Clone(im[file])
	data[off] ^= 1 << (bit % 8)
	im[file] = data
	im.materialize(t, dir)
	what := func() string {
		return file + " with bit " + strconv.Itoa(int(bit%8)) + " of byte " + strconv.Itoa(off) + " flipped"
	}
	opts := engine.Options{Clock: engine.NewManualClock(t0), SnapshotBytes: -1, Logger: quiet}
	b.rec.cfg.Apply(&opts)
	// verify must agree with Open about every damaged directory.
	cseq, cerr := checkDir(dir)
	db, err := openDB(dir, opts)
	if (err == nil) != (cerr == nil) {
		if db != nil {
			db.Close()
		}
		t.Fatalf("%s: Open says %v, Check says %v", what(), err, cerr)
	}
	if err != nil {
		if !errors.Is(err, engine.ErrCorrupt) {
			t.Fatalf("%s: open: %v, want ErrCorrupt", what(), err)
		}
		if !strings.Contains(err.Error(), filepath.Base(file)) || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("%s: the error does not name the file and offset: %v", what(), err)
		}
		return "refused"
	}
	defer db.Close()
	v, err := readView(db)
	if err != nil {
		t.Fatalf("%s: read: %v", what(), err)
	}
	if d := Diff(v.String(), b.rec.views[v.Seq]); d != "" {
		t.Fatalf("%s: recovered a state the model never had (batch %d): %s", what(), v.Seq, d)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("%s: verify: %v", what(), err)
	}
	if cseq != v.Seq {
		t.Fatalf("%s: Open recovered batch %d, Check batch %d", what(), v.Seq, cseq)
	}
	switch v.Seq {
	case b.last:
		return "recovered"
	case b.last - 1:
		if tail, starts := b.img.tailEntries(); tail == file && len(starts) > 0 && off >= starts[len(starts)-1] {
			return "recovered all but the damaged last record"
		}
	}
	t.Fatalf("%s: recovered only up to batch %d of %d", what(), v.Seq, b.last)
	return ""
}

// TestBitFlips flips one bit in every -flip-every'th byte of every log
// segment and snapshot of a directory with two snapshots and a log over
// several segments.
func TestBitFlips(t *testing.T) {
	t.Parallel()
	eachConfig(t, func(t *testing.T, cfg byte) {
		b := sharedFlipBase(t, cfg)
		dir := scratchDir(t)
		outcomes := map[string]int{}
		every := shortOr("flip-every", flagOr("flip-every", *flipEvery, 8), 97)
		for _, file := range append(b.img.segments(), b.img.snapshots()...) {
			for off := 0; off < len(b.img[file]); off += every {
				outcomes[b.checkFlip(t, dir, file, off, uint(off/every))]++
			}
		}
		// The value log's files are smaller: a shorter stride under -short.
		vevery := shortOr("flip-every", flagOr("flip-every", *flipEvery, 8), 29)
		for _, file := range b.img.valueFiles() {
			for off := 0; off < len(b.img[file]); off += vevery {
				outcomes["value log: "+b.checkValueFlip(t, dir, file, off, uint(off/vevery))]++
			}
		}
		t.Logf("%d segments, %d snapshots, %d value log files, batch %d: %v", len(b.img.segments()), len(b.img.snapshots()),
			len(b.img.valueFiles()), b.last, outcomes)
	})
}

// FuzzLogBitFlip flips one bit at a fuzzed offset of a log segment.
func FuzzLogBitFlip(f *testing.F) {
	for _, s := range [][3]uint32{{0, 0, 0}, {0, 1, 7}, {1, 5, 3}, {9, 1 << 20, 1}, {255, 13, 4}, {2, 100, 6}} {
		f.Add(uint8(s[0]), s[1], uint8(s[2]))
	}
	b := sharedFlipBase(f, 0x09)
	dir := scratchDir(f)
	f.Fuzz(func(t *testing.T, seg uint8, off uint32, bit uint8) {
		segs := b.img.segments()
		file := segs[int(seg)%len(segs)]
		if len(b.img[file]) == 0 {
			return
		}
		b.checkFlip(t, dir, file, int(off%uint32(len(b.img[file]))), uint(bit))
	})
}

// FuzzSnapshotBitFlip flips one bit at a fuzzed offset of a snapshot.
func FuzzSnapshotBitFlip(f *testing.F) {
	for _, s := range [][3]uint32{{0, 0, 0}, {1, 0, 0}, {0, 20, 2}, {1, 30, 7}, {1, 1 << 16, 5}, {0, 9, 1}} {
		f.Add(uint8(s[0]), s[1], uint8(s[2]))
	}
	b := sharedFlipBase(f, 0x09)
	dir := scratchDir(f)
	f.Fuzz(func(t *testing.T, which uint8, off uint32, bit uint8) {
		snaps := b.img.snapshots()
		file := snaps[int(which)%len(snaps)]
		b.checkFlip(t, dir, file, int(off%uint32(len(b.img[file]))), uint(bit))
	})
}
