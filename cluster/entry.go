package cluster

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"

	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

// A raft log entry is stored as one wal record, whose sequence number is the
// entry's index. The record's data is the entry in a fixed layout, so that
// the same entry always gives the same bytes (little-endian; uvarint is
// encoding/binary's and must be minimal):
//
//	version    byte     1
//	type       byte     raft.LogType
//	flags      byte     bit 0: appendedAt follows; other bits must be 0
//	index      uint64
//	term       uint64
//	appendedAt int64 seconds, uint32 nanoseconds (only with flag bit 0)
//	data       uvarint length, then the bytes
//	extensions uvarint length, then the bytes
//
// A future layout bumps the version byte; decoding refuses versions it does
// not know. Part of the on-disk format, do not change.
const (
	entryVersion byte = 1

	flagAppendedAt byte = 1 << 0

	entryHeader = 1 + 1 + 1 + 8 + 8
)

// errEntry marks a record that passed the wal's checksum but is not an entry:
// a bug or a format this version does not know, never a torn write.
var errEntry = fmt.Errorf("%w: raft log entry", wal.ErrCorrupt)

// appendEntry encodes e and appends it to dst.
func appendEntry(dst []byte, e *raft.Log) []byte {
	var flags byte
	if !e.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, entryVersion, byte(e.Type), flags)
	dst = binary.LittleEndian.AppendUint64(dst, e.Index)
	dst = binary.LittleEndian.AppendUint64(dst, e.Term)
	if flags&flagAppendedAt != 0 {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.AppendedAt.Unix()))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(e.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
	dst = append(dst, e.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Extensions)))
	dst = append(dst, e.Extensions...)
	return dst
}

// decodeEntry decodes b into e. The slices in e are copies, never b's
// memory. Any byte out of place is an error wrapping wal.ErrCorrupt, so that
// every accepted input is the encoding of exactly one entry.
func decodeEntry(b []byte, e *raft.Log) error {
	if len(b) < entryHeader {
		return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", errEntry, len(b), entryHeader)
	}
	if b[0] != entryVersion {
		return fmt.Errorf("%w: unknown version %d", errEntry, b[0])
	}
	flags := b[2]
	if flags&^flagAppendedAt != 0 {
		return fmt.Errorf("%w: unknown flags %#x", errEntry, flags)
	}
	out := raft.Log{
		Type:  raft.LogType(b[1]),
		Index: binary.LittleEndian.Uint64(b[3:]),
		Term:  binary.LittleEndian.Uint64(b[11:]),
	}
	b = b[entryHeader:]
	if flags&flagAppendedAt != 0 {
		if len(b) < 12 {
			return fmt.Errorf("%w: appendedAt cut off", errEntry)
		}
		sec, nsec := int64(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint32(b[8:])
		if nsec >= 1e9 {
			return fmt.Errorf("%w: appendedAt nanoseconds %d out of range", errEntry, nsec)
		}
		out.AppendedAt = time.Unix(sec, int64(nsec)).UTC()
		if out.AppendedAt.IsZero() {
			return fmt.Errorf("%w: appendedAt flagged but zero", errEntry)
		}
		b = b[12:]
	}
	var err error
	if out.Data, b, err = decodeBytes(b, "data"); err != nil {
		return err
	}
	if out.Extensions, b, err = decodeBytes(b, "extensions"); err != nil {
		return err
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the entry", errEntry, len(b))
	}
	*e = out
	return nil
}

// decodeBytes reads a length-prefixed field; an empty field decodes as nil.
func decodeBytes(b []byte, what string) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || k != (bits.Len64(n|1)+6)/7 {
		return nil, nil, fmt.Errorf("%w: invalid %s length", errEntry, what)
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: %s length %d runs past the end", errEntry, what, n)
	}
	if n == 0 {
		return nil, b, nil
	}
	return append([]byte(nil), b[:n]...), b[n:], nil
}
