package wal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

// faultFS stands in for Options.openFile: the files it opens are real, but
// one chosen operation on one chosen file fails, and every write, fsync or
// open after that is counted (a failed Log must do no more I/O; closing a
// file it gives up on is allowed).
type faultFS struct {
	mu    sync.Mutex
	op    string // what fails next: "create", "open", "write", "short", "sync", "close"
	match string // in the path of the file that fails; "" for any
	fired bool
	after int
}

func (ffs *faultFS) arm(op, match string) {
	ffs.mu.Lock()
	defer ffs.mu.Unlock()
	ffs.op, ffs.match = op, match
}

// hit returns which of ops on path is the one to fail, if any.
func (ffs *faultFS) hit(path string, ops ...string) string {
	ffs.mu.Lock()
	defer ffs.mu.Unlock()
	if ffs.fired && ops[0] != "close" {
		ffs.after++
	}
	for _, op := range ops {
		if op == ffs.op && strings.Contains(path, ffs.match) {
			ffs.op, ffs.fired = "", true
			return op
		}
	}
	return ""
}

func (ffs *faultFS) open(name string, flag int, perm fs.FileMode) (segmentFile, error) {
	op := "open"
	if flag&os.O_CREATE != 0 {
		op = "create"
	}
	if ffs.hit(name, op) != "" {
		return nil, &fs.PathError{Op: op, Path: name, Err: errInjected}
	}
	f, err := vfs.Default.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{f: f, ffs: ffs}, nil
}

// faultFile does not embed the file, so that io.Copy goes through Write.
type faultFile struct {
	f   vfs.File
	ffs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	switch f.ffs.hit(f.f.Name(), "write", "short") {
	case "write":
		return 0, errInjected
	case "short":
		// Half the bytes reach the file, as when the disk fills up.
		n, _ := f.f.Write(b[:len(b)/2])
		return n, errInjected
	}
	return f.f.Write(b)
}

// WriteAt fails as Write does. A "short" write is one of records; the
// zeros of a tail's spare space (see reserve) meet "shortspare" instead,
// so that each case picks the write it cuts short.
func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	short := "short"
	if allZero(b) {
		short = "shortspare"
	}
	switch f.ffs.hit(f.f.Name(), "write", short) {
	case "write":
		return 0, errInjected
	case "short", "shortspare":
		n, _ := f.f.WriteAt(b[:len(b)/2], off)
		return n, errInjected
	}
	return f.f.WriteAt(b, off)
}

func (f *faultFile) Truncate(size int64) error {
	if f.ffs.hit(f.f.Name(), "truncate") != "" {
		return errInjected
	}
	return f.f.Truncate(size)
}

func (f *faultFile) Datasync() error {
	if f.ffs.hit(f.f.Name(), "sync") != "" {
		return errInjected
	}
	return f.f.Datasync()
}

func (f *faultFile) Sync() error {
	if f.ffs.hit(f.f.Name(), "sync") != "" {
		return errInjected
	}
	return f.f.Sync()
}

func (f *faultFile) Close() error {
	if f.ffs.hit(f.f.Name(), "close") != "" {
		f.f.Close()
		return errInjected
	}
	return f.f.Close()
}

