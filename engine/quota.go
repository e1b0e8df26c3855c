package engine

import (
	"context"
	"encoding/json"

	"github.com/docketdb/docket/engine/internal/validate"
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
		q = d.c.adm.Quota(d.c.store, idxNS(ns))
		iu := d.c.store.NamespaceUsage(idxNS(ns))
		u.Tasks, u.Bytes = int(iu.Tasks), iu.Bytes
	})
	return q, u, err
}
