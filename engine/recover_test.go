package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// damageBase builds a crashed data directory: enqueues 1..20, a snapshot at
// 20, 21..40, a snapshot at 40 (the log now starts at 21), 41..50, over
// small log segments. Every enqueue is one batch and one task, so batch k
// holds task k.
//
// The directory is built once per test binary and copied for each caller.
func damageBase(t *testing.T) string {
	t.Helper()
	damageTemplate.once.Do(func() { damageTemplate.dir, damageTemplate.err = buildDamageBase() })
	if damageTemplate.err != nil {
		t.Fatalf("building the damage base: %v", damageTemplate.err)
	}
	dir := t.TempDir()
	if err := copyTree(damageTemplate.dir, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// damageTemplate is the directory damageBase copies; TestMain removes it.
var damageTemplate struct {
	once sync.Once
	dir  string
	err  error
}

func buildDamageBase() (string, error) {
	dir, err := os.MkdirTemp("", "docket-damage-base-")
	if err != nil {
		return "", err
	}
	db, err := Open(dir, Options{Clock: NewManualClock(t0), SnapshotBytes: -1, SegmentBytes: 400, Logger: quietLogger()})
	if err != nil {
		return dir, err
	}
	q := db.Queue(ns, "q")
	for i := 1; i <= 50; i++ {
		if _, err := q.Enqueue(ctx, Task{Payload: []byte(`{"x":"0123456789"}`)}); err != nil {
			db.Close()
			return dir, err
		}
		if i == 20 || i == 40 {
			if err := db.Checkpoint(ctx); err != nil {
				db.Close()
				return dir, err
			}
		}
	}
	(&env{db: db}).crash()
	return dir, nil
}

// copyTree copies the directories and files under src into dst, keeping
// their permissions.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(discard{}, nil)) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// snapFiles returns the snapshot files, newest first.
func snapFiles(t *testing.T, dir string) []string {
	t.Helper()
	s, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
	sort.Sort(sort.Reverse(sort.StringSlice(s)))
	if len(s) != 2 {
		t.Fatalf("want 2 snapshots, have %v", s)
	}
	return s
}

// recordAt finds the log record seq: its segment and the offset of its
// entry.
func recordAt(t *testing.T, dir string, seq uint64) (string, int) {
	t.Helper()
	for _, p := range walSegments(t, dir) {
		b, _ := os.ReadFile(p)
		for off := 0; off < len(b); {
			size, k := binary.Uvarint(b[off:])
			if k <= 0 || off+k+int(size) > len(b) || size < 13 {
				break
			}
			if binary.LittleEndian.Uint64(b[off+k+5:]) == seq {
				return p, off
			}
			off += k + int(size)
		}
	}
	t.Fatalf("record %d not found", seq)
	return "", 0
}

// flipRecord flips a bit in the data of record seq (its checksum then fails).
func flipRecord(t *testing.T, dir string, seq uint64) {
	t.Helper()
	p, off := recordAt(t, dir, seq)
	b, _ := os.ReadFile(p)
	b[off+1+13+2] ^= 0x10
	os.WriteFile(p, b, 0o644)
}

func flipFile(t *testing.T, path string) {
	t.Helper()
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x40
	os.WriteFile(path, b, 0o644)
}

// TestCheckAgreesWithOpen: for every kind of damage, Check (docket verify)
// says the directory is sound exactly when Open opens it, and then both
// recover the same batch. Check runs first: Open cuts a torn tail.
func TestCheckAgreesWithOpen(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		opens  *bool // nil: either, as long as the two agree
		seq    uint64
	}{
		{"sound", func(*testing.T, string) {}, &yes, 50},
		{"torn tail", func(t *testing.T, dir string) {
			segs := walSegments(t, dir)
			last := segs[len(segs)-1]
			st, _ := os.Stat(last)
			os.Truncate(last, st.Size()-3)
		}, &yes, 49},
		{"newest snapshot damaged", func(t *testing.T, dir string) { flipFile(t, snapFiles(t, dir)[0]) }, &yes, 50},
		{"newest snapshot deleted", func(t *testing.T, dir string) { os.Remove(snapFiles(t, dir)[0]) }, &yes, 50},
		{"both snapshots damaged, log starts later", func(t *testing.T, dir string) {
			for _, s := range snapFiles(t, dir) {
				flipFile(t, s)
			}
		}, &no, 0},
		{"both snapshots deleted, log starts later", func(t *testing.T, dir string) {
			for _, s := range snapFiles(t, dir) {
				os.Remove(s)
			}
		}, &no, 0},
		{"log record before the newest snapshot damaged", func(t *testing.T, dir string) { flipRecord(t, dir, 30) }, &yes, 50},
		{"log record after the newest snapshot damaged", func(t *testing.T, dir string) { flipRecord(t, dir, 44) }, &no, 0},
		{"first record after the newest snapshot damaged", func(t *testing.T, dir string) { flipRecord(t, dir, 41) }, &no, 0},
		{"newest snapshot damaged and a record it covered", func(t *testing.T, dir string) {
			flipFile(t, snapFiles(t, dir)[0])
			flipRecord(t, dir, 30)
		}, &no, 0},
		{"segment after the snapshot deleted", func(t *testing.T, dir string) {
			p, _ := recordAt(t, dir, 45)
			if segs := walSegments(t, dir); p == segs[len(segs)-1] {
				t.Skip("record 45 is in the last segment")
			}
			os.Remove(p)
		}, &no, 0},
		{"first segment deleted", func(t *testing.T, dir string) { os.Remove(walSegments(t, dir)[0]) }, nil, 0},
		{"log directory deleted", func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "wal")) }, &no, 0},
		{"every snapshot and the log deleted", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "wal"))
			os.RemoveAll(filepath.Join(dir, "snap"))
			os.Mkdir(filepath.Join(dir, "snap"), 0o755)
		}, &yes, 0},
		{"zeros appended to the last segment", func(t *testing.T, dir string) {
			segs := walSegments(t, dir)
			f, _ := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
			f.Write(make([]byte, 100))
			f.Close()
		}, &yes, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := damageBase(t)
			tc.damage(t, dir)
			rep, cerr := Check(dir)
			db, oerr := Open(dir, Options{Logger: quietLogger()})
			if oerr == nil {
				defer db.Close()
			}
			if (cerr == nil) != (oerr == nil) {
				t.Fatalf("Check: %v; Open: %v", cerr, oerr)
			}
			if tc.opens != nil && *tc.opens != (oerr == nil) {
				t.Fatalf("Open: %v, want it to open: %v", oerr, *tc.opens)
			}
			if oerr != nil {
				if !errors.Is(cerr, ErrCorrupt) || !errors.Is(oerr, ErrCorrupt) {
					t.Fatalf("refusals should be ErrCorrupt: Check %v, Open %v", cerr, oerr)
				}
				return
			}
			if got := db.Stats().Seq; got != rep.Seq || (tc.opens != nil && got != tc.seq) {
				t.Fatalf("Open recovered batch %d, Check %d, want %d", got, rep.Seq, tc.seq)
			}
		})
	}
}

