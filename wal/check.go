package wal

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/docketdb/docket/internal/vfs"
)

// CheckReport describes a log directory as Open would find it.
type CheckReport struct {
	// Segments is the number of segment files, counted after any interrupted
	// truncation is resolved the way Open resolves it.
	Segments int

	// FirstSeq and LastSeq bound the valid records. For a log with no records
	// FirstSeq is LastSeq+1, the next sequence number to append. When the log
	// is corrupt they stop where the damage starts.
	FirstSeq uint64
	LastSeq  uint64

	// Records is the number of valid records and Bytes the size of their
	// entries, length prefixes included.
	Records uint64
	Bytes   int64

	// Torn is the torn tail Open would cut, or nil.
	Torn *Damage

	// Spare is the number of zero bytes after the last record of the tail
	// segment: space a Log keeps written ahead of its records (see
	// Options.Preallocate), which a crash leaves behind. It is not damage;
	// appends write over it.
	Spare int64

	// Corrupt is the damage that makes Open refuse the log, or nil.
	Corrupt *Damage

	// Covered lists damage in records before the from the check was given
	// (records a snapshot holds the effect of): a record whose checksum,
	// version or sequence is wrong but whose framing is intact, a segment
	// wholly before from that does not decode, records missing before from.
	// Open with that From gets past them; they go once the log is
	// truncated after the next snapshot.
	Covered []Damage
}

// Damage locates a bad spot in a segment file.
type Damage struct {
	File   string // path of the segment file
	Offset int64  // byte offset where the first invalid entry starts
	Size   int64  // bytes from Offset to the end of the file
	Reason string
}

func (d *Damage) err() error {
	return corruptf(d.File, d.Offset, "%s", d.Reason)
}

// Check validates every segment and record in dir without changing anything,
// for an offline verify. It returns an error wrapping ErrCorrupt, with the
// report's Corrupt filled in, exactly when Open would refuse the directory; a
// torn tail is reported in Torn with a nil error because Open repairs it.
// Since it writes nothing it may also run beside a process that has the log
// open, where a write in flight can show up as a torn tail.
func Check(dir string) (CheckReport, error) { return CheckFrom(dir, 0) }

// CheckFrom is Check for a log whose records before from are covered by a
// snapshot: damage in them is listed in Covered instead of refused, as Open
// with Options.From does.
func CheckFrom(dir string, from uint64) (CheckReport, error) {
	return CheckFromFS(vfs.Default, dir, from)
}

// CheckFromFS is CheckFrom on fsys.
func CheckFromFS(fsys vfs.FS, dir string, from uint64) (CheckReport, error) {
	s, err := scan(fsys, dir, from)
	if s == nil {
		return CheckReport{}, err
	}
	return s.report, err
}

// Validation is the pass over a log directory that Open starts with (every
// record of every segment read and checked), made ahead of Open by Validate
// so that it can run beside other work, such as loading the snapshot that
// decides Options.From.
type Validation struct {
	fs   vfs.FS
	dir  string
	from uint64
	s    *scanState // nil if the log was not found sound
}

// Validate validates the log in dir as Open with Options.From = from would,
// changing nothing. Given to Open as Options.Validated, it spares Open its
// own pass when it was made of the same dir with the same From and found
// the log sound; otherwise Open validates as usual. Nothing may change dir
// in between: the caller must be the one holding it.
func Validate(dir string, from uint64) *Validation {
	return ValidateFS(vfs.Default, dir, from)
}

// ValidateFS is Validate on fsys.
func ValidateFS(fsys vfs.FS, dir string, from uint64) *Validation {
	v := &Validation{fs: fsys, dir: dir, from: from}
	if s, err := scan(fsys, dir, from); err == nil {
		v.s = s
	}
	return v
}

// reuse returns v's scan when it stands for validating dir from from, or
// nil. A Validation is used at most once.
func (v *Validation) reuse(fsys vfs.FS, dir string, from uint64) *scanState {
	if v == nil || v.s == nil || v.fs != fsys || v.dir != dir || v.from != from {
		return nil
	}
	s := v.s
	v.s = nil
	return s
}

// segFile is one segment file.
type segFile struct {
	first uint64 // sequence number of its first record, from its name
	path  string // where the file is now
	final string // where it is once an interrupted truncation is resolved
}

// layout is a directory's segments as Open will see them.
type layout struct {
	segs   []segFile
	remove []string // files resolving an interrupted truncation deletes
	temps  []string // half-written .START/.END files
}

// readLayout lists dir's segment files the way tidwall/wal v1.2.1 does
// (its load), including how it finishes a truncation that a crash
// interrupted, but changes nothing. Agreeing with it keeps a directory
// written by either one readable by the other.
func readLayout(fsys vfs.FS, dir string) (layout, error) {
	var lay layout
	entries, err := fsys.ReadDir(dir) // sorted by name, as tidwall/wal's listing is
	if err != nil {
		return lay, err
	}
	var segs []segFile
	startIdx, endIdx := -1, -1
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || len(name) < nameDigits {
			continue
		}
		first, err := strconv.ParseUint(name[:nameDigits], 10, 64)
		if err != nil || first == 0 {
			continue
		}
		switch name[nameDigits:] {
		case "":
		case startSuffix:
			startIdx = len(segs) // the last one wins
		case endSuffix:
			if endIdx == -1 {
				endIdx = len(segs) // the first one wins
			}
		case startSuffix + tempSuffix, endSuffix + tempSuffix:
			lay.temps = append(lay.temps, filepath.Join(dir, name))
			continue
		default:
			continue
		}
		segs = append(segs, segFile{
			first: first,
			path:  filepath.Join(dir, name),
			final: filepath.Join(dir, name[:nameDigits]),
		})
	}
	if startIdx != -1 && endIdx != -1 {
		return lay, fmt.Errorf("%w: %s: both a %s and an %s file: two interrupted truncations",
			ErrCorrupt, dir, startSuffix, endSuffix)
	}
	if startIdx != -1 {
		// A front truncation wrote the new first segment; the ones it
		// replaces were being deleted.
		for _, s := range segs[:startIdx] {
			lay.remove = append(lay.remove, s.path)
		}
		segs = segs[startIdx:]
	}
	if endIdx != -1 {
		for _, s := range segs[endIdx+1:] {
			lay.remove = append(lay.remove, s.path)
		}
		segs = segs[:endIdx+1]
		if n := len(segs); n > 1 && segs[n-2].first == segs[n-1].first {
			// The .END file is renamed over the segment it rewrote.
			segs = append(segs[:n-2], segs[n-1])
		}
	}
	lay.segs = segs
	return lay, nil
}

