package wal

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"strconv"
	"strings"
)

const (
	// recordVersion is the first byte of every record. Part of the on-disk
	// format, do not change.
	recordVersion byte = 1

	// headerSize is version, crc and seq. Part of the on-disk format, do not
	// change.
	headerSize = 1 + 4 + 8

	// nameDigits is the width of a segment file name, the first sequence
	// number in decimal with leading zeros (tidwall/wal's naming). Part of the
	// on-disk format, do not change.
	nameDigits = 20

	// Suffixes tidwall/wal gives files during a truncation. Part of the
	// on-disk format, do not change.
	startSuffix = ".START"
	endSuffix   = ".END"
	tempSuffix  = ".TEMP"

	// brokenSuffix marks the copy of a segment whose torn tail was cut.
	brokenSuffix = ".broken"

	// minEntrySize is the smallest valid entry: a one-byte length and a
	// record with no data.
	minEntrySize = 1 + headerSize
)

// crcTable is CRC-32C: hardware-accelerated on common CPUs and better at
// catching the burst errors storage produces than IEEE. Part of the on-disk
// format, do not change.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// segmentName is the file name of the segment whose first record is seq.
func segmentName(seq uint64) string {
	s := strconv.FormatUint(seq, 10)
	return strings.Repeat("0", nameDigits-len(s)) + s
}

// appendRecord frames data as the record seq and appends it to dst. It does
// not allocate when dst has room, which keeps Append cheap.
func appendRecord(dst []byte, seq uint64, data []byte) []byte {
	n := len(dst)
	dst = append(dst, recordVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint64(dst[n+5:], seq)
	dst = append(dst, data...)
	binary.LittleEndian.PutUint32(dst[n+1:], crc32.Checksum(dst[n+5:], crcTable))
	return dst
}

// appendEntry frames data as the record seq with its length prefix, the
// bytes a segment file holds for it, and appends them to dst. It does not
// allocate when dst has room.
func appendEntry(dst []byte, seq uint64, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(headerSize+len(data)))
	return appendRecord(dst, seq, data)
}

// uvarintLen is the size of x's minimal uvarint encoding: the length
// prefix of an entry, which counts towards segment sizes.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// fault says why an entry is invalid.
type fault uint8

const (
	faultNone     fault = iota
	faultShortLen       // the length prefix is cut off by the end of the file
	faultBadLen         // the length prefix overflows or is not minimal
	faultPastEnd        // the length runs past the end of the file
	faultEmpty          // a zero length: what a zero-filled tail decodes as
	faultShortRec       // a record shorter than its header
	faultVersion        // an unknown version byte
	faultChecksum       // the CRC does not match
	faultSeq            // the stored seq is not the record's position
)

func (f fault) String() string {
	switch f {
	case faultNone:
		return "valid"
	case faultShortLen:
		return "length prefix cut off by end of file"
	case faultBadLen:
		return "invalid length prefix"
	case faultPastEnd:
		return "length runs past end of file"
	case faultEmpty:
		return "empty entry"
	case faultShortRec:
		return "record shorter than its header"
	case faultVersion:
		return "unknown record version"
	case faultChecksum:
		return "checksum mismatch"
	case faultSeq:
		return "sequence number out of place"
	}
	return "unknown fault"
}

// nextEntry splits the entry at the start of b (which must not be empty)
// into its record and its total size.
func nextEntry(b []byte) (rec []byte, n int, f fault) {
	size, k := binary.Uvarint(b)
	switch {
	case k == 0:
		return nil, 0, faultShortLen
	case k < 0 || k != uvarintLen(size):
		return nil, 0, faultBadLen
	case size > uint64(len(b)-k):
		return nil, 0, faultPastEnd
	}
	return b[k : k+int(size)], k + int(size), faultNone
}

// checkRecord validates rec as the record at position seq and returns its
// data.
func checkRecord(rec []byte, seq uint64) ([]byte, fault) {
	switch {
	case len(rec) == 0:
		return nil, faultEmpty
	case len(rec) < headerSize:
		return nil, faultShortRec
	case rec[0] != recordVersion:
		return nil, faultVersion
	case binary.LittleEndian.Uint32(rec[1:5]) != crc32.Checksum(rec[5:], crcTable):
		return nil, faultChecksum
	case seq == 0 || binary.LittleEndian.Uint64(rec[5:13]) != seq:
		// seq 0 is where a sequence that reached the top of uint64 wraps.
		return nil, faultSeq
	}
	return rec[headerSize:], faultNone
}

// segmentScan is what scanSegment found in one segment file.
type segmentScan struct {
	count   uint64 // valid records before the first invalid entry, skipped ones included
	good    int64  // offset just past the last valid entry
	fault   fault  // why the entry at good is invalid; faultNone if none is
	skipped []skipped
}

// skipped is a damaged record before the caller's from that scanSegment
// stepped over because its framing was intact.
type skipped struct {
	off   int64
	seq   uint64
	fault fault
}

// framed reports whether an entry with fault f still has a sound length
// prefix, so the next entry starts where it says: only then can a scan step
// over it without guessing. The record's own seq check keeps the records
// after it honest.
func (f fault) framed() bool {
	return f == faultChecksum || f == faultVersion || f == faultSeq
}

// scanSegment validates the entries of a segment whose first record is first,
// stopping at the first invalid one. A record below from whose framing is
// intact is stepped over and listed in skipped instead: a snapshot holds
// its effect.
func scanSegment(buf []byte, first, from uint64) segmentScan {
	var s segmentScan
	seq := first
	for off := 0; off < len(buf); {
		rec, n, f := nextEntry(buf[off:])
		if f == faultNone {
			_, f = checkRecord(rec, seq)
			if f != faultNone && seq < from && f.framed() {
				s.skipped = append(s.skipped, skipped{off: int64(off), seq: seq, fault: f})
				f = faultNone
			}
		}
		if f != faultNone {
			s.fault = f
			return s
		}
		off += n
		s.good = int64(off)
		s.count++
		seq++
	}
	return s
}

// validAfter reports whether a valid record that belongs after position want
// starts anywhere at or beyond off. It tells a torn tail, after which there
// is only debris, from damage in the middle of records that were written
// later. Every offset is tried because the damage may have hit a length
// prefix, hiding where the next entry starts. Records with a seq below want
// do not count: a torn tail can hold stale blocks of older records, and a
// duplicate of the last record is no evidence of later ones.
func validAfter(buf []byte, off int64, want uint64) bool {
	for p := off; p+minEntrySize <= int64(len(buf)); p++ {
		b := buf[p:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size < headerSize || size > uint64(len(b)-k) {
			continue
		}
		rec := b[k : k+int(size)]
		if rec[0] != recordVersion {
			continue
		}
		// Records between off and p take at least minEntrySize bytes each,
		// which bounds how far ahead a genuine record's seq can be and keeps
		// the CRC off most garbage.
		seq := binary.LittleEndian.Uint64(rec[5:13])
		if seq < want || (seq == want && p == off) || seq-want > 1+uint64(p-off)/minEntrySize {
			continue
		}
		if binary.LittleEndian.Uint32(rec[1:5]) == crc32.Checksum(rec[5:], crcTable) {
			return true
		}
	}
	return false
}
