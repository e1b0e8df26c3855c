//go:build linux

package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// A recording is one run of a program under SyncAlways with snapshots only
// where the program asks for them, and everything needed to judge any crash
// of it: the model's state after every batch, a copy of the data directory
// at every failpoint the log and snapshot code pass and after every
// instruction, and what of it was durable at each of those moments.
type recording struct {
	tb     testing.TB
	r      *runner
	cfg    Config
	views  map[uint64]string // the model's rendered state after each batch
	models map[uint64]*Model // and the model itself, to continue from there
	events []*event
	ops    []*event // the event after each instruction, in order
	dur    durability
	rng    *rand.Rand
	open   int   // events of the current instruction not yet finalised
	start  image // the directory before the first instruction
	// injected is the moment a failpoint was failed, if one was.
	injected *event
	clock    *engine.ManualClock // of the DB checkImage opened last
}

// event is one moment of the recorded run at which a crash is judged.
type event struct {
	name    string // the failpoint, "op" after an instruction, "open"
	op      int    // index of the instruction running
	desc    string // the instruction's history line (filled at its end)
	img     image  // the directory as a killed process would leave it
	ack     uint64 // newest batch acknowledged before this moment
	applied uint64 // newest batch that may have been written by then
	// power holds the directory as a power loss at this moment could
	// leave it, by kind of loss.
	power map[string]image
}

// recordOptions tune a recording.
type recordOptions struct {
	seed     uint64
	ops      int
	segBytes int
	weights  [numOps]int
	cfg      byte
	// inject, if set, is asked at every failpoint (with how many times that
	// point was passed, this time included) whether to fail it.
	inject func(name string, hit int) bool
	// injectOp, if set, is asked at every file operation that changes the
	// data directory while the DB is open (not while Open runs), with how
	// many came so far, this one included, whether to fail it.
	injectOp func(op errorfs.Op, n int) bool
	// lean captures the directory only where inject fails a point, not at
	// every failpoint and instruction.
	lean bool
	// dur is the durability mode (SyncAlways by default).
	dur engine.Durability
}

// crashWorkload is the recorded workload: the usual mix with explicit
// checkpoints and reopens (snapshots happen only there).
var crashWorkload = [numOps]int{
	opEnqueue: 20, opBatch: 5, opClaim: 16, opComplete: 14, opFail: 7, opHeartbeat: 5, opSnooze: 2,
	opCancel: 2, opRedrive: 2, opKV: 6, opAdvance: 5, opCheckpoint: 3, opReopen: 1, opForged: 2, opRead: 1,
}

func record(tb testing.TB, o recordOptions) *recording {
	tb.Helper()
	prog := genProgram(rand.New(rand.NewPCG(o.seed, 7)), o.ops, o.weights, o.cfg)
	rec := &recording{tb: tb, cfg: programConfig(prog[0]), views: map[uint64]string{}, models: map[uint64]*Model{},
		rng: rand.New(rand.NewPCG(o.seed, 11))}
	rc := runConfig{name: fmt.Sprintf("record/%s/seed=%d", o.dur, o.seed), dur: o.dur, snapBytes: -1, segBytes: o.segBytes}
	var mu sync.Mutex // failpoints run on the committing goroutine; keep the race detector informed
	hits := map[string]int{}
	nOps := 0
	fsys := errorfs.Wrap(scratch, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.r == nil {
			return nil
		}
		rec.observe(op)
		if o.injectOp == nil || !changes(op.Kind) || rec.r.opening.Load() {
			return nil
		}
		nOps++
		if !o.injectOp(op, nOps) {
			return nil
		}
		rec.injected = rec.event(op.Kind.String() + " " + strings.TrimPrefix(op.Path, rec.r.dir+"/"))
		return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: errInjected}
	}))
	rec.r = newRunnerFS(tb, rc, rec.cfg, "", fsys, func(opts *engine.Options) {
		opts.SyncEvery = time.Hour // SyncInterval: no background fsync during the run
		enginetest.Failpoint(opts, func(name string) error {
			mu.Lock()
			defer mu.Unlock()
			if rec.r == nil {
				return nil
			}
			hits[name]++
			fail := o.inject != nil && o.inject(name, hits[name])
			if fail || !o.lean {
				e := rec.event(name)
				if fail {
					rec.injected = e
					return errInjected
				}
			}
			return nil
		})
	})
	r := rec.r
	r.faults = o.inject != nil || o.injectOp != nil
	rec.views[0], rec.models[0] = r.view().String(), r.m.Clone()
	r.m.OnBatch = func(m *Model) {
		rec.views[m.Seq] = m.View(queues, allNS).String()
		rec.models[m.Seq] = m.Clone()
	}
	rec.start = capture(tb, r.dir)
	rec.dur.reset(rec.start)
	r.onOpen = func() {
		rec.event("open")
		rec.dur.reset(rec.events[len(rec.events)-1].img)
	}
	r.afterOp = func(i int) {
		if o.lean {
			for _, x := range rec.events[rec.open:] {
				x.applied, x.desc = r.m.Seq, r.hist[len(r.hist)-1]
			}
			rec.open = len(rec.events)
			return
		}
		e := rec.event("op")
		for _, x := range rec.events[rec.open:] {
			x.applied = r.m.Seq
			x.desc = r.hist[len(r.hist)-1]
		}
		rec.open = len(rec.events)
		rec.ops = append(rec.ops, e)
	}
	r.run(&program{data: prog, pos: 1}, o.ops)
	return rec
}

