// Package snapshot writes and reads docket's full state images.
//
// A snapshot holds the engine's whole state as of one log sequence number so
// that the write-ahead log before it can be truncated. This package does not
// know what the records mean: it stores a sequence of opaque byte records with
// a header and integrity checks, writes them atomically and finds them again.
//
// # Files
//
// A directory holds snapshots named "snap-<seq>.snap", where <seq> is the log
// sequence number written as exactly 20 decimal digits, so that names sort in
// sequence order. A snapshot is first written as "snap-<seq>.tmp", fsynced,
// closed, renamed to its final name, and then the directory is fsynced: a
// crash at any moment leaves either no new snapshot or a complete valid one,
// and at worst a leftover temp file that [RemoveTemp] or [Prune] deletes and
// [List] never reports.
//
// # Format (version 1)
//
// All fixed-width integers are little-endian. CRC means CRC-32C (Castagnoli).
// uvarint is encoding/binary's unsigned varint, and it must be minimal: an
// encoding with a redundant trailing zero byte is rejected, so a file that
// reads back successfully re-encodes to exactly the same bytes.
//
//	file    = header record* trailer
//
//	header  = magic      [8]byte  "DKTSNAP\x00"
//	          version    byte     1
//	          seq        uint64   log sequence number of the state
//	          headerCRC  uint32   CRC of the 17 bytes before it
//
//	record  = length     uvarint  0 ≤ length ≤ MaxRecord (64 MiB)
//	          recordCRC  uint32   CRC of the record bytes
//	          data       [length]byte
//
//	trailer = marker     uvarint  0xFFFFFFFF (5 bytes: ff ff ff ff 0f)
//	          count      uint64   number of records
//	          streamCRC  uint32   CRC of every record, length, CRC and data, in order
//	          seq        uint64   equal to the header's seq
//
// The trailer marker sits where a record length would and uses a value above
// MaxRecord, so it can never be mistaken for a record. The stream CRC covers
// the whole record section, from the end of the header to the marker, so
// records that are each intact but reordered, dropped or re-split still fail:
// a CRC of the data alone would not see records "a","" become "","a".
// Because the trailer carries the record count and repeats the seq, a file
// cut at any byte is corrupt rather than a shorter valid snapshot, and any
// byte after the trailer is corrupt too.
//
// A file named "snap-<20 digits>.snap" must carry that seq in its header.
// Files under other names (copies under inspection) are not checked against
// their name.
//
// An empty snapshot is 46 bytes: a 21-byte header and a 25-byte trailer.
//
// Every validation failure wraps [ErrCorrupt] and names the file and the byte
// offset where the problem starts. Readers check the record length against
// MaxRecord and against the file's size before allocating anything, so a
// damaged length field cannot make them allocate more than the file holds.
//
// A future format change bumps the version byte; readers refuse versions
// they do not know.
//
// # Streams
//
// [Encode] and [Decode] write and read the same format on an io.Writer and
// io.Reader, for a snapshot kept elsewhere than in a directory (a
// replicated log's snapshot store). The size of a stream is not known up
// front, so Decode allocates a record as its bytes arrive rather than from
// its length field, and everything else is checked as in a file.
package snapshot
