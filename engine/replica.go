package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
)

// replica is a copy of a DB's state kept by applying the batches the DB
// logs, exactly as logged: what a follower of the log would run, and what
// the tests use to check that applying needs nothing but the bytes. Feed it
// every batch in order (from the tap, see Options.tap, or the log);
// StateHash and EncodeState then equal the DB's at the same sequence
// number. A replica is not safe for concurrent use. Tests outside engine
// reach it through internal/enginetest.
type replica struct {
	store  *index.Store
	dec    *index.Decoder
	b      index.Batch
	failed error
}

// newReplica returns a replica of an empty DB.
func newReplica() *replica {
	s := index.NewStore()
	return &replica{store: s, dec: index.NewDecoder(s)}
}

// Apply applies data, the bytes logged for batch seq. An error (wrapping
// ErrCorrupt) means the bytes are damaged or do not follow the replica's
// state; the replica then refuses everything until restored.
func (r *replica) Apply(seq uint64, data []byte) (index.Outcome, error) {
	if r.failed != nil {
		return index.Outcome{Seq: seq}, r.failed
	}
	out, err := applyLogged(r.store, r.dec, &r.b, seq, data)
	if err != nil {
		r.failed = wrapStorage(err)
		return out, r.failed
	}
	return out, nil
}

// Seq is the sequence number of the last batch applied.
func (r *replica) Seq() uint64 { return r.store.Seq() }

// Verify checks every index against the primary records.
func (r *replica) Verify() error { return r.store.Verify() }

// StateHash is the SHA-256 of EncodeState's output.
func (r *replica) StateHash() ([sha256.Size]byte, error) { return index.StateHash(r.store.Copy()) }

// EncodeState writes the state as snapshot records in their fixed order,
// each preceded by its length as a uvarint.
func (r *replica) EncodeState(w io.Writer) error { return encodeState(r.store.Copy(), w) }

// RestoreState replaces the replica's state with one EncodeState wrote.
// On error the replica is left failed.
func (r *replica) RestoreState(rd io.Reader) error {
	s := index.NewStore()
	dec := index.NewDecoder(s)
	br := bufio.NewReader(rd)
	header := false
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		if err == nil && n > snapshot.MaxRecord {
			err = fmt.Errorf("record of %d bytes", n)
		}
		var rec []byte
		if err == nil {
			rec = make([]byte, n)
			_, err = io.ReadFull(br, rec)
		}
		var x index.Record
		if err == nil {
			x, err = dec.Record(rec)
		}
		if err == nil && header == (x.Kind == index.RecHeader) {
			err = errors.New("the header is not (only) first")
		}
		if err == nil {
			header = true
			err = s.Load(x)
		}
		if err != nil {
			r.failed = fmt.Errorf("%w: restore: %w", ErrCorrupt, err)
			return r.failed
		}
	}
	if !header {
		r.failed = fmt.Errorf("%w: restore: no header", ErrCorrupt)
		return r.failed
	}
	if err := s.Loaded(); err != nil {
		r.failed = fmt.Errorf("%w: restore: %w", ErrCorrupt, err)
		return r.failed
	}
	r.store, r.dec, r.failed = s, dec, nil
	return nil
}

func encodeState(img *index.Image, w io.Writer) error {
	var n [binary.MaxVarintLen64]byte
	return index.WriteImage(img, index.NewEncoder(), func(rec []byte) error {
		if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(rec)))]); err != nil {
			return err
		}
		_, err := w.Write(rec)
		return err
	})
}

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
	return encodeState(img, w)
}
