package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/engine"
)

// Config holds the engine options that change what a DB observably does.
// The zero value is the engine's defaults.
type Config struct {
	// IdempotencyTTL as in engine.Options: 0 means 24 h, negative (or under a
	// microsecond) forgets a key as soon as its task ends.
	IdempotencyTTL time.Duration
	// RetainCompleted as in engine.Options: 0 deletes completed tasks at once.
	RetainCompleted time.Duration
	// ValueThreshold as in engine.Options: 0 is the default (1 KiB), which
	// the programs' values stay under; a small one puts many of them in the
	// value log. The model keeps every value in line: what a caller reads
	// back is the same either way.
	ValueThreshold int
}

// Apply copies the configuration into engine options.
func (c Config) Apply(o *engine.Options) {
	o.IdempotencyTTL = c.IdempotencyTTL
	o.RetainCompleted = c.RetainCompleted
	o.ValueThreshold = c.ValueThreshold
}

// QueueKey names a queue: its namespace and its name.
type QueueKey struct {
	NS   engine.Namespace
	Name string
}

func (q QueueKey) String() string { return q.NS.String() + "/" + q.Name }

func (q QueueKey) less(o QueueKey) bool {
	if q.NS.Project != o.NS.Project {
		return q.NS.Project < o.NS.Project
	}
	if q.NS.Scope != o.NS.Scope {
		return q.NS.Scope < o.NS.Scope
	}
	return q.Name < o.Name
}

// Rec is a task record as a caller can observe it (engine.TaskInfo), with
// times as Unix microseconds (0 for none). Records held by a Model are never
// changed in place: a change stores a new Rec, so clones may share them.
type Rec struct {
	ID          uint64
	Queue       QueueKey
	State       engine.State
	Kind        string
	Payload     []byte
	Headers     map[string]string
	Priority    int
	Attempts    int
	MaxAttempts int
	NotBefore   int64
	BackoffBase int64
	BackoffMax  int64
	Owner       string
	Token       uint64
	// Secret is the lease secret of an in-flight task, as the engine chose
	// it (see Leased); not part of what String compares.
	Secret     uint64
	LeaseUntil int64
	Progress   []byte
	Result     []byte
	LastError  string
	IdemKey    string
	Created    int64
	Updated    int64
	// Errors is the attempt history (TaskInfo.Errors), Parent and
	// FollowUps the completion links.
	Errors    []AttemptErr
	Parent    uint64
	FollowUps []uint64
	// WaitingOn and Dependents are the dependency links (TaskInfo's), Policy
	// the task's OnParentFailure.
	WaitingOn  []uint64
	Dependents []uint64
	Policy     engine.DependencyPolicy
	// Partition is the task's partition ("" for none).
	Partition string
}

// AttemptErr is engine.AttemptError with its time in Unix microseconds.
type AttemptErr struct {
	Attempt int
	At      int64
	Error   string
}

// RecOf converts what the engine reports about a task into a Rec.
func RecOf(i engine.TaskInfo) Rec {
	r := Rec{
		ID: i.ID, Queue: QueueKey{i.Namespace, i.Queue}, State: i.State, Kind: i.Kind, Payload: i.Payload,
		Headers: i.Headers, Priority: i.Priority, Attempts: i.Attempts, MaxAttempts: i.MaxAttempts,
		NotBefore: Micros(i.NotBefore), BackoffBase: i.BackoffBase.Microseconds(),
		BackoffMax: i.BackoffMax.Microseconds(), Owner: i.Owner, Token: i.Token,
		LeaseUntil: Micros(i.LeaseUntil), Progress: i.Progress, Result: i.Result, LastError: i.LastError,
		IdemKey: i.IdempotencyKey, Created: Micros(i.CreatedAt), Updated: Micros(i.UpdatedAt),
		Parent: i.Parent, FollowUps: i.FollowUps, WaitingOn: i.WaitingOn, Dependents: i.Dependents,
		Policy: i.OnParentFailure, Partition: i.Partition,
	}
	for _, e := range i.Errors {
		r.Errors = append(r.Errors, AttemptErr{Attempt: e.Attempt, At: Micros(e.At), Error: e.Error})
	}
	return r
}

// withError returns errs with one more failed attempt, the oldest dropped
// beyond engine.MaxAttemptErrors; errs itself is not changed.
func withError(errs []AttemptErr, attempt int, at int64, msg string) []AttemptErr {
	keep := errs[max(0, len(errs)+1-engine.MaxAttemptErrors):]
	return append(slices.Clone(keep), AttemptErr{Attempt: attempt, At: at, Error: msg})
}

// Micros is t as Unix microseconds, 0 for the zero time (the engine's "none").
func Micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func timeOf(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

func renderHeaders(h map[string]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%q:%q,", k, h[k])
	}
	b.WriteByte('}')
	return b.String()
}

// String renders every field, for comparing records and printing diffs.
func (r *Rec) String() string {
	return fmt.Sprintf("task %d %s %s a=%d/%d p=%d nb=%d bo=%d/%d own=%q tok=%d lease=%d c=%d u=%d pay=%q kind=%q idem=%q err=%q prog=%q res=%q h=%s errs=%v parent=%d follow=%v waits=%v deps=%v policy=%s part=%q",
		r.ID, r.Queue, r.State, r.Attempts, r.MaxAttempts, r.Priority, r.NotBefore, r.BackoffBase, r.BackoffMax,
		r.Owner, r.Token, r.LeaseUntil, r.Created, r.Updated, r.Payload, r.Kind, r.IdemKey, r.LastError,
		r.Progress, r.Result, renderHeaders(r.Headers), r.Errors, r.Parent, r.FollowUps, r.WaitingOn, r.Dependents, r.Policy, r.Partition)
}

// LeaseString renders every field of a lease, times as Unix microseconds.
func LeaseString(l engine.Lease) string {
	return fmt.Sprintf("lease %d %s/%s kind=%q pay=%q h=%s prog=%q p=%d att=%d/%d own=%q tok=%d dl=%d enq=%d part=%q",
		l.ID, l.Namespace, l.Queue, l.Kind, l.Payload, renderHeaders(l.Headers), l.Progress, l.Priority,
		l.Attempt, l.MaxAttempts, l.Owner, l.Token, Micros(l.Deadline), Micros(l.EnqueuedAt), l.Partition)
}

// TxKind is the kind of a TxOp.
type TxKind uint8

// Transaction op kinds, as engine.Set, engine.Delete, engine.IfVersion,
// engine.IfExists, engine.IfAbsent and engine.Enqueue build them.
const (
	TxSet TxKind = iota + 1
	TxDelete
	TxIfVersion
	TxIfExists
	TxIfAbsent
	TxEnqueue
)

// TxOp is an engine.Op the model can read (engine.Op keeps its fields to
// itself).
type TxOp struct {
	Kind    TxKind
	Key     string
	Value   []byte
	Version uint64
	Queue   string
	Task    engine.Task
}

