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

var allFailpoints = []string{fpWriteMiddle, fpSyncBefore, fpRenameBefore, fpRenameAfter, fpDirsyncAfter}

func TestFailpointOrder(t *testing.T) {
	t.Parallel()
	for _, nrec := range []int{0, 1, 10} {
		t.Run(fmt.Sprintf("records=%d", nrec), func(t *testing.T) {
			var seen []string
			opts := Options{Failpoint: func(name string) error {
				seen = append(seen, name)
				return nil
			}}
			dir := t.TempDir()
			want := makeRecords(nrec, 20)
			if _, err := Write(dir, 1, opts, fillWith(want)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seen, allFailpoints) {
				t.Errorf("failpoints = %v, want %v", seen, allFailpoints)
			}
			if _, got, err := readAll(snapPath(dir, 1)); err != nil || !equalRecords(got, want) {
				t.Errorf("Read: %v", err)
			}
		})
	}
}

// TestFailpoints fails Write at each point and checks what a crash at that
// moment would leave, and what Write leaves once it has returned.
func TestFailpoints(t *testing.T) {
	t.Parallel()
	const prevSeq, newSeq = 10, 20
	prevRecs := makeRecords(30, 40)
	for _, point := range allFailpoints {
		for _, nrec := range []int{0, 1, 50} {
			t.Run(fmt.Sprintf("%s/records=%d", point, nrec), func(t *testing.T) {
				dir := t.TempDir()
				prev := writeSnap(t, dir, prevSeq, prevRecs)
				prevBytes, err := os.ReadFile(prev.Path)
				if err != nil {
					t.Fatal(err)
				}
				newRecs := makeRecords(nrec, 100)
				tmp := filepath.Join(dir, fileName(newSeq, tmpExt))
				final := snapPath(dir, newSeq)
				renamed := point == fpRenameAfter || point == fpDirsyncAfter

				injected := fmt.Errorf("injected at %s", point)
				opts := Options{Failpoint: func(name string) error {
					if name != point {
						return nil
					}
					checkCrashState(t, point, tmp, final, nrec)
					return injected
				}}
				_, err = Write(dir, newSeq, opts, fillWith(newRecs))
				if !errors.Is(err, injected) {
					t.Fatalf("Write = %v, want the injected error", err)
				}

				infos, err := List(dir)
				if err != nil {
					t.Fatal(err)
				}
				wantSeqs := []uint64{prevSeq}
				if renamed {
					wantSeqs = []uint64{newSeq, prevSeq}
				}
				if got := seqsOf(infos); !slices.Equal(got, wantSeqs) {
					t.Fatalf("List = %v, want %v", got, wantSeqs)
				}
				if renamed {
					if _, got, err := readAll(final); err != nil || !equalRecords(got, newRecs) {
						t.Errorf("renamed snapshot: %v", err)
					}
				}
				after, err := os.ReadFile(prev.Path)
				if err != nil || !bytes.Equal(after, prevBytes) {
					t.Fatalf("previous snapshot changed: %v", err)
				}
				if _, got, err := readAll(prev.Path); err != nil || !equalRecords(got, prevRecs) {
					t.Errorf("previous snapshot: %v", err)
				}
				assertNoTemp(t, dir)

				// Recovery then goes on as usual.
				if err := RemoveTemp(dir); err != nil {
					t.Fatal(err)
				}
				if info, _, err := LoadNewest(dir, nil); err != nil || info.Seq != wantSeqs[0] {
					t.Errorf("LoadNewest = %+v, %v; want seq %d", info, err, wantSeqs[0])
				}
			})
		}
	}
}

// checkCrashState looks at the directory at the failpoint, which is what a
// crash at that moment would leave (before any cleanup by Write).
func checkCrashState(t *testing.T, point, tmp, final string, nrec int) {
	t.Helper()
	_, finalErr := os.Stat(final)
	switch point {
	case fpWriteMiddle:
		fi, err := os.Stat(tmp)
		if err != nil {
			t.Fatalf("%s: temp file missing: %v", point, err)
		}
		if fi.Size() <= int64(headerSize) && nrec > 0 {
			t.Errorf("%s: temp file holds %d bytes, want a header and a record", point, fi.Size())
		}
		if _, _, err := Verify(tmp); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: partial temp file verifies: %v", point, err)
		}
		if finalErr == nil {
			t.Errorf("%s: final file exists", point)
		}
	case fpSyncBefore, fpRenameBefore:
		// Complete but not yet renamed: recovery ignores it.
		if _, n, err := Verify(tmp); err != nil || n != nrec {
			t.Errorf("%s: temp file: %d records, %v", point, n, err)
		}
		if finalErr == nil {
			t.Errorf("%s: final file exists", point)
		}
	case fpRenameAfter, fpDirsyncAfter:
		if _, err := os.Stat(tmp); err == nil {
			t.Errorf("%s: temp file still exists after rename", point)
		}
		if _, n, err := Verify(final); err != nil || n != nrec {
			t.Errorf("%s: final file: %d records, %v", point, n, err)
		}
	}
}
