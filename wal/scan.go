package wal

import (
	"fmt"

	"github.com/docketdb/docket/internal/vfs"
)

// Scan calls fn for every record with seq >= from, in order, reading the
// segment files of dir directly and changing nothing, so it is safe on a
// directory another process has open. It stops before a torn tail, as Open
// would cut it, and returns an error wrapping ErrCorrupt, before calling fn
// at all, for damage Open with Options.From = from would refuse: damage in
// records before from does not stop it (see CheckFrom). data is valid only
// during the call.
func Scan(dir string, from uint64, fn func(seq uint64, data []byte) error) error {
	return ScanFS(vfs.Default, dir, from, fn)
}

// ScanFS is Scan on fsys.
func ScanFS(fsys vfs.FS, dir string, from uint64, fn func(seq uint64, data []byte) error) error {
	s, err := scan(fsys, dir, from)
	if err != nil {
		return err
	}
	segs := s.layout.segs
	for i, seg := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			continue // nothing in it is wanted
		}
		buf, err := vfs.ReadFile(fsys, seg.path)
		if err != nil {
			return err
		}
		if i == len(segs)-1 && int64(len(buf)) > s.tailSize {
			buf = buf[:s.tailSize]
		}
		seq := seg.first
		for off := 0; off < len(buf); seq++ {
			rec, n, f := nextEntry(buf[off:])
			if f != faultNone {
				return corruptf(seg.path, int64(off), "record %d: %s (changed while scanning?)", seq, f)
			}
			data, f := checkRecord(rec, seq)
			if f != faultNone && !(seq < from && f.framed()) {
				return corruptf(seg.path, int64(off), "record %d: %s (changed while scanning?)", seq, f)
			}
			off += n
			if seq < from {
				continue
			}
			if err := fn(seq, data); err != nil {
				return fmt.Errorf("%s: record %d: %w", seg.path, seq, err)
			}
		}
	}
	return nil
}