// Engine returns the engine's form of o.
func (o TxOp) Engine() engine.Op {
	switch o.Kind {
	case TxSet:
		return engine.Set(o.Key, o.Value)
	case TxDelete:
		return engine.Delete(o.Key)
	case TxIfVersion:
		return engine.IfVersion(o.Key, o.Version)
	case TxIfExists:
		return engine.IfExists(o.Key)
	case TxIfAbsent:
		return engine.IfAbsent(o.Key)
	case TxEnqueue:
		return engine.Enqueue(o.Queue, o.Task)
	}
	return engine.Op{}
}

// EngineOps converts ops.
func EngineOps(ops []TxOp) []engine.Op {
	if ops == nil {
		return nil
	}
	out := make([]engine.Op, len(ops))
	for i, o := range ops {
		out[i] = o.Engine()
	}
	return out
}

type kvKey struct {
	NS  engine.Namespace
	Key string
}

type kvVal struct {
	Value   []byte
	Version uint64
}

type idemKey struct {
	Q   QueueKey
	Key string
}

type idemVal struct {
	ID      uint64
	Expires int64 // 0 while the task exists; the window's end for a unique key
	// States is 0 for a caller's key; for a unique-by-content key, the
	// states (bit 1<<state each) in which its task blocks a duplicate.
	States uint8
}

// Model is the reference implementation of docket's observable behaviour:
// plain maps, a full scan wherever the engine keeps an index, every rule
// written out once. Its methods mirror the engine's calls and return the
// same results and the same sentinel errors.
//
// Records are kept as the engine stores them; time moves them without a
// write (a due timer is ready, an expired lease ready again or dead, a
// retained completion past its retention gone), and every read and every
// call sees them as they are at Now (see at).
//
// It also counts batches the way the engine does (a KV entry's version is
// the sequence number of the batch that wrote it, so the count is
// observable): every commit with at least one mutation is one batch, and
// each commit is preceded by a housekeeping batch when idempotency keys
// expired or retained completed tasks aged out.
type Model struct {
	// Now is the time of the next call, Unix microseconds. Callers keep it
	// equal to the engine clock.
	Now    int64
	Seq    uint64
	NextID uint64
	// LastCommit is the sequence number of the newest batch a call (not
	// housekeeping) committed.
	LastCommit uint64

	tasks  map[uint64]*Rec
	kv     map[kvKey]kvVal
	idem   map[idemKey]idemVal
	totals map[QueueKey]qTotals
	confs  map[QueueKey]qConf // queue settings (model_controls.go)
	// parts are the partitions' token buckets that are not full (a
	// partition without one has a full bucket).
	parts map[partKey]partLevel
	deps  map[depKey]bool

	ttl        int64 // idempotency TTL, micros
	keepDone   bool  // completed tasks are kept
	retain     int64 // how long, micros
	maxPayload int

	// OnBatch, if set, is called after each batch is applied.
	OnBatch func(m *Model)
}

// NewModel returns an empty model configured like an engine opened with c,
// reading now.
func NewModel(c Config, now time.Time) *Model {
	ttl := c.IdempotencyTTL
	if ttl == 0 {
		ttl = 24 * time.Hour
	}
	return &Model{
		Now:        now.UnixMicro(),
		NextID:     1,
		tasks:      map[uint64]*Rec{},
		kv:         map[kvKey]kvVal{},
		idem:       map[idemKey]idemVal{},
		totals:     map[QueueKey]qTotals{},
		confs:      map[QueueKey]qConf{},
		parts:      map[partKey]partLevel{},
		deps:       map[depKey]bool{},
		ttl:        ttl.Microseconds(),
		keepDone:   c.RetainCompleted > 0,
		retain:     c.RetainCompleted.Microseconds(),
		maxPayload: 1 << 20,
	}
}

// modelSeed derives the secrets of leases the model hands out itself.
const modelSeed = 0x6d6f64656c

// Leased records the secrets of leases the engine handed out: they are
// random, so the model cannot choose them, only check that every fenced
// call presents them.
func (m *Model) Leased(ls []engine.Lease) {
	for _, l := range ls {
		if t, ok := m.tasks[l.ID]; ok && t.State == engine.InFlight && t.Token == l.Token {
			n := *t
			n.Secret = l.Secret
			m.tasks[l.ID] = &n
		}
	}
}

// Clone returns an independent copy (without OnBatch).
func (m *Model) Clone() *Model {
	c := *m
	c.tasks = maps.Clone(m.tasks)
	c.kv = maps.Clone(m.kv)
	c.idem = maps.Clone(m.idem)
	c.totals = maps.Clone(m.totals)
	c.confs = maps.Clone(m.confs)
	c.parts = maps.Clone(m.parts)
	c.deps = maps.Clone(m.deps)
	c.OnBatch = nil
	return &c
}

// qTotals is a queue's totals and, once it holds no task, since when.
type qTotals struct {
	engine.Totals
	idle int64
}

// idleTotalsTTL is how long the engine keeps the totals of a queue that
// holds no task (index.IdleTotalsTTL).
const idleTotalsTTL = 24 * time.Hour / time.Microsecond

// maxIdleTotals is how many idle queues' totals the engine keeps at most
// (index.MaxIdleTotals).
const maxIdleTotals = 1024

// at returns t as it is at Now, nil when it is gone: a due timer is ready;
// an expired lease is ready again since its deadline (dead on its last
// attempt), its attempt failed with "lease expired" then; a retained
// completion past its retention is forgotten.
func (m *Model) at(t *Rec) *Rec {
	switch {
	case t.State == engine.Completed && m.keepDone && t.Updated <= m.Now-m.retain:
		return nil
	case t.State == engine.Scheduled && t.NotBefore <= m.Now:
		n := *t
		n.State = engine.Ready
		return &n
	case t.State == engine.InFlight && t.LeaseUntil <= m.Now:
		n := *t
		n.State, n.NotBefore, n.LastError = engine.Ready, t.LeaseUntil, "lease expired"
		if t.Attempts >= t.MaxAttempts {
			n.State, n.NotBefore, n.LastError = engine.Dead, t.NotBefore, "lease expired; attempts exhausted"
		}
		n.Errors = withError(t.Errors, t.Attempts, t.LeaseUntil, n.LastError)
		n.Owner, n.LeaseUntil, n.Secret, n.Updated = "", 0, 0, t.LeaseUntil
		return &n
	}
	return t
}

// count adds to the totals of q.
func (x *txn) count(q QueueKey, f func(t *engine.Totals)) {
	m := x.m
	x.mut(func(uint64) {
		t := m.totals[q]
		f(&t.Totals)
		m.totals[q] = t
	})
}

