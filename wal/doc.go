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
// The files are laid out exactly as github.com/tidwall/wal v1.2.1 lays out
// its log, whose entry index is the sequence number: the same names, length
// prefixes, points where a segment is cut and renames during a truncation.
// Earlier versions of this package kept their segments with that library, so
// the directories they wrote open unchanged, and it can still read what this
// package writes (the tests hold the two to the same bytes). The package
// reads and writes the files itself because the library keeps no checksum,
// never fsyncs a directory, cannot open a log whose last entry is torn, and
// copies every record into an in-memory image of the tail segment.
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
// A new segment is started right after the entry that brings the tail to
// Options.SegmentSize bytes or more, and before a write to a tail that is
// already over it (a log reopened with a smaller size). Segments follow one
// another without gaps: each starts right after the last record of the one
// before. An empty tail segment is valid: it is what a log
// truncated to nothing looks like, and its name keeps the log's position.
//
// Other names that may appear, left by this package (or tidwall/wal):
//
//	<name>.START       a front truncation that was interrupted: the segment
//	                   rewritten to begin at <name>. Opening deletes every
//	                   segment before it and renames it to <name>.
//	<name>.END         the same for a back truncation (TruncateBack, which
//	                   only a replicated log uses): the segment rewritten to
//	                   end early. Opening deletes every segment after it and
//	                   renames it over <name>.
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
// While a Log is open, its tail segment may end in zeros after the last
// record: space written ahead (Options.Preallocate) so that a commit's fsync
// makes only data durable, not a longer file. The zeros are spare space, not
// an entry: appends write over them, and the segment is cut to its records
// once the Log moves on to the next segment or is closed. A crash can leave
// them, and an all-zero remainder of the tail reads as spare space (Check
// reports it in Spare). tidwall/wal cannot open such a tail; one closed
// cleanly has none.
//
// A future format bumps the version byte; readers refuse versions they do not
// know.
//
// # Damage
//
// A crash can only leave a partly written entry at the end of the newest
// segment, because every older segment was fsynced before the next one was
// created. So when the first invalid entry lies in the last segment, is not
// the start of an all-zero remainder (spare space, above), and nothing from
// there to the end of the file parses as a further valid record, it is a
// torn tail: Open and Repair copy the segment aside as <name>.broken,
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
// Append only frames the record into memory, as the segment file will hold
// it. Flush writes every appended record to the operating system straight
// from that buffer, one write call per segment the batch lands in (after
// zeros for the spare space when the tail has too little); Sync also
// fsyncs the tail (fdatasync on Linux: the data, and the size when a write
// grew the file), and one fsync serves every Sync call waiting for a record
// it covers. A segment is fsynced before the next one is created, so only
// the tail can hold data that is not durable. A truncation writes the
// segment it rewrites to a temporary file, fsyncs it and renames it into
// place before removing what it replaces. The directory is fsynced whenever
// a segment is created, renamed or removed. After any write error (a short
// write included), fsync error or failed file operation the Log is failed
// for good and every later call returns that error: an fsync that failed
// may have dropped dirty pages, so retrying it could report data durable
// that is not. Reopening the directory recovers from what is on disk,
// cutting what a short write left as a torn tail.
//
// # Memory
//
// An open Log holds the records appended and not yet written, and for each
// segment it wrote or read an index of one offset per 64 records; nothing
// else of the files. Read and Replay read the segment files, Read keeping
// its place between calls so that reading in order is cheap.
package wal