var errInjected = errors.New("injected I/O error")

// changes reports whether an operation of kind k changes what a file
// system holds: the ones an op sweep fails.
func changes(k errorfs.OpKind) bool {
	switch k {
	case errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpDirSync, errorfs.OpTruncate,
		errorfs.OpRename, errorfs.OpRemove, errorfs.OpMkdir:
		return true
	}
	return false
}

// observe follows, from the file operations the DB makes, what of the
// value log is durable: it has no failpoints, and its fsyncs come before
// the log's (a batch is never more durable than the values it refers to).
// A file's content is durable once fsynced, its directory entry once the
// directory is.
func (rec *recording) observe(op errorfs.Op) {
	d := &rec.dur
	rel, ok := strings.CutPrefix(op.Path, rec.r.dir+"/")
	if d.data == nil || !ok {
		return
	}
	switch {
	case op.Kind == errorfs.OpSync && inDir(rel, "vlog"):
		if b, err := vfs.ReadFile(scratch, op.Path); err == nil {
			d.data[rel] = b
		}
	case op.Kind == errorfs.OpDirSync && rel == "vlog":
		ents, _ := scratch.ReadDir(op.Path)
		for _, e := range ents {
			d.names["vlog/"+e.Name()] = true
		}
	}
}

// event captures the directory now, with its power-loss variants, and then
// updates what is durable according to what the failpoint says happened.
func (rec *recording) event(name string) *event {
	r := rec.r
	e := &event{name: name, op: r.ops - 1, img: capture(rec.tb, r.dir), ack: r.ackSeq, applied: r.m.Seq}
	rec.dur.cycled(e.img)
	e.power = rec.dur.variants(name, e.img, rec.rng)
	rec.events = append(rec.events, e)
	rec.dur.after(name, e.img)
	return e
}

// durability tracks, from the failpoints the log and snapshot code pass,
// which directory entries and which file contents an fsync has made
// durable. The failpoints sit right before or after each fsync:
//
//	log:      "append.write" (write next), "sync" (fsync next), "sync.after",
//	          "segment.create" (directory fsync next), "truncate" (directory
//	          fsync next; the rewritten segment was fsynced before its rename)
//	snapshot: "write.middle", "sync.before" (file fsync next),
//	          "rename.before" (file fsynced), "rename.after" (directory fsync
//	          next), "dirsync.after"
//
// tidwall/wal fsyncs a segment before it starts the next one, so only the
// newest segment can hold unsynced data.
type durability struct {
	names map[string]bool   // directory entries known durable
	data  map[string][]byte // content known durable, by path
}

func (d *durability) reset(im image) {
	d.names, d.data = map[string]bool{}, map[string][]byte{}
	for p, b := range im {
		d.names[p], d.data[p] = true, b
	}
}

