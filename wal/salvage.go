package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"sort"
	"strconv"

	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/vfs"
)

// SalvageReport says what Salvage did.
type SalvageReport struct {
	// RepairReport describes the log as it was kept.
	RepairReport

	// Damage is where the valid prefix ended, or nil when the log needed no
	// more than Repair and nothing was lost.
	Damage *Damage

	// LostFirst..LostLast are the sequence numbers dropped: from the first
	// damaged record to the highest one any file still shows. Zero when
	// nothing was lost.
	LostFirst, LostLast uint64

	// Readable holds the dropped records that still verify, in order, so
	// that the caller can say what they held. The others were unreadable.
	Readable []Record

	// Kept lists the copies of what was cut or moved away: the damaged
	// segment as it was, and every segment after it.
	Kept []string
}

// Record is one log record.
type Record struct {
	Seq  uint64
	Data []byte
}

// Salvage keeps the longest valid prefix of the log in dir from its first
// record (records before from, covered by a snapshot, may be damaged as in
// CheckFrom), when Repair would refuse: it copies the segment holding the
// first damage aside and cuts it there, and moves every later segment aside
// (renamed to <name>.broken), so nothing is deleted. It reports exactly which
// sequence numbers were dropped. A log that Repair accepts is repaired as
// Repair does and nothing is lost. It refuses (ErrCorrupt, nothing changed)
// when the valid prefix would end before from-1: the records the snapshot
// needs next would be gone. It must not run while the log is open.
func Salvage(dir string, from uint64) (SalvageReport, error) {
	return SalvageFS(vfs.Default, dir, from)
}

// SalvageFS is Salvage on fsys.
func SalvageFS(fsys vfs.FS, dir string, from uint64) (SalvageReport, error) {
	s, err := scan(fsys, dir, from)
	if err == nil {
		_, rep, err := recoverScanned(fsys, dir, from, nil)
		return SalvageReport{RepairReport: rep}, err
	}
	if s == nil || s.report.Corrupt == nil {
		return SalvageReport{}, err
	}
	r := s.report
	d := *r.Corrupt
	keepLast := r.LastSeq
	if from > 0 && keepLast+1 < from {
		return SalvageReport{}, fmt.Errorf("%w: salvage: the valid log ends at %d, before record %d that the snapshot needs next: %w",
			ErrCorrupt, keepLast, from, err)
	}
	bad := -1
	for i, seg := range s.layout.segs {
		if seg.path == d.File {
			bad = i
		}
	}
	if bad < 0 {
		return SalvageReport{}, fmt.Errorf("wal: salvage: damage in %s, which is not a segment", d.File)
	}
	// Finish an interrupted truncation first, as recoverDir does; it only
	// touches segments Open would not read.
	for _, p := range append(s.layout.remove, s.layout.temps...) {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return SalvageReport{}, err
		}
	}
	for _, seg := range s.layout.segs {
		if seg.path != seg.final {
			if err := fsys.Rename(seg.path, seg.final); err != nil {
				return SalvageReport{}, err
			}
		}
	}
	out := SalvageReport{Damage: &d, LostFirst: keepLast + 1, LostLast: keepLast + 1}
	found := map[uint64][]byte{}
	for i, seg := range s.layout.segs[bad:] {
		buf, err := vfs.ReadFile(fsys, seg.final)
		if err != nil {
			return SalvageReport{}, err
		}
		off := int64(0)
		if i == 0 {
			off = d.Offset
		}
		verified(buf, off, out.LostFirst, found)
		if i > 0 || seg.first > out.LostFirst {
			last := seg.first - 1
			if len(buf) > 0 {
				last = seg.first
			}
			out.LostLast = max(out.LostLast, last)
		}
	}
	for seq, data := range found {
		out.LostLast = max(out.LostLast, seq)
		out.Readable = append(out.Readable, Record{Seq: seq, Data: data})
	}
	sort.Slice(out.Readable, func(i, j int) bool { return out.Readable[i].Seq < out.Readable[j].Seq })

	for i, seg := range s.layout.segs[bad:] {
		if i == 0 && (d.Offset > 0 || bad == 0) {
			broken, err := cutTail(fsys, seg.final, d.Offset)
			if err != nil {
				return SalvageReport{}, err
			}
			out.Kept = append(out.Kept, broken)
			continue
		}
		moved, err := moveAside(fsys, seg.final)
		if err != nil {
			return SalvageReport{}, err
		}
		out.Kept = append(out.Kept, moved)
	}
	if err := fsync.DirFS(fsys, dir); err != nil {
		return SalvageReport{}, err
	}
	after, err := scan(fsys, dir, from)
	if err != nil {
		return out, fmt.Errorf("wal: salvage: the kept log still does not verify: %w", err)
	}
	a := after.report
	out.RepairReport = RepairReport{FirstSeq: a.FirstSeq, LastSeq: a.LastSeq, Records: a.Records, Covered: a.Covered}
	return out, nil
}

// verified adds to found every record at or after off in buf whose checksum
// holds and whose seq is at least min, trying every offset: after damage
// the framing cannot be trusted.
func verified(buf []byte, off int64, min uint64, found map[uint64][]byte) {
	for p := off; p+minEntrySize <= int64(len(buf)); p++ {
		b := buf[p:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size < headerSize || size > uint64(len(b)-k) {
			continue
		}
		rec := b[k : k+int(size)]
		if rec[0] != recordVersion {
			continue
		}
		seq := binary.LittleEndian.Uint64(rec[5:13])
		if seq < min || binary.LittleEndian.Uint32(rec[1:5]) != crc32.Checksum(rec[5:], crcTable) {
			continue
		}
		if _, ok := found[seq]; !ok {
			found[seq] = append([]byte(nil), rec[headerSize:]...)
		}
	}
}

// moveAside renames path to a fresh <path>.broken name and returns it.
func moveAside(fsys vfs.FS, path string) (string, error) {
	name := path + brokenSuffix
	for i := 1; ; i++ {
		if _, err := fsys.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			break
		} else if err != nil {
			return "", err
		}
		if i > 1000 {
			return "", fmt.Errorf("wal: no free name to move %s aside", path)
		}
		name = path + brokenSuffix + "." + strconv.Itoa(i)
	}
	return name, fsys.Rename(path, name)
}
