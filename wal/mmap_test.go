package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
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

// refusingMap is a tail file whose file system offers mappings but cannot
// make one (Map fails, or Stat does): the Log writes with write calls.
type refusingMap struct {
	*os.File
	statErr bool
	writes  *atomic.Int64
}

func (f refusingMap) Map(int) ([]byte, error) {
	return nil, errors.New("mmap: not on this file system")
}
func (f refusingMap) Datasync() error { return f.File.Sync() }

func (f refusingMap) Stat() (fs.FileInfo, error) {
	if f.statErr {
		return nil, errors.New("stat: refused")
	}
	return f.File.Stat()
}

func (f refusingMap) WriteAt(b []byte, off int64) (int, error) {
	f.writes.Add(1)
	return f.File.WriteAt(b, off)
}

// TestTailWrittenWhenItCannotBeMapped: a tail file the Log cannot map (the
// mapping refused, or the file's size unknown) gets its records by write
// calls, every one of them there on reopening.
func TestTailWrittenWhenItCannotBeMapped(t *testing.T) {
	t.Parallel()
	for _, statErr := range []bool{false, true} {
		t.Run(fmt.Sprint("stat fails: ", statErr), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var writes atomic.Int64
			open := func(name string, flag int, perm fs.FileMode) (segmentFile, error) {
				f, err := os.OpenFile(name, flag, perm)
				if err != nil {
					return nil, err
				}
				return refusingMap{File: f, statErr: statErr, writes: &writes}, nil
			}
			l := openLog(t, dir, Options{SegmentSize: 64 << 10, Preallocate: 16 << 10, openFile: open})
			const n = 500
			for range n {
				appendN(t, l, 1)
				if err := l.FlushTo(l.LastSeq()); err != nil {
					t.Fatal(err)
				}
			}
			if l.tmap != nil {
				t.Fatal("the tail is mapped though its file refused")
			}
			if w := writes.Load(); w < n {
				t.Fatalf("%d write calls for %d flushed records", w, n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			reopenAndCheck(t, dir, 1, n)
		})
	}
}
