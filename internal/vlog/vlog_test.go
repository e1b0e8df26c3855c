package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRoundTrip: values of every kind and size read back, before and
// after reopening, across files cut at FileSize; a value larger than
// FileSize gets a file of its own.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 1000)
	es := appendN(t, l, 0, 200)
	big, err := l.Append(999, Payload, bytes.Repeat([]byte("B"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	es = append(es, appendN(t, l, 200, 210)...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, es); err != nil {
		t.Fatal(err)
	}
	if big.Off != 0 || es[200].ref.File != big.File+1 || es[200].ref.Off != 0 {
		t.Errorf("big value at %v, next at %v: want a file of its own", big, es[200].ref)
	}
	files := l.Files()
	if len(files) < 10 {
		t.Fatalf("%d files for 60 KB in files of 1000 bytes", len(files))
	}
	for _, fi := range files {
		if fi.Size != fi.Synced || fi.Num != big.File && fi.Size > 1000 {
			t.Errorf("file %+v", fi)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, m, 1000)
	defer l.Close()
	if err := readBack(l, es); err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(big, 999, Payload, make([]byte, 0, 8000))
	if err != nil || len(got) != 5000 || got[4999] != 'B' {
		t.Fatalf("big value: %d bytes, %v", len(got), err)
	}
	// Scan lists every record of a file, in order.
	var scanned []entry
	for _, fi := range l.Files() {
		if err := l.Scan(fi.Num, func(owner uint64, kind Kind, r Ref) error {
			if owner != 999 {
				if kind != kindOf(owner) {
					t.Errorf("owner %d: kind %v", owner, kind)
				}
				scanned = append(scanned, entry{owner, r})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(scanned) != fmt.Sprint(es) {
		t.Errorf("Scan found\n%v\nwant\n%v", scanned, es)
	}
	if d, err := l.Check(); err != nil || len(d) != 0 {
		t.Errorf("Check of a sound log: %v, %v", d, err)
	}
}

// TestReadBeforeSync: a ref reads back only after a Sync that began after
// its Append; before, Read fails with ErrUnsynced every time, in the head
// file and in a file cut since the last Sync.
func TestReadBeforeSync(t *testing.T) {
	t.Parallel()
	l := open(t, newMem(t), 600)
	defer l.Close()
	first := appendN(t, l, 1, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	more := appendN(t, l, 3, 20) // spans several files
	if more[len(more)-1].ref.File == first[0].ref.File {
		t.Fatal("no file cut")
	}
	for _, e := range more {
		if _, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil); !errors.Is(err, ErrUnsynced) {
			t.Fatalf("Read of owner %d before Sync: %v, want ErrUnsynced", e.owner, err)
		}
	}
	if err := readBack(l, first); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, append(first, more...)); err != nil {
		t.Fatal(err)
	}
}

// TestBadInput: each call with an argument that cannot be valid gets a
// clear error and changes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 0)
	es := appendN(t, l, 1, 4)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	e := es[1]       // owner 2, 74 bytes
	l.maxValue = 100 // as MaxValueSize, without a GiB in the test
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"append kind 0", ErrBadRef, func() error { _, err := l.Append(1, 0, nil); return err }},
		{"append kind 9", ErrBadRef, func() error { _, err := l.Append(1, 9, nil); return err }},
		{"append too large", ErrBadRef, func() error { _, err := l.Append(1, Payload, make([]byte, 101)); return err }},
		{"read kind 0", ErrBadRef, func() error { _, err := l.Read(e.ref, e.owner, 0, nil); return err }},
		{"read negative offset", ErrBadRef, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Off: -1, Len: e.ref.Len}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read length over max", ErrBadRef, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Len: MaxValueSize + 1}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read past the end", ErrMissing, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Off: 1 << 20, Len: 3}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read missing file", ErrMissing, func() error {
			_, err := l.Read(Ref{File: 77, Len: 3}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read zero length", ErrMismatch, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Off: e.ref.Off}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read shorter length", ErrMismatch, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Off: e.ref.Off, Len: e.ref.Len - 1}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"read other owner", ErrMismatch, func() error { _, err := l.Read(e.ref, 3, kindOf(e.owner), nil); return err }},
		{"read other kind", ErrMismatch, func() error { _, err := l.Read(e.ref, e.owner, kindOf(e.owner+1), nil); return err }},
		{"read mid-record", ErrCorrupt, func() error {
			_, err := l.Read(Ref{File: e.ref.File, Off: e.ref.Off + 1, Len: 3}, e.owner, kindOf(e.owner), nil)
			return err
		}},
		{"remove head", ErrActive, func() error { return l.Remove(e.ref.File) }},
		{"remove missing", ErrMissing, func() error { return l.Remove(77) }},
		{"compact missing", ErrMissing, func() error { _, err := l.Compact(77, nil); return err }},
		{"scan missing", ErrMissing, func() error { return l.Scan(77, nil) }},
		{"open negative size", ErrBadRef, func() error { _, err := Open(dir+"2", Options{FS: m, FileSize: -1}); return err }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	if err := readBack(l, es); err != nil {
		t.Fatalf("after bad calls: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closed := []func() error{
		func() error { _, err := l.Append(1, Payload, nil); return err },
		func() error { _, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil); return err },
		l.Sync,
		func() error { return l.Scan(e.ref.File, nil) },
		func() error { _, err := l.Compact(e.ref.File, nil); return err },
		func() error { return l.Remove(e.ref.File) },
		l.Close,
	}
	for i, call := range closed {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("call %d after Close: %v, want ErrClosed", i, err)
		}
	}
}

// TestPowerLoss: after a power loss, what Sync returned for reads back,
// what it did not fails cleanly, and appends after reopening go to a new
// file, never over a synced record.
func TestPowerLoss(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 4000)
	synced := appendN(t, l, 0, 40)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	lost := appendN(t, l, 40, 80) // in the head file and in new ones
	crashed := m.CrashClone()
	l.Close()

	for round := range 3 {
		l = open(t, crashed, 4000)
		if err := readBack(l, synced); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, e := range lost {
			got, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil)
			switch {
			case round == 0 && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt):
				t.Fatalf("round %d: unsynced owner %d: %v, want ErrMissing or ErrCorrupt", round, e.owner, err)
			case err == nil && !bytes.Equal(got, value(e.owner)):
				// A file number lost with the crash is used again by
				// the appends after it: a stale ref may name a record,
				// but never returns another's bytes.
				t.Fatalf("round %d: unsynced owner %d: wrong bytes", round, e.owner)
			}
		}
		last := synced[len(synced)-1].ref.File
		more := appendN(t, l, 100, 110)
		if more[0].ref.File <= last || more[0].ref.Off != 0 {
			t.Fatalf("round %d: append after reopening at %v, last synced file %d", round, more[0].ref, last)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := readBack(l, append(synced, more...)); err != nil {
			t.Fatal(err)
		}
		synced = append(synced, more...)
		crashed = crashed.CrashClone()
		l.Close()
	}
}

