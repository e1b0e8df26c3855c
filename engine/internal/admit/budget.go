package admit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/bytesize"
	"github.com/docketdb/docket/internal/index"
)

// The memory budget (Options.MaxMemory) bounds what the state holds: task
// records with their payloads and fields, idempotency keys, KV entries and
// dependencies, as index.Usage estimates them from the records (the same
// figure on every node and after every restart). A write that would take
// the state past the budget is refused with ErrFull and changes nothing;
// writes that free state (complete, fail, cancel, delete) are never
// refused for it, so a full DB can always be drained. A claim adds its
// owner's bytes to each task it leases (the lease record itself is
// counted when the task is admitted): it may use the reserve below, and
// past it leases one task at a time, never refused.
//
// Writes to a namespace's system area (worker presence, schedules) may use
// the same reserve.
//
// A completion that enqueues follow-ups or writes KV entries adds state
// as it frees its task: it may use a reserve of an eighth of the budget
// beyond it, so that a workflow whose steps are queued behind each other
// keeps moving when producers filled the budget; past the reserve it is
// refused with ErrFull too, its lease kept (the worker retries it, or the
// lease expires and the task runs again).

// DefaultMemoryShare is the share of the memory available to the process
// that the budget takes by default: a quarter, so that the Go heap's
// collection slack (the heap may reach twice what is live) and the host
// program fit beside it.
const DefaultMemoryShare = 4

// ReserveShare is the share of the budget completions may use beyond it.
const ReserveShare = 8

// warnEvery bounds how often the engine logs that the state is above
// warnPercent of its budget, and how often it logs refusals.
const warnEvery = time.Minute

// warnPercent is the share of the budget past which the engine logs a
// warning (once, then at most once a minute while above).
const warnPercent = 80

// BudgetOf is the budget Options.MaxMemory asks for: the value itself,
// none for a negative one, and DefaultMemoryShare of what the machine or
// the cgroup allows for 0 (none where that cannot be read).
func BudgetOf(maxMemory int64) int64 {
	switch {
	case maxMemory > 0:
		return maxMemory
	case maxMemory < 0:
		return 0
	}
	return AvailableMemory() / DefaultMemoryShare
}

// memoryFresh is how long AvailableMemory keeps a figure read: Opens in a
// row (a test's, a process opening its DBs) read the files once, and an
// Open a while later reads what the machine or the cgroup allows then.
const memoryFresh = time.Second

// available is AvailableMemory's figure, read again once memoryFresh old.
var available = memoProbe{read: readAvailableMemory, now: time.Now, fresh: memoryFresh}

// memoProbe keeps what read returns for fresh, as now tells time.
type memoProbe struct {
	read  func() int64
	now   func() time.Time
	fresh time.Duration

	mu sync.Mutex
	at time.Time // when v was read; zero before the first read
	v  int64
}

func (p *memoProbe) get() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if age := now.Sub(p.at); p.at.IsZero() || age < 0 || age >= p.fresh {
		p.v, p.at = p.read(), now
	}
	return p.v
}

// AvailableMemory is the smaller of the machine's memory and the cgroup's
// limit, 0 where neither can be read. The figure is read at most once a
// memoryFresh.
func AvailableMemory() int64 { return available.get() }

// readAvailableMemory reads AvailableMemory's figure from /proc and the
// cgroup's files.
func readAvailableMemory() int64 {
	var limit int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					limit = kb << 10
				}
			}
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 { // "max": no limit
			continue
		}
		if limit == 0 || n < limit {
			limit = n
		}
	}
	return limit
}

// Admitter admits commands into the state against the memory budget and
// the namespaces' quotas. It is guarded by the engine lock: every method
// is called with it held.
type Admitter struct {
	Budget int64 // Options.MaxMemory resolved; 0: none
	Log    *slog.Logger
	Clock  dockettype.Clock
	// quotas holds the namespaces' quotas as last parsed.
	quotas map[index.Namespace]quotaCache
	// The state of the memory warnings: when the last warning about the
	// share was logged, when the last refusal was, and the refusals since.
	above, refused time.Time
	more           int
}

// quotaCache is a namespace's quota as last parsed, with the record it
// was parsed from.
type quotaCache struct {
	raw string
	q   dockettype.Quota
}

