package snapshot

import (
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"
)

// MaxRecord is the largest record a snapshot holds, in bytes. Readers reject
// longer length fields before allocating, so a damaged length cannot ask for
// gigabytes. Part of the on-disk format, do not change.
const MaxRecord = 64 << 20

const (
	// magic opens every snapshot file. Part of the on-disk format, do not change.
	magic = "DKTSNAP\x00"

	// version is the format version written after magic. Part of the on-disk
	// format, do not change; bump it for a new format instead.
	version = 1

	// headerSize is magic, version, seq and the header CRC. Part of the
	// on-disk format, do not change.
	headerSize = len(magic) + 1 + 8 + 4

	// crcSize is the width of every CRC field. Part of the on-disk format, do
	// not change.
	crcSize = 4

	// trailerMarker stands where a record length would and is above
	// MaxRecord, so no record can look like it. Part of the on-disk format,
	// do not change.
	trailerMarker = 1<<32 - 1

	// trailerMarkerSize is the uvarint length of trailerMarker.
	trailerMarkerSize = 5

	// trailerSize is the marker, record count, stream CRC and seq. Part of the
	// on-disk format, do not change.
	trailerSize = trailerMarkerSize + 8 + crcSize + 8

	// minFileSize is an empty snapshot: nothing shorter can be valid.
	minFileSize = headerSize + trailerSize
)

const (
	namePrefix = "snap-"
	snapExt    = ".snap"
	tmpExt     = ".tmp"
	seqDigits  = 20 // enough for any uint64, and fixed so names sort by seq
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendHeader(b []byte, seq uint64) []byte {
	start := len(b)
	b = append(b, magic...)
	b = append(b, version)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

func appendTrailer(b []byte, count uint64, streamCRC uint32, seq uint64) []byte {
	b = binary.AppendUvarint(b, trailerMarker)
	b = binary.LittleEndian.AppendUint64(b, count)
	b = binary.LittleEndian.AppendUint32(b, streamCRC)
	return binary.LittleEndian.AppendUint64(b, seq)
}

func fileName(seq uint64, ext string) string {
	s := strconv.FormatUint(seq, 10)
	return namePrefix + strings.Repeat("0", seqDigits-len(s)) + s + ext
}

// parseName returns the seq encoded in a file name of the form
// "snap-<20 digits><ext>". Names that only resemble it (other digit counts,
// signs, values beyond uint64) are not ours and are rejected.
func parseName(name, ext string) (uint64, bool) {
	if len(name) != len(namePrefix)+seqDigits+len(ext) ||
		!strings.HasPrefix(name, namePrefix) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	digits := name[len(namePrefix) : len(namePrefix)+seqDigits]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return seq, true
}
