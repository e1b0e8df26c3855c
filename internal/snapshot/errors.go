package snapshot

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt marks a snapshot file that fails validation: bad magic,
	// version or checksum, a cut-off file, trailing bytes, or a seq that does
	// not match the file name. Every such error wraps it and names the file
	// and byte offset, so recovery can refuse to start and say where to look.
	ErrCorrupt = errors.New("snapshot: corrupt")

	// ErrNotFound reports that a directory holds no snapshot at all, which
	// for a fresh directory is normal: recovery replays the whole log.
	ErrNotFound = errors.New("snapshot: none")
)

// corruptf builds an error wrapping ErrCorrupt that locates the problem.
func corruptf(path string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
}