func inDir(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// cycled records that every segment but the newest is durable: tidwall/wal
// fsyncs a segment before it starts the next one.
func (d *durability) cycled(im image) {
	segs := im.segments()
	for _, p := range segs[:max(len(segs)-1, 0)] {
		d.data[p] = im[p]
	}
}

// after updates the durable state once the step that follows the failpoint
// name has run (the failpoints return nil while recording).
func (d *durability) after(name string, im image) {
	switch name {
	case "sync.after":
		for _, p := range im.segments() {
			d.data[p] = im[p]
		}
	case "segment.create", "truncate":
		// Segments before the newest were fsynced when the next one was
		// started; a truncation fsyncs the segment it rewrites (under a new
		// name) before renaming it into place.
		segs := im.segments()
		for i, p := range segs {
			if i < len(segs)-1 || (name == "truncate" && !d.names[p]) {
				d.data[p] = im[p]
			}
		}
		for p := range d.names {
			if inDir(p, "wal") {
				if _, ok := im[p]; !ok {
					delete(d.names, p)
					delete(d.data, p)
				}
			}
		}
		for p := range im {
			if inDir(p, "wal") {
				d.names[p] = true
			}
		}
	case "rename.before":
		for p, b := range im {
			if inDir(p, "snap") && strings.HasSuffix(p, ".tmp") {
				d.data[p] = b
				d.data[strings.TrimSuffix(p, ".tmp")+".snap"] = b
			}
		}
	case "dirsync.after":
		for p := range d.names {
			if inDir(p, "snap") {
				if _, ok := im[p]; !ok {
					delete(d.names, p)
				}
			}
		}
		for p := range im {
			if inDir(p, "snap") {
				d.names[p] = true
			}
		}
	case "op":
		// Prune removes old snapshots and fsyncs the directory right after
		// "dirsync.after", without a failpoint of its own.
		for p := range d.names {
			if inDir(p, "snap") {
				if _, ok := im[p]; !ok {
					delete(d.names, p)
				}
			}
		}
	}
}

// variants returns the directory as a power loss at a moment with current
// content im could leave it:
//
//	"lost":    everything not fsynced is gone: contents back to their last
//	           fsync, directory entries back to their last directory fsync
//	"partial": as "lost", but unsynced appends survive in part, and a new
//	           segment's directory entry survives with part of its data
//	"zeroed":  unsynced appends keep their length but read as zeros
//	"entries": file data as written, but entries created since the last
//	           directory fsync are missing
//
// Directory changes are taken to reach the disk in order (as journaling
// file systems commit them), so "partial" keeps a new segment only when its
// creation was the last change: not at "truncate", whose rename of the
// rewritten segment follows the removal of the old ones.
func (d *durability) variants(name string, im image, rng *rand.Rand) map[string]image {
	out := map[string]image{"lost": {}, "partial": {}, "zeroed": {}, "entries": {}}
	for p := range d.names {
		cur, exists := im[p]
		dur := d.data[p]
		out["lost"][p] = dur
		out["entries"][p] = dur
		out["partial"][p] = dur
		out["zeroed"][p] = dur
		if exists && extends(cur, dur) && len(cur) > len(dur) {
			extra := len(cur) - len(dur)
			out["partial"][p] = cur[:len(dur)+rng.IntN(extra+1)]
			out["zeroed"][p] = append(bytes.Clone(dur), make([]byte, extra)...)
			out["entries"][p] = cur
		}
	}
	if segs := im.segments(); len(segs) > 0 && name != "truncate" {
		if p := segs[len(segs)-1]; !d.names[p] {
			out["partial"][p] = im[p][:rng.IntN(len(im[p])+1)]
		}
	}
	return out
}

// checkImage opens a copy of im and requires the recovered state to be
// exactly what the log and snapshots in it hold (every valid record kept,
// only a torn tail dropped), to include every acknowledged batch, to be
// one the model went through, and to verify. It returns the recovered
// sequence number, with the DB left open in db when keep is set.
func (rec *recording) checkImage(tb testing.TB, dir string, im image, ack, applied uint64, what string, keep bool) (uint64, *engine.DB) {
	tb.Helper()
	want, ok := im.lastSeq()
	if !ok {
		tb.Fatalf("%s: the segments in the image do not follow one another: the engine left a gap", what)
	}
	if want < ack {
		tb.Fatalf("%s: the image holds batches up to %d, but %d was acknowledged: acknowledged data never reached the disk (or was not made durable)",
			what, want, ack)
	}
	im.materialize(tb, dir)
	rec.clock = engine.NewManualClock(t0)
	opts := engine.Options{Clock: rec.clock, SnapshotBytes: -1, Logger: quiet}
	rec.cfg.Apply(&opts)
	// verify first: Open cuts a torn tail, verify must judge it as it is.
	cseq, cerr := checkDir(dir)
	db, err := openDB(dir, opts)
	if err != nil {
		tb.Fatalf("%s: open: %v", what, err)
	}
	v, err := readView(db)
	if err != nil {
		db.Close()
		tb.Fatalf("%s: read: %v", what, err)
	}
	if cerr != nil || cseq != v.Seq {
		db.Close()
		tb.Fatalf("%s: Open recovered batch %d, but Check says batch %d, %v", what, v.Seq, cseq, cerr)
	}
	switch {
	case v.Seq != want:
		db.Close()
		tb.Fatalf("%s: recovered to batch %d, the image holds valid batches up to %d (acknowledged %d, written at most %d)",
			what, v.Seq, want, ack, applied)
	case v.Seq > applied:
		db.Close()
		tb.Fatalf("%s: recovered to batch %d, but at most %d were written", what, v.Seq, applied)
	}
	if d := Diff(v.String(), rec.views[v.Seq]); d != "" {
		db.Close()
		tb.Fatalf("%s: recovered state is not the model's after batch %d: %s", what, v.Seq, d)
	}
	if err := db.Verify(); err != nil {
		db.Close()
		tb.Fatalf("%s: verify: %v", what, err)
	}
	if keep {
		return v.Seq, db
	}
	if err := db.Close(); err != nil && !errors.Is(err, engine.ErrFailed) {
		tb.Fatalf("%s: close: %v", what, err)
	}
	return v.Seq, nil
}

// continueFrom runs more instructions on a DB recovered to batch seq,
// against the model as it was then, crashes again (copies the directory
// while the DB is open, cut at a random point of what was appended), and
// checks that recovery too.
func (rec *recording) continueFrom(db *engine.DB, dir string, seq uint64, n int, rng *rand.Rand, what string) {
	tb := rec.tb
	tb.Helper()
	m := rec.models[seq].Clone()
	clock := rec.clock
	if d := timeOf(m.Now).Sub(clock.Now()); d > 0 {
		clock.Advance(d)
	}
	m.Now = clock.Now().UnixMicro()
	rc := runConfig{name: what + "/continued", dur: engine.SyncAlways, snapBytes: -1}
	r := &runner{tb: tb, rc: rc, cfg: rec.cfg, dir: dir, clock: clock, db: db, m: m, fullCheck: true}
	r.opts = engine.Options{Clock: clock, SnapshotBytes: -1, Logger: quiet}
	rec.cfg.Apply(&r.opts)
	r.ackSeq = seq
	views := map[uint64]string{seq: rec.views[seq]}
	m.OnBatch = func(m *Model) { views[m.Seq] = m.View(queues, allNS).String() }
	// Only appends, so that the second crash can cut anywhere in what was
	// appended (a checkpoint fsyncs and rewrites the log).
	w := crashWorkload
	w[opReopen], w[opCheckpoint] = 0, 0
	before := capture(tb, dir)
	r.run(&program{data: genProgram(rng, n, w, 0)[1:]}, n)
	r.checkState("continued run")
	after := capture(tb, dir)
	db.Close()
	// The second crash: cut the newest segment somewhere in what the
	// continued run appended.
	crash := after.clone()
	if tail, _ := after.tailEntries(); tail != "" {
		from := len(before[tail])
		if !extends(after[tail], before[tail]) {
			from = 0
		}
		if n := len(after[tail]) - from; n > 0 {
			crash[tail] = after[tail][:from+rng.IntN(n+1)]
		}
	}
	sub := &recording{tb: tb, cfg: rec.cfg, views: views}
	sub.checkImage(tb, dir, crash, seq, m.Seq, what+", crashed again", false)
}

// where describes an event for failure messages.
func (e *event) where() string {
	return fmt.Sprintf("crash at %q during instruction %d (%s)", e.name, e.op, e.desc)
}