// Quota returns ns's quota as its record in st says. The parsed record is
// kept, and parsed again when the record differs, so that it follows
// every write, replay and restore without a hook.
func (a *Admitter) Quota(st *index.Store, ns index.Namespace) dockettype.Quota {
	e, ok := st.KV(ns, dockettype.QuotaKey)
	if !ok {
		if a.quotas != nil {
			delete(a.quotas, ns)
		}
		return dockettype.Quota{}
	}
	if qc, ok := a.quotas[ns]; ok && qc.raw == string(e.Value) {
		return qc.q
	}
	var q dockettype.Quota
	if json.Unmarshal(e.Value, &q) != nil || validate.Quota(q) != nil {
		q = dockettype.Quota{} // only SetQuota writes the record
	}
	if a.quotas == nil {
		a.quotas = make(map[index.Namespace]quotaCache)
	}
	a.quotas[ns] = quotaCache{raw: string(e.Value), q: q}
	return q
}

// Admit refuses cmd with ErrFull when what it adds would take the state
// of st past the budget (the budget and its reserve, for a completion),
// or its namespace past its quota; it cuts what a claim leases to what
// fits. Values of at least threshold bytes go to the value log (Adds).
// Standalone, it runs as the command is planned, so the check and the
// commit are one step; replicated, on the node that submits the command,
// before it goes to the log (the followers plan what the log holds,
// whatever their own budget).
func (a *Admitter) Admit(st *index.Store, cmd *machine.Command, threshold int) error {
	add, completion := Adds(cmd, threshold)
	a.claim(st, cmd, add)
	if add == 0 {
		return nil
	}
	if err := a.quota(st, cmd, add, completion); err != nil {
		return err
	}
	if a.Budget <= 0 {
		return nil
	}
	used := st.Usage().Bytes
	limit := a.Budget
	if completion {
		limit += a.Budget / ReserveShare
	}
	if used+add <= limit {
		a.warn(used + add)
		return nil
	}
	a.refuse(used, add)
	return fmt.Errorf("%w: the state holds %s of its memory budget of %s (Options.MaxMemory) and this call would add %s; "+
		"complete, cancel or delete tasks, or raise the budget", dockettype.ErrFull, bytesize.Format(used), bytesize.Format(a.Budget), bytesize.Format(add))
}

// claim cuts how many tasks cmd, a claim, leases to what the budget and
// its reserve (and its namespace's byte quota and reserve) hold beyond
// add, what the rest of cmd adds: each task leased adds its owner's
// bytes. Past the reserve a claim still leases one task, so that a queue
// always drains (a state taken past the reserve by what is never refused,
// such as failures' errors, with no lease held, would otherwise refuse
// every claim): the state then passes the reserve by at most the owner
// names of the leases held.
func (a *Admitter) claim(st *index.Store, cmd *machine.Command, add int64) {
	per, most := ClaimAdds(cmd)
	if per == 0 {
		return
	}
	fit := int64(*most)
	if a.Budget > 0 {
		room := a.Budget + a.Budget/ReserveShare - st.Usage().Bytes - add
		fit = min(fit, max(room, 0)/per)
	}
	ns := index.Namespace(cmd.NS)
	if q := a.Quota(st, ns); q.MaxBytes > 0 {
		room := q.MaxBytes + q.MaxBytes/ReserveShare - st.NamespaceUsage(ns).Bytes - add
		fit = min(fit, max(room, 0)/per)
	}
	if fit < int64(*most) {
		*most = int(max(fit, 1))
	}
}

