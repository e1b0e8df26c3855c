package cluster

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/docketdb/docket/wal"
)

func openStable(t testing.TB, path string, opts StableOptions) *StableStore {
	t.Helper()
	s, err := OpenStableStore(path, opts)
	if err != nil {
		t.Fatalf("OpenStableStore: %v", err)
	}
	return s
}

func TestStableStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft", "stable")
	s := openStable(t, path, StableOptions{})
	if _, err := s.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key = %v, want raft's \"not found\"", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("GetUint64 of a missing key = %d, %v", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	check := func(s *StableStore) {
		t.Helper()
		if v, err := s.GetUint64([]byte("CurrentTerm")); v != 8 || err != nil {
			t.Fatalf("CurrentTerm = %d, %v; want 8", v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); string(v) != "node-2" || err != nil {
			t.Fatalf("LastVoteCand = %q, %v", v, err)
		}
		if v, err := s.Get([]byte("empty")); len(v) != 0 || err != nil {
			t.Fatalf("empty = %q, %v", v, err)
		}
	}
	check(s)
	check(openStable(t, path, StableOptions{}))
	if _, err := s.GetUint64([]byte("LastVoteCand")); err == nil {
		t.Fatal("GetUint64 of a 6-byte value succeeded")
	}
	// Values are copies both ways.
	v := []byte("abc")
	s.Set([]byte("k"), v)
	v[0] = 'x'
	got, _ := s.Get([]byte("k"))
	got[1] = 'y'
	if got2, _ := s.Get([]byte("k")); string(got2) != "abc" {
		t.Fatalf("stored value changed through a caller's slice: %q", got2)
	}
}

func TestStableStoreEncoding(t *testing.T) {
	kv := map[string][]byte{"b": {2}, "a": {1}, "": nil}
	b := encodeStable(kv)
	if !bytes.Equal(b, encodeStable(map[string][]byte{"a": {1}, "": {}, "b": {2}})) {
		t.Fatal("encoding depends on map order")
	}
	got, err := decodeStable(b)
	if err != nil || len(got) != 3 || got["a"][0] != 1 || got["b"][0] != 2 {
		t.Fatalf("decode = %v, %v", got, err)
	}
}

// Every bit flip and every cut of the file is refused, never read as other
// values: a lost vote could let the node vote twice in a term.
func TestStableStoreDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stable")
	s := openStable(t, path, StableOptions{})
	s.SetUint64([]byte("CurrentTerm"), 3)
	s.Set([]byte("LastVoteCand"), []byte("n1"))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	try := func(b []byte, what string) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenStableStore(path, StableOptions{}); !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("%s: OpenStableStore = %v, want ErrCorrupt", what, err)
		}
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		try(b, "bit flip")
	}
	for n := range len(good) {
		try(good[:n], "cut")
	}
	try(append(bytes.Clone(good), 0), "trailing byte")
}

// A Set interrupted at any step leaves, after reopening, either the old
// values or the new ones, and the open store keeps the old ones.
func TestStableStoreCrash(t *testing.T) {
	for _, point := range []string{"write", "rename", "dir"} {
		t.Run(point, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stable")
			arm := false
			s := openStable(t, path, StableOptions{Failpoint: func(name string) error {
				if arm && name == point {
					return errors.New("injected crash")
				}
				return nil
			}})
			if err := s.SetUint64([]byte("CurrentTerm"), 4); err != nil {
				t.Fatal(err)
			}
			arm = true
			if err := s.SetUint64([]byte("CurrentTerm"), 5); err == nil {
				t.Fatal("Set at a failpoint succeeded")
			}
			if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 4 {
				t.Fatalf("failed Set changed the store to %d", v)
			}
			r := openStable(t, path, StableOptions{})
			v, err := r.GetUint64([]byte("CurrentTerm"))
			if err != nil || (v != 4 && v != 5) {
				t.Fatalf("after the crash CurrentTerm = %d, %v; want 4 or 5", v, err)
			}
			if point != "dir" && v != 4 {
				t.Fatalf("a Set that crashed before its rename is visible: %d", v)
			}
			if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("reopening left the temporary file: %v", err)
			}
			arm = false
			if err := s.SetUint64([]byte("CurrentTerm"), 6); err != nil {
				t.Fatalf("Set after a failed one: %v", err)
			}
			if v, _ := openStable(t, path, StableOptions{}).GetUint64([]byte("CurrentTerm")); v != 6 {
				t.Fatalf("CurrentTerm = %d after a later Set, want 6", v)
			}
		})
	}
}

func TestStableStoreBadPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o640)
	if _, err := OpenStableStore(filepath.Join(file, "stable"), StableOptions{}); err == nil {
		t.Fatal("a path under a regular file was accepted")
	}
}
