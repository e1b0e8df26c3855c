package vlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Kind says what a value is to the engine. It is stored in each record
// and checked by Read, so that a ref cannot return another kind's bytes.
type Kind uint8

// The kinds of values. Part of the on-disk format, do not change.
const (
	Payload  Kind = 1 // a task's payload
	Result   Kind = 2 // a task's result
	Progress Kind = 3 // a progress record
	KVValue  Kind = 4 // a value of the key-value store
	maxKind       = KVValue
)

func (k Kind) valid() bool { return k >= Payload && k <= maxKind }

func (k Kind) String() string {
	switch k {
	case Payload:
		return "payload"
	case Result:
		return "result"
	case Progress:
		return "progress"
	case KVValue:
		return "kv"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

const (
	// recordVersion is byte 8 of every record. Part of the on-disk format,
	// do not change.
	recordVersion byte = 1

	// HeaderSize is the bytes before a value in its record: crc, header
	// crc, version, kind, owner, length. Part of the on-disk format, do not
	// change.
	HeaderSize = 4 + 4 + 1 + 1 + 8 + 4

	// MaxValueSize is the largest value Append takes.
	MaxValueSize = 1 << 30

	// fileDigits is the width of a file name's number; fileSuffix ends it.
	// Part of the on-disk format, do not change.
	fileDigits = 10
	fileSuffix = ".vlog"
)

// crcTable is CRC-32C, as the WAL uses. Part of the on-disk format, do not
// change.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileName is the name of value log file n.
func fileName(n uint32) string {
	s := strconv.FormatUint(uint64(n), 10)
	return strings.Repeat("0", fileDigits-len(s)) + s + fileSuffix
}

// parseFileName returns the number of a value log file name.
func parseFileName(name string) (uint32, bool) {
	digits, ok := strings.CutSuffix(name, fileSuffix)
	if !ok || len(digits) != fileDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// header is a record's header, decoded.
type header struct {
	crc   uint32 // of bytes 4 to the end of the value
	owner uint64
	kind  Kind
	len   uint32
}

// appendRecord frames val as a record of owner and kind and appends it to
// dst. It does not allocate when dst has room.
func appendRecord(dst []byte, owner uint64, kind Kind, val []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	h := dst[n:]
	h[8] = recordVersion
	h[9] = byte(kind)
	binary.LittleEndian.PutUint64(h[10:], owner)
	binary.LittleEndian.PutUint32(h[18:], uint32(len(val)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[8:HeaderSize], crcTable))
	crc := crc32.Update(crc32.Checksum(h[4:HeaderSize], crcTable), crcTable, val)
	binary.LittleEndian.PutUint32(h[0:], crc)
	return append(dst, val...)
}

// decodeHeader checks the header at the start of b (at least HeaderSize
// bytes) against its own checksum, so that its length can be trusted even
// when the value is damaged.
func decodeHeader(b []byte) (header, error) {
	if len(b) < HeaderSize {
		return header{}, fmt.Errorf("header cut at %d of %d bytes", len(b), HeaderSize)
	}
	if got, want := crc32.Checksum(b[8:HeaderSize], crcTable), binary.LittleEndian.Uint32(b[4:]); got != want {
		return header{}, fmt.Errorf("header checksum %08x, want %08x", got, want)
	}
	if b[8] != recordVersion {
		return header{}, fmt.Errorf("unknown record version %d", b[8])
	}
	h := header{
		crc:   binary.LittleEndian.Uint32(b[0:]),
		kind:  Kind(b[9]),
		owner: binary.LittleEndian.Uint64(b[10:]),
		len:   binary.LittleEndian.Uint32(b[18:]),
	}
	if !h.kind.valid() {
		return header{}, fmt.Errorf("unknown kind %d", b[9])
	}
	if h.len > MaxValueSize {
		return header{}, fmt.Errorf("value length %d over the maximum %d", h.len, MaxValueSize)
	}
	return h, nil
}

// validHeader is decodeHeader's verdict without its error, for resync to
// try every offset cheaply.
func validHeader(b []byte) bool {
	return len(b) >= HeaderSize &&
		crc32.Checksum(b[8:HeaderSize], crcTable) == binary.LittleEndian.Uint32(b[4:]) &&
		b[8] == recordVersion && Kind(b[9]).valid() &&
		binary.LittleEndian.Uint32(b[18:]) <= MaxValueSize
}

// checkValue reports whether rec, a whole record whose header h decoded,
// matches its checksum.
func checkValue(h header, rec []byte) error {
	if got := crc32.Checksum(rec[4:], crcTable); got != h.crc {
		return fmt.Errorf("checksum %08x, want %08x", got, h.crc)
	}
	return nil
}
