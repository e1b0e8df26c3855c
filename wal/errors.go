package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt marks a log that fails validation in a way a crash cannot
	// explain: a bad record in an older segment, valid records after a bad
	// one, a missing segment. Every such error names the file and byte offset
	// so that recovery can refuse to start and say where to look.
	ErrCorrupt = errors.New("wal: corrupt")

	// ErrFailed reports that a write, fsync or directory change failed
	// earlier. The Log then refuses everything, because memory may be ahead
	// of disk; the error also wraps the original failure.
	ErrFailed = errors.New("wal: failed")

	// ErrClosed reports a call on a Log after Close.
	ErrClosed = errors.New("wal: closed")

	// ErrSequence reports a sequence number that does not fit the log: an
	// Append that is not LastSeq()+1, or a Sync or TruncateFront beyond what
	// was appended.
	ErrSequence = errors.New("wal: out of sequence")
)

// corruptf builds an error wrapping ErrCorrupt that locates the problem.
func corruptf(path string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
}
