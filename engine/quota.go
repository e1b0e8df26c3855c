package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/bytesize"
	"github.com/docketdb/docket/internal/index"
)

// Quotas is implemented by an API that keeps per-namespace quotas: *DB in
// process, the client package over the network. Setting a quota needs
// PermAdmin on the namespace, reading it PermRead.
type Quotas interface {
	// SetQuota replaces ns's quota; the zero Quota removes it.
	SetQuota(ctx context.Context, ns Namespace, q Quota) error
	// Quota returns ns's quota (the zero Quota if none) and what ns
	// holds now.
	Quota(ctx context.Context, ns Namespace) (Quota, NamespaceUsage, error)
}

var _ Quotas = (*DB)(nil)

// SetQuota implements Quotas.
func (d *DB) SetQuota(ctx context.Context, ns Namespace, q Quota) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := validate.Quota(q); err != nil {
		return err
	}
	if err := d.authorize(ns, PermAdmin); err != nil {
		return err
	}
	if q == (Quota{}) {
		return d.sysCommit(ctx, ns, Delete(QuotaKey))
	}
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return d.sysCommit(ctx, ns, Set(QuotaKey, b))
}

// Quota implements Quotas.
func (d *DB) Quota(ctx context.Context, ns Namespace) (Quota, NamespaceUsage, error) {
	u := NamespaceUsage{Namespace: ns}
	if err := checkNS(ns); err != nil {
		return Quota{}, u, err
	}
	if err := d.authorize(ns, PermRead); err != nil {
		return Quota{}, u, err
	}
	var q Quota
	err := d.c.read(ctx, func() {
		q = d.c.quotaOf(idxNS(ns))
		iu := d.c.store.NamespaceUsage(idxNS(ns))
		u.Tasks, u.Bytes = int(iu.Tasks), iu.Bytes
	})
	return q, u, err
}

// quotaCache is a namespace's quota as last parsed, with the record it
// was parsed from.
type quotaCache struct {
	raw string
	q   Quota
}

// quotaOf returns ns's quota as its record in the state says, under c.mu.
// The parsed record is kept, and parsed again when the record differs, so
// that it follows every write, replay and restore without a hook.
func (c *core) quotaOf(ns index.Namespace) Quota {
	e, ok := c.store.KV(ns, QuotaKey)
	if !ok {
		if c.quotas != nil {
			delete(c.quotas, ns)
		}
		return Quota{}
	}
	if qc, ok := c.quotas[ns]; ok && qc.raw == string(e.Value) {
		return qc.q
	}
	var q Quota
	if json.Unmarshal(e.Value, &q) != nil || validate.Quota(q) != nil {
		q = Quota{} // only SetQuota writes the record
	}
	if c.quotas == nil {
		c.quotas = make(map[index.Namespace]quotaCache)
	}
	c.quotas[ns] = quotaCache{raw: string(e.Value), q: q}
	return q
}

// admitQuota refuses cmd with ErrFull when what it adds would take its
// namespace past its quota (and the quota's reserve, for a completion or
// a write to the system area). It is called with c.mu held, as admit.
func (c *core) admitQuota(cmd *command, add int64, completion bool) error {
	ns := idxNS(cmd.NS)
	q := c.quotaOf(ns)
	if q == (Quota{}) || admit.OnlyQuota(cmd) {
		return nil
	}
	if completion && cmd.Op != cmdCommit && len(cmd.Ops) == 0 {
		// A completion that writes nothing but its result frees its task:
		// a quota lowered below what the namespace holds must not stop
		// its workers from draining it.
		return nil
	}
	tasks := admit.TasksAdded(cmd)
	u := c.store.NamespaceUsage(ns)
	maxTasks, maxBytes := int64(q.MaxTasks), q.MaxBytes
	if completion {
		maxTasks += maxTasks / memoryReserveShare
		maxBytes += maxBytes / memoryReserveShare
	}
	if q.MaxTasks > 0 && tasks > 0 && u.Tasks+tasks > maxTasks {
		return fmt.Errorf("%w: namespace %s holds %d tasks of its quota of %d and this call would add %d; "+
			"complete, cancel or delete tasks, or raise the quota", ErrFull, cmd.NS, u.Tasks, q.MaxTasks, tasks)
	}
	if q.MaxBytes > 0 && add > 0 && u.Bytes+add > maxBytes {
		return fmt.Errorf("%w: namespace %s holds %s of its quota of %s and this call would add %s; "+
			"complete, cancel or delete tasks, or raise the quota", ErrFull, cmd.NS, bytesize.Format(u.Bytes), bytesize.Format(q.MaxBytes), bytesize.Format(add))
	}
	return nil
}
