package index

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestPartitionBuckets: partition bucket records apply, are refused when
// their queue's settings do not allow them, restore from snapshot records
// with the same state hash, and Verify checks them against the settings.
func TestPartitionBuckets(t *testing.T) {
	s := NewStore()
	conf := QueueConf{Queue: qk, PartRate: 2, PartPer: 1000, PartBurst: 3}
	b := PartBucket{Queue: qk, Key: "a", Credit: 1500, At: 7}
	if _, err := s.Apply(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutBucket, Bucket: b}}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a bucket without a partition rate: %v", err)
	}
	if _, err := s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutPutConf, Conf: conf},
		{Kind: MutPutBucket, Bucket: b}, {Kind: MutPutBucket, Bucket: PartBucket{Queue: qk, Key: "", Credit: 0, At: 9}}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.PartTokens(&conf, "a", 7); got != 1 {
		t.Fatalf("tokens of a: %d", got)
	}
	if got := s.PartTokens(&conf, "none", 0); got != 3 {
		t.Fatalf("a partition without a record: %d tokens, want a full bucket", got)
	}
	if got := s.PartNextToken(&conf, "", 9); got != 9+500 {
		t.Fatalf("next token of the default partition at %d", got)
	}
	if !s.PartBucketFull(&conf, "a", 7+750) || s.PartBucketFull(&conf, "a", 7+749) {
		t.Fatal("a refills to full at 757")
	}
	for name, bad := range map[string]PartBucket{
		"full":     {Queue: qk, Key: "b", Credit: 3000},
		"negative": {Queue: qk, Key: "b", Credit: -1},
		"no conf":  {Queue: QueueKey{Name: "other"}, Key: "b"},
	} {
		if _, err := s.Apply(&Batch{Seq: s.Seq() + 1, Mutations: []Mutation{{Kind: MutPutBucket, Bucket: bad}}}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	if err := WriteImage(s.Copy(), NewEncoder(), func(rec []byte) error { recs = append(recs, slices.Clone(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	s2 := NewStore()
	dec := NewDecoder(s2)
	for _, rec := range recs {
		r, err := dec.Record(rec)
		if err == nil {
			err = s2.Load(r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if mustHash(t, s2) != mustHash(t, s) || s2.NumPartBuckets() != 2 {
		t.Fatal("restored buckets differ")
	}
	if err := s2.Verify(); err != nil {
		t.Fatal(err)
	}
	// Verify finds a record the settings no longer allow (a smaller burst
	// written without deleting the records, as no plan does).
	s2.confs.Set(QueueConf{Queue: qk, PartRate: 2, PartPer: 1000, PartBurst: 1})
	if err := s2.Verify(); err == nil {
		t.Fatal("Verify passed a bucket above its burst")
	}
	// A delete removes the record: the bucket is full.
	if _, err := s.Apply(&Batch{Seq: s.Seq() + 1, Mutations: []Mutation{{Kind: MutDeleteBucket, Bucket: PartBucket{Queue: qk, Key: "a"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.PartTokens(&conf, "a", 0); got != 3 || s.NumPartBuckets() != 1 {
		t.Fatalf("after the delete: %d tokens, %d records", got, s.NumPartBuckets())
	}
	var keys []string
	s.PartBuckets(qk, "a", func(b PartBucket) bool { keys = append(keys, b.Key); return true })
	if !slices.Equal(keys, []string{""}) {
		t.Fatalf("PartBuckets from a: %q", keys)
	}
}

// TestPartitionRateNeedsVersion6: settings with a partition rate and the
// partition bucket mutations decode in a version 6 batch, round trip, and
// are damage in a version 5 batch; the records decode as snapshot records.
func TestPartitionRateNeedsVersion6(t *testing.T) {
	s := NewStore()
	enc := NewEncoder()
	rated := QueueConf{Queue: qk, PartRate: 5, PartPer: 100, PartBurst: 6}
	both := QueueConf{Queue: qk, PartMaxInFlight: 2, PartRate: 5, PartPer: 100, PartBurst: 6, Rate: 1, Per: 1, Burst: 1, Credit: 1, At: 3}
	put := PartBucket{Queue: qk, Key: "tenant", Credit: 42, At: 99}
	for name, m := range map[string]Mutation{
		"rate":        {Kind: MutPutConf, Conf: rated},
		"rate, bound": {Kind: MutPutConf, Conf: both},
		"bucket":      {Kind: MutPutBucket, Bucket: put},
		"delete":      {Kind: MutDeleteBucket, Bucket: PartBucket{Queue: qk, Key: "tenant"}},
	} {
		data, err := enc.Batch(&Batch{Seq: 1, Mutations: []Mutation{m}})
		if err != nil {
			t.Fatal(err)
		}
		var b Batch
		if err := NewDecoder(s).Batch(data, &b); err != nil {
			t.Fatalf("%s: version 6 refused: %v", name, err)
		}
		if got := b.Mutations[0]; got.Kind != m.Kind || got.Conf != m.Conf || got.Bucket != m.Bucket {
			t.Fatalf("%s misread: %+v", name, got)
		}
		for i := range data {
			if err := NewDecoder(NewStore()).Batch(data[:i], &b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: prefix %d: %v", name, i, err)
			}
		}
		old := bytes.Clone(data)
		old[0] = batchVersion5
		if err := NewDecoder(s).Batch(old, &b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s in a version 5 batch: %v, want ErrCorrupt", name, err)
		}
	}
	rec, err := enc.ConfRecord(both)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := NewDecoder(s).Record(bytes.Clone(rec)); err != nil || r.Conf != both {
		t.Fatalf("settings record: %+v %v", r.Conf, err)
	}
	rec, err = enc.BucketRecord(put)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := NewDecoder(s).Record(bytes.Clone(rec)); err != nil || r.Kind != RecBucket || r.Bucket != put {
		t.Fatalf("bucket record: %+v %v", r.Bucket, err)
	}
}
