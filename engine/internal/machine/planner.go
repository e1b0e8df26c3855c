package machine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// Planner builds one batch under the engine lock. It reads the state and
// appends mutations and assertions; it never changes the state itself.
type Planner struct {
	s      *State
	B      *index.Batch
	now    int64
	nextID uint64
	idem   map[idemRef]uint64 // idempotency keys enqueued earlier in this batch
	ending []uint64           // tasks this batch ends (completed or cancelled)
	Events []dockettype.TaskEvent
	due    []index.Due    // scratch for claim
	turns  []partTurn     // scratch for claimParts
	keys   []string       // scratch for takePartTokens
	Lost   index.QueueKey // queue of the last refused lease
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

// Begin starts planning batch b at now on the state s.
func (p *Planner) Begin(s *State, b *index.Batch, now int64) *Planner {
	p.s = s
	p.B = b
	p.B.Reset()
	p.B.Now = now
	p.now = now
	p.nextID = p.s.Store.NextID()
	if len(p.idem) > 0 {
		clear(p.idem)
	}
	p.Events = p.Events[:0]
	p.ending = p.ending[:0]
	p.parent, p.parentMut = 0, -1
	p.sibs = p.sibs[:0]
	p.deps.reset()
	return p
}

func (p *Planner) Event(k dockettype.EventKind, q index.QueueKey, latency int64) {
	p.Events = append(p.Events, dockettype.TaskEvent{Kind: k, Namespace: dockettype.Namespace{Project: q.Project, Scope: q.Scope}, Queue: q.Name,
		Latency: micros(latency)})
}

func (p *Planner) put(m index.Mutation) { p.B.Mutations = append(p.B.Mutations, m) }

func (p *Planner) update(u index.TaskUpdate) {
	p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutUpdateTask, Update: u})
}

// enqueue plans one new task (or finds the task its idempotency key names).
// It fails only when a dependency cannot be resolved (deps.go).
func (p *Planner) enqueue(qk index.QueueKey, s *Spec) (dockettype.Enqueued, error) {
	if s.Idem != "" {
		ref := idemRef{qk, s.Idem}
		if id, ok := p.idem[ref]; ok {
			p.sibs = append(p.sibs, id)
			return dockettype.Enqueued{ID: id, Deduplicated: true}, nil
		}
		// A key held by a task this same commit ends (a completion whose
		// follow-up reuses the key) moves to the new task: deduplicating
		// into a task that is ending would silently drop the follow-up.
		if e, ok := p.s.Store.Idem(qk, s.Idem); ok && (e.Expires == 0 || e.Expires > p.now) &&
			!slices.Contains(p.ending, e.ID) && p.blocks(&e) {
			p.sibs = append(p.sibs, e.ID)
			return dockettype.Enqueued{ID: e.ID, Deduplicated: true}, nil
		}
	}
	var parents []uint64
	if len(s.Deps) > 0 || len(s.Sibs) > 0 {
		var err error
		if parents, err = p.dependencies(qk.Namespace, s); err != nil {
			return dockettype.Enqueued{}, err
		}
	}
	id := p.nextID
	p.nextID++
	nb := p.now + s.Delay
	if s.At != 0 {
		nb = s.At
	}
	state := index.StateScheduled
	if nb <= p.now {
		state, nb = index.StateReady, p.now
	}
	if len(parents) > 0 {
		state = index.StateWaiting // until they complete; then ready, or scheduled for nb
	}
	var part *index.Partition
	if s.Part != "" {
		part = p.s.Store.PartRef(qk, s.Part)
	}
	t := p.s.Store.NewTask(&index.Fields{
		ID: id, Queue: p.s.Store.QueueRef(qk), State: state, MaxAttempts: s.MaxAttempts, Priority: s.Prio,
		NotBefore: nb, BackoffBase: s.Base, BackoffMax: s.Max, Created: p.now, Updated: p.now, Payload: s.Payload,
		Part: part,
	})
	if s.Kind != "" || s.Idem != "" || len(s.Headers) > 0 || p.parent != 0 || s.Policy != 0 {
		t.Extra = &index.Extra{Kind: s.Kind, IdemKey: s.Idem, Headers: s.Headers, Parent: p.parent, DepPolicy: s.Policy}
	}
	if p.parentMut >= 0 {
		u := &p.B.Mutations[p.parentMut].Update
		u.Flags |= index.UpdFollowUps
		u.FollowUps = append(u.FollowUps, id)
	}
	p.put(index.Mutation{Kind: index.MutPutTask, Task: t})
	for _, parent := range parents {
		p.put(index.Mutation{Kind: index.MutPutDep, Dep: index.Dep{Parent: parent, Child: id}})
	}
	p.sibs = append(p.sibs, id)
	if s.Idem != "" {
		if p.idem == nil {
			p.idem = make(map[idemRef]uint64)
		}
		p.idem[idemRef{qk, s.Idem}] = id
		e := index.Idem{Queue: qk, Key: s.Idem, ID: id}
		if s.Uniq != 0 {
			e.States, e.Expires = s.Uniq, p.now+s.Window
		}
		p.put(index.Mutation{Kind: index.MutPutIdem, Idem: e})
	}
	p.Event(dockettype.EvEnqueued, qk, 0)
	return dockettype.Enqueued{ID: id}, nil
}