// afterBatch does what the engine does at the end of every batch: a queue
// that holds no task goes idle (its totals kept), one that holds a task
// again is not idle, and totals idle for longer than the TTL are
// forgotten.
func (m *Model) afterBatch() {
	held := map[QueueKey]bool{}
	for _, t := range m.tasks {
		held[t.Queue] = true
	}
	for q, t := range m.totals {
		switch {
		case held[q]:
			t.idle = 0
		case t.idle == 0:
			t.idle = m.Now
		}
		m.totals[q] = t
	}
	var forget []QueueKey
	for q, t := range m.totals {
		if t.idle != 0 && t.idle <= m.Now-int64(idleTotalsTTL) {
			forget = append(forget, q)
		}
	}
	if len(forget) > 256 {
		slices.SortFunc(forget, func(a, b QueueKey) int {
			if c := cmpInt(m.totals[a].idle, m.totals[b].idle); c != 0 {
				return c
			}
			if a.less(b) {
				return -1
			}
			return 1
		})
		forget = forget[:256]
	}
	for _, q := range forget {
		delete(m.totals, q)
	}
	// Then at most index.MaxIdleTotals idle ones are kept, the latest.
	var idle []QueueKey
	for q, t := range m.totals {
		if t.idle != 0 {
			idle = append(idle, q)
		}
	}
	if len(idle) > maxIdleTotals {
		slices.SortFunc(idle, func(a, b QueueKey) int {
			if c := cmpInt(m.totals[a].idle, m.totals[b].idle); c != 0 {
				return c
			}
			if a.less(b) {
				return -1
			}
			return 1
		})
		for _, q := range idle[:len(idle)-maxIdleTotals] {
			delete(m.totals, q)
		}
	}
}

// Len is the number of task records.
func (m *Model) Len() int { return len(m.tasks) }

// Task returns the record with id, in any queue.
func (m *Model) Task(id uint64) (Rec, bool) {
	t, ok := m.tasks[id]
	if !ok {
		return Rec{}, false
	}
	return *t, true
}

// ---- validation (the subset of engine/validate.go a caller can hit) ----

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{engine.ErrInvalid}, args...)...)
}

func checkName(s string) error {
	if s == "" || len(s) > engine.MaxNameBytes || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return invalid("name %q", s)
	}
	return nil
}

func checkKey(k string) error {
	if k == "" || len(k) > engine.MaxKeyBytes {
		return invalid("key %q", k)
	}
	return nil
}

func (m *Model) checkJSON(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > m.maxPayload || !json.Valid(b) || !utf8.Valid(b) {
		return invalid("json %q", b)
	}
	return nil
}

func checkDuration(d time.Duration, allowZero bool) error {
	if d < 0 || (d == 0 && !allowZero) || d > engine.MaxDuration {
		return invalid("duration %v", d)
	}
	return nil
}

// spec is a validated task with its defaults filled in.
type spec struct {
	t       engine.Task
	key     string // the idempotency key: the caller's, or derived from the content
	uniq    uint8  // unique by content: the blocking states
	window  int64  // unique by content: the window, micros
	delay   int64
	at      int64
	maxAtt  int
	base    int64
	max     int64
	headers map[string]string
	deps    []uint64 // sorted, no repeats
	sibs    []int    // sorted, no repeats
}

func (m *Model) checkTask(t engine.Task) (spec, error) {
	s := spec{t: t}
	if err := m.checkJSON(t.Payload); err != nil {
		return s, err
	}
	if t.Kind != "" {
		if err := checkName(t.Kind); err != nil {
			return s, err
		}
	}
	if err := checkDuration(t.Delay, true); err != nil {
		return s, err
	}
	if !t.At.IsZero() {
		if t.At.Year() < 1970 || t.At.Year() > 9999 || t.At.UnixMicro() <= 0 {
			return s, invalid("at %v", t.At)
		}
		s.at = t.At.UnixMicro()
	}
	if t.MaxAttempts < 0 || t.MaxAttempts > engine.MaxAttemptsLimit {
		return s, invalid("max attempts %d", t.MaxAttempts)
	}
	if err := checkDuration(t.BackoffBase, true); err != nil {
		return s, err
	}
	if err := checkDuration(t.BackoffMax, true); err != nil {
		return s, err
	}
	if t.BackoffMax > 0 && t.BackoffBase > t.BackoffMax {
		return s, invalid("backoff base %v over max %v", t.BackoffBase, t.BackoffMax)
	}
	if t.IdempotencyKey != "" {
		if err := checkKey(t.IdempotencyKey); err != nil {
			return s, err
		}
		if strings.HasPrefix(t.IdempotencyKey, engine.ReservedPrefix) {
			return s, invalid("reserved idempotency key %q", t.IdempotencyKey)
		}
	}
	s.key = t.IdempotencyKey
	if t.Unique != nil {
		if err := checkUnique(t, &s); err != nil {
			return s, err
		}
	}
	if len(t.Headers) > engine.MaxHeaders {
		return s, invalid("headers")
	}
	for k, v := range t.Headers {
		if k == "" || len(k) > engine.MaxHeaderBytes || len(v) > engine.MaxHeaderBytes || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return s, invalid("header %q", k)
		}
	}
	if len(t.Headers) > 0 {
		s.headers = maps.Clone(t.Headers)
	}
	if err := checkDeps(t, &s); err != nil {
		return s, err
	}
	if t.Partition != "" {
		if err := checkName(t.Partition); err != nil {
			return s, err
		}
	}
	s.delay = t.Delay.Microseconds()
	s.maxAtt = t.MaxAttempts
	if s.maxAtt == 0 {
		s.maxAtt = 5
	}
	s.base, s.max = t.BackoffBase.Microseconds(), t.BackoffMax.Microseconds()
	if s.base == 0 {
		s.base = time.Second.Microseconds()
	}
	if s.max == 0 {
		s.max = time.Minute.Microseconds()
	}
	return s, nil
}

func (m *Model) checkOps(ops []TxOp) error {
	if len(ops) > engine.MaxOps {
		return invalid("too many ops")
	}
	for _, o := range ops {
		switch o.Kind {
		case TxSet, TxDelete, TxIfVersion, TxIfExists, TxIfAbsent:
			if err := checkKey(o.Key); err != nil {
				return err
			}
			if o.Kind == TxSet && len(o.Value) > m.maxPayload {
				return invalid("value size")
			}
		case TxEnqueue:
			if err := checkName(o.Queue); err != nil {
				return err
			}
			if _, err := m.checkTask(o.Task); err != nil {
				return err
			}
		default:
			return invalid("zero op")
		}
	}
	return nil
}

func checkNS(ns engine.Namespace) error {
	if err := checkName(ns.Project); err != nil {
		return err
	}
	return checkName(ns.Scope)
}

func checkQueue(q QueueKey) error {
	if err := checkNS(q.NS); err != nil {
		return err
	}
	return checkName(q.Name)
}

// ---- commits ----

