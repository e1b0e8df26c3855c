package engine

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenReadOnly: a read-only DB sees what Open would recover, refuses
// every write with ErrReadOnly, and changes nothing on disk, not even a torn
// tail Open would cut.
func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	dir := damageBase(t)
	segs := walSegments(t, dir)
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	os.Truncate(last, st.Size()-3) // batch 50 is torn
	before := dirBytes(t, dir)

	db, err := OpenReadOnly(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.Seq != 49 || s.Tasks != 49 {
		t.Fatalf("read-only sees %+v", s)
	}
	q := db.Queue(ns, "q")
	if c, err := q.Counts(ctx); err != nil || c.Ready != 49 {
		t.Fatalf("counts %+v %v", c, err)
	}
	if _, err := q.Get(ctx, 3); err != nil {
		t.Fatal(err)
	}
	_, err = q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrReadOnly)
	_, err = q.Claim(ctx, "w", time.Minute, 1)
	wantErr(t, err, ErrReadOnly)
	wantErr(t, q.Redrive(ctx, 3), ErrReadOnly)
	wantErr(t, db.Checkpoint(ctx), ErrReadOnly)

	// Readers share the lock; a writer is kept out meanwhile.
	db2, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	db2.Close()
	_, err = Open(dir, Options{})
	wantErr(t, err, ErrLocked)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !sameFiles(before, dirBytes(t, dir)) {
		t.Fatal("a read-only open changed the directory")
	}

	// A writer keeps readers out.
	w, err := Open(dir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenReadOnly(dir, Options{})
	wantErr(t, err, ErrLocked)
	w.Close()
}

// TestOpenReadOnlyRefusesOtherDirectories: a directory that is not a docket
// data directory is refused and left exactly as it was.
func TestOpenReadOnlyRefusesOtherDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644)
	_, err := OpenReadOnly(dir, Options{})
	wantErr(t, err, ErrInvalid)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("the directory now holds %d entries", len(ents))
	}
	_, err = OpenReadOnly(filepath.Join(dir, "missing"), Options{})
	if !os.IsNotExist(err) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatal("OpenReadOnly created the directory")
	}
	_, err = OpenReadOnly("", Options{})
	wantErr(t, err, ErrInvalid)
	// Corruption is Open's verdict too.
	base := damageBase(t)
	flipRecord(t, base, 44)
	_, err = OpenReadOnly(base, Options{})
	wantErr(t, err, ErrCorrupt)
}

// TestLogsCutTailAndDeadLetter: with only Options.Logger, an operator hears
// of a torn tail Open cut (file, offset, bytes) and of a task going to the
// dead-letter queue.
func TestLogsCutTailAndDeadLetter(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	e := newEnv(t, false, func(o *Options) {
		o.SnapshotBytes = -1
		o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	})
	q := e.q("q")
	for range 3 {
		e.enqueue(q, Task{MaxAttempts: 1})
	}
	e.crash()
	segs := walSegments(t, e.dir)
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	os.Truncate(last, st.Size()-2)
	e.db = nil
	e.open()
	line := logLine(t, logged.String(), "torn tail")
	for _, want := range []string{"level=WARN", "file=" + last, "offset=", "bytes="} {
		if !strings.Contains(line, want) {
			t.Fatalf("cut-tail log line lacks %q: %s", want, line)
		}
	}
	q = e.q("q")
	ls := e.claim(q, 2)
	if err := q.Fail(ctx, ls[0], Failure{Err: "boom"}); err != nil {
		t.Fatal(err)
	}
	line = logLine(t, logged.String(), "dead-letter")
	for _, want := range []string{"level=WARN", "id=1", "queue=q", "error=boom"} {
		if !strings.Contains(line, want) {
			t.Fatalf("dead-letter log line lacks %q: %s", want, line)
		}
	}
	// A lease that expires with no attempts left is dead-lettered too.
	e.clock.Advance(time.Hour)
	e.claim(q, 1)
	line = logLine(t, logged.String(), "id=2")
	if !strings.Contains(line, "dead-letter") || !strings.Contains(line, "lease expired") {
		t.Fatalf("expired lease: %s", line)
	}
}

func logLine(t *testing.T, log, substr string) string {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) {
			return l
		}
	}
	t.Fatalf("no log line mentions %q:\n%s", substr, log)
	return ""
}