// ended plans what happens to a task's idempotency key when the task ends:
// it is remembered for the TTL, then forgotten.
func (p *Planner) ended(t *index.Task) {
	p.ending = append(p.ending, t.ID)
	key := t.Ex().IdemKey
	if key == "" {
		return
	}
	e, ok := p.s.Store.Idem(t.Queue.Key, key)
	if !ok || e.ID != t.ID {
		return // the key has since been reused for another task
	}
	if e.States != 0 {
		p.endedUnique(t, e)
		return
	}
	ttl := p.s.IdemTTL
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
func (p *Planner) fenced(qk index.QueueKey, l *dockettype.Lease) (*index.Task, error) {
	t, ok := p.s.Store.Task(l.ID)
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
		p.Event(dockettype.EvLeaseLost, qk, 0)
		p.Lost = qk
		return nil, fmt.Errorf("%w: task %d token %d: %s", dockettype.ErrLeaseLost, l.ID, l.Token, why)
	}
	p.B.Assertions = append(p.B.Assertions, index.Assertion{Kind: index.AssertToken, ID: t.ID, Token: t.Token()})
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
func (p *Planner) settle(t *index.Task) (*index.Task, index.TaskUpdate) {
	u, changed := settled(t, p.now)
	if !changed || u.Flags == 0 {
		return t, u // at most the state: the next update carries it
	}
	p.update(u)
	nt := t.With(&u)
	return nt, index.UpdateOf(nt)
}

// At returns t as it is at now (t itself when time changed nothing).
func At(t *index.Task, now int64) *index.Task {
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
func (p *Planner) claim(qk index.QueueKey, owner string, lease int64, max int, conf *index.QueueConf, freed *index.Task) []dockettype.Lease {
	q := p.s.Store.Queue(qk)
	if q == nil {
		return nil
	}
	now := p.now
	n := 0
	q.ExpiredLast(now, func(id uint64) bool {
		t, _ := p.s.Store.Task(id)
		u, _ := settled(t, now)
		p.update(u)
		p.Event(dockettype.EvDead, qk, 0)
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
	var out []dockettype.Lease
	if len(due) > 0 {
		out = make([]dockettype.Lease, 0, len(due))
	}
	for _, d := range due {
		t, _ := p.s.Store.Task(d.ID)
		t, u := p.settle(t)
		if d.Stored == index.StateInFlight {
			p.Event(dockettype.EvReclaimed, qk, 0)
		}
		u.State, u.Attempts, u.Token = index.StateInFlight, t.Attempts+1, t.Token()+1
		u.Owner, u.LeaseUntil, u.Updated = owner, now+lease, now
		u.Secret = p.secret(t.ID, u.Token)
		p.update(u)
		out = append(out, leaseOf(t, &u))
		p.Event(dockettype.EvClaimed, qk, 0)
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
func (p *Planner) secret(id, token uint64) uint64 {
	if p.B.Seed == 0 {
		p.B.Seed = p.s.Entropy()
	}
	return LeaseSecret(p.B.Seed, id, token)
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

func leaseOf(t *index.Task, u *index.TaskUpdate) dockettype.Lease {
	x := t.Ex()
	k := t.Queue.Key
	return dockettype.Lease{
		ID: t.ID, Namespace: dockettype.Namespace{Project: k.Project, Scope: k.Scope}, Queue: k.Name, Kind: x.Kind, Payload: clone(t.Payload()),
		Headers: maps.Clone(x.Headers), Progress: clone(x.Progress), Priority: int(t.Priority), Attempt: int(u.Attempts),
		MaxAttempts: int(t.MaxAttempts()), Owner: u.Owner, Token: u.Token, Secret: u.Secret, Deadline: timeOf(u.LeaseUntil),
		EnqueuedAt: timeOf(t.Created), Partition: t.PartitionKey(),
	}
}
