//go:build linux

package fuzz

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/docketdb/docket/engine"
)

var (
	crashSeed = flag.Uint64("crash-seed", 1, "seed of the workload the crash tests record")
	crashOps  = flag.Int("crash-ops", 300, "instructions in the workload the crash tests record")
	contEvery = flag.Int("crash-continue-every", 8,
		"TestCrashEveryByte continues after every record boundary and every Nth cut: runs more instructions, crashes and recovers again (1: after every cut; 64 under the race detector unless set)")
)

// flagOr returns the value of the named int flag, or raceValue under the
// race detector when the flag was not set explicitly.
func flagOr(name string, value, raceValue int) int {
	if !raceEnabled || flagSet(name) {
		return value
	}
	return raceValue
}

// shortOr returns v, or shortValue with -short when the named flag was not
// set explicitly: the long sweeps run in full in .ci/run, a sample of them
// while working.
func shortOr(name string, v, shortValue int) int {
	if !testing.Short() || flagSet(name) {
		return v
	}
	return shortValue
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// recordCrash returns the shared crash workload's recording under the
// configuration byte cfg: 300 instructions (about 190 of them commit)
// under SyncAlways with 1 KiB segments, so the log spans many segments and
// checkpoints truncate it, a 90 s idempotency TTL and a minute's retention
// of completed tasks, so housekeeping batches happen. It is recorded once
// per configuration for the tests that sweep it; each gets its own copy
// to check images with.
func recordCrash(t *testing.T, cfg byte) *recording {
	crashMu.Lock()
	once := crashOnce[cfg]
	if once == nil {
		once = new(sync.Once)
		crashOnce[cfg] = once
	}
	crashMu.Unlock()
	once.Do(func() {
		rec := record(t, recordOptions{seed: *crashSeed, ops: shortOr("crash-ops", *crashOps, 60), segBytes: 1024,
			weights: crashWorkload, cfg: cfg})
		crashMu.Lock()
		crashRec[cfg] = rec
		crashMu.Unlock()
	})
	crashMu.Lock()
	shared := crashRec[cfg]
	crashMu.Unlock()
	if shared == nil {
		t.Fatal("recording the crash workload failed")
	}
	r := *shared
	r.tb, r.clock = t, nil
	return &r
}

// crashConfigs are the configuration bytes (see programConfig) every crash
// sweep runs under: values in line, and a value threshold of 64 bytes, so
// that cuts, flips, power losses and failed operations hit the value log's
// files too.
var crashConfigs = []struct {
	name string
	cfg  byte
}{{"inline", 0x09}, {"values", 0x19}}

// eachConfig runs fn as a parallel subtest per crash configuration.
func eachConfig(t *testing.T, fn func(t *testing.T, cfg byte)) {
	for _, c := range crashConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fn(t, c.cfg)
		})
	}
}

// valueFiles reports whether im holds value log bytes: a sweep under the
// values configuration that never wrote any would test nothing new.
func valueFiles(im image) int {
	n := 0
	for p, b := range im {
		if inDir(p, "vlog") {
			n += len(b)
		}
	}
	return n
}

var (
	crashMu   sync.Mutex
	crashOnce = map[byte]*sync.Once{}
	crashRec  = map[byte]*recording{}
)

// span is the part of a file an instruction appended: bytes [from, to).
type span struct {
	path     string
	from, to int
}