// TestTornTail cuts the last file at every byte and pads it with zeros, as
// a crash during a write leaves it: Open succeeds, whole records read
// back, cut ones fail with ErrCorrupt or ErrMissing, Scan stops cleanly,
// Check reports the torn tail and nothing else, and appends go to a new
// file.
func TestTornTail(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 0)
	es := appendN(t, l, 1, 6)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	whole := fileBytes(t, m, 0)
	for cut := 0; cut <= len(whole); cut++ {
		for _, pad := range []int{0, 100} {
			b := append(bytes.Clone(whole[:cut]), make([]byte, pad)...)
			l := open(t, memWith(t, map[uint32][]byte{0: b}), 0)
			var intact, scanned []entry
			lastEnd := int64(0)
			for _, e := range es {
				// Zeros may restore a cut value that ends in zeros.
				if end := e.ref.end(); end <= int64(len(b)) && bytes.Equal(b[:end], whole[:end]) {
					intact = append(intact, e)
					lastEnd = end
				} else if err := lostOK(l, e); err != nil {
					t.Fatalf("cut %d pad %d: %v", cut, pad, err)
				}
			}
			if err := readBack(l, intact); err != nil {
				t.Fatalf("cut %d pad %d: %v", cut, pad, err)
			}
			if err := l.Scan(0, func(owner uint64, kind Kind, r Ref) error {
				scanned = append(scanned, entry{owner, r})
				return nil
			}); err != nil {
				t.Fatalf("cut %d pad %d: Scan: %v", cut, pad, err)
			}
			if fmt.Sprint(scanned) != fmt.Sprint(intact) {
				t.Fatalf("cut %d pad %d: Scan found %v, want %v", cut, pad, scanned, intact)
			}
			d, err := l.Check()
			if err != nil {
				t.Fatal(err)
			}
			atEdge := int64(len(b)) == lastEnd
			switch {
			case atEdge && len(d) != 0:
				t.Fatalf("cut %d pad %d at a record's edge: Check found %v", cut, pad, d)
			case !atEdge && (len(d) != 1 || !d[0].Torn):
				t.Fatalf("cut %d pad %d: Check found %v, want one torn tail", cut, pad, d)
			}
			r, err := l.Append(9, Payload, []byte("after"))
			if err != nil || r.File != 1 || r.Off != 0 {
				t.Fatalf("append after reopening: %v %v, want file 1 offset 0", r, err)
			}
			l.Close()
		}
	}
}

