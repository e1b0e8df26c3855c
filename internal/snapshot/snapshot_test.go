package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// encode returns the exact bytes Write produces for seq and recs, through
// the same Writer code path.
func encode(seq uint64, recs [][]byte) []byte {
	var buf bytes.Buffer
	w := newWriter(&buf, 4096)
	w.writeHeader(seq)
	for _, r := range recs {
		if err := w.Add(r); err != nil {
			panic(err)
		}
	}
	if err := w.finish(seq); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// makeRecords returns n deterministic records whose sizes cycle up to maxSize.
func makeRecords(n, maxSize int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		size := 0
		if maxSize > 0 {
			size = (i * 37) % (maxSize + 1)
		}
		r := make([]byte, size)
		for j := range r {
			r[j] = byte(i*31 + j*7)
		}
		recs[i] = r
	}
	return recs
}

func bigRecord(size int) []byte {
	r := make([]byte, size)
	for i := range r {
		r[i] = byte(i * 13)
	}
	return r
}

func fillWith(recs [][]byte) func(*Writer) error {
	return func(w *Writer) error {
		for _, r := range recs {
			if err := w.Add(r); err != nil {
				return err
			}
		}
		return nil
	}
}

func writeSnap(t testing.TB, dir string, seq uint64, recs [][]byte) Info {
	t.Helper()
	info, err := Write(dir, seq, Options{}, fillWith(recs))
	if err != nil {
		t.Fatalf("Write(seq %d): %v", seq, err)
	}
	return info
}

// readAll copies every record, since Read's slices are only valid during fn.
func readAll(path string) (uint64, [][]byte, error) {
	recs := [][]byte{}
	seq, n, err := Read(path, func(rec []byte) error {
		recs = append(recs, bytes.Clone(rec))
		return nil
	})
	if err == nil && n != len(recs) {
		return 0, nil, fmt.Errorf("Read returned n=%d but delivered %d records", n, len(recs))
	}
	return seq, recs, err
}

