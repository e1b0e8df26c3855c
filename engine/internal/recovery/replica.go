package recovery

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
)

// Replica is a copy of a DB's state kept by applying the batches the DB
// logs, exactly as logged: what a follower of the log would run, and what
// the tests use to check that applying needs nothing but the bytes. Feed it
// every batch in order (from the tap, see Options.tap, or the log);
// StateHash and EncodeState then equal the DB's at the same sequence
// number. A replica is not safe for concurrent use. Tests outside engine
// reach it through internal/enginetest.
type Replica struct {
	store  *index.Store
	dec    *index.Decoder
	b      index.Batch
	failed error
	apply  Apply
}

// NewReplica returns a replica of an empty DB that applies with apply.
func NewReplica(apply Apply) *Replica {
	s := index.NewStore()
	return &Replica{store: s, dec: index.NewDecoder(s), apply: apply}
}

// Apply applies data, the bytes logged for batch seq. An error (wrapping
// dockettype.ErrCorrupt) means the bytes are damaged or do not follow the replica's
// state; the replica then refuses everything until restored.
func (r *Replica) Apply(seq uint64, data []byte) (index.Outcome, error) {
	if r.failed != nil {
		return index.Outcome{Seq: seq}, r.failed
	}
	out, err := ApplyLogged(r.store, r.apply, r.dec, &r.b, seq, data)
	if err != nil {
		r.failed = WrapStorage(err)
		return out, r.failed
	}
	return out, nil
}

// Seq is the sequence number of the last batch applied.
func (r *Replica) Seq() uint64 { return r.store.Seq() }

// Verify checks every index against the primary records.
func (r *Replica) Verify() error { return r.store.Verify() }

// StateHash is the SHA-256 of EncodeState's output.
func (r *Replica) StateHash() ([sha256.Size]byte, error) { return index.StateHash(r.store.Copy()) }

// EncodeState writes the state as snapshot records in their fixed order,
// each preceded by its length as a uvarint.
func (r *Replica) EncodeState(w io.Writer) error { return EncodeState(r.store.Copy(), w) }

// RestoreState replaces the replica's state with one EncodeState wrote.
// On error the replica is left failed.
func (r *Replica) RestoreState(rd io.Reader) error {
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
			r.failed = fmt.Errorf("%w: restore: %w", dockettype.ErrCorrupt, err)
			return r.failed
		}
	}
	if !header {
		r.failed = fmt.Errorf("%w: restore: no header", dockettype.ErrCorrupt)
		return r.failed
	}
	if err := s.Loaded(); err != nil {
		r.failed = fmt.Errorf("%w: restore: %w", dockettype.ErrCorrupt, err)
		return r.failed
	}
	r.store, r.dec, r.failed = s, dec, nil
	return nil
}

// EncodeState writes img as snapshot records in their fixed order, each
// preceded by its length as a uvarint.
func EncodeState(img *index.Image, w io.Writer) error {
	var n [binary.MaxVarintLen64]byte
	return index.WriteImage(img, index.NewEncoder(), func(rec []byte) error {
		if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(rec)))]); err != nil {
			return err
		}
		_, err := w.Write(rec)
		return err
	})
}
