package wal

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// memLog returns a strict memory file system whose root is durable, and
// the log directory's path on it.
func memLog(t *testing.T) (*vfs.MemFS, string) {
	t.Helper()
	m := vfs.NewMem()
	d, err := m.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	return m, "/db/wal"
}

// checkRecovered opens the log on fsys and requires it to hold records
// 1..n with their payloads, n at least durable, and returns n.
func checkRecovered(t *testing.T, fsys vfs.FS, dir string, durable, appended uint64, what string) uint64 {
	t.Helper()
	l, err := Open(dir, Options{FS: fsys, SegmentSize: 256})
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer l.Close()
	last := l.LastSeq()
	if last < durable || last > appended {
		t.Fatalf("%s: recovered records up to %d, %d were made durable, %d appended", what, last, durable, appended)
	}
	next := l.FirstSeq()
	if err := l.Replay(next, func(seq uint64, data []byte) error {
		if seq != next || !bytes.Equal(data, payload(seq)) {
			t.Fatalf("%s: record %d (want %d) holds %q", what, seq, next, data)
		}
		next++
		return nil
	}); err != nil {
		t.Fatalf("%s: replay: %v", what, err)
	}
	return last
}

// TestPowerLossKeepsSynced runs the log on the strict memory file system
// and loses power after every step: every record a Sync returned for must
// be there, with nothing damaged, and a record only flushed is lost
// (which shows the file system is strict).
func TestPowerLossKeepsSynced(t *testing.T) {
	t.Parallel()
	m, dir := memLog(t)
	l := openLog(t, dir, Options{FS: m, SegmentSize: 256})
	defer l.Close()
	var synced uint64
	const n = 60
	for seq := uint64(1); seq <= n; seq++ {
		if err := l.Append(seq, payload(seq)); err != nil {
			t.Fatal(err)
		}
		if seq%7 == 0 {
			if err := l.Sync(seq); err != nil {
				t.Fatal(err)
			}
			synced = seq
		} else if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		checkRecovered(t, m.CrashClone(), dir, synced, seq, "power loss after record "+payloadName(seq))
	}
	if last := checkRecovered(t, m.CrashClone(), dir, synced, n, "power loss at the end"); last == n {
		t.Fatalf("record %d was only flushed and survived a power loss: the memory file system is not strict", n)
	}
	if got := checkRecovered(t, m.Clone(), dir, n, n, "a killed process"); got != n {
		t.Fatalf("a killed process left %d records, want %d", got, n)
	}
}

func payloadName(seq uint64) string { return string(payload(seq)[:bytes.IndexByte(payload(seq), ':')]) }

// TestFailEveryOperation fails the Nth file operation of a workload
// (appends, syncs, new segments, a front truncation), for every N: the
// Log must stop, and a power loss then must keep
// every record a Sync returned for. A Sync that succeeds after a failure
// fails the test. It replaces the named failpoints'
// sweep with one over every operation they sat beside.
func TestFailEveryOperation(t *testing.T) {
	t.Parallel()
	ops := func(fsys vfs.FS, dir string, synced *uint64) (err error) {
		l, err := Open(dir, Options{FS: fsys, SegmentSize: 256})
		if err != nil {
			return err
		}
		defer func() {
			// Fail-stop: once an operation failed, nothing more is made
			// durable.
			if err != nil && l.LastSeq() > *synced {
				if serr := l.Sync(l.LastSeq()); serr == nil {
					err = fmt.Errorf("a Sync succeeded after %w", err)
				}
			}
			if cerr := l.Close(); err == nil {
				err = cerr
			}
		}()
		for seq := uint64(1); seq <= 40; seq++ {
			if err := l.Append(seq, payload(seq)); err != nil {
				return err
			}
			if seq%5 == 0 {
				if err := l.Sync(seq); err != nil {
					return err
				}
				*synced = seq
			}
			if seq == 25 {
				if err := l.TruncateFront(10); err != nil {
					return err
				}
			}
		}
		return nil
	}
	count := errorfs.NewOnIndex(0, func(errorfs.Op) bool { return true })
	m, dir := memLog(t)
	var synced uint64
	if err := ops(errorfs.Wrap(m, count), dir, &synced); err != nil {
		t.Fatal(err)
	}
	total := count.Count()
	if total < 50 {
		t.Fatalf("the workload makes only %d file operations", total)
	}
	for n := 1; n <= total; n++ {
		m, dir := memLog(t)
		inj := errorfs.NewOnIndex(n, func(errorfs.Op) bool { return true })
		var synced uint64
		err := ops(errorfs.Wrap(m, inj), dir, &synced)
		op, hit := inj.Hit()
		if !hit {
			t.Fatalf("operation %d of %d never came", n, total)
		}
		// Reads, stats, closes and the removal of temporary files are
		// allowed to fail quietly; nothing else is.
		quiet := op.Kind == errorfs.OpClose || op.Kind == errorfs.OpRead || op.Kind == errorfs.OpStat || op.Kind == errorfs.OpOpen ||
			op.Kind == errorfs.OpRemove && strings.HasSuffix(op.Path, ".TEMP")
		if err == nil && !quiet {
			t.Fatalf("the workload succeeded although operation %d (%s %s) failed", n, op.Kind, op.Path)
		}
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("operation %d (%s %s) failed, the workload returned %v", n, op.Kind, op.Path, err)
		}
		checkRecovered(t, m.CrashClone(), dir, synced, 40, "power loss after failing "+op.Kind.String()+" "+op.Path)
	}
	t.Logf("%d operations failed in turn", total)
}
