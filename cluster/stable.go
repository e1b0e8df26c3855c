package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// ErrKeyNotFound is what StableStore returns for a key never set. Its text is
// the one raft recognises for a missing current term or vote.
var ErrKeyNotFound = errors.New("not found")

// The stable file holds every key and value, rewritten whole by each Set:
//
//	magic    [4]byte  "DKST"
//	version  byte     1
//	count    uvarint  number of pairs
//	pairs    count times: uvarint key length, key, uvarint value length, value,
//	         in increasing key order
//	crc      uint32   CRC-32C of every byte before it, little-endian
//
// Part of the on-disk format, do not change.
const (
	stableMagic   = "DKST"
	stableVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// StableOptions configures a StableStore. The zero value is ready to use.
type StableOptions struct {
	// Failpoint, if set, is called at named points of a Set; a non-nil error
	// is treated as if the I/O there had failed. It exists to test crashes:
	//
	//	"write"   the new file is written, not yet fsynced
	//	"rename"  the new file is fsynced, not yet renamed over the old one
	//	"dir"     renamed, the directory not yet fsynced
	Failpoint func(name string) error

	// FS is the file system the store is on; nil is the operating
	// system's. Tests run it on one that can crash or fail operations.
	FS vfs.FS
}

// StableStore is raft's stable storage (current term, last vote) in one small
// file. Set writes a temporary file, fsyncs it, renames it over the old one
// and fsyncs the directory, so a crash at any point leaves either the old
// contents or the new, and a failed Set leaves the store as it was.
type StableStore struct {
	path string
	opts StableOptions

	mu sync.Mutex
	kv map[string][]byte
}

var _ raft.StableStore = (*StableStore)(nil)

// OpenStableStore opens the store kept in the file path, creating its
// directory if missing; a missing file is an empty store. A file that fails
// its checksum or does not decode is refused with an error wrapping
// wal.ErrCorrupt: a lost term or vote could let this node vote twice.
func OpenStableStore(path string, opts StableOptions) (*StableStore, error) {
	opts.FS = vfs.Or(opts.FS)
	fsys := opts.FS
	// Each directory created is synced into its parent: a power loss must
	// not take the directory, and the term and vote in it, with it.
	if err := fsync.MkdirAllFS(fsys, filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("cluster: stable store %s: %w", path, err)
	}
	// A temporary file is a Set that never completed.
	if err := fsys.Remove(path + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cluster: stable store %s: %w", path, err)
	}
	s := &StableStore{path: path, opts: opts, kv: map[string][]byte{}}
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("cluster: stable store %s: %w", path, err)
	}
	if s.kv, err = decodeStable(b); err != nil {
		return nil, fmt.Errorf("cluster: stable store %s: %w", path, err)
	}
	return s, nil
}

// Set stores val under key durably.
func (s *StableStore) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := maps.Clone(s.kv)
	kv[string(key)] = bytes.Clone(val)
	if err := s.write(encodeStable(kv)); err != nil {
		return fmt.Errorf("cluster: stable store %s: %w", s.path, err)
	}
	s.kv = kv
	return nil
}

// Get returns the value stored under key, or ErrKeyNotFound.
func (s *StableStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, ErrKeyNotFound
	}
	return bytes.Clone(v), nil
}

// SetUint64 stores val under key as 8 little-endian bytes.
func (s *StableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.LittleEndian.AppendUint64(nil, val))
}

// GetUint64 returns the number stored under key, or 0 and ErrKeyNotFound.
func (s *StableStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("cluster: stable store %s: key %q holds %d bytes, not a uint64", s.path, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// write replaces the file with b, durably.
func (s *StableStore) write(b []byte) error {
	tmp := s.path + ".tmp"
	fsys := s.opts.FS
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := s.failpoint("write"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := s.failpoint("rename"); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, s.path); err != nil {
		return err
	}
	if err := s.failpoint("dir"); err != nil {
		return err
	}
	return fsync.DirFS(fsys, filepath.Dir(s.path))
}

func (s *StableStore) failpoint(name string) error {
	if s.opts.Failpoint == nil {
		return nil
	}
	return s.opts.Failpoint(name)
}

func encodeStable(kv map[string][]byte) []byte {
	b := append([]byte(stableMagic), stableVersion)
	b = binary.AppendUvarint(b, uint64(len(kv)))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(kv[k])))
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeStable(b []byte) (map[string][]byte, error) {
	if len(b) < len(stableMagic)+1+1+4 || string(b[:len(stableMagic)]) != stableMagic {
		return nil, fmt.Errorf("%w: not a stable store file", wal.ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", wal.ErrCorrupt)
	}
	if v := body[len(stableMagic)]; v != stableVersion {
		return nil, fmt.Errorf("%w: unknown version %d", wal.ErrCorrupt, v)
	}
	p := body[len(stableMagic)+1:]
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || k != (bits.Len64(n|1)+6)/7 || n > uint64(len(p)-k) {
			return nil, false
		}
		f := p[k : k+int(n)]
		p = p[k+int(n):]
		return f, true
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)) {
		return nil, fmt.Errorf("%w: invalid pair count", wal.ErrCorrupt)
	}
	p = p[k:]
	kv := make(map[string][]byte, n)
	prev := ""
	for i := uint64(0); i < n; i++ {
		key, ok1 := field()
		val, ok2 := field()
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: pair %d does not decode", wal.ErrCorrupt, i)
		}
		if i > 0 && string(key) <= prev {
			return nil, fmt.Errorf("%w: keys out of order", wal.ErrCorrupt)
		}
		prev = string(key)
		kv[prev] = bytes.Clone(val)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the pairs", wal.ErrCorrupt, len(p))
	}
	return kv, nil
}
