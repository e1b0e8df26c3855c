package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/flock"
	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// Open opens (creating if needed) the docket data directory dir, recovering
// its state from the newest valid snapshot and the log after it. A directory
// can be open in one DB at a time; a second Open returns ErrLocked. An empty
// dir is ErrInvalid (an unset variable must not silently give a DB that
// keeps nothing): use OpenInMemory for that.
func Open(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data directory (use OpenInMemory for a DB that keeps nothing)", ErrInvalid)
	}
	return open(dir, opts, (*core).openDir)
}

// OpenInMemory returns a DB that keeps everything in memory: no log, no
// snapshots, nothing survives Close.
func OpenInMemory(opts Options) (*DB, error) { return open("", opts, nil) }

// OpenReadOnly opens the existing docket data directory dir to read it: it
// runs the recovery Open runs over the files as they are (a torn tail is not
// read, and not cut), creates and changes nothing, and takes the directory's
// lock shared, so it fails with ErrLocked while a DB has the directory open
// for writing and keeps one from opening it meanwhile. A directory that is
// not a docket data directory is ErrInvalid. Every write returns
// ErrReadOnly; Close releases the lock.
func OpenReadOnly(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data directory", ErrInvalid)
	}
	fsys := vfs.Or(opts.fs)
	if err := recovery.IsDocketDir(fsys, dir); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if opts.Authorizer == nil {
		opts.Authorizer = denyAll{}
	}
	var lock vfs.File
	if f, err := fsys.Open(filepath.Join(dir, "LOCK")); err == nil {
		if err := fsys.Lock(f, false); err != nil {
			f.Close()
			if errors.Is(err, flock.ErrHeld) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
			}
			return nil, err
		}
		lock = f
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b, _, err := recovery.InPlace(fsys, dir, opts.Logger, false, applyBatch)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	c := &core{
		opts:    opts,
		clock:   opts.Clock,
		dir:     dir,
		st:      readOnlyStorage{lock: lock},
		store:   b.Store,
		enc:     index.NewEncoder(),
		waiters: make(map[index.QueueKey]*waitq),
		stopBg:  make(chan struct{}),
		slots:   make(chan struct{}, opts.MaxInFlight),
	}
	if err := c.openValues(true); err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	c.st = readOnlyStorage{lock: lock, vals: c.vals}
	c.dead = newDeadLog(opts.Logger, opts.Clock, c.stopBg)
	return &DB{c: c}, nil
}

// open returns a DB over dir with opts; attach, if not nil, gives it its
// storage (which is otherwise memory) and the state that storage holds.
func open(dir string, opts Options, attach func(*core) error) (*DB, error) {
	opts = opts.withDefaults()
	if opts.Durability < SyncAlways || opts.Durability > SyncNever {
		return nil, fmt.Errorf("%w: durability %d", ErrInvalid, opts.Durability)
	}
	if opts.Authorizer == nil {
		opts.Authorizer = denyAll{}
	}
	c := &core{
		opts:    opts,
		clock:   opts.Clock,
		entropy: newEntropy(),
		dir:     dir,
		st:      memoryStorage{},
		store:   index.NewStore(),
		enc:     index.NewEncoder(),
		waiters: make(map[index.QueueKey]*waitq),
		stopBg:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
		slots:   make(chan struct{}, opts.MaxInFlight),
		adm:     admit.Admitter{Budget: budgetOf(opts.MaxMemory), Log: opts.Logger, Clock: opts.Clock},
	}
	c.dead = newDeadLog(opts.Logger, opts.Clock, c.stopBg)
	if attach != nil {
		if err := attach(c); err != nil {
			return nil, err
		}
	}
	if c.st.logged() {
		if opts.Durability == SyncInterval {
			c.bg.Add(1)
			go c.syncLoop()
		}
		c.piped.Add(1)
		go c.pipeline()
	}
	if c.vals != nil {
		c.compactor.Add(1)
		go func() {
			defer c.compactor.Done()
			c.vals.Loop(c.stopBg, c.opts.Logger)
		}()
	}
	return &DB{c: c}, nil
}

func (c *core) snapDir() string { return filepath.Join(c.dir, "snap") }

// fs is the file system the DB's files are on.
func (c *core) fs() vfs.FS { return vfs.Or(c.opts.fs) }

func (c *core) openDir() error {
	fsys := c.fs()
	if err := fsync.MkdirAllFS(fsys, c.dir, 0o755); err != nil {
		return err
	}
	lock, err := fsys.OpenFile(filepath.Join(c.dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := fsys.Lock(lock, true); err != nil {
		lock.Close()
		if errors.Is(err, flock.ErrHeld) {
			return fmt.Errorf("%w: %s", ErrLocked, c.dir)
		}
		return err
	}
	wopts := wal.Options{FS: fsys, SegmentSize: c.opts.SegmentBytes, Failpoint: c.opts.failpoint,
		// The values a batch refers to reach the value log, as durably,
		// before the batch reaches the log: whichever commit's sync writes
		// it (group commit), the values of every record it takes were
		// appended before them, under mu. Set once the state is recovered,
		// before any write.
		BeforeWrite: func() error {
			if c.vals == nil {
				return nil
			}
			return c.vals.Sync()
		}}
	if obs := c.opts.Observer; obs != nil {
		wopts.OnSync = obs.Synced
	}
	store, log, err := recovery.OpenLog(fsys, c.dir, c.opts.Logger, applyBatch, wopts)
	if err != nil {
		lock.Close()
		return err
	}
	c.store = store
	d := &diskStorage{fsys: fsys, snapDir: c.snapDir(), log: log, lock: lock,
		durability: c.opts.Durability, failpoint: c.opts.failpoint, fail: c.failLocked}
	c.st = d
	if err := c.openValues(false); err != nil {
		log.Close()
		lock.Close()
		return err
	}
	d.vals = c.vals
	return nil
}
