package index

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// libraryBytes is what the msgpack library's Encoder writes for call.
func libraryBytes(t testing.TB, call func(*msgpack.Encoder) error) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := call(enc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkAppenders compares each appender with the library on n, s and b.
func checkAppenders(t testing.TB, n int64, s string, b []byte) {
	t.Helper()
	same := func(what string, got []byte, call func(*msgpack.Encoder) error) {
		t.Helper()
		if want := libraryBytes(t, call); !bytes.Equal(got, want) {
			t.Fatalf("%s: appended % x, the library writes % x", what, got, want)
		}
	}
	prefix := []byte{0x01} // appenders append, keeping what is there
	tail := func(got []byte) []byte {
		if got[0] != 0x01 {
			t.Fatalf("the appender overwrote the slice it was given")
		}
		return got[1:]
	}
	same("uint", tail(appendUint(bytes.Clone(prefix), uint64(n))), func(e *msgpack.Encoder) error { return e.EncodeUint(uint64(n)) })
	same("int", tail(appendInt(bytes.Clone(prefix), n)), func(e *msgpack.Encoder) error { return e.EncodeInt(n) })
	same("string", tail(appendString(bytes.Clone(prefix), s)), func(e *msgpack.Encoder) error { return e.EncodeString(s) })
	same("bytes", tail(appendBytes(bytes.Clone(prefix), b)), func(e *msgpack.Encoder) error { return encodeBytes(e, true, b) })
	if l := int(uint32(n)); l >= 0 {
		same("array", tail(appendArrayLen(bytes.Clone(prefix), l)), func(e *msgpack.Encoder) error { return e.EncodeArrayLen(l) })
		same("map", tail(appendMapLen(bytes.Clone(prefix), l)), func(e *msgpack.Encoder) error { return e.EncodeMapLen(l) })
	}
}

// TestAppendersMatchTheLibrary: at every boundary of the MessagePack
// forms, and one past it, the appenders write the library's bytes.
func TestAppendersMatchTheLibrary(t *testing.T) {
	var ns []int64
	for _, edge := range []int64{0, 15, 16, 31, 32, 127, 128, 255, 256, math.MaxUint16, math.MaxUint32, math.MaxInt64,
		-1, -32, -33, math.MinInt8, math.MinInt16, math.MinInt32, math.MinInt64} {
		ns = append(ns, edge)
		if edge != math.MaxInt64 {
			ns = append(ns, edge+1)
		}
		if edge != math.MinInt64 {
			ns = append(ns, edge-1)
		}
	}
	ns = append(ns, -1<<63+1, 1<<40, -1<<40)
	for _, n := range ns {
		checkAppenders(t, n, "", nil)
		// uint64 values above MaxInt64 come from negative ns; lengths from
		// the low 32 bits of n.
	}
	for _, l := range []int{0, 1, 31, 32, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		s := strings.Repeat("é", l/2) + strings.Repeat("x", l%2)
		checkAppenders(t, 0, s, []byte(s))
	}
}

// FuzzAppenders: for any values, the appenders write the library's bytes.
func FuzzAppenders(f *testing.F) {
	f.Add(int64(0), "", []byte(nil))
	f.Add(int64(-33), strings.Repeat("a", 40), []byte{1, 2, 3})
	f.Add(int64(1<<33), strings.Repeat("b", 300), make([]byte, 300))
	f.Fuzz(func(t *testing.T, n int64, s string, b []byte) {
		checkAppenders(t, n, s, b)
	})
}