// appended returns what the step from image a to image b appended to the
// value log and the log, in the order they reach the disk (the values a
// batch refers to before the batch), if that is all it changed.
func appended(a, b image) ([]span, bool) {
	for p, x := range a {
		y, ok := b[p]
		if !ok || !((inDir(p, "wal") || inDir(p, "vlog")) && extends(y, x) || bytes.Equal(x, y)) {
			return nil, false
		}
	}
	var out []span
	for _, p := range append(b.valueFiles(), b.segments()...) {
		if n := len(b[p]) - len(a[p]); n > 0 || a[p] == nil {
			out = append(out, span{p, len(a[p]), len(b[p])})
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok && !slices.ContainsFunc(out, func(s span) bool { return s.path == p }) {
			return nil, false // a new file that is not a segment
		}
	}
	return out, true
}

// cut returns b with only the first k bytes of the appended spans written:
// a crash in the middle of the instruction. Segments not reached yet do not
// exist, unless withEmpty asks for one created but not yet written.
func cut(b image, spans []span, k int, withEmpty bool) image {
	im := b.clone()
	whole := true // every span before this one is written in full
	for _, s := range spans {
		take := min(k, s.to-s.from)
		k -= take
		switch {
		case take > 0 || s.from > 0:
			im[s.path] = b[s.path][:s.from+take]
		case withEmpty && whole:
			im[s.path] = nil
			withEmpty = false
		default:
			delete(im, s.path)
		}
		whole = whole && take == s.to-s.from
	}
	return im
}

// boundaries returns the cut offsets (in the numbering of cut) that fall
// between two records.
func boundaries(b image, spans []span) map[int]bool {
	out := map[int]bool{}
	base := 0
	for _, s := range spans {
		if !inDir(s.path, "wal") {
			base += s.to - s.from // a value log file: no boundary counts
			continue
		}
		first, _ := segName(filepath.Base(s.path))
		off := 0
		for n := uint64(0); off < len(b[s.path]); n++ {
			rec, size, ok := refEntry(b[s.path][off:])
			if !ok {
				break
			}
			if _, ok := refRecord(rec, first+n); !ok {
				break
			}
			if off >= s.from {
				out[base+off-s.from] = true
			}
			off += size
		}
		base += s.to - s.from
	}
	return out
}

// TestCrashEveryByte cuts the log of the recorded 200-instruction run at
// every byte it ever wrote (the directory as it was when that byte was
// being written) and reopens: the recovered state must be the model's
// after the last whole record before the cut, which includes everything
// acknowledged before it. After every record boundary and every
// -crash-continue-every cuts it then runs more instructions on the
// recovered DB, crashes again mid-write and recovers again. The
// instructions are checked in crashShards shards side by side, each on its
// own directory with random numbers of its own per instruction: the cuts
// are the same whatever the number of shards.
func TestCrashEveryByte(t *testing.T) {
	t.Parallel()
	eachConfig(t, crashEveryByte)
}

func crashEveryByte(t *testing.T, cfg byte) {
	rec := recordCrash(t, cfg)
	every := shortOr("crash-continue-every", flagOr("crash-continue-every", *contEvery, 64), 64)
	stride := shortOr("", 1, 23) // with -short, record boundaries and every 23rd byte
	if cfg&0x10 != 0 {
		// The values run doubles the sweep: under the race detector it
		// takes record boundaries and every 3rd byte.
		stride = shortOr("", flagOr("", 1, 3), 23)
	}
	var (
		mu                                             sync.Mutex
		cuts, continued, logBytes, valueBytes, skipped int
		distinct                                       = map[[32]byte]bool{}
	)
	first, planned := rec.firstCuts(stride)
	t.Run("shards", func(t *testing.T) {
		for shard := range crashShards {
			t.Run(fmt.Sprint(shard), func(t *testing.T) {
				t.Parallel()
				r := *rec // its own clock and test
				r.tb = t
				dir := scratchDir(t)
				for i := shard; i < len(rec.ops); i += crashShards {
					c := r.cutInstruction(t, dir, i, first[i], stride, every)
					mu.Lock()
					cuts += c.cuts
					continued += c.continued
					logBytes += c.logBytes
					valueBytes += c.valueBytes
					if !c.appended {
						skipped++
					}
					for h := range c.distinct {
						distinct[h] = true
					}
					mu.Unlock()
				}
			})
		}
	})
	if logBytes < 1000 {
		t.Fatalf("the recorded log is only %d bytes", logBytes)
	}
	if cuts != planned {
		t.Fatalf("%d cuts checked, %d planned", cuts, planned)
	}
	if cfg&0x10 != 0 && valueBytes == 0 {
		t.Fatal("no cut fell in the value log")
	}
	t.Logf("%d instructions, %d log bytes written (%d of them to the value log), %d cuts checked (%d distinct images), %d continued and crashed again, %d instructions rewrote files",
		len(rec.ops), logBytes, valueBytes, cuts, len(distinct), continued, skipped)
}

// crashShards is how many shards TestCrashEveryByte checks side by side.
const crashShards = 4

// cutCounts is what TestCrashEveryByte checked of one instruction.
type cutCounts struct {
	appended                              bool // the instruction only appended to the log
	cuts, continued, logBytes, valueBytes int
	distinct                              map[[32]byte]bool
}

// cutSpans returns what instruction i of rec appended to the log, if that
// is all it did, and the batch acknowledged before it.
func (rec *recording) cutSpans(i int) (spans []span, prevAck uint64, ok bool) {
	prev := rec.start
	if i > 0 {
		prev, prevAck = rec.ops[i-1].img, rec.ops[i-1].ack
	}
	spans, ok = appended(prev, rec.ops[i].img)
	return spans, prevAck, ok
}

// firstCuts returns, for every instruction, the number of cuts the
// instructions before it check: every other cut, counted over the whole
// run, has spare space after it, however the instructions are sharded.
func (rec *recording) firstCuts(stride int) (first []int, total int) {
	first = make([]int, len(rec.ops))
	cuts := 0
	for i, e := range rec.ops {
		first[i] = cuts
		spans, _, ok := rec.cutSpans(i)
		if !ok {
			continue
		}
		total := 0
		for _, s := range spans {
			total += s.to - s.from
		}
		bounds := boundaries(e.img, spans)
		for k := 0; k < total; k++ {
			if k%stride != 0 && !bounds[k] {
				continue
			}
			spare := cuts%2 == 1
			cuts++
			if bounds[k] && (spare || cut(e.img, spans, k, true).hash() != cut(e.img, spans, k, false).hash()) {
				cuts++
			}
		}
	}
	return first, cuts
}

// cutInstruction checks instruction i of rec cut at every stride'th byte it
// appended and at every record boundary, continuing after the boundaries
// and every every'th cut; first is the number of cuts before it (see
// firstCuts).
func (rec *recording) cutInstruction(t *testing.T, dir string, i, first, stride, every int) cutCounts {
	t.Helper()
	e := rec.ops[i]
	out := cutCounts{distinct: map[[32]byte]bool{}}
	spans, prevAck, ok := rec.cutSpans(i)
	if !ok {
		return out // a checkpoint or reopen rewrote files: covered by the failpoint tests
	}
	out.appended = true
	rng := rand.New(rand.NewPCG(*crashSeed, 3<<32|uint64(i)))
	total := 0
	for _, s := range spans {
		total += s.to - s.from
		if inDir(s.path, "vlog") {
			out.valueBytes += s.to - s.from
		}
	}
	out.logBytes = total
	bounds := boundaries(e.img, spans)
	for k := 0; k < total; k++ {
		if k%stride != 0 && !bounds[k] {
			continue
		}
		what := fmt.Sprintf("instruction %d (%s) cut after %d of %d appended bytes", i, e.desc, k, total)
		cont := bounds[k] || k%every == 0
		im := cut(e.img, spans, k, false)
		if (first+out.cuts)%2 == 1 {
			// The zeros a log keeps ahead of its records, which the
			// cut bytes would have been written over.
			im = im.withSpare(1 + rng.IntN(2048))
			what += ", spare space after it"
		}
		out.distinct[im.hash()] = true
		seq, db := rec.checkImage(t, dir, im, prevAck, e.applied, what, cont)
		out.cuts++
		if cont {
			rec.continueFrom(db, dir, seq, 3, rng, what)
			out.continued++
		}
		if bounds[k] {
			// At a segment boundary the next segment may exist, empty.
			with := cut(e.img, spans, k, true)
			if with.hash() == im.hash() {
				continue
			}
			out.distinct[with.hash()] = true
			rec.checkImage(t, dir, with, prevAck, e.applied, what+" (with an empty new segment)", false)
			out.cuts++
		}
	}
	return out
}

// TestCrashTails appends what a crash or a disk can leave after the last
// record - zeros, garbage, a second copy of the last record, part of one -
// to the log after every instruction of the recorded run: recovery must
// drop it and find exactly the records before it, never a phantom one.
func TestCrashTails(t *testing.T) {
	t.Parallel()
	eachConfig(t, crashTails)
}

func crashTails(t *testing.T, cfg byte) {
	rec := recordCrash(t, cfg)
	dir := scratchDir(t)
	rng := rand.New(rand.NewPCG(*crashSeed, 5))
	n := 0
	distinct := map[[32]byte]bool{}
	stride := shortOr("", 1, 3)
	for i, e := range rec.ops {
		tail, starts := e.img.tailEntries()
		if tail == "" || i%stride != 0 {
			continue
		}
		buf := e.img[tail]
		tails := map[string][]byte{
			"one zero byte":  {0},
			"zeroed sector":  make([]byte, 512),
			"zeroed page":    make([]byte, 4096),
			"garbage":        randBytes(rng, 1+rng.IntN(64)),
			"garbage sector": randBytes(rng, 512),
		}
		if len(starts) > 0 {
			last := buf[starts[len(starts)-1]:]
			tails["duplicated last record"] = last
			tails["duplicated last record, torn"] = last[:1+rng.IntN(len(last)-1)]
			tails["duplicated last record, then zeros"] = append(bytes.Clone(last), make([]byte, 100)...)
			if len(starts) > 1 {
				tails["an older record again"] = buf[starts[0]:starts[1]]
			}
		}
		for name, extra := range tails {
			im := e.img.clone()
			im[tail] = append(bytes.Clone(buf), extra...)
			distinct[im.hash()] = true
			rec.checkImage(t, dir, im, e.ack, e.applied, fmt.Sprintf("after instruction %d (%s), %s", i, e.desc, name), false)
			n++
		}
	}
	t.Logf("%d damaged tails checked (%d distinct images)", n, len(distinct))
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestCrashAtFailpoints reopens the directory as it was at every failpoint
// of the recorded run - before and after each write and fsync of the log,
// at each step of writing a snapshot, of truncating the log - and after
// every instruction: what a SIGKILL at that moment leaves.
func TestCrashAtFailpoints(t *testing.T) {
	t.Parallel()
	eachConfig(t, crashAtFailpoints)
}

func crashAtFailpoints(t *testing.T, cfg byte) {
	rec := recordCrash(t, cfg)
	dir := scratchDir(t)
	byName := map[string]int{}
	distinct := map[[32]byte]bool{}
	for _, e := range rec.events {
		distinct[e.img.hash()] = true
		rec.checkImage(t, dir, e.img, e.ack, e.applied, e.where(), false)
		byName[e.name]++
	}
	for _, name := range []string{"append.write", "sync", "sync.after", "segment.create", "truncate",
		"write.middle", "sync.before", "rename.before", "rename.after", "dirsync.after"} {
		if byName[name] == 0 {
			t.Errorf("the recorded run never passed failpoint %q", name)
		}
	}
	if cfg&0x10 != 0 && valueFiles(rec.ops[len(rec.ops)-1].img) == 0 {
		t.Fatal("the recorded run wrote no value log")
	}
	t.Logf("%d crash points (%d distinct images): %v", len(rec.events), len(distinct), byName)
}

// TestPowerLoss reopens the directory as a power loss at every moment of
// TestCrashAtFailpoints could leave it: data written since its file's last
// fsync lost, whole or in part or zeroed, and directory entries created
// since their directory's last fsync missing. Nothing acknowledged may be
// lost and nothing that never happened may appear.
func TestPowerLoss(t *testing.T) {
	t.Parallel()
	eachConfig(t, powerLoss)
}

func powerLoss(t *testing.T, cfg byte) {
	rec := recordCrash(t, cfg)
	dir := scratchDir(t)
	n := 0
	distinct := map[[32]byte]bool{}
	stride := shortOr("", 1, 4) // with -short, every 4th moment
	for i, e := range rec.events {
		if i%stride != 0 {
			continue
		}
		for _, kind := range []string{"lost", "partial", "zeroed", "entries"} {
			im := e.power[kind]
			distinct[im.hash()] = true
			rec.checkImage(t, dir, im, e.ack, e.applied, fmt.Sprintf("power loss (%s) at %s", kind, e.where()), false)
			n++
		}
	}
	t.Logf("%d power-loss images checked (%d distinct)", n, len(distinct))
}

// TestCrashWithoutSync records the workload under SyncNever and
// SyncInterval, which acknowledge once the log is written to the operating
// system: a killed process (as opposed to a machine losing power) must
// still lose nothing acknowledged. Every failpoint and every instruction is
// a crash point.
func TestCrashWithoutSync(t *testing.T) {
	t.Parallel()
	for _, mode := range []engine.Durability{engine.SyncNever, engine.SyncInterval} {
		for _, c := range crashConfigs {
			t.Run(mode.String()+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				crashWithoutSync(t, mode, c.cfg)
			})
		}
	}
}

func crashWithoutSync(t *testing.T, mode engine.Durability, cfg byte) {
	rec := record(t, recordOptions{seed: *crashSeed + 1, ops: shortOr("crash-ops", 150, 40), segBytes: 1024, weights: crashWorkload,
		cfg: cfg, dur: mode})
	dir := scratchDir(t)
	distinct := map[[32]byte]bool{}
	for _, e := range rec.events {
		distinct[e.img.hash()] = true
		rec.checkImage(t, dir, e.img, e.ack, e.applied, e.where(), false)
	}
	t.Logf("%d crash points (%d distinct images)", len(rec.events), len(distinct))
}
