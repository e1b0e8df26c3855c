package engine

import "sync"

// LeaseWatcher is implemented by an API that can tell its caller, in
// process, that a leased task was cancelled, so that a worker stops the
// handler within moments instead of at its next heartbeat. *DB implements
// it; a network client need not (the worker then relies on heartbeats).
type LeaseWatcher interface {
	// WatchLease calls f once if the task of l is cancelled while the watch
	// is on. f runs on the cancelling goroutine after the cancellation has
	// committed, with no engine lock held; it must be fast and must not call
	// into the DB. stop ends the watch; after it returns, f is not called.
	WatchLease(l Lease, f func()) (stop func(), err error)
}

var _ LeaseWatcher = (*DB)(nil)

// watchSet holds the lease watches of an engine, by task id.
type watchSet struct {
	mu sync.Mutex
	m  map[uint64]map[*leaseWatch]struct{}
}

type leaseWatch struct {
	mu      sync.Mutex // held while f runs, so that stop waits for it
	f       func()
	stopped bool
}

// WatchLease implements LeaseWatcher. The caller needs the work permission
// on the lease's namespace.
func (d *DB) WatchLease(l Lease, f func()) (func(), error) {
	if f == nil {
		return nil, invalid("WatchLease with a nil function")
	}
	if err := checkNS(l.Namespace); err != nil {
		return nil, err
	}
	if err := d.authorize(l.Namespace, PermWork); err != nil {
		return nil, err
	}
	ws := &d.c.watch
	w := &leaseWatch{f: f}
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = make(map[uint64]map[*leaseWatch]struct{})
	}
	set := ws.m[l.ID]
	if set == nil {
		set = make(map[*leaseWatch]struct{}, 1)
		ws.m[l.ID] = set
	}
	set[w] = struct{}{}
	ws.mu.Unlock()
	return func() {
		ws.mu.Lock()
		if set := ws.m[l.ID]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(ws.m, l.ID)
			}
		}
		ws.mu.Unlock()
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
	}, nil
}

// fire runs and forgets the watches of task id. Call with no lock held.
func (ws *watchSet) fire(id uint64) {
	ws.mu.Lock()
	set := ws.m[id]
	delete(ws.m, id)
	ws.mu.Unlock()
	for w := range set {
		w.mu.Lock()
		if !w.stopped {
			w.stopped = true
			w.f()
		}
		w.mu.Unlock()
	}
}
