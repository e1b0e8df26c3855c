package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/docketdb/docket/index"
)

// kv is the in-process KV.
type kv struct {
	db *DB
	ns Namespace
}

// KV returns a handle on the key-value entries of namespace ns.
func (d *DB) KV(ns Namespace) KV { return &kv{db: d, ns: ns} }

func (k *kv) Namespace() Namespace { return k.ns }

func (k *kv) check(perms Perm) error {
	if err := checkNS(k.ns); err != nil {
		return err
	}
	return k.db.authorize(k.ns, perms)
}

// Get returns the entry for key, ErrNotFound if there is none.
func (k *kv) Get(ctx context.Context, key string) (Entry, error) {
	if err := checkKey("key", key); err != nil {
		return Entry{}, err
	}
	if err := k.check(PermKVRead); err != nil {
		return Entry{}, err
	}
	var e index.KV
	var ok bool
	err := k.db.c.read(ctx, func() { e, ok = k.db.c.store.KV(k.ns.idx(), key) })
	if err == nil && !ok {
		err = fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	return Entry{Key: e.Key, Value: e.Value, Version: e.Version}, err
}

// Scan returns entries in key order, selected by o.
func (k *kv) Scan(ctx context.Context, o ScanOptions) ([]Entry, error) {
	if o.Limit < 0 || o.Limit > MaxBatch {
		return nil, invalid("scan limit %d is outside 0..%d", o.Limit, MaxBatch)
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	if err := k.check(PermKVRead); err != nil {
		return nil, err
	}
	start := max(o.Start, o.Prefix)
	var out []Entry
	err := k.db.c.read(ctx, func() {
		k.db.c.store.ScanKV(k.ns.idx(), start, o.End, func(e index.KV) bool {
			if !strings.HasPrefix(e.Key, o.Prefix) {
				return false
			}
			out = append(out, Entry{Key: e.Key, Value: e.Value, Version: e.Version})
			return len(out) < o.Limit
		})
	})
	return out, err
}

// Commit applies ops (KV writes, assertions, enqueues) in one atomic commit.
// A failed assertion returns ErrConflict and applies nothing.
func (k *kv) Commit(ctx context.Context, ops ...Op) (TxResult, error) {
	if len(ops) == 0 {
		return TxResult{}, invalid("empty transaction")
	}
	vops, perms, _, err := checkOps(ops, k.db.c.opts.MaxPayloadBytes, nil)
	if err != nil {
		return TxResult{}, err
	}
	if err := k.check(perms); err != nil {
		return TxResult{}, err
	}
	cmd := command{op: cmdCommit, ns: k.ns, ops: vops}
	var res cmdResult
	err = k.db.c.exec(ctx, &cmd, &res)
	return TxResult{Version: res.seq, Enqueued: res.enqs}, err
}

func planCommit(p *planner, cmd *command, res *cmdResult) error {
	var err error
	res.enqs, err = p.ops(cmd.ns, cmd.ops, nil)
	return err
}