// txn is one commit being planned: it reads the state as it was before the
// commit and collects the changes, applied in order when it commits.
type txn struct {
	m      *Model
	now    int64
	nextID uint64
	idem   map[idemKey]uint64 // keys enqueued earlier in this commit
	ending []uint64           // tasks this commit ends (their keys move to a new task)
	muts   []func(seq uint64)
	// touched are the tasks this commit puts or deletes (a bulk action's
	// walk stops at one).
	touched map[uint64]bool
	// parent is the task this commit completes: the tasks it enqueues are
	// its follow-ups, listed in done when the completion is kept.
	parent uint64
	done   *Rec
	// sibs are the ids this commit's enqueues gave, in order; cut the
	// dependencies it deletes.
	sibs []uint64
	cut  map[depKey]bool
	// freed is the task a completion that claims completed, as it was.
	freed *Rec
}

// begin starts a commit: first the housekeeping batch, if one is due.
func (m *Model) begin() *txn {
	m.housekeep()
	return &txn{m: m, now: m.Now, nextID: m.NextID}
}

func (x *txn) mut(f func(seq uint64)) { x.muts = append(x.muts, f) }

// commit applies the collected changes as one batch and returns the
// sequence number of the state after it (unchanged if nothing changed).
func (x *txn) commit() uint64 {
	m := x.m
	if len(x.muts) == 0 {
		return m.Seq
	}
	m.Seq++
	m.LastCommit = m.Seq
	for _, f := range x.muts {
		f(m.Seq)
	}
	m.afterBatch()
	if m.OnBatch != nil {
		m.OnBatch(m)
	}
	return m.Seq
}

// housekeepBatch is the engine's bound on the expired entries one
// housekeeping batch removes (engine/db.go).
const housekeepBatch = 256

// housekeep forgets idempotency keys whose time is up and retained completed
// tasks that aged out, in a batch of its own, as every engine commit does
// before its own batch.
func (m *Model) housekeep() {
	type exp struct {
		k idemKey
		v idemVal
	}
	var idems []exp
	for k, v := range m.idem {
		if v.Expires != 0 && v.Expires <= m.Now {
			idems = append(idems, exp{k, v})
		}
	}
	sort.Slice(idems, func(i, j int) bool {
		a, b := idems[i], idems[j]
		if a.v.Expires != b.v.Expires {
			return a.v.Expires < b.v.Expires
		}
		if a.k.Q != b.k.Q {
			return a.k.Q.less(b.k.Q)
		}
		return a.k.Key < b.k.Key
	})
	if len(idems) > housekeepBatch {
		idems = idems[:housekeepBatch]
	}
	var done []*Rec
	if m.retain > 0 {
		for _, t := range m.tasks {
			if t.State == engine.Completed && t.Updated <= m.Now-m.retain {
				done = append(done, t)
			}
		}
		sort.Slice(done, func(i, j int) bool {
			if done[i].Updated != done[j].Updated {
				return done[i].Updated < done[j].Updated
			}
			return done[i].ID < done[j].ID
		})
		if n := 2*housekeepBatch - len(idems); len(done) > n {
			done = done[:n]
		}
	}
	x := &txn{m: m, now: m.Now, nextID: m.NextID}
	x.killExpiredParents()
	if len(idems)+len(done)+len(x.muts) == 0 {
		return
	}
	m.Seq++
	for _, e := range idems {
		delete(m.idem, e.k)
	}
	for _, t := range done {
		delete(m.tasks, t.ID)
	}
	for _, f := range x.muts {
		f(m.Seq)
	}
	m.afterBatch()
	if m.OnBatch != nil {
		m.OnBatch(m)
	}
}

// put stores rec as part of the commit.
func (x *txn) put(rec *Rec) {
	m := x.m
	x.touch(rec.ID)
	x.mut(func(uint64) {
		m.tasks[rec.ID] = rec
		if rec.ID >= m.NextID {
			m.NextID = rec.ID + 1
		}
	})
}

func (x *txn) del(id uint64) {
	m := x.m
	x.touch(id)
	x.mut(func(uint64) { delete(m.tasks, id) })
}

// enqueue plans one new task, or finds the one its idempotency key names.
func (x *txn) enqueue(q QueueKey, s *spec) (engine.Enqueued, error) {
	m := x.m
	key := s.key
	if key != "" {
		ik := idemKey{q, key}
		if id, ok := x.idem[ik]; ok {
			x.sibs = append(x.sibs, id)
			return engine.Enqueued{ID: id, Deduplicated: true}, nil
		}
		if e, ok := m.idem[ik]; ok && (e.Expires == 0 || e.Expires > x.now) && !slices.Contains(x.ending, e.ID) &&
			m.blocks(e) {
			x.sibs = append(x.sibs, e.ID)
			return engine.Enqueued{ID: e.ID, Deduplicated: true}, nil
		}
	}
	parents, err := x.parentsOf(q.NS, s)
	if err != nil {
		return engine.Enqueued{}, err
	}
	id := x.nextID
	x.nextID++
	nb := x.now + s.delay
	if s.at != 0 {
		nb = s.at
	}
	state := engine.Scheduled
	if nb <= x.now {
		state, nb = engine.Ready, x.now
	}
	var payload []byte
	if len(s.t.Payload) > 0 {
		payload = bytes.Clone(s.t.Payload)
	}
	if len(parents) > 0 {
		state = engine.Waiting
	}
	x.put(&Rec{
		ID: id, Queue: q, State: state, Kind: s.t.Kind, Payload: payload, Headers: s.headers,
		Priority: s.t.Priority, MaxAttempts: s.maxAtt, NotBefore: nb, BackoffBase: s.base, BackoffMax: s.max,
		IdemKey: key, Created: x.now, Updated: x.now, Parent: x.parent, Policy: s.t.OnParentFailure,
		Partition: s.t.Partition,
	})
	for _, p := range parents {
		x.mut(func(uint64) { m.deps[depKey{p, id}] = true })
	}
	x.sibs = append(x.sibs, id)
	x.count(q, func(t *engine.Totals) { t.Enqueued++ })
	if x.done != nil {
		x.done.FollowUps = append(x.done.FollowUps, id)
	}
	if key != "" {
		ik := idemKey{q, key}
		if x.idem == nil {
			x.idem = map[idemKey]uint64{}
		}
		x.idem[ik] = id
		e := idemVal{ID: id}
		if s.uniq != 0 {
			e.States, e.Expires = s.uniq, x.now+s.window
		}
		x.mut(func(uint64) { m.idem[ik] = e })
	}
	return engine.Enqueued{ID: id}, nil
}

// ended plans what happens to a task's idempotency key when the task ends
// (completed or cancelled): remembered for the TTL, or forgotten at once.
func (x *txn) ended(t *Rec) {
	m := x.m
	x.ending = append(x.ending, t.ID)
	if t.IdemKey == "" {
		return
	}
	ik := idemKey{t.Queue, t.IdemKey}
	e, ok := m.idem[ik]
	if !ok || e.ID != t.ID {
		return // the key names another task by now
	}
	if e.States != 0 {
		// Unique by content: kept to the window's end by a completion when
		// completed tasks block, forgotten otherwise.
		if x.parent != t.ID || e.States&(1<<engine.Completed) == 0 {
			x.mut(func(uint64) { delete(m.idem, ik) })
		}
		return
	}
	if m.ttl <= 0 {
		x.mut(func(uint64) { delete(m.idem, ik) })
		return
	}
	e.Expires = x.now + m.ttl
	x.mut(func(uint64) { m.idem[ik] = e })
}