// TestCheckReportsWhatIsNotDamage: a missing path, a directory that is not a
// docket directory, and a file that cannot be read are reported as such,
// never as corrupt.
func TestCheckReportsWhatIsNotDamage(t *testing.T) {
	t.Parallel()
	_, err := Check(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing path: %v", err)
	}
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "go.mod"), []byte("module x\n"), 0o644)
	_, err = Check(plain)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a docket data directory") {
		t.Fatalf("plain directory: %v", err)
	}

	// A snapshot or log directory that cannot be read (here: a file in its
	// place) is an I/O error, not damage to fall back from.
	for _, sub := range []string{"snap", "wal"} {
		dir := damageBase(t)
		os.RemoveAll(filepath.Join(dir, sub))
		os.WriteFile(filepath.Join(dir, sub), []byte("x"), 0o644)
		_, cerr := Check(dir)
		_, oerr := Open(dir, Options{Logger: quietLogger()})
		if cerr == nil || errors.Is(cerr, ErrCorrupt) || oerr == nil || errors.Is(oerr, ErrCorrupt) {
			t.Fatalf("%s is a file: Check %v, Open %v; want an I/O error from both", sub, cerr, oerr)
		}
	}

	if os.Geteuid() == 0 {
		t.Log("running as root: the permission case cannot be staged")
		return
	}
	dir := damageBase(t)
	seg := walSegments(t, dir)[0]
	os.Chmod(seg, 0)
	defer os.Chmod(seg, 0o644)
	_, err = Check(dir)
	if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("unreadable segment: %v, want a permission error", err)
	}
}

