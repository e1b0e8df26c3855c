package cluster

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/docketdb/docket/internal/flock"
)

// TestUnlockReleasesLockAChildShares: releasing a node directory's lock
// frees it at once, while a child process still has a copy of the LOCK
// file's descriptor (as every child started in the process does until it
// runs its program): closing the file alone left the directory locked for
// as long as the child held it.
func TestUnlockReleasesLockAChildShares(t *testing.T) {
	if os.Getenv("DOCKET_TEST_HOLD_FILES") == "1" {
		io.Copy(io.Discard, os.Stdin)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no inherited descriptors (ExtraFiles) on Windows")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "LOCK"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err := lockShared(dir)
	if err != nil || lock == nil {
		t.Fatalf("lock: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnlockReleasesLockAChildShares$")
	cmd.Env = append(os.Environ(), "DOCKET_TEST_HOLD_FILES=1")
	cmd.ExtraFiles = []*os.File{lock}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child exits at the end of its input
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}()
	if err := unlock(lock); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flock.Exclusive(f); errors.Is(err, flock.ErrHeld) {
		t.Fatal("the directory is still locked once its lock was released")
	} else if err != nil {
		t.Fatal(err)
	}
}
