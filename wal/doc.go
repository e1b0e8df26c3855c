// Package wal is docket's write-ahead log. The engine appends every committed
// mutation batch here under its sequence number and acknowledges the commit
// only once the log says that number is durable.
//
// Records are opaque bytes to this package. It frames each one with a version
// byte, a checksum and its sequence number; gathers the records appended by
// concurrent commits into one write and one fsync (group commit); cuts a torn
// tail on open and refuses every other kind of damage; and drops the records
// a snapshot has made redundant.
//
// Storage is github.com/tidwall/wal, whose entry index is the sequence
// number. That library keeps no checksum, never fsyncs a directory and cannot
// open a log whose last entry is torn, so this package validates and repairs
// the files before handing them to it, and fsyncs the directory itself.
//
// # Files
//
// A log directory holds segment files. Each is named after the sequence number
// of its first record, written as exactly 20 decimal digits so that names sort
// in log order:
//
//	00000000000000000001   records 1, 2, ...
//	00000000000000004097   records 4097, ... (the tail: appends go here)
//
// A new segment is started once the tail reaches Options.SegmentSize bytes.
// Segments follow one another without gaps: each starts right after the last
// record of the one before. An empty tail segment is valid: it is what a log
// truncated to nothing looks like, and its name keeps the log's position.
//
// Other names that may appear, left by tidwall/wal or by this package:
//
//	<name>.START       a front truncation that was interrupted: the segment
//	                   rewritten to begin at <name>. Opening deletes every
//	                   segment before it and renames it to <name>.
//	<name>.END         the same for a back truncation, which docket never
//	                   does; opening deletes every segment after it.
//	<name>.START.TEMP  a .START file still being written; meaningless, and
//	<name>.END.TEMP    removed when the log is opened or repaired.
//	<name>.broken      a copy of segment <name> taken before its torn tail was
//	                   cut (.broken.1, .broken.2, ... if one exists already).
//	                   Nothing reads it again; it is kept for inspection.
//
// Every other name is ignored.
//
// # Segment format (version 1)
//
// Fixed-width integers are little-endian. CRC means CRC-32C (Castagnoli).
// uvarint is encoding/binary's unsigned varint and must be minimal.
//
//	segment = entry*
//
//	entry   = length   uvarint   size of record in bytes (tidwall/wal's framing)
//	          record   [length]byte
//
//	record  = version  byte      1
//	          crc      uint32    CRC of the bytes after it: seq, then data
//	          seq      uint64    the record's sequence number
//	          data     [length-13]byte  the caller's bytes
//
// A record is valid when its version is known, its CRC matches and its seq is
// its position: the segment's first sequence number (its name) plus the
// number of records before it in the segment. An entry of length 0, which is
// what a zero-filled tail decodes as, is never valid, nor is a record shorter
// than its 13-byte header. Sequence numbers start at 1.
//
// A future format bumps the version byte; readers refuse versions they do not
// know.
//
// # Damage
//
// A crash can only leave a partly written entry at the end of the newest
// segment, because every older segment was fsynced before the next one was
// created. So when the first invalid entry lies in the last segment and
// nothing from there to the end of the file parses as a further valid record,
// it is a torn tail: Open and Repair copy the segment aside as <name>.broken,
// truncate it where that entry starts, and fsync the file and the directory.
// The records lost were never acknowledged. Any other damage - an invalid entry
// in an older segment, valid records after an invalid one, a missing segment -
// means that acknowledged data is gone or altered. Open then refuses with an
// error wrapping ErrCorrupt that names the file and the byte offset, and
// changes nothing. Check reports the same findings without touching the
// directory.
//
// Decoding never trusts a length beyond the bytes the file holds.
//
// # Durability
//
// Append only copies the record into memory. Flush writes every appended
// record to the operating system in one batch; Sync also fsyncs, and one
// fsync serves every Sync call waiting for a record it covers. The directory
// is fsynced whenever a segment is created, renamed or removed. After any
// write or fsync error the Log is failed for good: an fsync that failed may
// have dropped dirty pages, so retrying it could report data durable that is
// not. Reopening the directory recovers from what is on disk.
package wal
