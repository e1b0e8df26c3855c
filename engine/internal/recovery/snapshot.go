package recovery

import (
	"errors"
	"fmt"
	"sync"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
)

// ReadSnapshot loads the snapshot file at path.
func ReadSnapshot(fsys vfs.FS, path string) (*index.Store, error) {
	return LoadSnapshot(path, func(fn func([]byte) error) (uint64, error) {
		seq, _, err := snapshot.ReadFS(fsys, path, fn)
		return seq, err
	})
}

const (
	chunk    = 1024      // records a chunk holds at most
	rawBytes = 256 << 10 // bytes of records a raw chunk holds, unless one record is larger
	inFlight = 4         // chunks queued between two stages
)

// raw is a chunk of records as read: record i is buf[ends[i-1]:ends[i]].
type raw struct {
	buf  []byte
	ends []int
}

// A record is handed to the loader as its task, or, for the few records
// of other kinds, as a Record (which is large) of its own.
type item struct {
	task *index.Task
	rec  *index.Record
}

// raws and items keep LoadSnapshot's chunks between loads: a snapshot
// loaded often (a small DB's, opened again and again) would otherwise
// allocate and clear them each time. A raw chunk grown for a large record
// is not kept; the pools let the collector free the rest once loads stop.
var (
	raws  = sync.Pool{New: func() any { return &raw{buf: make([]byte, 0, rawBytes)} }}
	items = sync.Pool{New: func() any { b := make([]item, 0, chunk); return &b }}
)

// keepRaw puts r back in raws, empty, unless it grew past rawBytes.
func keepRaw(r *raw) {
	if cap(r.buf) != rawBytes {
		return
	}
	r.buf, r.ends = r.buf[:0], r.ends[:0]
	raws.Put(r)
}

// keepItems puts b back in items, empty.
func keepItems(b []item) {
	clear(b)
	b = b[:0]
	items.Put(&b)
}

// LoadSnapshot builds a store from the snapshot named name, whose records
// read streams to its argument, returning the snapshot's seq.
//
// It runs as a pipeline of three goroutines handing records over in
// chunks: one reads and checks the records (read), copying them out of
// the reader's buffer; one decodes them; and the calling one loads them
// into the store. Each of the three takes a good part of a restore's
// time, and the chunks in flight absorb the moments one of them is held
// up (by the garbage collector, mostly), so on two cores a restore takes
// about as long as its longest stage. The result, and the first error,
// are those of doing all three in one loop: the records before a damaged
// one are loaded, and checked, first.
func LoadSnapshot(name string, read func(fn func(rec []byte) error) (uint64, error)) (*index.Store, error) {
	// Each stage hands its chunks back to the one before (freeRaws, free)
	// for its next ones; the chunks left at the end go back to the pools,
	// from this goroutine, which took the first ones (a pool keeps what a
	// goroutine puts for that goroutine's processor first).
	firstRaw, firstItems := raws.Get().(*raw), *items.Get().(*[]item)
	filled := make(chan *raw, inFlight)
	freeRaws := make(chan *raw, inFlight+2)
	chunks := make(chan []item, inFlight)
	free := make(chan []item, inFlight+2)
	defer func() {
		for {
			select {
			case r := <-freeRaws:
				keepRaw(r)
			case b := <-free:
				keepItems(b)
			default:
				return
			}
		}
	}()
	stop := make(chan struct{}) // a later stage failed: read and decode no further
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }

	var seq uint64
	var readErr, decErr error
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(filled)
		r := firstRaw
		send := func() bool {
			select {
			case filled <- r:
			case <-stop:
				return false
			}
			select {
			case r = <-freeRaws:
			default:
				r = raws.Get().(*raw)
			}
			return true
		}
		seq, readErr = read(func(rec []byte) error {
			if len(r.ends) > 0 && (len(r.ends) == chunk || len(r.buf)+len(rec) > cap(r.buf)) && !send() {
				return errStopped
			}
			r.buf = append(r.buf, rec...)
			r.ends = append(r.ends, len(r.buf))
			return nil
		})
		if len(r.ends) > 0 {
			send()
		}
		r.buf, r.ends = r.buf[:0], r.ends[:0] // not sent, or the one send took after it
		select {
		case freeRaws <- r:
		default:
			keepRaw(r)
		}
	}()
	go func() {
		defer close(chunks)
		dec := index.NewDecoder(nil)
		buf := firstItems
		defer func() {
			// Not sent, or the one send took after it.
			clear(buf)
			select {
			case free <- buf[:0]:
			default:
				keepItems(buf)
			}
		}()
		send := func() bool {
			select {
			case chunks <- buf:
			case <-stop:
				return false
			}
			select {
			case buf = <-free:
			default:
				buf = *items.Get().(*[]item)
			}
			return true
		}
		for r := range filled {
			prev := 0
			for _, end := range r.ends {
				rec := r.buf[prev:end]
				prev = end
				it := item{}
				if t, ok := dec.Task(rec); ok {
					it.task = t
				} else {
					x, err := dec.Record(rec)
					if err != nil {
						decErr = err
						halt()
						return
					}
					it.rec = &x
				}
				if buf = append(buf, it); len(buf) == chunk && !send() {
					return
				}
			}
			if cap(r.buf) == rawBytes { // not grown for a large record
				r.buf, r.ends = r.buf[:0], r.ends[:0]
				select {
				case freeRaws <- r:
				default:
					keepRaw(r)
				}
			}
		}
		if len(buf) > 0 {
			send()
		}
	}()
	store := index.NewStore()
	header := false
	var err error
	for recs := range chunks {
		for i := 0; i < len(recs) && err == nil; i++ {
			it := recs[i]
			switch {
			case header == (it.task == nil && it.rec.Kind == index.RecHeader):
				err = fmt.Errorf("%w: snapshot header not (only) first", index.ErrCorrupt)
			case it.task != nil:
				err = store.LoadTask(it.task)
			default:
				header = true
				err = store.Load(*it.rec)
			}
		}
		if err != nil {
			halt()
		}
		clear(recs)
		select {
		case free <- recs[:0]:
		default:
			keepItems(recs)
		}
	}
	<-readDone // the decoder is done: chunks is closed
	if err == nil {
		err = decErr
	}
	if err == nil {
		err = readErr
	}
	if err == nil && (!header || seq != store.Seq()) {
		err = fmt.Errorf("%w: snapshot %s header does not match", index.ErrCorrupt, name)
	}
	if err == nil {
		err = store.Loaded()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return store, nil
}

// errStopped ends a snapshot read whose records are no longer wanted.
var errStopped = errors.New("docket: snapshot load stopped")
