package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenValidated: Open takes a Validate of the same directory and From
// in place of its own pass, and otherwise validates as if it had none, so
// that a validation made for another From (or directory) never lets
// damage through.
func TestOpenValidated(t *testing.T) {
	t.Parallel()
	// newDamaged is a log of 40 records over several segments whose
	// record 2 fails its checksum: damage that only a From past it covers.
	newDamaged := func(t *testing.T) string {
		dir := newLog(t, 256, 40)
		flip(t, segPaths(t, dir)[0], 1)
		return dir
	}
	files := func(t *testing.T, dir string) [][]byte {
		var b [][]byte
		for _, p := range segPaths(t, dir) {
			b = append(b, readFile(t, p))
		}
		return b
	}

	t.Run("sound", func(t *testing.T) {
		dir := newLog(t, 256, 40)
		l := openLog(t, dir, Options{Validated: Validate(dir, 0)})
		defer l.Close()
		if l.FirstSeq() != 1 || l.LastSeq() != 40 {
			t.Fatalf("holds %d..%d", l.FirstSeq(), l.LastSeq())
		}
		wantRecords(t, replayAll(t, l, 0), 1, 40)
	})

	t.Run("used in place of the pass, once", func(t *testing.T) {
		// Damage made after the validation (which the caller must not
		// allow) shows that Open trusted it rather than read again.
		dir := newLog(t, 256, 40)
		v := Validate(dir, 0)
		flip(t, segPaths(t, dir)[0], 1)
		l := openLog(t, dir, Options{Validated: v})
		l.Close()
		if _, err := Open(dir, Options{Validated: v}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("second Open with the same validation: %v, want ErrCorrupt", err)
		}
	})

	t.Run("made for a later From", func(t *testing.T) {
		dir := newDamaged(t)
		before := files(t, dir)
		if _, err := Open(dir, Options{Validated: Validate(dir, 20)}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open from 0 with a validation from 20: %v, want ErrCorrupt", err)
		}
		if after := files(t, dir); !equalFiles(before, after) {
			t.Fatal("a refused Open changed the segments")
		}
		l := openLog(t, dir, Options{From: 20, Validated: Validate(dir, 20)})
		defer l.Close()
		if cov := l.Repaired().Covered; len(cov) != 1 || l.LastSeq() != 40 {
			t.Fatalf("Open from 20: covered %+v, last %d", cov, l.LastSeq())
		}
	})

	t.Run("made of another directory", func(t *testing.T) {
		dir := newDamaged(t)
		other := newLog(t, 256, 40)
		if _, err := Open(dir, Options{Validated: Validate(other, 0)}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open with another directory's validation: %v, want ErrCorrupt", err)
		}
	})

	t.Run("that found the log unsound", func(t *testing.T) {
		dir := newDamaged(t)
		v := Validate(dir, 0)
		if _, err := Open(dir, Options{Validated: v}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})

	t.Run("of a torn tail", func(t *testing.T) {
		dir := newLog(t, 256, 40)
		last := lastSeg(t, dir)
		st, err := os.Stat(last)
		if err != nil {
			t.Fatal(err)
		}
		os.Truncate(last, st.Size()-3)
		l := openLog(t, dir, Options{Validated: Validate(dir, 0)})
		defer l.Close()
		if rep := l.Repaired(); rep.Cut == nil || rep.Broken == "" || l.LastSeq() != 39 {
			t.Fatalf("repaired %+v, last %d; want the tail cut as without a validation", rep, l.LastSeq())
		}
	})

	t.Run("of a missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "wal")
		l := openLog(t, dir, Options{Validated: Validate(dir, 0)})
		defer l.Close()
		if l.LastSeq() != 0 {
			t.Fatalf("new log holds up to %d", l.LastSeq())
		}
	})
}

func equalFiles(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
