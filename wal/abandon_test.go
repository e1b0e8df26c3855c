package wal

import (
	"errors"
	"fmt"
	"testing"
)

// TestAbandon: Abandon closes the log without writing what was appended
// after the last Sync; what was synced is kept, and the log refuses
// further calls.
func TestAbandon(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if err := l.Append(seq, []byte(fmt.Sprint("record ", seq))); err != nil {
			t.Fatal(err)
		}
		if seq == 3 {
			if err := l.Sync(3); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Abandon(); !errors.Is(err, ErrFailed) {
		t.Fatalf("abandon: %v, want ErrFailed", err)
	}
	if err := l.Append(6, []byte("x")); err == nil {
		t.Fatal("append after abandon succeeded")
	}
	l, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got []uint64
	if err := l.Replay(1, func(seq uint64, data []byte) error {
		if want := fmt.Sprint("record ", seq); string(data) != want {
			t.Fatalf("record %d: %q, want %q", seq, data, want)
		}
		got = append(got, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("records after abandon: %v, want [1 2 3]", got)
	}
}
