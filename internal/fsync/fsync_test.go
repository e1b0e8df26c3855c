package fsync

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteFileReplaces: the new content replaces the old and no temporary
// file is left behind.
func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, want := range []string{"one", "two, longer", "3"} {
		if err := WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(entries))
	}
}

// TestWriteFileFailureKeepsTheOldFile: when the rename cannot happen (the
// target is a non-empty directory) the call fails, the target is untouched
// and the temporary file is gone.
func TestWriteFileFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("x"), 0o600); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(path, "inside")); err != nil {
		t.Fatalf("the target changed: %v", err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// TestDirOfMissingDirectoryFails: a sync that cannot happen is reported.
func TestDirOfMissingDirectoryFails(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Dir does nothing on Windows")
	}
	if err := Dir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("syncing a missing directory succeeded")
	}
}

// TestMkdirAll creates every missing level, accepts an existing directory
// and refuses a path that is a file.
func TestMkdirAll(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(deep); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(deep); err != nil || !st.IsDir() {
		t.Fatalf("stat %s: %v", deep, err)
	}
	if err := MkdirAll(deep); err != nil {
		t.Fatalf("existing directory: %v", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(file); err == nil {
		t.Fatal("a file was accepted as a directory")
	}
	if err := MkdirAll(filepath.Join(file, "below")); err == nil {
		t.Fatal("a directory below a file was created")
	}
}
