package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"slices"

	"github.com/docketdb/docket/index"
)

// planner builds one batch under the engine lock. It reads the state and
// appends mutations and assertions; it never changes the state itself.
type planner struct {
	c      *core
	b      *index.Batch
	now    int64
	nextID uint64
	idem   map[idemRef]uint64 // idempotency keys enqueued earlier in this batch
	ending []uint64           // tasks this batch ends (completed or cancelled)
	events []TaskEvent
	moved  []cand         // scratch for claim
	lost   index.QueueKey // queue of the last refused lease
}

type idemRef struct {
	q   index.QueueKey
	key string
}

// cand is a task that becomes claimable during a claim: a due timer or an
// expired lease.
type cand struct {
	t         *index.Task
	reclaimed bool
}

func (p *planner) begin(now int64) *planner {
	p.b = &p.c.batch
	p.b.Reset()
	p.b.Now = now
	p.now = now
	p.nextID = p.c.store.NextID()
	if len(p.idem) > 0 {
		clear(p.idem)
	}
	p.events = p.events[:0]
	p.ending = p.ending[:0]
	return p
}

func (p *planner) event(k EventKind, q index.QueueKey, latency int64) {
	p.events = append(p.events, TaskEvent{Kind: k, Namespace: Namespace{q.Project, q.Scope}, Queue: q.Name,
		Latency: micros(latency)})
}

func (p *planner) put(m index.Mutation) { p.b.Mutations = append(p.b.Mutations, m) }

func (p *planner) update(u index.TaskUpdate) {
	p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutUpdateTask, Update: u})
}

// enqueue plans one new task (or finds the task its idempotency key names).
func (p *planner) enqueue(qk index.QueueKey, s *spec) Enqueued {
	if s.idem != "" {
		ref := idemRef{qk, s.idem}
		if id, ok := p.idem[ref]; ok {
			return Enqueued{ID: id, Deduplicated: true}
		}
		// A key held by a task this same commit ends (a completion whose
		// follow-up reuses the key) moves to the new task: deduplicating
		// into a task that is ending would silently drop the follow-up.
		if e, ok := p.c.store.Idem(qk, s.idem); ok && (e.Expires == 0 || e.Expires > p.now) &&
			!slices.Contains(p.ending, e.ID) {
			return Enqueued{ID: e.ID, Deduplicated: true}
		}
	}
	id := p.nextID
	p.nextID++
	nb := p.now + s.delay
	if s.at != 0 {
		nb = s.at
	}
	state := index.StateScheduled
	if nb <= p.now {
		state, nb = index.StateReady, p.now
	}
	t := &index.Task{
		ID: id, Queue: p.c.store.QueueRef(qk), State: state, MaxAttempts: s.maxAttempts, Priority: s.prio,
		NotBefore: nb, BackoffBase: s.base, BackoffMax: s.max, Created: p.now, Updated: p.now, Payload: s.payload,
	}
	if s.kind != "" || s.idem != "" || len(s.headers) > 0 {
		t.Extra = &index.Extra{Kind: s.kind, IdemKey: s.idem, Headers: s.headers}
	}
	p.put(index.Mutation{Kind: index.MutPutTask, Task: t})
	if s.idem != "" {
		if p.idem == nil {
			p.idem = make(map[idemRef]uint64)
		}
		p.idem[idemRef{qk, s.idem}] = id
		p.put(index.Mutation{Kind: index.MutPutIdem, Idem: index.Idem{Queue: qk, Key: s.idem, ID: id}})
	}
	p.event(EvEnqueued, qk, 0)
	return Enqueued{ID: id}
}

// ended plans what happens to a task's idempotency key when the task ends:
// it is remembered for the TTL, then forgotten.
func (p *planner) ended(t *index.Task) {
	p.ending = append(p.ending, t.ID)
	key := t.Ex().IdemKey
	if key == "" {
		return
	}
	e, ok := p.c.store.Idem(t.Queue.Key, key)
	if !ok || e.ID != t.ID {
		return // the key has since been reused for another task
	}
	ttl := p.c.opts.IdempotencyTTL.Microseconds()
	if ttl <= 0 {
		p.put(index.Mutation{Kind: index.MutDeleteIdem, Idem: e})
		return
	}
	e.Expires = p.now + ttl
	p.put(index.Mutation{Kind: index.MutPutIdem, Idem: e})
}