// scanState is the result of validating a directory.
type scanState struct {
	layout   layout
	report   CheckReport
	sizes    []int64 // size of each segment file in layout.segs
	tailSize int64   // bytes of entries in the last segment once a torn tail is cut and spare space left out
}

// scan validates every segment in dir. On corruption it returns the state
// with report.Corrupt set and the matching error; on other errors, no state.
// Damage confined to records below from is listed in report.Covered.
func scan(fsys vfs.FS, dir string, from uint64) (*scanState, error) {
	lay, err := readLayout(fsys, dir)
	if err != nil {
		return nil, err
	}
	s := &scanState{layout: lay}
	r := &s.report
	r.Segments = len(lay.segs)
	r.FirstSeq = 1
	if len(lay.segs) > 0 {
		r.FirstSeq = lay.segs[0].first
	}
	next := r.FirstSeq
	defer func() { r.LastSeq = next - 1 }()
	var buf []byte // one segment at a time, reused: nothing keeps it
	for i, seg := range lay.segs {
		if seg.first != next {
			if seg.first > next && seg.first <= from {
				r.Covered = append(r.Covered, Damage{File: seg.path, Reason: fmt.Sprintf(
					"records %d..%d are missing", next, seg.first-1)})
				next = seg.first
			} else {
				r.Corrupt = &Damage{File: seg.path, Reason: fmt.Sprintf(
					"segment starts at seq %d, want %d: a segment is missing or was cut short", seg.first, next)}
				return s, r.Corrupt.err()
			}
		}
		buf, err = readInto(fsys, buf[:0], seg.path)
		if err != nil {
			return nil, err
		}
		s.sizes = append(s.sizes, int64(len(buf)))
		last := i == len(lay.segs)-1
		res := scanSegment(buf, seg.first, from)
		for _, k := range res.skipped {
			r.Covered = append(r.Covered, Damage{File: seg.path, Offset: k.off,
				Size: int64(len(buf)) - k.off, Reason: fmt.Sprintf("record %d: %s", k.seq, k.fault)})
		}
		if !last && lay.segs[i+1].first <= from {
			// Every record of this segment is below from: whatever is
			// wrong in it, nothing will read it again.
			r.Records += res.count
			r.Bytes += res.good
			if res.fault != faultNone {
				r.Covered = append(r.Covered, Damage{File: seg.path, Offset: res.good,
					Size: int64(len(buf)) - res.good, Reason: fmt.Sprintf("record %d: %s", seg.first+res.count, res.fault)})
			} else if end := seg.first + res.count; end < lay.segs[i+1].first {
				r.Covered = append(r.Covered, Damage{File: lay.segs[i+1].path, Reason: fmt.Sprintf(
					"records %d..%d are missing", end, lay.segs[i+1].first-1)})
			} else if end > lay.segs[i+1].first {
				r.Covered = append(r.Covered, Damage{File: seg.path, Reason: fmt.Sprintf(
					"%d entries, past record %d where the next segment starts", res.count, lay.segs[i+1].first-1)})
			}
			// The next segment's name says where it starts; what damage
			// made of this one's entries (damaged ones are skipped, so a
			// cut length prefix can make more of them) does not.
			next = lay.segs[i+1].first
			continue
		}
		r.Records += res.count
		r.Bytes += res.good
		next += res.count
		if last {
			s.tailSize = int64(len(buf))
		}
		if res.fault == faultNone {
			continue
		}
		if last && allZero(buf[res.good:]) {
			// The spare space of a preallocated tail: every record
			// written over it so far is before res.good.
			s.tailSize = res.good
			r.Spare = int64(len(buf)) - res.good
			continue
		}
		d := &Damage{
			File:   seg.path,
			Offset: res.good,
			Size:   int64(len(buf)) - res.good,
			Reason: fmt.Sprintf("record %d: %s", next, res.fault),
		}
		if last && !validAfter(buf, res.good, next) {
			r.Torn = d
			s.tailSize = res.good
			continue
		}
		if last {
			d.Reason += ", with valid records after it"
		}
		r.Corrupt = d
		return s, d.err()
	}
	return s, nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }

// readInto reads the file at path into buf, grown as needed, and returns
// it: a scan of many segments then allocates one segment's worth, not the
// whole log's.
func readInto(fsys vfs.FS, buf []byte, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Read to the end whatever the size said: a file that grew since is
	// read whole, as os.ReadFile would.
	buf = slices.Grow(buf[:0], int(st.Size())+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
	}
}
