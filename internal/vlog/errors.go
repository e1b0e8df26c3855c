package vlog

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt marks bytes that fail their checksum or cannot be a record:
	// a flipped bit, a record cut by a crash. The error names the file and
	// the record's offset.
	ErrCorrupt = errors.New("vlog: corrupt")

	// ErrMissing reports a Ref past the end of its file or into a file that
	// does not exist (never written, lost by a crash, or removed).
	ErrMissing = errors.New("vlog: missing")

	// ErrUnsynced reports a Read of a value appended but not yet made
	// durable by Sync. Such a Read always fails, whether or not its bytes
	// have reached the file: refs are valid once Sync returns.
	ErrUnsynced = errors.New("vlog: not synced")

	// ErrMismatch reports an intact record that is not the one asked for:
	// another owner, another kind or another length than the Ref says.
	ErrMismatch = errors.New("vlog: record does not match the ref")

	// ErrBadRef reports a Ref or argument that cannot be valid: a negative
	// offset, an unknown Kind, a value larger than MaxValueSize.
	ErrBadRef = errors.New("vlog: bad argument")

	// ErrActive reports a Remove of the file appends go to, or of one with
	// appends not yet synced.
	ErrActive = errors.New("vlog: file is active")

	// ErrFailed reports that a write, fsync or directory change failed
	// earlier. Append, Sync and Compact then refuse, because what was
	// appended may not be on disk; Read of synced values still works. The
	// error also wraps the original failure.
	ErrFailed = errors.New("vlog: failed")

	// ErrClosed reports a call on a Log after Close.
	ErrClosed = errors.New("vlog: closed")
)

// corruptf builds an error wrapping ErrCorrupt that locates the record.
func corruptf(file uint32, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: file %s offset %d: %s", ErrCorrupt, fileName(file), off, fmt.Sprintf(format, args...))
}
