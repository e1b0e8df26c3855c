package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/docketdb/docket/internal/bytesize"
	"github.com/docketdb/docket/internal/index"
)

// A quota bounds what one namespace's state may hold, as the memory budget
// bounds the whole state: its tasks and its bytes, counted as
// NamespaceUsage counts them. A write that would take its namespace past
// its quota is refused with ErrFull and changes nothing; the other
// namespaces do not notice. As with the budget, writes that free state are
// never refused, and completions with follow-ups and writes to the system
// area (worker presence, schedules) may use a reserve of an eighth of the
// quota beyond it. A completion that writes nothing but its result is a
// write that frees state: no quota refuses it.
//
// The quota is a record in the namespace's system area (QuotaKey): it is
// durable, replicated with the rest of the state, and every node reads
// the same quota from it. Setting a quota below what the namespace holds
// refuses what adds to it until enough is freed; nothing is removed.

// QuotaKey is the key of a namespace's quota in its system area.
const QuotaKey = ReservedPrefix + "quota"

// Quota is the limit of one namespace's state. Zero in a field is no
// limit on it.
type Quota struct {
	// MaxTasks bounds the namespace's tasks, in every state.
	MaxTasks int `json:"max_tasks,omitempty"`
	// MaxBytes bounds the bytes its tasks, idempotency keys and KV
	// entries take, as the memory budget counts them.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

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

func (q Quota) check() error {
	if q.MaxTasks < 0 {
		return invalid("quota max tasks %d is negative", q.MaxTasks)
	}
	if q.MaxBytes < 0 {
		return invalid("quota max bytes %d is negative", q.MaxBytes)
	}
	return nil
}

// SetQuota implements Quotas.
func (d *DB) SetQuota(ctx context.Context, ns Namespace, q Quota) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := q.check(); err != nil {
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
	if json.Unmarshal(e.Value, &q) != nil || q.check() != nil {
		q = Quota{} // only SetQuota writes the record
	}
	if c.quotas == nil {
		c.quotas = make(map[index.Namespace]quotaCache)
	}
	c.quotas[ns] = quotaCache{raw: string(e.Value), q: q}
	return q
}

// tasksAdded counts the tasks cmd adds if it is planned as asked.
func (cmd *command) tasksAdded() int64 {
	var n int64
	switch cmd.op {
	case cmdEnqueue:
		n = 1
	case cmdEnqueueBatch:
		n = int64(len(cmd.tasks))
	case cmdCommit, cmdComplete, cmdCompleteClaim:
	default:
		return 0
	}
	for i := range cmd.ops {
		if cmd.ops[i].kind == OpEnqueue {
			n++
		}
	}
	return n
}

// onlyQuota reports whether cmd writes nothing but a quota record: setting
// a quota is never refused for the quota it replaces.
func (cmd *command) onlyQuota() bool {
	if cmd.op != cmdCommit || len(cmd.ops) == 0 {
		return false
	}
	for i := range cmd.ops {
		if cmd.ops[i].key != QuotaKey || cmd.ops[i].kind == OpEnqueue {
			return false
		}
	}
	return true
}

// admitQuota refuses cmd with ErrFull when what it adds would take its
// namespace past its quota (and the quota's reserve, for a completion or
// a write to the system area). It is called with c.mu held, as admit.
func (c *core) admitQuota(cmd *command, add int64, completion bool) error {
	ns := idxNS(cmd.ns)
	q := c.quotaOf(ns)
	if q == (Quota{}) || cmd.onlyQuota() {
		return nil
	}
	if completion && cmd.op != cmdCommit && len(cmd.ops) == 0 {
		// A completion that writes nothing but its result frees its task:
		// a quota lowered below what the namespace holds must not stop
		// its workers from draining it.
		return nil
	}
	tasks := cmd.tasksAdded()
	u := c.store.NamespaceUsage(ns)
	maxTasks, maxBytes := int64(q.MaxTasks), q.MaxBytes
	if completion {
		maxTasks += maxTasks / memoryReserveShare
		maxBytes += maxBytes / memoryReserveShare
	}
	if q.MaxTasks > 0 && tasks > 0 && u.Tasks+tasks > maxTasks {
		return fmt.Errorf("%w: namespace %s holds %d tasks of its quota of %d and this call would add %d; "+
			"complete, cancel or delete tasks, or raise the quota", ErrFull, cmd.ns, u.Tasks, q.MaxTasks, tasks)
	}
	if q.MaxBytes > 0 && add > 0 && u.Bytes+add > maxBytes {
		return fmt.Errorf("%w: namespace %s holds %s of its quota of %s and this call would add %s; "+
			"complete, cancel or delete tasks, or raise the quota", ErrFull, cmd.ns, bytesize.Format(u.Bytes), bytesize.Format(q.MaxBytes), bytesize.Format(add))
	}
	return nil
}