// ops plans KV writes, assertions and enqueues in namespace ns: every
// assertion is checked against the state before the commit, then the
// writes and enqueues happen in order.
func (x *txn) ops(ns engine.Namespace, ops []TxOp) ([]engine.Enqueued, error) {
	m := x.m
	for _, o := range ops {
		e, ok := m.kv[kvKey{ns, o.Key}]
		switch {
		case o.Kind == TxIfExists && !ok:
			return nil, fmt.Errorf("%w: key %q does not exist", engine.ErrConflict, o.Key)
		case o.Kind == TxIfAbsent && ok:
			return nil, fmt.Errorf("%w: key %q exists", engine.ErrConflict, o.Key)
		case o.Kind == TxIfVersion && (!ok || e.Version != o.Version):
			return nil, fmt.Errorf("%w: key %q version", engine.ErrConflict, o.Key)
		}
	}
	var enq []engine.Enqueued
	for _, o := range ops {
		k := kvKey{ns, o.Key}
		switch o.Kind {
		case TxSet:
			v := bytes.Clone(o.Value)
			if v == nil {
				v = []byte{}
			}
			x.mut(func(seq uint64) { m.kv[k] = kvVal{Value: v, Version: seq} })
		case TxDelete:
			x.mut(func(uint64) { delete(m.kv, k) })
		case TxEnqueue:
			s, _ := m.checkTask(o.Task)
			e, err := x.enqueue(QueueKey{ns, o.Queue}, &s)
			if err != nil {
				return nil, err
			}
			enq = append(enq, e)
		}
	}
	return enq, nil
}

// fenced returns the in-flight task l names, or ErrLeaseLost. The token
// and the lease secret fence (the owner name is not checked), and a lease
// is lost once its deadline has passed.
func (x *txn) fenced(q QueueKey, l engine.Lease) (*Rec, error) {
	t, ok := x.m.tasks[l.ID]
	if !ok || t.Queue != q || t.State != engine.InFlight || t.Token != l.Token || t.Secret != l.Secret ||
		t.LeaseUntil <= x.now {
		return nil, fmt.Errorf("%w: task %d token %d", engine.ErrLeaseLost, l.ID, l.Token)
	}
	return t, nil
}

// ownLease refuses a lease that names another queue than q: the caller's
// mistake, ErrInvalid before anything commits, not a lost lease (a lease
// naming no queue is judged by its fence alone).
func ownLease(q QueueKey, l engine.Lease) error {
	if (l.Queue != "" || l.Namespace != engine.Namespace{}) && (QueueKey{l.Namespace, l.Queue}) != q {
		return invalid("lease of task %d is of another queue", l.ID)
	}
	return nil
}

// ---- the calls ----

// Enqueue is Queue.Enqueue and Queue.EnqueueBatch: the tasks and ops commit
// together or not at all.
func (m *Model) Enqueue(q QueueKey, tasks []engine.Task, ops []TxOp) ([]engine.Enqueued, error) {
	if len(tasks) > engine.MaxBatch {
		return nil, invalid("batch")
	}
	specs := make([]spec, len(tasks))
	for i, t := range tasks {
		s, err := m.checkTask(t)
		if err != nil {
			return nil, err
		}
		specs[i] = s
	}
	if err := m.checkOps(ops); err != nil {
		return nil, err
	}
	if err := checkSiblings(tasks, ops); err != nil {
		return nil, err
	}
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	x := m.begin()
	out := make([]engine.Enqueued, len(tasks))
	for i := range specs {
		var err error
		if out[i], err = x.enqueue(q, &specs[i]); err != nil {
			return nil, err
		}
	}
	if _, err := x.ops(q.NS, ops); err != nil {
		return nil, err
	}
	x.commit()
	return out, nil
}

// maxMoved is the engine's bound on the expired last-attempt leases one
// claim dead-letters (engine/planner.go).
const maxMoved = 65536

// Claim is Queue.Claim: lease up to max tasks claimable now, highest
// priority first, lowest id first within a priority: stored ready tasks,
// due timers and expired leases with attempts left alike. Expired
// last-attempt leases are dead-lettered first (at most maxMoved, in
// deadline order). What a claim does not take stays as it is stored.
func (m *Model) Claim(q QueueKey, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	if err := checkClaim(owner, lease, max); err != nil {
		return nil, err
	}
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	x := m.begin()
	out := x.claim(q, owner, lease, max, 0)
	x.commit()
	return out, nil
}

// checkClaim checks a claim's arguments as the engine does.
func checkClaim(owner string, lease time.Duration, max int) error {
	if err := checkName(owner); err != nil {
		return err
	}
	if err := checkDuration(lease, false); err != nil {
		return err
	}
	if lease < time.Microsecond {
		return invalid("lease")
	}
	if max < 1 || max > engine.MaxBatch {
		return invalid("max")
	}
	return nil
}

// claim plans a claim in x, reading the state as it was before x, within
// q's settings: freed is how many of q's tasks in flight x has already
// completed, whose slots of an in-flight bound the claim may take.
func (x *txn) claim(q QueueKey, owner string, lease time.Duration, max, freed int) []engine.Lease {
	m := x.m
	now := x.now
	max, ok := m.allowed(q, max, freed)
	if !ok {
		return nil // paused, or limited to nothing: no batch
	}
	var spent, ready, stored []*Rec
	for _, t := range m.tasks {
		if t.Queue != q {
			continue
		}
		stored = append(stored, t)
		switch e := m.at(t); {
		case t.State == engine.InFlight && e.State == engine.Dead:
			spent = append(spent, t)
		case e.State == engine.Ready:
			ready = append(ready, t)
		}
	}
	slices.SortFunc(spent, func(a, b *Rec) int {
		if a.LeaseUntil != b.LeaseUntil {
			return cmpInt(a.LeaseUntil, b.LeaseUntil)
		}
		return cmpInt(a.ID, b.ID)
	})
	for _, t := range spent[:min(len(spent), maxMoved)] {
		x.put(m.at(t))
		x.count(q, func(t *engine.Totals) { t.DeadLettered++ })
		x.parentEnded(t.ID, parentDied)
	}
	slices.SortFunc(ready, func(a, b *Rec) int {
		if a.Priority != b.Priority {
			return -cmpInt(a.Priority, b.Priority)
		}
		return cmpInt(a.ID, b.ID)
	})
	var out []engine.Lease
	for _, t := range m.rotate(q, stored, ready, max, x.freed) {
		n := *m.at(t)
		if t.State == engine.InFlight {
			x.count(q, func(t *engine.Totals) { t.Retried++ })
		}
		n.State, n.Attempts, n.Token = engine.InFlight, t.Attempts+1, t.Token+1
		// A secret of the model's own until Leased records the engine's: a
		// lease the model hands out fences like the engine's, and one made
		// up (secret 0) is refused.
		n.Secret = engine.LeaseSecret(modelSeed, n.ID, n.Token)
		n.Owner, n.LeaseUntil, n.Updated = owner, now+lease.Microseconds(), now
		x.put(&n)
		x.count(q, func(t *engine.Totals) { t.Claimed++ })
		out = append(out, engine.Lease{
			ID: n.ID, Namespace: q.NS, Queue: q.Name, Kind: n.Kind, Payload: n.Payload, Headers: n.Headers,
			Progress: n.Progress, Priority: n.Priority, Attempt: n.Attempts, MaxAttempts: n.MaxAttempts,
			Owner: owner, Token: n.Token, Secret: n.Secret, Deadline: timeOf(n.LeaseUntil), EnqueuedAt: timeOf(n.Created),
			Partition: n.Partition,
		})
	}
	x.took(q, out)
	return out
}

