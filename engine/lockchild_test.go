package engine

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

// holdFiles starts this test binary again as a child that inherits f (as
// os/exec's children do for the moment between fork and exec, and
// ExtraFiles for good) and keeps it until the test ends.
func holdFiles(t *testing.T, f vfs.File) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("no inherited descriptors (ExtraFiles) on Windows")
	}
	of, ok := vfs.OSFile(f)
	if !ok {
		t.Fatal("not a file of the operating system")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCloseReleasesLockAChildShares$")
	cmd.Env = append(os.Environ(), "DOCKET_TEST_HOLD_FILES=1")
	cmd.ExtraFiles = []*os.File{of}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the child exits at the end of its input
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	})
}

// TestCloseReleasesLockAChildShares: Close releases the directory's lock
// while a child process still has a copy of the LOCK file's descriptor,
// which every child started anywhere in the process (os/exec) has until it
// runs its program: reopening right after Close found the directory locked.
// A read-only DB's shared lock is released the same way.
func TestCloseReleasesLockAChildShares(t *testing.T) {
	t.Parallel()
	if os.Getenv("DOCKET_TEST_HOLD_FILES") == "1" {
		io.Copy(io.Discard, os.Stdin)
		return
	}
	t.Run("exclusive", func(t *testing.T) {
		e := newEnv(t, false)
		e.enqueue(e.q("q"), Task{})
		holdFiles(t, e.db.c.st.(*diskStorage).lock)
		if err := e.db.Close(); err != nil {
			t.Fatal(err)
		}
		e.db = nil
		e.open()
		_, err := Open(e.dir, Options{})
		wantErr(t, err, ErrLocked)
		e.db.Close()
		e.db = nil
		rdb, err := OpenReadOnly(e.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rdb.Close()
	})
	t.Run("shared", func(t *testing.T) {
		e := newEnv(t, false)
		e.enqueue(e.q("q"), Task{})
		e.db.Close()
		e.db = nil
		rdb, err := OpenReadOnly(e.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		holdFiles(t, rdb.c.st.(readOnlyStorage).lock)
		if err := rdb.Close(); err != nil {
			t.Fatal(err)
		}
		e.open()
	})
}