// quota refuses cmd with ErrFull when what it adds would take its
// namespace past its quota (and the quota's reserve, for a completion or
// a write to the system area).
func (a *Admitter) quota(st *index.Store, cmd *machine.Command, add int64, completion bool) error {
	ns := index.Namespace(cmd.NS)
	q := a.Quota(st, ns)
	if q == (dockettype.Quota{}) || OnlyQuota(cmd) {
		return nil
	}
	if _, commit := cmd.Args.(*machine.Commit); completion && !commit && len(ops(cmd)) == 0 {
		// A completion that writes nothing but its result frees its task:
		// a quota lowered below what the namespace holds must not stop
		// its workers from draining it.
		return nil
	}
	tasks := TasksAdded(cmd)
	u := st.NamespaceUsage(ns)
	maxTasks, maxBytes := int64(q.MaxTasks), q.MaxBytes
	if completion {
		maxTasks += maxTasks / ReserveShare
		maxBytes += maxBytes / ReserveShare
	}
	if q.MaxTasks > 0 && tasks > 0 && u.Tasks+tasks > maxTasks {
		return fmt.Errorf("%w: namespace %s holds %d tasks of its quota of %d and this call would add %d; "+
			"complete, cancel or delete tasks, or raise the quota", dockettype.ErrFull, cmd.NS, u.Tasks, q.MaxTasks, tasks)
	}
	if q.MaxBytes > 0 && add > 0 && u.Bytes+add > maxBytes {
		return fmt.Errorf("%w: namespace %s holds %s of its quota of %s and this call would add %s; "+
			"complete, cancel or delete tasks, or raise the quota", dockettype.ErrFull, cmd.NS, bytesize.Format(u.Bytes), bytesize.Format(q.MaxBytes), bytesize.Format(add))
	}
	return nil
}

// Pending is at least what a batch not applied yet adds to the state: in
// all, and in each namespace it writes to.
type Pending struct {
	bytes int64
	ns    []nsPending
}

type nsPending struct {
	ns           index.Namespace
	bytes, tasks int64
}

func (u *Pending) of(ns index.Namespace) *nsPending {
	for i := range u.ns {
		if u.ns[i].ns == ns {
			return &u.ns[i]
		}
	}
	u.ns = append(u.ns, nsPending{ns: ns})
	return &u.ns[len(u.ns)-1]
}

// Add counts what ms, mutations a command of namespace ns planned into
// the batch, add to the state.
func (u *Pending) Add(ns index.Namespace, ms []index.Mutation) {
	pn := u.of(ns)
	for i := range ms {
		var n int64
		switch m := &ms[i]; m.Kind {
		case index.MutPutTask:
			n = index.TaskBytes(m.Task)
			pn.tasks++
		case index.MutPutIdem:
			n = index.IdemBytes(&m.Idem)
		case index.MutPutDep:
			n = index.DepCost
		}
		u.bytes += n
		pn.bytes += n
	}
}

// Reset empties u for the next batch, keeping its memory.
func (u *Pending) Reset() { u.bytes, u.ns = 0, u.ns[:0] }

// Fits reports whether cmd would be admitted with what a batch not applied
// yet adds (pend) counted. If so it is admitted after the batch is applied
// too.
func (a *Admitter) Fits(st *index.Store, cmd *machine.Command, threshold int, pend *Pending) bool {
	add, _ := Adds(cmd, threshold)
	if add == 0 {
		return true
	}
	if a.Budget > 0 && st.Usage().Bytes+pend.bytes+add > a.Budget {
		return false
	}
	ns := index.Namespace(cmd.NS)
	q := a.Quota(st, ns)
	if q == (dockettype.Quota{}) || OnlyQuota(cmd) {
		return true
	}
	u := st.NamespaceUsage(ns)
	pn := pend.of(ns)
	if tasks := TasksAdded(cmd); q.MaxTasks > 0 && tasks > 0 && u.Tasks+pn.tasks+tasks > int64(q.MaxTasks) {
		return false
	}
	return q.MaxBytes <= 0 || u.Bytes+pn.bytes+add <= q.MaxBytes
}

func (a *Admitter) warn(used int64) {
	if used*100 < a.Budget*warnPercent {
		return
	}
	now := a.Clock.Now()
	if !a.above.IsZero() && now.Sub(a.above) < warnEvery {
		return
	}
	a.above = now
	a.Log.Warn("docket: the state is near its memory budget; writes that add to it will be refused past it",
		"used", used, "budget", a.Budget, "percent", used*100/a.Budget)
}

func (a *Admitter) refuse(used, add int64) {
	now := a.Clock.Now()
	if !a.refused.IsZero() && now.Sub(a.refused) < warnEvery {
		a.more++
		return
	}
	a.Log.Warn("docket: a write was refused: the memory budget is full",
		"used", used, "budget", a.Budget, "adds", add, "refused_since_last_line", a.more)
	a.refused, a.more = now, 0
}