// claimable reports whether a claim on q now would lease something. It
// changes the model (it claims), so call it on a clone.
func (m *Model) claimable(q QueueKey) bool {
	ls, err := m.Claim(q, "probe", time.Second, 1)
	return err == nil && len(ls) > 0
}

func cmpInt[T int | int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Complete is Queue.Complete: fenced by the lease's token; the task is
// deleted (or kept as completed when retention is on), its idempotency key
// starts its TTL, ops apply and follow-ups are enqueued, all in one commit.
func (m *Model) Complete(q QueueKey, l engine.Lease, result []byte, ops []TxOp, follow []engine.FollowUp) error {
	all, err := m.checkComplete(q, l, result, ops, follow)
	if err != nil {
		return err
	}
	x := m.begin()
	if err := x.complete(q, l, result, all); err != nil {
		return err
	}
	x.commit()
	return nil
}

// checkComplete checks a completion's arguments as the engine does and
// returns its ops with the follow-ups as enqueue ops after them.
func (m *Model) checkComplete(q QueueKey, l engine.Lease, result []byte, ops []TxOp, follow []engine.FollowUp) ([]TxOp, error) {
	if err := m.checkJSON(result); err != nil {
		return nil, err
	}
	if len(follow) > engine.MaxOps {
		return nil, invalid("follow-ups")
	}
	all := slices.Clone(ops)
	for _, f := range follow {
		all = append(all, TxOp{Kind: TxEnqueue, Queue: f.Queue, Task: f.Task})
	}
	if err := m.checkOps(all); err != nil {
		return nil, err
	}
	if err := checkSiblings(nil, all); err != nil {
		return nil, err
	}
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	if err := ownLease(q, l); err != nil {
		return nil, err
	}
	return all, nil
}

// complete plans a fenced completion in x.
func (x *txn) complete(q QueueKey, l engine.Lease, result []byte, all []TxOp) error {
	m := x.m
	t, err := x.fenced(q, l)
	if err != nil {
		return err
	}
	x.parent = t.ID
	if m.keepDone {
		n := *t
		n.State, n.Owner, n.LeaseUntil, n.Updated, n.Secret = engine.Completed, "", 0, x.now, 0
		n.Result = nil
		if len(result) > 0 {
			n.Result = bytes.Clone(result)
		}
		n.FollowUps = nil
		x.done = &n // its follow-ups are added as they are enqueued
		x.put(&n)
	} else {
		x.del(t.ID)
	}
	x.count(q, func(t *engine.Totals) { t.Completed++ })
	x.ended(t)
	x.parentEnded(t.ID, parentCompleted)
	_, err = x.ops(q.NS, all)
	return err
}

// CompleteAndClaim is Queue.CompleteAndClaim: Complete and Claim in one
// commit. The claim reads the state before the commit, so it takes
// neither the completed task nor the follow-ups nor the tasks the
// completion releases from waiting, but the completed task's
// slot of an in-flight bound is free for it; it obeys the queue's settings
// as Claim does. If the completion is refused nothing is claimed.
func (m *Model) CompleteAndClaim(q QueueKey, l engine.Lease, result []byte, ops []TxOp, follow []engine.FollowUp,
	owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	if err := checkClaim(owner, lease, max); err != nil {
		return nil, err
	}
	all, err := m.checkComplete(q, l, result, ops, follow)
	if err != nil {
		return nil, err
	}
	x := m.begin()
	if err := x.complete(q, l, result, all); err != nil {
		return nil, err
	}
	x.freed = m.tasks[l.ID]
	out := x.claim(q, owner, lease, max, 1)
	x.commit()
	return out, nil
}

// HeartbeatBatch is Queue.HeartbeatBatch: every lease fenced on its own
// (one that appears earlier in the batch is refused), those that hold
// extended to now+extend in one commit. It returns one error per lease
// and the new deadline.
func (m *Model) HeartbeatBatch(q QueueKey, ls []engine.Lease, extend time.Duration) ([]error, time.Time, error) {
	if len(ls) > engine.MaxBatch {
		return nil, time.Time{}, invalid("batch")
	}
	if err := checkDuration(extend, false); err != nil {
		return nil, time.Time{}, err
	}
	if extend < time.Microsecond {
		return nil, time.Time{}, invalid("extend")
	}
	if err := checkQueue(q); err != nil {
		return nil, time.Time{}, err
	}
	for _, l := range ls {
		if err := ownLease(q, l); err != nil {
			return nil, time.Time{}, err
		}
	}
	x := m.begin()
	errs := make([]error, len(ls))
	seen := map[uint64]bool{}
	until := x.now + extend.Microseconds()
	for i, l := range ls {
		if seen[l.ID] {
			errs[i] = fmt.Errorf("%w: task %d twice", engine.ErrLeaseLost, l.ID)
			continue
		}
		seen[l.ID] = true
		t, err := x.fenced(q, l)
		if err != nil {
			errs[i] = err
			continue
		}
		n := *t
		n.LeaseUntil, n.Updated = until, x.now
		x.put(&n)
	}
	x.commit()
	return errs, timeOf(until), nil
}

// Backoff is the retry delay after a failed attempt: base doubled for every
// attempt after the first, capped at max.
func Backoff(base, max int64, attempts int) int64 {
	d := base
	for i := 1; i < attempts && d < max; i++ {
		d *= 2 // d < max <= MaxDuration in micros, far from overflowing
	}
	return min(d, max)
}

// Fail is Queue.Fail: dead when permanent or out of attempts, else retried
// after RetryAfter or the exponential backoff.
func (m *Model) Fail(q QueueKey, l engine.Lease, f engine.Failure) error {
	if err := checkDuration(f.RetryAfter, true); err != nil {
		return err
	}
	if err := checkQueue(q); err != nil {
		return err
	}
	msg := f.Err
	if len(msg) > engine.MaxErrorBytes {
		msg = msg[:engine.MaxErrorBytes]
	}
	msg = strings.ToValidUTF8(msg, "")
	if err := ownLease(q, l); err != nil {
		return err
	}
	x := m.begin()
	t, err := x.fenced(q, l)
	if err != nil {
		return err
	}
	n := *t
	n.Owner, n.LeaseUntil, n.Updated, n.LastError, n.Secret = "", 0, x.now, msg, 0
	n.Errors = withError(t.Errors, t.Attempts, x.now, msg)
	if f.Permanent || t.Attempts >= t.MaxAttempts {
		n.State = engine.Dead
		x.count(q, func(t *engine.Totals) { t.DeadLettered++ })
	} else {
		x.count(q, func(t *engine.Totals) { t.Retried++ })
		delay := f.RetryAfter.Microseconds()
		if delay <= 0 {
			delay = Backoff(t.BackoffBase, t.BackoffMax, t.Attempts)
		}
		n.State, n.NotBefore = engine.Scheduled, x.now+delay
		if delay == 0 {
			n.State, n.NotBefore = engine.Ready, x.now
		}
	}
	x.put(&n)
	if n.State == engine.Dead {
		x.parentEnded(t.ID, parentDied)
	}
	x.commit()
	return nil
}

// Heartbeat is Queue.Heartbeat: the lease ends extend from now, and progress
// replaces the stored one unless it is nil.
func (m *Model) Heartbeat(q QueueKey, l engine.Lease, extend time.Duration, progress []byte) (time.Time, error) {
	if err := checkDuration(extend, false); err != nil {
		return time.Time{}, err
	}
	if err := m.checkJSON(progress); err != nil {
		return time.Time{}, err
	}
	if err := checkQueue(q); err != nil {
		return time.Time{}, err
	}
	if err := ownLease(q, l); err != nil {
		return time.Time{}, err
	}
	x := m.begin()
	t, err := x.fenced(q, l)
	if err != nil {
		return time.Time{}, err
	}
	n := *t
	n.LeaseUntil, n.Updated = x.now+extend.Microseconds(), x.now
	if progress != nil {
		n.Progress = nil
		if len(progress) > 0 {
			n.Progress = bytes.Clone(progress)
		}
	}
	x.put(&n)
	x.commit()
	return timeOf(n.LeaseUntil), nil
}

// Snooze is Queue.Snooze: back to waiting for d, the attempt refunded.
func (m *Model) Snooze(q QueueKey, l engine.Lease, d time.Duration) error {
	if err := checkDuration(d, true); err != nil {
		return err
	}
	if err := checkQueue(q); err != nil {
		return err
	}
	if err := ownLease(q, l); err != nil {
		return err
	}
	x := m.begin()
	t, err := x.fenced(q, l)
	if err != nil {
		return err
	}
	n := *t
	n.Attempts--
	n.Owner, n.LeaseUntil, n.Updated, n.Secret = "", 0, x.now, 0
	n.State, n.NotBefore = engine.Scheduled, x.now+d.Microseconds()
	if d == 0 {
		n.State, n.NotBefore = engine.Ready, x.now
	}
	x.put(&n)
	x.commit()
	return nil
}

// Cancel is Queue.Cancel: the task is removed in whatever state it is.
func (m *Model) Cancel(q QueueKey, id uint64) error {
	if err := checkQueue(q); err != nil {
		return err
	}
	x := m.begin()
	t, ok := m.tasks[id]
	if !ok || t.Queue != q || m.at(t) == nil {
		return fmt.Errorf("%w: task %d", engine.ErrNotFound, id)
	}
	if t.State == engine.Waiting {
		x.cutWaits(id)
	}
	x.del(id)
	if t.State != engine.Completed {
		x.ended(t)
	}
	x.parentEnded(id, parentCancelled)
	x.commit()
	return nil
}

// redrive plans the redrive of t, a task dead at now (as at returns it).
// A task stored in flight (an expired last lease) is dead-lettered first.
func (x *txn) redrive(t *Rec) {
	if x.m.tasks[t.ID].State == engine.InFlight {
		x.count(t.Queue, func(t *engine.Totals) { t.DeadLettered++ })
		x.parentEnded(t.ID, parentDied)
	}
	n := *t
	n.State, n.Attempts, n.NotBefore, n.Updated = engine.Ready, 0, x.now, x.now
	x.put(&n)
}

// Redrive is Queue.Redrive: a dead task goes back to ready with a fresh
// attempt budget.
func (m *Model) Redrive(q QueueKey, id uint64) error {
	if err := checkQueue(q); err != nil {
		return err
	}
	x := m.begin()
	t, ok := m.tasks[id]
	if ok && t.Queue == q {
		t = m.at(t)
	}
	if !ok || t == nil || t.Queue != q {
		return fmt.Errorf("%w: task %d", engine.ErrNotFound, id)
	}
	if t.State != engine.Dead {
		return fmt.Errorf("%w: task %d is %s", engine.ErrConflict, id, t.State)
	}
	x.redrive(t)
	x.commit()
	return nil
}

// RedriveAll is Queue.RedriveAll: every dead task of the queue, in id order,
// MaxBatch per commit.
func (m *Model) RedriveAll(q QueueKey) (int, error) {
	if err := checkQueue(q); err != nil {
		return 0, err
	}
	total := 0
	for {
		x := m.begin()
		dead := m.list(q, engine.Dead)
		if len(dead) > engine.MaxBatch {
			dead = dead[:engine.MaxBatch]
		}
		for _, t := range dead {
			x.redrive(t)
		}
		x.commit()
		total += len(dead)
		if len(dead) < engine.MaxBatch {
			return total, nil
		}
	}
}

// Commit is KV.Commit. The result's Version is the sequence number of the
// state after the commit.
func (m *Model) Commit(ns engine.Namespace, ops []TxOp) (engine.TxResult, error) {
	if len(ops) == 0 {
		return engine.TxResult{}, invalid("empty transaction")
	}
	if err := m.checkOps(ops); err != nil {
		return engine.TxResult{}, err
	}
	if err := checkSiblings(nil, ops); err != nil {
		return engine.TxResult{}, err
	}
	if err := checkNS(ns); err != nil {
		return engine.TxResult{}, err
	}
	x := m.begin()
	enq, err := x.ops(ns, ops)
	if err != nil {
		return engine.TxResult{}, err
	}
	return engine.TxResult{Version: x.commit(), Enqueued: enq}, nil
}

// ---- reads: no commit, no housekeeping ----

// Get is Queue.Get.
func (m *Model) Get(q QueueKey, id uint64) (Rec, error) {
	t, ok := m.tasks[id]
	if ok && t.Queue == q {
		t = m.at(t)
	}
	if !ok || t == nil || t.Queue != q {
		return Rec{}, fmt.Errorf("%w: task %d", engine.ErrNotFound, id)
	}
	return m.withDeps(*t, true), nil
}

// list returns the queue's tasks in state s at Now, as at sees them, in the
// order List serves them: ready by priority (high first) then id,
// scheduled by due time, in-flight by lease deadline (then id), dead and
// completed by id.
func (m *Model) list(q QueueKey, s engine.State) []*Rec {
	var out []*Rec
	for _, t := range m.tasks {
		if t.Queue != q {
			continue
		}
		if e := m.at(t); e != nil && e.State == s {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Rec) int {
		switch s {
		case engine.Ready:
			if a.Priority != b.Priority {
				return -cmpInt(a.Priority, b.Priority)
			}
		case engine.Scheduled:
			if a.NotBefore != b.NotBefore {
				return cmpInt(a.NotBefore, b.NotBefore)
			}
		case engine.InFlight:
			if a.LeaseUntil != b.LeaseUntil {
				return cmpInt(a.LeaseUntil, b.LeaseUntil)
			}
		}
		return cmpInt(a.ID, b.ID)
	})
	return out
}

// List returns every task of the queue in state s, in List order.
func (m *Model) List(q QueueKey, s engine.State) []Rec {
	var out []Rec
	for _, t := range m.list(q, s) {
		out = append(out, m.withDeps(*t, false))
	}
	return out
}

// Counts is Queue.Counts.
func (m *Model) Counts(q QueueKey) engine.Counts {
	var c engine.Counts
	for _, t := range m.tasks {
		if t.Queue != q {
			continue
		}
		e := m.at(t)
		if e == nil {
			continue
		}
		switch e.State {
		case engine.Ready:
			c.Ready++
		case engine.Scheduled:
			c.Scheduled++
		case engine.InFlight:
			c.InFlight++
		case engine.Dead:
			c.Dead++
		case engine.Completed:
			c.Completed++
		case engine.Waiting:
			c.Waiting++
		}
	}
	return c
}

// Queues is DB.Queues over the queues qs: those holding a task at Now or
// with settings, in the order given, with their counts, oldest ready time,
// totals and settings.
func (m *Model) Queues(qs []QueueKey) []engine.QueueInfo {
	var out []engine.QueueInfo
	for _, q := range qs {
		c := m.Counts(q)
		conf, set := m.confs[q]
		if c == (engine.Counts{}) && !set {
			continue
		}
		info := engine.QueueInfo{Namespace: q.NS, Name: q.Name, Counts: c, Totals: m.totals[q].Totals}
		s := conf.settings()
		info.Paused, info.Limits = s.Paused, s.Limits
		oldest := int64(0)
		for _, t := range m.list(q, engine.Ready) {
			if oldest == 0 || t.NotBefore < oldest {
				oldest = t.NotBefore
			}
		}
		info.OldestReady = timeOf(oldest)
		out = append(out, info)
	}
	return out
}

// KVGet is KV.Get.
func (m *Model) KVGet(ns engine.Namespace, key string) (engine.Entry, error) {
	if err := checkKey(key); err != nil {
		return engine.Entry{}, err
	}
	e, ok := m.kv[kvKey{ns, key}]
	if !ok {
		return engine.Entry{}, fmt.Errorf("%w: key %q", engine.ErrNotFound, key)
	}
	return engine.Entry{Key: key, Value: e.Value, Version: e.Version}, nil
}

// Scan is KV.Scan.
func (m *Model) Scan(ns engine.Namespace, o engine.ScanOptions) ([]engine.Entry, error) {
	if o.Limit < 0 || o.Limit > engine.MaxBatch {
		return nil, invalid("limit")
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	var keys []string
	for k := range m.kv {
		if k.NS == ns && k.Key >= o.Start && strings.HasPrefix(k.Key, o.Prefix) && (o.End == "" || k.Key < o.End) {
			keys = append(keys, k.Key)
		}
	}
	sort.Strings(keys)
	var out []engine.Entry
	for _, k := range keys {
		if len(out) == o.Limit {
			break
		}
		e := m.kv[kvKey{ns, k}]
		out = append(out, engine.Entry{Key: k, Value: e.Value, Version: e.Version})
	}
	return out, nil
}

// ---- whole-state views ----

// States lists the task states in the order views render them.
var States = []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed, engine.Waiting}

// View is the whole observable state of a DB over a fixed set of queues and
// namespaces: every task as List returns it, every KV entry as Scan returns
// it, and the sequence number Stats reports.
type View struct {
	Seq   uint64
	Tasks map[QueueKey][][]Rec // per queue, per state (in States order)
	KV    map[engine.Namespace][]engine.Entry
}

// View returns the model's state over queues and namespaces.
func (m *Model) View(queues []QueueKey, nss []engine.Namespace) View {
	v := View{Seq: m.Seq, Tasks: map[QueueKey][][]Rec{}, KV: map[engine.Namespace][]engine.Entry{}}
	for _, q := range queues {
		per := make([][]Rec, len(States))
		for i, s := range States {
			per[i] = m.List(q, s)
		}
		v.Tasks[q] = per
	}
	for _, ns := range nss {
		v.KV[ns], _ = m.Scan(ns, engine.ScanOptions{Limit: engine.MaxBatch})
	}
	return v
}

// String renders the view canonically: equal states render equally.
func (v View) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d\n", v.Seq)
	qs := slices.SortedFunc(maps.Keys(v.Tasks), func(a, b QueueKey) int {
		if a == b {
			return 0
		}
		if a.less(b) {
			return -1
		}
		return 1
	})
	for _, q := range qs {
		for i, s := range States {
			for _, r := range v.Tasks[q][i] {
				fmt.Fprintf(&b, "%s %s: %s\n", q, s, r.String())
			}
		}
	}
	nss := slices.SortedFunc(maps.Keys(v.KV), func(a, b engine.Namespace) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, ns := range nss {
		for _, e := range v.KV[ns] {
			fmt.Fprintf(&b, "kv %s %q=%q v%d\n", ns, e.Key, e.Value, e.Version)
		}
	}
	return b.String()
}

// Diff returns the first lines where two renderings differ, or "".
func Diff(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return "renderings differ"
}

// ErrClass names the sentinel an error wraps, for comparing outcomes.
func ErrClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, engine.ErrInvalid):
		return "invalid"
	case errors.Is(err, engine.ErrNotFound):
		return "not-found"
	case errors.Is(err, engine.ErrLeaseLost):
		return "lease-lost"
	case errors.Is(err, engine.ErrConflict):
		return "conflict"
	case errors.Is(err, engine.ErrPermission):
		return "permission"
	case errors.Is(err, engine.ErrClosed):
		return "closed"
	case errors.Is(err, engine.ErrFailed):
		return "failed"
	case errors.Is(err, engine.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, engine.ErrLocked):
		return "locked"
	}
	return "other: " + err.Error()
}
