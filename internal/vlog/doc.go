// Package vlog is a value log: values too large to keep in memory
// (payloads, results, progress records, key-value values) live in
// append-only files, and the engine's in-memory records hold only a Ref
// (file number, record offset, value length) to them.
//
// # Files
//
// A log directory holds files named after their number, ten decimal digits
// and ".vlog", so that names sort in number order:
//
//	0000000000.vlog
//	0000000001.vlog   (appends go to the highest number)
//
// Other names are ignored. Appends go to one file, the head, until it
// passes Options.FileSize; then to the next number. Open never appends to
// a file it finds: the head is numbered one past the highest file there,
// so no record written before a crash is ever overwritten, whether its
// tail was torn or not. A file is created by the first Sync that writes to
// it.
//
// # Records
//
// A file is a sequence of records, each a header and the value, with no
// padding. Integers are little-endian. Part of the on-disk format, do not
// change:
//
//	offset size field
//	0      4    crc: CRC-32C of bytes 4 to the end of the value
//	4      4    header crc: CRC-32C of bytes 8 to 22
//	8      1    version, 1
//	9      1    kind: 1 payload, 2 result, 3 progress, 4 kv value
//	10     8    owner (the task or key the value belongs to)
//	18     4    value length, at most MaxValueSize
//	22     n    value
//
// The header has its own checksum so that the length of a record whose
// value is damaged can be trusted and the records after it found.
//
// # Guarantees
//
//   - Append only copies into memory (it does no I/O), so it can run under
//     the engine's commit lock. A Ref it returns is readable once a Sync
//     that began after the Append returns; before that Read fails with
//     ErrUnsynced, whether or not the bytes have reached the file. The
//     engine hands out refs only after Sync, and must not Read earlier.
//   - Sync writes what was appended, fdatasyncs each file it wrote and
//     syncs the directory when it created a file. After it returns, every
//     ref appended before it began reads back after a crash and reopen.
//     Appends may run during Sync; they wait for the next one. A failed
//     write or sync makes the log fail-stop: Append, Sync and Compact then
//     return ErrFailed; Reads of synced values still work.
//   - Read checks the record's checksums, owner, kind and length. It never
//     returns wrong bytes: a ref into bytes a crash tore or lost fails with
//     ErrCorrupt or ErrMissing, a flipped bit with ErrCorrupt naming file
//     and offset, a ref to another record with ErrMismatch. A ref that was
//     never synced may, after a crash, name a file number the appends
//     after reopening use again; it then fails with ErrMismatch or
//     ErrCorrupt, or finds its own value, never another's.
//   - Scan calls its function for every intact record of a file in order,
//     skipping damaged records and a torn tail; Check lists them: file,
//     offset, and the owner and kind when the header is intact. Damage with
//     no intact record after it is reported as the torn tail (Torn): a
//     crash during a write leaves the same bytes as a flipped bit in the
//     last record.
//   - Compact copies the live records of a file to the head, syncs them and
//     returns the moves; the file itself is not changed. The engine then
//     makes its refs point at the copies (durably, in its WAL) and calls
//     Remove. A crash or error at any point of Compact loses no value: the
//     old file is intact, and the copies already written are dead records
//     that compacting their own file later reclaims. Compact runs beside
//     Append, Sync and Read. A damaged live record makes it fail with
//     ErrCorrupt instead of dropping the value. Its live function must
//     count as live the values of commits not yet applied: the engine
//     compacts only files below a Head it read after applying every commit
//     that appended before it.
//   - Remove waits for the Reads, Scans and Compacts of the file that are
//     running; Reads that begin after it fail with ErrMissing, so a Read
//     that loses the race with compaction looks its ref up again (it has
//     moved). It refuses the head (ErrActive). A removal a crash undoes
//     leaves a file the engine has no ref into, which the next Remove
//     deletes. File numbers are never used twice for synced files: Remove
//     keeps a higher-numbered file on disk.
//   - Close lets running Reads, Scans and Compacts end (Compacts with
//     ErrClosed) and a running Sync finish; what was appended since the
//     last Sync is dropped.
//
// Opening the same directory twice at once is not supported: the engine's
// lock on its data directory covers the value log.
package vlog
