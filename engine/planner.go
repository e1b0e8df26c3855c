package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/docketdb/docket/internal/index"
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
	due    []index.Due    // scratch for claim
	turns  []partTurn     // scratch for claimParts
	keys   []string       // scratch for takePartTokens
	lost   index.QueueKey // queue of the last refused lease
	// parent is the task the batch completes, and parentMut the index in
	// the batch of its completion update (-1 when it is deleted): an
	// enqueue that follows is its follow-up.
	parent    uint64
	parentMut int
	// sibs are the ids the current command's enqueues gave, in order
	// (Task.DependsOnSibling), and deps what the batch does to
	// dependencies (deps.go).
	sibs []uint64
	deps depPlan
}

type idemRef struct {
	q   index.QueueKey
	key string
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
	p.parent, p.parentMut = 0, -1
	p.sibs = p.sibs[:0]
	p.deps.reset()
	return p
}

func (p *planner) event(k EventKind, q index.QueueKey, latency int64) {
	p.events = append(p.events, TaskEvent{Kind: k, Namespace: Namespace{Project: q.Project, Scope: q.Scope}, Queue: q.Name,
		Latency: micros(latency)})
}

func (p *planner) put(m index.Mutation) { p.b.Mutations = append(p.b.Mutations, m) }

func (p *planner) update(u index.TaskUpdate) {
	p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutUpdateTask, Update: u})
}

