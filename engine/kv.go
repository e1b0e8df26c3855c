package engine

import (
	"context"
	"fmt"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/engine/internal/view"
	"github.com/docketdb/docket/internal/index"
)

// SystemAPI is implemented by an API that offers each namespace's system
// area. *DB implements it; code that keeps runtime state (the worker's
// periodic schedules) looks for it with a type assertion.
type SystemAPI interface {
	// SystemKV returns a handle on the system area of namespace ns: every
	// key it reads or writes must start with ReservedPrefix, and every call
	// needs PermSystem on ns (an Enqueue op in a commit also needs
	// PermEnqueue).
	SystemKV(ns Namespace) KV
}

var _ SystemAPI = (*DB)(nil)

// kv is the in-process KV: the user's area of a namespace, or (system set)
// its system area.
type kv struct {
	db     *DB
	ns     Namespace
	system bool
}

// KV returns a handle on the key-value entries of namespace ns, except
// those under ReservedPrefix.
func (d *DB) KV(ns Namespace) KV { return &kv{db: d, ns: ns} }

// SystemKV implements SystemAPI.
func (d *DB) SystemKV(ns Namespace) KV { return &kv{db: d, ns: ns, system: true} }

func (k *kv) Namespace() Namespace { return k.ns }

func (k *kv) check(perms Perm) error {
	if err := checkNS(k.ns); err != nil {
		return err
	}
	return k.db.authorize(k.ns, perms)
}

// space is the key space the handle reaches.
func (k *kv) space() validate.KeySpace {
	if k.system {
		return validate.SystemSpace
	}
	return validate.UserSpace
}

// readPerm is the permission a read of the handle needs.
func (k *kv) readPerm() Perm {
	if k.system {
		return PermSystem
	}
	return PermKVRead
}

// Get returns the entry for key, ErrNotFound if there is none.
func (k *kv) Get(ctx context.Context, key string) (Entry, error) {
	if err := k.space().Key("key", key); err != nil {
		return Entry{}, err
	}
	if err := k.check(k.readPerm()); err != nil {
		return Entry{}, err
	}
	var e index.KV
	var ok bool
	err := k.db.c.read(ctx, func() { e, ok = k.db.c.store.KV(idxNS(k.ns), key) })
	if err == nil && !ok {
		err = fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	return Entry{Key: e.Key, Value: e.Value, Version: e.Version}, err
}

// Scan returns entries in key order, selected by o.
func (k *kv) Scan(ctx context.Context, o ScanOptions) ([]Entry, error) {
	if err := validate.PageLimit("scan limit", &o.Limit); err != nil {
		return nil, err
	}
	if err := k.check(k.readPerm()); err != nil {
		return nil, err
	}
	var out []Entry
	err := k.db.c.read(ctx, func() { out = view.Scan(k.db.c.store, idxNS(k.ns), o, k.system) })
	return out, err
}

// Commit applies ops (KV writes, assertions, enqueues) in one atomic commit.
// A failed assertion returns ErrConflict and applies nothing.
func (k *kv) Commit(ctx context.Context, ops ...Op) (TxResult, error) {
	if len(ops) == 0 {
		return TxResult{}, invalid("empty transaction")
	}
	vops, perms, _, err := k.space().Ops(ops, k.db.c.opts.MaxPayloadBytes, nil)
	if err != nil {
		return TxResult{}, err
	}
	if err := validate.Siblings(nil, vops); err != nil {
		return TxResult{}, err
	}
	if err := k.check(perms); err != nil {
		return TxResult{}, err
	}
	cmd := command{NS: k.ns, Args: &machine.Commit{Ops: vops}}
	var res cmdResult
	err = k.db.c.exec(ctx, &cmd, &res)
	return TxResult{Version: res.Seq, Enqueued: res.Enqs}, err
}
