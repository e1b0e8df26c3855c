package snapshot

import (
	"os"
	"testing"
)

const (
	benchRecords    = 100_000
	benchRecordSize = 150
)

func benchData() ([][]byte, int64) {
	recs := make([][]byte, benchRecords)
	var total int64
	for i := range recs {
		r := make([]byte, benchRecordSize)
		for j := range r {
			r[j] = byte(i*131 + j*17)
		}
		recs[i] = r
		total += int64(len(r))
	}
	return recs, total
}

func BenchmarkWrite(b *testing.B) {
	recs, total := benchData()
	dir := b.TempDir()
	fill := fillWith(recs)
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	var size int64
	for i := 0; i < b.N; i++ {
		info, err := Write(dir, uint64(i), Options{}, fill)
		if err != nil {
			b.Fatal(err)
		}
		size = info.Size
		b.StopTimer()
		if err := os.Remove(info.Path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)*benchRecords/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(size)/benchRecords, "bytes/record")
}

func BenchmarkRead(b *testing.B) {
	recs, total := benchData()
	info := writeSnap(b, b.TempDir(), 1, recs)
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var sum int
		_, n, err := Read(info.Path, func(rec []byte) error {
			sum += len(rec)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != benchRecords || int64(sum) != total {
			b.Fatalf("read %d records, %d bytes", n, sum)
		}
	}
	b.ReportMetric(float64(b.N)*benchRecords/b.Elapsed().Seconds(), "records/s")
}
