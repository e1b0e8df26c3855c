package cluster

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

func sampleEntries() []raft.Log {
	return []raft.Log{
		{},
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")},
		{Index: 42, Term: 7, Type: raft.LogCommand, Data: []byte("hello"), Extensions: []byte{0, 1, 2},
			AppendedAt: time.Date(2026, 12, 1, 22, 0, 0, 123456789, time.UTC)},
		{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: raft.LogType(255), Data: bytes.Repeat([]byte{0xff}, 300),
			AppendedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Index: 3, Term: 2, Type: raft.LogNoop, AppendedAt: time.Unix(-5, 0).UTC()},
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range sampleEntries() {
		b := appendEntry(nil, &e)
		var got raft.Log
		if err := decodeEntry(b, &got); err != nil {
			t.Fatalf("decode %+v: %v", e, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip: got %+v, want %+v", got, e)
		}
		if b2 := appendEntry(nil, &got); !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not deterministic: %x then %x", b, b2)
		}
	}
}

// The layout is the on-disk format: this is entry 42 above, byte for byte.
func TestEntryLayout(t *testing.T) {
	e := sampleEntries()[2]
	want := []byte{
		1, 0, 1, // version, LogCommand, appendedAt flag
		42, 0, 0, 0, 0, 0, 0, 0, // index
		7, 0, 0, 0, 0, 0, 0, 0, // term
	}
	at := e.AppendedAt.Unix()
	for i := range 8 {
		want = append(want, byte(at>>(8*i)))
	}
	want = append(want, 0x15, 0xcd, 0x5b, 0x07) // 123456789
	want = append(want, 5, 'h', 'e', 'l', 'l', 'o', 3, 0, 1, 2)
	if got := appendEntry(nil, &e); !bytes.Equal(got, want) {
		t.Fatalf("layout:\n got %x\nwant %x", got, want)
	}
}

func TestDecodeEntryRefuses(t *testing.T) {
	good := appendEntry(nil, &sampleEntries()[2])
	cases := map[string][]byte{
		"empty":           nil,
		"short header":    good[:10],
		"version":         append([]byte{2}, good[1:]...),
		"unknown flag":    append(append([]byte{}, good[:2]...), append([]byte{3}, good[3:]...)...),
		"time cut":        good[:entryHeader+5],
		"data cut":        good[:len(good)-5],
		"trailing":        append(append([]byte{}, good...), 0),
		"no extensions":   good[:len(good)-4],
		"long varint":     append(appendEntry(nil, &raft.Log{}), 0)[:entryHeader],
		"nanos too large": func() []byte { b := bytes.Clone(good); b[entryHeader+8+3] = 0xff; return b }(),
	}
	// A non-minimal length: 0x80 0x00 encodes 0 in two bytes.
	cases["non-minimal length"] = append(append(appendEntry(nil, &raft.Log{})[:entryHeader:entryHeader], 0x80, 0x00), 0)
	for name, b := range cases {
		var e raft.Log
		e.Index = 99
		err := decodeEntry(b, &e)
		if !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("%s: decode = %v, want ErrCorrupt", name, err)
		}
		if e.Index != 99 {
			t.Errorf("%s: a refused decode changed the entry", name)
		}
	}
}

// FuzzDecodeEntry checks that decoding never panics and that every input it
// accepts is the one encoding of the entry it decodes to.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range sampleEntries() {
		f.Add(appendEntry(nil, &e))
	}
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e raft.Log
		if err := decodeEntry(b, &e); err != nil {
			if !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if re := appendEntry(nil, &e); !bytes.Equal(re, b) {
			t.Fatalf("accepted %x, which re-encodes as %x", b, re)
		}
	})
}