// TestOpenGetsPastDamageBeforeSnapshot: a damaged log record whose effect the
// newest snapshot holds does not stop Open or Repair; Open says so in the
// log, and the next snapshot's truncation removes it.
func TestOpenGetsPastDamageBeforeSnapshot(t *testing.T) {
	t.Parallel()
	dir := damageBase(t)
	flipRecord(t, dir, 30)
	if _, err := Repair(dir); err != nil {
		t.Fatalf("repair: %v", err)
	}
	var logged bytes.Buffer
	db, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.Seq != 50 || st.Tasks != 50 {
		t.Fatalf("recovered %+v", st)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "record 30") {
		t.Fatalf("the ignored damage was not logged: %s", logged.String())
	}
	q := db.Queue(ns, "q")
	if _, err := q.Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		q.Enqueue(ctx, Task{})
	}
	db.Close()
	rep, err := Check(dir)
	if err != nil || len(rep.Log.Covered) != 0 || rep.Seq != 53 {
		t.Fatalf("after the log moved on: %+v %v", rep, err)
	}
}

// TestSalvage: damage after the newest snapshot makes Open refuse; Salvage
// keeps everything before the damaged record, keeps copies of what it cut,
// and says which batches and how many tasks were lost.
func TestSalvage(t *testing.T) {
	t.Parallel()
	dir := damageBase(t)
	flipRecord(t, dir, 44)
	before := dirBytes(t, dir)
	if _, err := Open(dir, Options{Logger: quietLogger()}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	if _, err := Repair(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Repair: %v, want ErrCorrupt", err)
	}
	if !sameFiles(before, dirBytes(t, dir)) {
		t.Fatal("Open or Repair changed a corrupt directory")
	}
	rep, err := Salvage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostFirst != 44 || rep.LostLast != 50 || rep.Lost() != 7 || rep.LastSeq != 43 ||
		rep.Readable != 6 || rep.Tasks != 6 || rep.NewTasks != 6 || len(rep.Kept) == 0 {
		t.Fatalf("report: %+v", rep)
	}
	var out strings.Builder
	rep.Print(&out)
	for _, want := range []string{"LOST: batches 44..50 (7 batches", "6 still readable", "1 unreadable", "kept aside"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, k := range rep.Kept {
		if _, err := os.Stat(k); err != nil {
			t.Fatalf("kept copy: %v", err)
		}
	}
	if _, err := Check(dir); err != nil {
		t.Fatalf("Check after salvage: %v", err)
	}
	db, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st := db.Stats(); st.Seq != 43 || st.Tasks != 43 {
		t.Fatalf("after salvage: %+v", st)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queue(ns, "q").Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
}

// TestSalvageRefusals: an open directory, and damage no cut can get past,
// are refused and nothing changes; a sound directory loses nothing.
func TestSalvageRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	_, err := Salvage(e.dir)
	wantErr(t, err, ErrLocked)

	dir := damageBase(t)
	for _, s := range snapFiles(t, dir) {
		os.Remove(s)
	}
	before := dirBytes(t, dir)
	_, err = Salvage(dir)
	wantErr(t, err, ErrCorrupt)
	if !sameFiles(before, dirBytes(t, dir)) {
		t.Fatal("a refused salvage changed the directory")
	}

	dir = damageBase(t)
	rep, err := Salvage(dir)
	if err != nil || rep.Lost() != 0 || rep.LastSeq != 50 {
		t.Fatalf("sound directory: %+v %v", rep, err)
	}
}