func equalRecords(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

func snapPath(dir string, seq uint64) string {
	return filepath.Join(dir, fileName(seq, snapExt))
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	for _, name := range dirNames(t, dir) {
		if _, ok := parseName(name, tmpExt); ok {
			t.Errorf("temp file %s left in %s", name, dir)
		}
	}
}

func seqsOf(infos []Info) []uint64 {
	seqs := []uint64{}
	for _, in := range infos {
		seqs = append(seqs, in.Seq)
	}
	return seqs
}

func TestFileName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		seq  uint64
		want string
	}{
		{0, "snap-00000000000000000000.snap"},
		{42, "snap-00000000000000000042.snap"},
		{1<<64 - 1, "snap-18446744073709551615.snap"},
	}
	for _, tt := range tests {
		got := fileName(tt.seq, snapExt)
		if got != tt.want {
			t.Errorf("fileName(%d) = %q, want %q", tt.seq, got, tt.want)
		}
		if seq, ok := parseName(got, snapExt); !ok || seq != tt.seq {
			t.Errorf("parseName(%q) = %d, %v", got, seq, ok)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		seq  uint64
		recs [][]byte
	}{
		{"no records", 0, nil},
		{"one record", 1, [][]byte{[]byte("hello")}},
		{"one empty record", 2, [][]byte{{}}},
		{"many", 3, makeRecords(5000, 300)},
		{"max seq", 1<<64 - 1, makeRecords(3, 10)},
		{"big record", 4, [][]byte{bigRecord(3 << 20)}},
		{"big among small", 5, [][]byte{[]byte("a"), bigRecord(maxReadBuf + 1), {}, bigRecord(2 << 20), []byte("z")}},
		// Around the boundary between reading in place and copying out.
		{"read buffer edge", 6, [][]byte{bigRecord(maxReadBuf - crcSize), bigRecord(maxReadBuf - crcSize + 1), bigRecord(maxReadBuf - crcSize - 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			info := writeSnap(t, dir, tt.seq, tt.recs)
			if info.Seq != tt.seq || info.Path != snapPath(dir, tt.seq) {
				t.Errorf("Info = %+v, want seq %d path %s", info, tt.seq, snapPath(dir, tt.seq))
			}
			data, err := os.ReadFile(info.Path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != int64(len(data)) {
				t.Errorf("Info.Size = %d, file is %d bytes", info.Size, len(data))
			}
			if !bytes.Equal(data, encode(tt.seq, tt.recs)) {
				t.Errorf("file bytes differ from the encoder's")
			}
			seq, recs, err := readAll(info.Path)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if seq != tt.seq {
				t.Errorf("Read seq = %d, want %d", seq, tt.seq)
			}
			if !equalRecords(recs, tt.recs) {
				t.Errorf("Read returned %d records, want %d (or contents differ)", len(recs), len(tt.recs))
			}
			vseq, n, err := Verify(info.Path)
			if err != nil || vseq != tt.seq || n != len(tt.recs) {
				t.Errorf("Verify = %d, %d, %v; want %d, %d, nil", vseq, n, err, tt.seq, len(tt.recs))
			}
			assertNoTemp(t, dir)
		})
	}
}

func TestAddCopies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := makeRecords(100, 50)
	info, err := Write(dir, 9, Options{}, func(w *Writer) error {
		buf := make([]byte, 0, 64)
		for _, r := range want {
			buf = append(buf[:0], r...)
			if err := w.Add(buf); err != nil {
				return err
			}
			clear(buf[:cap(buf)]) // the caller reuses its buffer at once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := readAll(info.Path)
	if err != nil || !equalRecords(got, want) {
		t.Fatalf("Read: %v (records equal: %v)", err, equalRecords(got, want))
	}
}

func TestWriteFailures(t *testing.T) {
	t.Parallel()
	errFill := errors.New("fill failed")
	tests := []struct {
		name    string
		fill    func(w *Writer) error
		wantErr error // nil: any error
	}{
		{"fill returns error", func(w *Writer) error {
			w.Add([]byte("a"))
			return errFill
		}, errFill},
		{"fill ignores Add error", func(w *Writer) error {
			w.Add([]byte("a"))
			w.Add(make([]byte, MaxRecord+1))
			w.Add([]byte("b")) // must be refused too: the snapshot is abandoned
			return nil
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			prev := writeSnap(t, dir, 1, makeRecords(3, 5))
			_, err := Write(dir, 2, Options{}, tt.fill)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("Write error = %v, want %v", err, tt.wantErr)
			}
			infos, err := List(dir)
			if err != nil || !slices.Equal(seqsOf(infos), []uint64{1}) {
				t.Fatalf("List = %v, %v; want only seq 1", seqsOf(infos), err)
			}
			if _, _, err := Verify(prev.Path); err != nil {
				t.Errorf("previous snapshot: %v", err)
			}
			assertNoTemp(t, dir)
		})
	}
}

func TestAddAfterWriteReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var kept *Writer
	if _, err := Write(dir, 1, Options{}, func(w *Writer) error { kept = w; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.Add([]byte("late")); err == nil {
		t.Fatal("Add after Write returned succeeded")
	}
	if _, n, err := Verify(snapPath(dir, 1)); err != nil || n != 0 {
		t.Fatalf("Verify = %d, %v", n, err)
	}
}

func TestWriteSameSeqReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSnap(t, dir, 5, makeRecords(10, 10))
	want := makeRecords(3, 100)
	writeSnap(t, dir, 5, want)
	_, got, err := readAll(snapPath(dir, 5))
	if err != nil || !equalRecords(got, want) {
		t.Fatalf("Read: %v (records equal: %v)", err, equalRecords(got, want))
	}
}

func TestWriteMissingDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "absent")
	if _, err := Write(dir, 1, Options{}, nil); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, seq := range []uint64{5, 100, 7, 0} {
		writeSnap(t, dir, seq, nil)
	}
	unrelated := []string{
		fileName(200, tmpExt), // leftover temp: newer but never a snapshot
		"snap-1.snap",         // wrong digit count
		"snap-0000000000000000000x.snap",
		"snap-99999999999999999999.snap", // 20 digits but beyond uint64
		"snap-+0000000000000000001.snap",
		"snap-00000000000000000300.snap.bak",
		"other.txt",
		"wal-00000000000000000001",
	}
	for _, name := range unrelated {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(snapPath(dir, 400), 0o755); err != nil {
		t.Fatal(err)
	}

	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqsOf(infos), []uint64{100, 7, 5, 0}; !slices.Equal(got, want) {
		t.Fatalf("List seqs = %v, want %v", got, want)
	}
	for _, in := range infos {
		if in.Path != snapPath(dir, in.Seq) || in.Size != int64(minFileSize) {
			t.Errorf("Info = %+v, want path %s size %d", in, snapPath(dir, in.Seq), minFileSize)
		}
	}

	empty, err := List(t.TempDir())
	if err != nil || len(empty) != 0 {
		t.Errorf("List(empty dir) = %v, %v", empty, err)
	}
	if _, err := List(filepath.Join(dir, "absent")); err == nil {
		t.Error("List of a missing directory succeeded")
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	tests := []struct {
		keep int
		want []uint64
	}{
		{0, []uint64{}},
		{1, []uint64{50}},
		{2, []uint64{50, 40}},
		{5, []uint64{50, 40, 30, 20, 10}},
		{10, []uint64{50, 40, 30, 20, 10}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("keep=%d", tt.keep), func(t *testing.T) {
			dir := t.TempDir()
			for _, seq := range []uint64{30, 10, 50, 20, 40} {
				writeSnap(t, dir, seq, makeRecords(2, 4))
			}
			for _, seq := range []uint64{60, 5} {
				if err := os.WriteFile(filepath.Join(dir, fileName(seq, tmpExt)), []byte("partial"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "keep.me"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Prune(dir, tt.keep); err != nil {
				t.Fatal(err)
			}
			infos, err := List(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := seqsOf(infos); !slices.Equal(got, tt.want) {
				t.Errorf("after Prune(%d): %v, want %v", tt.keep, got, tt.want)
			}
			for _, in := range infos {
				if _, _, err := Verify(in.Path); err != nil {
					t.Errorf("kept snapshot: %v", err)
				}
			}
			assertNoTemp(t, dir)
			if _, err := os.Stat(filepath.Join(dir, "keep.me")); err != nil {
				t.Errorf("Prune touched an unrelated file: %v", err)
			}
		})
	}
	if err := Prune(t.TempDir(), -1); err == nil {
		t.Error("Prune(-1) succeeded")
	}
}

func TestRemoveTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSnap(t, dir, 3, makeRecords(2, 8))
	// A Write that crashed before its rename, newer than any snapshot.
	leftover := filepath.Join(dir, fileName(9, tmpExt))
	partial := encode(9, makeRecords(10, 8))
	if err := os.WriteFile(leftover, partial[:len(partial)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	unrelated := filepath.Join(dir, "notes.tmp")
	if err := os.WriteFile(unrelated, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	infos, err := List(dir)
	if err != nil || !slices.Equal(seqsOf(infos), []uint64{3}) {
		t.Fatalf("List with a leftover temp = %v, %v; want [3]", seqsOf(infos), err)
	}
	if info, _, err := LoadNewest(dir, nil); err != nil || info.Seq != 3 {
		t.Fatalf("LoadNewest = %+v, %v; want seq 3", info, err)
	}
	if err := RemoveTemp(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temp still there: %v", err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("RemoveTemp removed a file that is not ours: %v", err)
	}
	if _, _, err := Verify(snapPath(dir, 3)); err != nil {
		t.Errorf("snapshot damaged by RemoveTemp: %v", err)
	}
	if err := RemoveTemp(dir); err != nil {
		t.Errorf("second RemoveTemp: %v", err)
	}

	// A Write of the same seq as a leftover temp file overwrites it.
	if err := os.WriteFile(leftover, bytes.Repeat([]byte{0xff}, 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	want := makeRecords(4, 8)
	writeSnap(t, dir, 9, want)
	if _, got, err := readAll(snapPath(dir, 9)); err != nil || !equalRecords(got, want) {
		t.Fatalf("Read after overwriting a leftover temp: %v", err)
	}
	assertNoTemp(t, dir)
}

func TestLoadNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, _, err := LoadNewest(dir, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoadNewest(empty) = %v, want ErrNotFound", err)
	}
	writeSnap(t, dir, 1, makeRecords(1, 3))
	want := makeRecords(7, 20)
	writeSnap(t, dir, 2, want)
	var got [][]byte
	info, n, err := LoadNewest(dir, func(rec []byte) error {
		got = append(got, bytes.Clone(rec))
		return nil
	})
	if err != nil || info.Seq != 2 || n != len(want) || !equalRecords(got, want) {
		t.Fatalf("LoadNewest = %+v, %d, %v", info, n, err)
	}

	// A corrupt newest snapshot is an error, not a silent fallback to seq 1.
	path := snapPath(dir, 2)
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadNewest(dir, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("LoadNewest with corrupt newest = %v, want ErrCorrupt", err)
	}
}

func TestReadCallbackError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	info := writeSnap(t, dir, 1, makeRecords(10, 10))
	stop := errors.New("stop")
	calls := 0
	_, _, err := Read(info.Path, func([]byte) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("Read = %v after %d calls, want the callback's error after 3", err, calls)
	}
}

func TestReadMissingFile(t *testing.T) {
	t.Parallel()
	_, _, err := Read(filepath.Join(t.TempDir(), fileName(1, snapExt)), nil)
	if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read(missing) = %v, want a not-exist error that is not ErrCorrupt", err)
	}
}