// fenced returns the in-flight task a lease names, or ErrLeaseLost, and
// asserts its token in the batch so that replay re-checks the fence.
func (p *planner) fenced(qk index.QueueKey, l *Lease) (*index.Task, error) {
	t, ok := p.c.store.Task(l.ID)
	if !ok || t.Queue.Key != qk || t.State != index.StateInFlight || t.Token != l.Token || t.Secret != l.Secret {
		p.event(EvLeaseLost, qk, 0)
		p.lost = qk
		return nil, fmt.Errorf("%w: task %d token %d", ErrLeaseLost, l.ID, l.Token)
	}
	p.b.Assertions = append(p.b.Assertions, index.Assertion{Kind: index.AssertToken, ID: t.ID, Token: t.Token})
	return t, nil
}

// maxMoved bounds how many due timers and expired leases one claim turns
// into ready tasks, so one claim never builds an unbounded batch; the rest
// are handled by the next claims, in time order.
const maxMoved = 65536

// claim plans promotion of due timers, reclaim of expired leases, then
// leases up to max tasks, highest priority and oldest first.
func (p *planner) claim(qk index.QueueKey, owner string, lease int64, max int) []Lease {
	q := p.c.store.Queue(qk)
	if q == nil {
		return nil
	}
	now := p.now
	moved := p.moved[:0]
	q.Scheduled.Scan(func(it index.TimeItem) bool {
		if it.At > now || len(moved) >= maxMoved {
			return false
		}
		t, _ := p.c.store.Task(it.ID)
		moved = append(moved, cand{t: t})
		return true
	})
	q.InFlight.Scan(func(it index.TimeItem) bool {
		if it.At > now || len(moved) >= maxMoved {
			return false
		}
		t, _ := p.c.store.Task(it.ID)
		if t.Attempts >= t.MaxAttempts {
			u := index.UpdateOf(t)
			u.State, u.Owner, u.LeaseUntil, u.Updated, u.Secret = index.StateDead, "", 0, now, 0
			u.Flags, u.LastError = index.UpdLastError, "lease expired; attempts exhausted"
			p.update(u)
			p.event(EvDead, qk, 0)
			return true
		}
		moved = append(moved, cand{t: t, reclaimed: true})
		p.event(EvReclaimed, qk, 0)
		return true
	})
	slices.SortFunc(moved, func(a, b cand) int {
		switch {
		case a.t.Priority != b.t.Priority:
			if a.t.Priority > b.t.Priority {
				return -1
			}
			return 1
		case a.t.ID < b.t.ID:
			return -1
		case a.t.ID > b.t.ID:
			return 1
		}
		return 0
	})
	var out []Lease
	take := func(t *index.Task, reclaimed bool) {
		u := index.UpdateOf(t)
		u.State, u.Attempts, u.Token = index.StateInFlight, t.Attempts+1, t.Token+1
		u.Owner, u.LeaseUntil, u.Updated = owner, now+lease, now
		u.Secret = p.secret(t.ID, u.Token)
		if reclaimed {
			u.Flags, u.LastError = index.UpdLastError, "lease expired"
		}
		p.update(u)
		if out == nil {
			out = make([]Lease, 0, min(max, q.Ready.Len()+len(moved)))
		}
		out = append(out, leaseOf(t, &u))
		p.event(EvClaimed, qk, 0)
	}
	i := 0
	q.Ready.Scan(func(it index.PrioItem) bool {
		for len(out) < max && i < len(moved) && (moved[i].t.Priority > it.Prio ||
			moved[i].t.Priority == it.Prio && moved[i].t.ID < it.ID) {
			take(moved[i].t, moved[i].reclaimed)
			i++
		}
		if len(out) >= max {
			return false
		}
		t, _ := p.c.store.Task(it.ID)
		take(t, false)
		return len(out) < max
	})
	for ; i < len(moved) && len(out) < max; i++ {
		take(moved[i].t, moved[i].reclaimed)
	}
	for ; i < len(moved); i++ {
		t := moved[i].t
		u := index.UpdateOf(t)
		u.State = index.StateReady
		if moved[i].reclaimed {
			u.NotBefore, u.Owner, u.LeaseUntil, u.Updated, u.Secret = now, "", 0, now, 0
			u.Flags, u.LastError = index.UpdLastError, "lease expired"
		}
		p.update(u)
	}
	clear(moved)
	p.moved = moved[:0]
	return out
}

