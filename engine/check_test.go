package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirBytes reads every file under dir, to show a call changed nothing.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCheckAndRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 5 {
		e.enqueue(q, Task{Payload: []byte(`{"x":"0123456789"}`)})
	}
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.enqueue(q, Task{})
	}
	// A directory in use cannot be repaired.
	_, err := Repair(e.dir)
	wantErr(t, err, ErrLocked)
	e.crash()

	rep, err := Check(e.dir)
	if err != nil || rep.Tasks != 10 || rep.Queues != 1 || rep.LoadedFrom == "" || rep.Log.Torn != nil {
		t.Fatalf("sound directory: %+v %v", rep, err)
	}

	// A torn tail is reported, not counted as damage, and left in place.
	segs := walSegments(t, e.dir)
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	os.Truncate(last, st.Size()-2)
	before := dirBytes(t, e.dir)
	rep, err = Check(e.dir)
	if err != nil || rep.Log.Torn == nil || rep.Tasks != 9 {
		t.Fatalf("torn tail: %+v %v", rep, err)
	}
	var out strings.Builder
	rep.Print(&out)
	if !strings.Contains(out.String(), "torn tail") {
		t.Fatalf("report does not mention the torn tail:\n%s", out.String())
	}
	if !sameFiles(before, dirBytes(t, e.dir)) {
		t.Fatal("Check changed the directory")
	}
	msg, err := Repair(e.dir)
	if err != nil || !strings.Contains(msg, "cut") {
		t.Fatalf("repair: %q %v", msg, err)
	}
	if rep, err = Check(e.dir); err != nil || rep.Log.Torn != nil || rep.Tasks != 9 {
		t.Fatalf("after repair: %+v %v", rep, err)
	}
	if msg, err = Repair(e.dir); err != nil || !strings.Contains(msg, "nothing to repair") {
		t.Fatalf("second repair: %q %v", msg, err)
	}

	// A damaged snapshot that Open gets past (the log still starts at 1) is
	// reported, but the verdict is Open's: it opens.
	snaps, _ := filepath.Glob(filepath.Join(e.dir, "snap", "*.snap"))
	data, _ := os.ReadFile(snaps[0])
	data[len(data)/2] ^= 0x40
	os.WriteFile(snaps[0], data, 0o644)
	rep, err = Check(e.dir)
	if err != nil || len(rep.Snapshots) != 1 || !errors.Is(rep.Snapshots[0].Err, ErrCorrupt) || rep.Tasks != 9 {
		t.Fatalf("damaged snapshot: %+v %v", rep, err)
	}
	out.Reset()
	rep.Print(&out)
	if !strings.Contains(out.String(), "BAD") {
		t.Fatalf("report does not show the bad snapshot:\n%s", out.String())
	}
	before = dirBytes(t, e.dir)
	_, err = Repair(e.dir) // not its business: the log is sound
	if err != nil || !sameFiles(before, dirBytes(t, e.dir)) {
		t.Fatalf("repair touched a sound log: %v", err)
	}
}

func TestCheckRefusesCorruptLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 20 {
		e.enqueue(q, Task{Payload: []byte(`{"x":"0123456789"}`)})
	}
	e.crash()
	seg := walSegments(t, e.dir)[0]
	data, _ := os.ReadFile(seg)
	data[len(data)/3] ^= 0x01
	os.WriteFile(seg, data, 0o644)
	before := dirBytes(t, e.dir)
	rep, err := Check(e.dir)
	wantErr(t, err, ErrCorrupt)
	if rep.Log.Corrupt == nil {
		t.Fatalf("report has no damage: %+v", rep)
	}
	_, err = Repair(e.dir)
	wantErr(t, err, ErrCorrupt)
	if !sameFiles(before, dirBytes(t, e.dir)) {
		t.Fatal("Check or Repair changed a corrupt directory")
	}
	if _, err := Check(filepath.Join(e.dir, "missing")); err == nil {
		t.Fatal("Check of a missing directory succeeded")
	}
}
