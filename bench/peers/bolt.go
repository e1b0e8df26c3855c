package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
	bolt "go.etcd.io/bbolt"
)

// A minimal queue on bbolt, the embedded B+tree store etcd uses: the
// plainest durable queue a Go program could write for itself, and the one
// issue 13's W3 figures were measured against. Pending tasks sit in the
// "ready" bucket under big-endian sequence numbers (so a cursor's first
// key is the oldest); a claim moves them, in the same transaction, to
// "leased" with a deadline in front of the payload; a completion deletes
// them from there. Every call is one read-write transaction, so one fsync
// when the database syncs. It has no priorities, delays, retries or lease
// expiry: only the work W1–W6R measure.
var (
	boltReady  = []byte("ready")
	boltLeased = []byte("leased")
)

// boltPoll is how often a blocking claim polls: bbolt has no notification.
const boltPoll = time.Millisecond

// boltLease is how long a claim holds a task.
const boltLease = 10 * time.Minute

type boltJob struct {
	key     [8]byte
	payload []byte
}

type boltDriver struct{ db *bolt.DB }

// openBolt opens a bbolt file with its default options, fsyncing every
// commit when cfg asks for SyncAlways and never otherwise (NoSync).
func openBolt(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[boltJob], error) {
	if cfg.InMemory {
		return nil, fmt.Errorf("bbolt: in-memory mode is not compared")
	}
	db, err := bolt.Open(filepath.Join(dir, "queue.bolt"), 0o600, &bolt.Options{
		Timeout: time.Second,
		NoSync:  cfg.Durability != engine.SyncAlways,
	})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{boltReady, boltLeased} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bbolt buckets: %w", err)
	}
	return &boltDriver{db: db}, nil
}

func (d *boltDriver) Enqueue(ctx context.Context, payload []byte) error {
	return d.EnqueueBatch(ctx, [][]byte{payload})
}

func (d *boltDriver) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltReady)
		for _, p := range payloads {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], seq)
			if err := b.Put(k[:], p); err != nil {
				return err
			}
		}
		return nil
	})
}

// Claim moves up to max of the oldest ready tasks to leased in one
// transaction; with wait, it polls every boltPoll until it gets one.
func (d *boltDriver) Claim(ctx context.Context, max int, wait bool) ([]boltJob, error) {
	var t *time.Ticker
	for {
		jobs, err := d.claim(max)
		if err != nil || len(jobs) > 0 || !wait {
			return jobs, err
		}
		if t == nil {
			t = time.NewTicker(boltPoll)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (d *boltDriver) claim(max int) ([]boltJob, error) {
	var jobs []boltJob
	err := d.db.Update(func(tx *bolt.Tx) error {
		jobs = jobs[:0]
		ready, leased := tx.Bucket(boltReady), tx.Bucket(boltLeased)
		c := ready.Cursor()
		deadline := uint64(time.Now().Add(boltLease).UnixNano())
		for k, v := c.First(); k != nil && len(jobs) < max; k, v = c.Next() {
			j := boltJob{payload: append([]byte(nil), v...)} // v lives only as long as tx
			copy(j.key[:], k)
			val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), deadline)
			if err := leased.Put(j.key[:], append(val, v...)); err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		for _, j := range jobs {
			if err := ready.Delete(j.key[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

func (d *boltDriver) Complete(ctx context.Context, j *boltJob) error {
	return d.CompleteBatch(ctx, []boltJob{*j})
}

// errNotLeased is a completion of a task the queue does not hold leased.
var errNotLeased = errors.New("bbolt: task not leased")

// CompleteBatch deletes the jobs from leased in one transaction.
func (d *boltDriver) CompleteBatch(ctx context.Context, js []boltJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		leased := tx.Bucket(boltLeased)
		for i := range js {
			if leased.Get(js[i].key[:]) == nil {
				return fmt.Errorf("%w: %x", errNotLeased, js[i].key)
			}
			if err := leased.Delete(js[i].key[:]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (d *boltDriver) Payload(j *boltJob) []byte { return j.payload }

func (d *boltDriver) Close() error { return d.db.Close() }
