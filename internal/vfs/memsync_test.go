package vfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

// openRW opens name on m for reading and writing, created if missing.
func openRW(t *testing.T, m *MemFS, name string, flag int) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func writeAt(t *testing.T, f File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func syncFile(t *testing.T, f File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestMemCrashOverwrites: a power loss undoes unsynced writes over bytes
// already synced, not only unsynced appends: overwrites in place, writes
// over zeros written ahead and synced (as a log preallocates), a file
// truncated and grown again, and a file reopened with O_TRUNC. A Sync then
// keeps them all, and a killed process's clone keeps what is unsynced as
// unsynced.
func TestMemCrashOverwrites(t *testing.T) {
	t.Parallel()
	m := NewMem()
	syncDir(t, m, "/") // the files below are created before it
	f := openRW(t, m, "/a", 0)
	writeAt(t, f, "hello world", 0)
	syncFile(t, f)
	syncDir(t, m, "/")
	crashed := func(want string) {
		t.Helper()
		if got := content(m.CrashClone(), "/a"); got != want {
			t.Errorf("after a crash: %q, want %q", got, want)
		}
	}

	writeAt(t, f, "HELLO", 0)
	crashed("hello world")
	syncFile(t, f)
	crashed("HELLO world")

	// Zeros written ahead and synced, then records over them.
	writeAt(t, f, "\x00\x00\x00\x00", 11)
	syncFile(t, f)
	writeAt(t, f, "ab", 11)
	crashed("HELLO world\x00\x00\x00\x00")
	syncFile(t, f)
	writeAt(t, f, "cd", 13)
	crashed("HELLO worldab\x00\x00")
	syncFile(t, f)
	crashed("HELLO worldabcd")

	// Truncated and grown again: the cut bytes come back as zeros only
	// once synced.
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(6); err != nil {
		t.Fatal(err)
	}
	crashed("HELLO worldabcd")
	syncFile(t, f)
	crashed("HEL\x00\x00\x00")
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	syncFile(t, f)
	writeAt(t, f, "xyz", 4) // a hole, then bytes
	crashed("HE")
	syncFile(t, f)
	crashed("HE\x00\x00xyz")

	// A killed process's clone: what was written is there, unsynced.
	writeAt(t, f, "Q", 1)
	k := m.Clone()
	if got := content(k, "/a"); got != "HQ\x00\x00xyz" {
		t.Errorf("a killed process's clone: %q", got)
	}
	if got := content(k.CrashClone(), "/a"); got != "HE\x00\x00xyz" {
		t.Errorf("a killed process's clone, then a crash: %q", got)
	}
	kf := openRW(t, k, "/a", 0)
	syncFile(t, kf)
	kf.Close()
	if got := content(k.CrashClone(), "/a"); got != "HQ\x00\x00xyz" {
		t.Errorf("a killed process's clone synced, then a crash: %q", got)
	}
	crashed("HE\x00\x00xyz") // the original is not changed
	f.Close()

	// Reopened with O_TRUNC and written: the synced content until a Sync.
	g := openRW(t, m, "/a", os.O_TRUNC)
	writeAt(t, g, "new", 0)
	crashed("HE\x00\x00xyz")
	syncFile(t, g)
	crashed("new")
	g.Close()
}

// TestMemCrashModel: random writes, truncations, syncs and crashes on one
// file agree with a model that keeps a copy of the whole content at each
// Sync.
func TestMemCrashModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		m := NewMem()
		syncDir(t, m, "/")
		f := openRW(t, m, "/f", 0)
		syncDir(t, m, "/")
		var data, synced []byte
		for step := range 200 {
			switch op := rng.IntN(10); {
			case op < 5: // a write, often at the end, sometimes past it
				off := int64(len(data))
				if len(data) > 0 && rng.IntN(2) == 0 {
					off = rng.Int64N(int64(len(data)))
				}
				off += rng.Int64N(3)
				p := make([]byte, 1+rng.IntN(40))
				for i := range p {
					p[i] = byte('a' + rng.IntN(26))
				}
				writeAt(t, f, string(p), off)
				if end := off + int64(len(p)); end > int64(len(data)) {
					data = append(data, make([]byte, end-int64(len(data)))...)
				}
				copy(data[off:], p)
			case op < 7:
				syncFile(t, f)
				synced = bytes.Clone(data)
			case op < 8:
				size := rng.Int64N(int64(len(data)) + 20)
				if err := f.Truncate(size); err != nil {
					t.Fatal(err)
				}
				if size <= int64(len(data)) {
					data = data[:size]
				} else {
					data = append(data, make([]byte, size-int64(len(data)))...)
				}
			case op < 9: // a killed process: carry on in its clone
				m = m.Clone()
				f.Close()
				f = openRW(t, m, "/f", 0)
			default:
				f.Close()
				f = openRW(t, m, "/f", os.O_TRUNC)
				data = data[:0]
			}
			if got := content(m.CrashClone(), "/f"); got != string(synced) {
				t.Fatalf("round %d step %d: after a crash %q, want %q", round, step, got, synced)
			}
			if got := content(m, "/f"); got != string(data) {
				t.Fatalf("round %d step %d: %q, want %q", round, step, got, data)
			}
		}
		f.Close()
	}
}
