package vlog

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkAppendSync appends 1 KiB values on the operating system's file
// system, with a Sync after every batch of them (the engine's group
// commit round).
func BenchmarkAppendSync(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			val := make([]byte, 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(val)))
			i := 0
			for b.Loop() {
				if _, err := l.Append(uint64(i), Payload, val); err != nil {
					b.Fatal(err)
				}
				if i++; i%batch == 0 {
					if err := l.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// BenchmarkRead reads 1 KiB values at random from a synced log of 64 MiB
// on the operating system's file system (mostly in the page cache).
func BenchmarkRead(b *testing.B) {
	l, err := Open(b.TempDir(), Options{FileSize: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	val := make([]byte, 1024)
	refs := make([]Ref, 64<<10)
	for i := range refs {
		if refs[i], err = l.Append(uint64(i), Payload, val); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, HeaderSize+len(val))
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.SetBytes(int64(len(val)))
	for b.Loop() {
		i := rng.IntN(len(refs))
		if _, err := l.Read(refs[i], uint64(i), Payload, dst); err != nil {
			b.Fatal(err)
		}
	}
}