// secret returns the lease secret of task id claimed with token: derived
// from the batch's seed, which is drawn (once per batch, only when a batch
// needs one) from the engine's entropy and logged with the batch. Replay
// and a follower planning the same batch with the same seed derive the same
// secrets; nobody who has not seen the batch can guess them.
func (p *planner) secret(id, token uint64) uint64 {
	if p.b.Seed == 0 {
		p.b.Seed = p.c.entropy()
	}
	return LeaseSecret(p.b.Seed, id, token)
}

// LeaseSecret derives the secret of the lease of task id with token from a
// batch seed: the first 8 bytes of SHA-256(seed, id, token), little-endian,
// never 0 (0 means "no secret").
func LeaseSecret(seed, id, token uint64) uint64 {
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], seed)
	binary.LittleEndian.PutUint64(buf[8:], id)
	binary.LittleEndian.PutUint64(buf[16:], token)
	sum := sha256.Sum256(buf[:])
	return max(binary.LittleEndian.Uint64(sum[:8]), 1)
}

// newEntropy returns the default entropy: a ChaCha8 stream (a CSPRNG)
// keyed from crypto/rand, never 0. It is called under the engine lock only,
// and costs a fraction of a crypto/rand read per batch.
func newEntropy() func() uint64 {
	var key [32]byte
	rand.Read(key[:]) // never fails (Go 1.24+)
	rng := mrand.NewChaCha8(key)
	return func() uint64 { return max(rng.Uint64(), 1) }
}

// nextDue is the earliest time a timer or a lease of the queue comes due,
// or 0 if none.
func (p *planner) nextDue(qk index.QueueKey) int64 {
	q := p.c.store.Queue(qk)
	if q == nil {
		return 0
	}
	var at int64
	if it, ok := q.Scheduled.Min(); ok {
		at = it.At
	}
	if it, ok := q.InFlight.Min(); ok && (at == 0 || it.At < at) {
		at = it.At
	}
	return at
}

func leaseOf(t *index.Task, u *index.TaskUpdate) Lease {
	x := t.Ex()
	k := t.Queue.Key
	return Lease{
		ID: t.ID, Namespace: Namespace{k.Project, k.Scope}, Queue: k.Name, Kind: x.Kind, Payload: clone(t.Payload),
		Headers: maps.Clone(x.Headers), Progress: clone(x.Progress), Priority: int(t.Priority), Attempt: int(u.Attempts),
		MaxAttempts: int(t.MaxAttempts), Owner: u.Owner, Token: u.Token, Secret: u.Secret, Deadline: timeOf(u.LeaseUntil),
		EnqueuedAt: timeOf(t.Created),
	}
}

func infoOf(t *index.Task) TaskInfo {
	x := t.Ex()
	k := t.Queue.Key
	return TaskInfo{
		ID: t.ID, Namespace: Namespace{k.Project, k.Scope}, Queue: k.Name, Kind: x.Kind, State: State(t.State),
		Payload: clone(t.Payload), Headers: maps.Clone(x.Headers), Priority: int(t.Priority), Attempts: int(t.Attempts),
		MaxAttempts: int(t.MaxAttempts), NotBefore: timeOf(t.NotBefore), Owner: t.Owner, Token: t.Token,
		LeaseUntil: timeOf(t.LeaseUntil), Progress: clone(x.Progress), Result: clone(x.Result), LastError: x.LastError,
		IdempotencyKey: x.IdemKey, BackoffBase: micros(t.BackoffBase), BackoffMax: micros(t.BackoffMax),
		CreatedAt: timeOf(t.Created), UpdatedAt: timeOf(t.Updated),
	}
}