// TestBitFlip flips every bit of a small file in turn: the damaged record
// fails Read with ErrCorrupt naming file and offset, the others read back,
// Check lists exactly it (with owner and kind when its header is intact),
// Scan skips it, and Compact refuses to drop it while it is live.
func TestBitFlip(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 0)
	es := appendN(t, l, 1, 4)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	whole := fileBytes(t, m, 0)
	step := 1
	if testing.Short() {
		step = 7
	}
	for bit := 0; bit < len(whole)*8; bit += step {
		b := bytes.Clone(whole)
		b[bit/8] ^= 1 << (bit % 8)
		fm := memWith(t, map[uint32][]byte{0: b})
		l := open(t, fm, 0)
		var hit entry
		var rest []entry
		for _, e := range es {
			if int64(bit/8) >= e.ref.Off && int64(bit/8) < e.ref.end() {
				hit = e
			} else {
				rest = append(rest, e)
			}
		}
		_, err := l.Read(hit.ref, hit.owner, kindOf(hit.owner), nil)
		where := fmt.Sprintf("file %s offset %d", fileName(0), hit.ref.Off)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), where) {
			t.Fatalf("bit %d: Read of owner %d: %v, want ErrCorrupt at %s", bit, hit.owner, err, where)
		}
		if err := readBack(l, rest); err != nil {
			t.Fatalf("bit %d: %v", bit, err)
		}
		d, err := l.Check()
		if err != nil {
			t.Fatal(err)
		}
		headerOK := bit/8-int(hit.ref.Off) < 4 || bit/8-int(hit.ref.Off) >= HeaderSize
		if len(d) != 1 || d[0].Off != hit.ref.Off || d[0].HeaderOK != headerOK || d[0].Torn && hit != es[len(es)-1] ||
			headerOK && (d[0].Owner != hit.owner || d[0].Kind != kindOf(hit.owner)) {
			t.Fatalf("bit %d in owner %d: Check found %v", bit, hit.owner, d)
		}
		var scanned []entry
		l.Scan(0, func(owner uint64, kind Kind, r Ref) error {
			scanned = append(scanned, entry{owner, r})
			return nil
		})
		if fmt.Sprint(scanned) != fmt.Sprint(rest) {
			t.Fatalf("bit %d: Scan found %v, want %v", bit, scanned, rest)
		}
		if _, err := l.Compact(0, func(uint64, Kind, Ref) bool { return true }); !errors.Is(err, ErrCorrupt) && !d[0].Torn {
			t.Fatalf("bit %d: Compact with the damaged record live: %v, want ErrCorrupt", bit, err)
		}
		l.Close()
	}
}
