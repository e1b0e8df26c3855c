package wal

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMappedTailSurvivesAKill: on Linux the tail segment is written through
// a shared mapping, not write calls; what FlushTo returned for is in the
// page cache all the same, so a process killed (SIGKILL) right after loses
// none of it. The child process (this test binary again) appends and
// flushes, then waits to be killed; its maps show the segment mapped.
func TestMappedTailSurvivesAKill(t *testing.T) {
	if dir := os.Getenv("DOCKET_WAL_KILL_DIR"); dir != "" {
		n, _ := strconv.Atoi(os.Getenv("DOCKET_WAL_KILL_N"))
		l, err := Open(dir, Options{SegmentSize: 64 << 10, Preallocate: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, n)
		if err := l.FlushTo(l.LastSeq()); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("flushed\n")
		io.Copy(io.Discard, os.Stdin) // until killed
		t.Fatal("not killed")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the tail is mapped on Linux only")
	}
	t.Parallel()
	dir := t.TempDir()
	const n = 3000 // several segments of 64 KiB, the last one mapped
	cmd := exec.Command(os.Args[0], "-test.run=^TestMappedTailSurvivesAKill$")
	cmd.Env = append(os.Environ(), "DOCKET_WAL_KILL_DIR="+dir, "DOCKET_WAL_KILL_N="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the child waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "flushed\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	names := segNames(t, dir)
	tail := filepath.Join(dir, names[len(names)-1])
	if !strings.Contains(string(maps), tail) {
		t.Fatalf("the tail segment %s is not mapped by the child:\n%s", tail, maps)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	reopenAndCheck(t, dir, 1, n)
}
