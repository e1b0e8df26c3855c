package engine

import (
	"crypto/sha256"
	"io"

	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/index"
)

// replica is a copy of a DB's state kept by applying its logged batches
// (see recovery.Replica); newReplica's applies as the commit path does.
type replica = recovery.Replica

func newReplica() *replica { return recovery.NewReplica(applyBatch) }

// image takes a copy-on-write image of the state under the engine lock.
func (d *DB) image() (*index.Image, error) {
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	return c.store.Copy(), nil
}

// StateHash is the SHA-256 of EncodeState's output: two DBs (or a DB and a
// follower that applied its log) with equal hashes hold the same state, sequence number and time
// included.
func (d *DB) StateHash() ([sha256.Size]byte, error) {
	if err := d.owner("StateHash"); err != nil {
		return [sha256.Size]byte{}, err
	}
	img, err := d.image()
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return index.StateHash(img)
}

// EncodeState writes the whole state as snapshot records in their fixed
// order (the header, tasks by id, KV entries, idempotency keys), each
// preceded by its length as a uvarint: the same state gives the same bytes
// on every node. The commit path pauses only to take a copy-on-write image.
func (d *DB) EncodeState(w io.Writer) error {
	if err := d.owner("EncodeState"); err != nil {
		return err
	}
	img, err := d.image()
	if err != nil {
		return err
	}
	return recovery.EncodeState(img, w)
}
