package flock

import (
	"os"
	"strconv"
	"strings"
)

// The exclusive holder of a lock file records its process id in it, so that
// a process refused the lock can say who has it. The id is written after
// the first byte (a newline): on Windows the lock covers that byte, and
// others cannot read it while the lock is held. It is padded to a fixed
// width, so that a shorter id overwrites a longer one without truncating
// the file.
const pidWidth = 20

// recordHolder writes this process's id into f, best effort: a lock file
// opened read-only, or a write that fails, leaves it unrecorded.
func recordHolder(f *os.File) {
	pid := strconv.Itoa(os.Getpid())
	f.WriteAt([]byte("\n"+pid+strings.Repeat(" ", pidWidth-len(pid))+"\n"), 0)
}

// Holder returns the id of a process that holds the lock file at path, or
// 0 when it cannot tell. On Linux it asks the kernel (/proc/locks), which
// also knows shared holders; elsewhere, or when the kernel lists none, it
// reads the id the exclusive holder recorded, unless that process is gone.
// Call it after Exclusive or Shared reported ErrHeld: a recorded id can be
// that of an earlier holder when the current one records nothing (a shared
// lock, an older program), and a process reusing that id would be named.
func Holder(path string) int {
	if pid := kernelHolder(path); pid > 0 {
		return pid
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, pidWidth+1)
	n, _ := f.ReadAt(b, 1)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 || !alive(pid) {
		return 0
	}
	return pid
}