// enqueue plans one new task (or finds the task its idempotency key names).
// It fails only when a dependency cannot be resolved (deps.go).
func (p *planner) enqueue(qk index.QueueKey, s *spec) (Enqueued, error) {
	if s.idem != "" {
		ref := idemRef{qk, s.idem}
		if id, ok := p.idem[ref]; ok {
			p.sibs = append(p.sibs, id)
			return Enqueued{ID: id, Deduplicated: true}, nil
		}
		// A key held by a task this same commit ends (a completion whose
		// follow-up reuses the key) moves to the new task: deduplicating
		// into a task that is ending would silently drop the follow-up.
		if e, ok := p.c.store.Idem(qk, s.idem); ok && (e.Expires == 0 || e.Expires > p.now) &&
			!slices.Contains(p.ending, e.ID) && p.blocks(&e) {
			p.sibs = append(p.sibs, e.ID)
			return Enqueued{ID: e.ID, Deduplicated: true}, nil
		}
	}
	var parents []uint64
	if len(s.deps) > 0 || len(s.sibs) > 0 {
		var err error
		if parents, err = p.dependencies(qk.Namespace, s); err != nil {
			return Enqueued{}, err
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
	if len(parents) > 0 {
		state = index.StateWaiting // until they complete; then ready, or scheduled for nb
	}
	var part *index.Partition
	if s.part != "" {
		part = p.c.store.PartRef(qk, s.part)
	}
	t := p.c.store.NewTask(&index.Fields{
		ID: id, Queue: p.c.store.QueueRef(qk), State: state, MaxAttempts: s.maxAttempts, Priority: s.prio,
		NotBefore: nb, BackoffBase: s.base, BackoffMax: s.max, Created: p.now, Updated: p.now, Payload: s.payload,
		Part: part,
	})
	if s.kind != "" || s.idem != "" || len(s.headers) > 0 || p.parent != 0 || s.policy != 0 {
		t.Extra = &index.Extra{Kind: s.kind, IdemKey: s.idem, Headers: s.headers, Parent: p.parent, DepPolicy: s.policy}
	}
	if p.parentMut >= 0 {
		u := &p.b.Mutations[p.parentMut].Update
		u.Flags |= index.UpdFollowUps
		u.FollowUps = append(u.FollowUps, id)
	}
	p.put(index.Mutation{Kind: index.MutPutTask, Task: t})
	for _, parent := range parents {
		p.put(index.Mutation{Kind: index.MutPutDep, Dep: index.Dep{Parent: parent, Child: id}})
	}
	p.sibs = append(p.sibs, id)
	if s.idem != "" {
		if p.idem == nil {
			p.idem = make(map[idemRef]uint64)
		}
		p.idem[idemRef{qk, s.idem}] = id
		e := index.Idem{Queue: qk, Key: s.idem, ID: id}
		if s.uniq != 0 {
			e.States, e.Expires = s.uniq, p.now+s.window
		}
		p.put(index.Mutation{Kind: index.MutPutIdem, Idem: e})
	}
	p.event(EvEnqueued, qk, 0)
	return Enqueued{ID: id}, nil
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
	if e.States != 0 {
		p.endedUnique(t, e)
		return
	}
	ttl := p.c.opts.IdempotencyTTL.Microseconds()
	if ttl <= 0 {
		p.put(index.Mutation{Kind: index.MutDeleteIdem, Idem: e})
		return
	}
	e.Expires = p.now + ttl
	p.put(index.Mutation{Kind: index.MutPutIdem, Idem: e})
}

// fenced returns the in-flight task a lease names, or ErrLeaseLost saying
// why, and asserts its token in the batch so that replay re-checks the
// fence. A lease whose deadline has passed is lost: reads already report
// its task ready again (or dead), whether or not a claim has taken it since.
func (p *planner) fenced(qk index.QueueKey, l *Lease) (*index.Task, error) {
	t, ok := p.c.store.Task(l.ID)
	var why string
	switch {
	case !ok || t.Queue.Key != qk:
		why = "no such task in the queue (completed, cancelled, or never there)"
	case t.State != index.StateInFlight:
		why = "the task is " + t.StateAt(p.now).String() + ", not in flight"
	case t.Token() != l.Token:
		why = fmt.Sprintf("stale token (the task was claimed again, token %d)", t.Token())
	case t.Secret() != l.Secret:
		why = "wrong lease secret"
	case t.LeaseUntil() <= p.now:
		why = "the lease expired at " + timeOf(t.LeaseUntil()).Format(time.RFC3339Nano)
	}
	if why != "" {
		p.event(EvLeaseLost, qk, 0)
		p.lost = qk
		return nil, fmt.Errorf("%w: task %d token %d: %s", ErrLeaseLost, l.ID, l.Token, why)
	}
	p.b.Assertions = append(p.b.Assertions, index.Assertion{Kind: index.AssertToken, ID: t.ID, Token: t.Token()})
	return t, nil
}

// maxMoved bounds how many expired last-attempt leases one claim
// dead-letters, so one claim never builds an unbounded batch; the next
// claims go on, in deadline order. (Reads already report them dead.)
const maxMoved = 65536

// settled returns the update that stores t as it is at now, and whether
// that differs from how it is stored. Time moves a task without a write (a
// due timer is ready; an expired lease is ready again, or dead on its last
// attempt): reads show that state, and a plan that acts on the task stores
// it first, so that what a read showed and what the log holds agree. An
// expired lease ends with its deadline: that is when its attempt failed
// ("lease expired", recorded in the attempt history) and when the task was
// last updated.
func settled(t *index.Task, now int64) (index.TaskUpdate, bool) {
	u := index.UpdateOf(t)
	st := t.StateAt(now)
	if st == t.State {
		return u, false
	}
	u.State = st
	if t.State == index.StateInFlight {
		msg := "lease expired"
		if st == index.StateReady {
			u.NotBefore = t.LeaseUntil() // ready since then
		} else {
			msg = "lease expired; attempts exhausted"
		}
		u.Owner, u.LeaseUntil, u.Secret, u.Updated = "", 0, 0, t.LeaseUntil()
		u.Flags |= index.UpdLastError | index.UpdAddError
		u.LastError, u.ErrAttempt, u.ErrAt = msg, t.Attempts, t.LeaseUntil()
	}
	return u, true
}

// settle plans storing t as it is at now when time changed more than its
// state (an expired lease: its failed attempt is recorded, and counted in
// the queue's totals, by an update of its own), and returns the record and
// the update to plan the next step from.
func (p *planner) settle(t *index.Task) (*index.Task, index.TaskUpdate) {
	u, changed := settled(t, p.now)
	if !changed || u.Flags == 0 {
		return t, u // at most the state: the next update carries it
	}
	p.update(u)
	nt := t.With(&u)
	return nt, index.UpdateOf(nt)
}

// at returns t as it is at now (t itself when time changed nothing).
func at(t *index.Task, now int64) *index.Task {
	if u, changed := settled(t, now); changed {
		return t.With(&u)
	}
	return t
}

// claim plans leases of up to max tasks claimable now, highest priority
// and oldest first: stored ready tasks, due timers and expired leases with
// attempts left alike, so a task is never served while one of higher
// priority is due, however many are due. It also dead-letters expired
// last-attempt leases (at most maxMoved). A due task it does not take stays
// as it is stored: nothing needs moving before a task can be served, so a
// claim costs O((max + dead-lettered) log n).
func (p *planner) claim(qk index.QueueKey, owner string, lease int64, max int, conf *index.QueueConf, freed *index.Task) []Lease {
	q := p.c.store.Queue(qk)
	if q == nil {
		return nil
	}
	now := p.now
	n := 0
	q.ExpiredLast(now, func(id uint64) bool {
		t, _ := p.c.store.Task(id)
		u, _ := settled(t, now)
		p.update(u)
		p.event(EvDead, qk, 0)
		p.parentEnded(id, parentDied)
		n++
		return n < maxMoved
	})
	var due []index.Due
	if q.Partitioned() {
		due = p.claimParts(q, max, conf, freed)
	} else {
		due = q.Claimable(now, index.ServingStart, false, max, p.due[:0])
	}
	var out []Lease
	if len(due) > 0 {
		out = make([]Lease, 0, len(due))
	}
	for _, d := range due {
		t, _ := p.c.store.Task(d.ID)
		t, u := p.settle(t)
		if d.Stored == index.StateInFlight {
			p.event(EvReclaimed, qk, 0)
		}
		u.State, u.Attempts, u.Token = index.StateInFlight, t.Attempts+1, t.Token()+1
		u.Owner, u.LeaseUntil, u.Updated = owner, now+lease, now
		u.Secret = p.secret(t.ID, u.Token)
		p.update(u)
		out = append(out, leaseOf(t, &u))
		p.event(EvClaimed, qk, 0)
	}
	clear(due)
	p.due = due[:0]
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

func leaseOf(t *index.Task, u *index.TaskUpdate) Lease {
	x := t.Ex()
	k := t.Queue.Key
	return Lease{
		ID: t.ID, Namespace: Namespace{Project: k.Project, Scope: k.Scope}, Queue: k.Name, Kind: x.Kind, Payload: clone(t.Payload),
		Headers: maps.Clone(x.Headers), Progress: clone(x.Progress), Priority: int(t.Priority), Attempt: int(u.Attempts),
		MaxAttempts: int(t.MaxAttempts()), Owner: u.Owner, Token: u.Token, Secret: u.Secret, Deadline: timeOf(u.LeaseUntil),
		EnqueuedAt: timeOf(t.Created), Partition: t.PartitionKey(),
	}
}

// infoOf describes t as it is at now.
func infoOf(t *index.Task, now int64) TaskInfo {
	t = at(t, now)
	x := t.Ex()
	k := t.Queue.Key
	info := TaskInfo{
		ID: t.ID, Namespace: Namespace{Project: k.Project, Scope: k.Scope}, Queue: k.Name, Kind: x.Kind, State: State(t.State),
		Payload: clone(t.Payload), Headers: maps.Clone(x.Headers), Priority: int(t.Priority), Attempts: int(t.Attempts),
		MaxAttempts: int(t.MaxAttempts()), NotBefore: timeOf(t.NotBefore), Owner: t.Owner(), Token: t.Token(),
		LeaseUntil: timeOf(t.LeaseUntil()), Progress: clone(x.Progress), Result: clone(x.Result), LastError: x.LastError,
		IdempotencyKey: x.IdemKey, BackoffBase: micros(t.BackoffBase()), BackoffMax: micros(t.BackoffMax()),
		CreatedAt: timeOf(t.Created), UpdatedAt: timeOf(t.Updated()), Parent: x.Parent, FollowUps: slices.Clone(x.FollowUps),
		OnParentFailure: DependencyPolicy(x.DepPolicy), Partition: t.PartitionKey(),
	}
	if len(x.Errors) > 0 {
		info.Errors = make([]AttemptError, len(x.Errors))
		for i, e := range x.Errors {
			info.Errors[i] = AttemptError{Attempt: int(e.Attempt), At: timeOf(e.At), Error: e.Error}
		}
	}
	return info
}
