package index

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// WriteImage encodes img as snapshot records in their one fixed order: the
// header, then tasks by id, KV entries by namespace and key, idempotency
// entries by queue and key, queue totals by queue, queue settings by queue,
// dependencies by parent and child, partition buckets by queue and key.
// add receives each record; the slice is valid only until add returns.
// The same state gives the same records, byte for byte, on every node.
func WriteImage(img *Image, enc *Encoder, add func(rec []byte) error) error {
	rec, err := enc.Header(img.Seq, img.NextID, img.Now)
	if err == nil {
		err = add(rec)
	}
	img.Tasks.Scan(func(t *Task) bool {
		if err == nil {
			if rec, err = enc.TaskRecord(t); err == nil {
				err = add(rec)
			}
		}
		return err == nil
	})
	img.KV.Scan(func(e KV) bool {
		if err == nil {
			if rec, err = enc.KVRecord(e); err == nil {
				err = add(rec)
			}
		}
		return err == nil
	})
	img.Idem.Scan(func(e Idem) bool {
		if err == nil {
			if rec, err = enc.IdemRecord(e); err == nil {
				err = add(rec)
			}
		}
		return err == nil
	})
	if img.Totals != nil {
		img.Totals.Scan(func(r QueueTotals) bool {
			if err == nil {
				if rec, err = enc.TotalsRecord(r); err == nil {
					err = add(rec)
				}
			}
			return err == nil
		})
	}
	if img.Confs != nil {
		img.Confs.Scan(func(c QueueConf) bool {
			if err == nil {
				if rec, err = enc.ConfRecord(c); err == nil {
					err = add(rec)
				}
			}
			return err == nil
		})
	}
	if img.Deps != nil {
		img.Deps.Scan(func(d Dep) bool {
			if err == nil {
				if rec, err = enc.DepRecord(d); err == nil {
					err = add(rec)
				}
			}
			return err == nil
		})
	}
	if img.Buckets != nil {
		img.Buckets.Scan(func(b PartBucket) bool {
			if err == nil {
				if rec, err = enc.BucketRecord(b); err == nil {
					err = add(rec)
				}
			}
			return err == nil
		})
	}
	return err
}

// StateHash is the SHA-256 of img's records as WriteImage produces them,
// each preceded by its length as a uvarint. Two stores with equal hashes
// hold the same state (sequence number and time included); replicas compare
// it to prove they applied the same log the same way.
func StateHash(img *Image) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := WriteImage(img, NewEncoder(), func(rec []byte) error { return hashRecord(h, rec) })
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, err
}

func hashRecord(h hash.Hash, rec []byte) error {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(rec)))])
	_, err := h.Write(rec)
	return err
}