// TestFileFailures makes each write, fsync, creation and close the Log does
// fail in turn, for real rather than at a failpoint: the call that meets it
// and every later call return ErrFailed wrapping the cause, the Log does no
// more I/O, and reopening the directory gives back every record synced
// before, cutting what a short write left.
func TestFileFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		op       string // faultFS operation
		match    string
		segSize  int
		call     func(l *Log) error
		wantCut  bool   // reopening cuts a torn tail
		minFirst uint64 // reopening finishes the truncation: it holds no record before this one
	}{
		{"write on sync", "write", "", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }, false, 1},
		{"write on flush", "write", "", 0, func(l *Log) error { return l.Flush() }, false, 1},
		{"write on read", "write", "", 0, func(l *Log) error { _, err := l.Read(l.LastSeq()); return err }, false, 1},
		{"write on close", "write", "", 0, func(l *Log) error { return l.Close() }, false, 1},
		{"short write", "short", "", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }, true, 1},
		{"short write across segments", "short", "", 200, func(l *Log) error { return l.Flush() }, true, 1},
		// Spare space cut short is zeros still: nothing to cut.
		{"short write of spare space", "shortspare", "", 200, func(l *Log) error { return l.Flush() }, false, 1},
		{"trim on close", "truncate", "", 0, func(l *Log) error { return l.Close() }, false, 1},
		{"sync", "sync", "", 0, func(l *Log) error { return l.Sync(l.LastSeq()) }, false, 1},
		{"sync on close", "sync", "", 0, func(l *Log) error { return l.Close() }, false, 1},
		{"sync of a full segment", "sync", "", 200, func(l *Log) error { return l.Flush() }, false, 1},
		{"close of a full segment", "close", "", 200, func(l *Log) error { return l.Flush() }, false, 1},
		{"create of a segment", "create", "", 200, func(l *Log) error { return l.Flush() }, false, 1},
		{"close", "close", "", 0, func(l *Log) error { return l.Close() }, false, 1},
		{"truncate front: create", "create", tempSuffix, 0, func(l *Log) error { return l.TruncateFront(5) }, false, 1},
		{"truncate front: write", "write", tempSuffix, 0, func(l *Log) error { return l.TruncateFront(5) }, false, 1},
		{"truncate front: short write", "short", tempSuffix, 0, func(l *Log) error { return l.TruncateFront(5) }, false, 1},
		{"truncate front: sync", "sync", tempSuffix, 0, func(l *Log) error { return l.TruncateFront(5) }, false, 1},
		{"truncate front: close tail", "close", segmentName(1), 0, func(l *Log) error { return l.TruncateFront(5) }, false, 5},
		{"truncate front: reopen tail", "open", "", 0, func(l *Log) error { return l.TruncateFront(5) }, false, 5},
		{"truncate front: middle segment", "sync", tempSuffix, 200, func(l *Log) error { return l.TruncateFront(5) }, false, 1},
		{"truncate back: create", "create", tempSuffix, 0, func(l *Log) error { return l.TruncateBack(15) }, false, 1},
		{"truncate back: write", "write", tempSuffix, 0, func(l *Log) error { return l.TruncateBack(15) }, false, 1},
		{"truncate back: sync", "sync", tempSuffix, 0, func(l *Log) error { return l.TruncateBack(15) }, false, 1},
		{"truncate back: reopen tail", "open", "", 0, func(l *Log) error { return l.TruncateBack(15) }, false, 1},
		// Reset drops every record; reopening after a failure finds the
		// log empty, at 1 as a new directory when the new segment was not
		// created.
		{"reset: create", "create", segmentName(100), 0, func(l *Log) error { return l.Reset(100) }, false, 1},
		{"reset: sync", "sync", segmentName(100), 0, func(l *Log) error { return l.Reset(100) }, false, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{}
			l := openLog(t, dir, Options{SegmentSize: tt.segSize, openFile: ffs.open})
			appendN(t, l, 10)
			if err := l.Sync(10); err != nil {
				t.Fatal(err)
			}
			appendN(t, l, 10) // pending; crosses segments when segSize is set
			if strings.HasPrefix(tt.name, "truncate") || strings.HasPrefix(tt.name, "reset") {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			ffs.arm(tt.op, tt.match)
			err := tt.call(l)
			if !ffs.fired {
				t.Fatalf("the call never reached %s of %q (returned %v)", tt.op, tt.match, err)
			}
			isErr(t, err, ErrFailed)
			isErr(t, err, errInjected)

			isErr(t, l.Append(l.LastSeq()+1, nil), ErrFailed)
			isErr(t, l.Sync(l.LastSeq()), ErrFailed)
			isErr(t, l.Sync(1), ErrFailed)
			isErr(t, l.Flush(), ErrFailed)
			isErr(t, l.TruncateFront(2), ErrFailed)
			isErr(t, l.TruncateBack(3), ErrFailed)
			isErr(t, l.Reset(50), ErrFailed)
			isErr(t, l.Replay(0, func(uint64, []byte) error { return nil }), ErrFailed)
			if _, err := l.Read(1); !errors.Is(err, ErrFailed) {
				t.Fatalf("Read on a failed Log: %v", err)
			}
			if err := l.Close(); !errors.Is(err, ErrFailed) && !errors.Is(err, ErrClosed) {
				t.Fatalf("Close: %v", err)
			}
			if ffs.after != 0 {
				t.Fatalf("%d file operations after the failure", ffs.after)
			}

			if _, err := Check(dir); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, Options{})
			defer l.Close()
			if cut := l.Repaired().Cut != nil; cut != tt.wantCut {
				t.Fatalf("reopening cut a torn tail: %v, want %v (%+v)", cut, tt.wantCut, l.Repaired())
			}
			switch {
			case strings.HasPrefix(tt.name, "reset"):
				if l.FirstSeq() != tt.minFirst || l.LastSeq() != tt.minFirst-1 {
					t.Fatalf("reopened log holds %d..%d, want it empty at %d", l.FirstSeq(), l.LastSeq(), tt.minFirst)
				}
			case l.FirstSeq() > tt.minFirst || l.LastSeq() < 10:
				t.Fatalf("reopened log holds %d..%d, want at least %d..10", l.FirstSeq(), l.LastSeq(), tt.minFirst)
			}
			wantRecords(t, replayAll(t, l, 0), l.FirstSeq(), l.LastSeq())
			for name := range snapshotDir(t, dir) {
				if strings.HasSuffix(name, tempSuffix) {
					t.Fatalf("%s left behind", name)
				}
			}
			// It takes writes again.
			appendN(t, l, 3)
			if err := l.Sync(l.LastSeq()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenFileFailures fails the files Open itself needs.
func TestOpenFileFailures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, op string
		existing bool
	}{
		{"create the first segment", "create", false},
		{"open the tail", "open", true},
		{"sync the tail", "sync", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.existing {
				dir = newLog(t, 0, 5)
			}
			ffs := &faultFS{}
			ffs.arm(tt.op, "")
			if _, err := Open(dir, Options{openFile: ffs.open}); !errors.Is(err, errInjected) {
				t.Fatalf("Open = %v, want the injected failure", err)
			}
			var want uint64
			if tt.existing {
				want = 5
			}
			reopenAndCheck(t, dir, 1, want)
		})
	}
}

// TestTempFileOfAFailedTruncationIsRemoved checks that the half-written
// .START.TEMP a failed truncation leaves would not survive Open either,
// when the process dies before it can remove it.
func TestTempFileOfAFailedTruncationIsRemoved(t *testing.T) {
	t.Parallel()
	dir := newLog(t, 0, 20)
	temp := filepath.Join(dir, segmentName(5)+startSuffix+tempSuffix)
	writeFile(t, temp, []byte("half a segment"))
	reopenAndCheck(t, dir, 1, 20)
	if _, err := os.Stat(temp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s survived Open: %v", temp, err)
	}
}
