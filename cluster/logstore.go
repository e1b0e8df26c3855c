package cluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/raft"
)

// LogStore is raft's log on docket's write-ahead log: one wal record per
// entry, the record's sequence number being the entry's index, so replicated
// and standalone docket share one file format and one set of crash checks.
// StoreLogs makes its entries durable with a single fsync, and concurrent
// writers share fsyncs through the wal's group commit.
//
// The wal holds a contiguous run of entries, so LogStore is a
// raft.MonotonicLogStore: raft then removes every entry after installing a
// snapshot, and the next StoreLogs starts the log afresh at its index.
type LogStore struct {
	log *wal.Log

	// mu serialises the calls that change the log: the wal's Append must not
	// run concurrently with itself or with a truncation.
	mu  sync.Mutex
	buf []byte
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// OpenLogStore opens the log in dir, creating it if missing. opts are the
// wal's; the zero value is ready to use. Like wal.Open it cuts a torn tail and
// refuses, with an error wrapping wal.ErrCorrupt, any other damage.
func OpenLogStore(dir string, opts wal.Options) (*LogStore, error) {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	return &LogStore{log: l}, nil
}

// FirstIndex returns the index of the oldest entry held, 0 if none is.
func (s *LogStore) FirstIndex() (uint64, error) {
	first, last := s.log.FirstSeq(), s.log.LastSeq()
	if last < first {
		return 0, nil
	}
	return first, nil
}

// LastIndex returns the index of the newest entry held, 0 if none is.
func (s *LogStore) LastIndex() (uint64, error) {
	first, last := s.log.FirstSeq(), s.log.LastSeq()
	if last < first {
		return 0, nil
	}
	return last, nil
}

// GetLog reads the entry at index into e; raft.ErrLogNotFound if it is not
// held.
func (s *LogStore) GetLog(index uint64, e *raft.Log) error {
	b, err := s.log.Read(index)
	if errors.Is(err, wal.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	if err := decodeEntry(b, e); err != nil {
		return fmt.Errorf("cluster: log entry %d: %w", index, err)
	}
	if e.Index != index {
		return fmt.Errorf("%w: record %d holds entry %d", errEntry, index, e.Index)
	}
	return nil
}

// StoreLog stores one entry durably.
func (s *LogStore) StoreLog(e *raft.Log) error {
	return s.StoreLogs([]*raft.Log{e})
}

// StoreLogs stores entries with consecutive indexes and returns once they are
// durable. The first must follow the newest entry held; an index beyond that
// is where raft continues after a snapshot, and starts the log there (what it
// held is covered by the snapshot). An empty log starts at any index, since
// DeleteRange of the whole log is both raft's removal after a snapshot and its
// removal of a conflicting suffix that begins at the first entry. Otherwise an
// index at or below the newest entry is refused: raft deletes a conflicting
// suffix before replacing it.
func (s *LogStore) StoreLogs(entries []*raft.Log) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := entries[0].Index
	for i, e := range entries {
		if e.Index != first+uint64(i) {
			return fmt.Errorf("cluster: store logs: index %d follows %d: entries must be consecutive", e.Index, first+uint64(i)-1)
		}
	}
	if first == 0 {
		return fmt.Errorf("cluster: store logs: index 0: indexes start at 1")
	}
	if next := s.log.LastSeq() + 1; first != next {
		if first < next && s.log.FirstSeq() < next {
			return fmt.Errorf("cluster: store logs: index %d, but the log already holds up to %d", first, next-1)
		}
		if err := s.log.Reset(first); err != nil {
			return err
		}
	}
	for _, e := range entries {
		s.buf = appendEntry(s.buf[:0], e)
		if err := s.log.Append(e.Index, s.buf); err != nil {
			return err
		}
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil
	}
	// Every record this sync is for is appended, and no one else appends
	// (s.mu): the log's leader has no committers to wait for.
	return s.log.SyncGathered(entries[len(entries)-1].Index)
}

// DeleteRange deletes the entries min..max, inclusive. Only the oldest
// entries (compaction after a snapshot) or the newest ones (a conflicting
// suffix) can be deleted, as raft does; a range inside the log is refused.
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return fmt.Errorf("cluster: delete range %d..%d: empty range", min, max)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first, last := s.log.FirstSeq(), s.log.LastSeq()
	switch {
	case last < first || max < first || min > last:
		return nil // nothing held in the range
	case min <= first && max >= last:
		return s.log.TruncateFront(last + 1)
	case min <= first:
		return s.log.TruncateFront(max + 1)
	case max >= last:
		return s.log.TruncateBack(min - 1)
	}
	return fmt.Errorf("cluster: delete range %d..%d: inside the log %d..%d, only its front or back can go", min, max, first, last)
}

// IsMonotonic reports that the log cannot hold gaps.
func (s *LogStore) IsMonotonic() bool { return true }

// Close makes everything durable and closes the log.
func (s *LogStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Close()
}
