package dockettype

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Retrying narrows a Filter to the scheduled tasks that wait out their
// backoff after a failed attempt, or to every task but those.
type Retrying uint8

const (
	// AnyRetrying does not look at retries.
	AnyRetrying Retrying = iota
	// OnlyRetrying keeps the tasks retrying: scheduled after a failed
	// attempt, with its error recorded.
	OnlyRetrying
	// NotRetrying keeps every task but those retrying (in the scheduled
	// state: the timers).
	NotRetrying
)

// Filter selects tasks of a queue for Search and Bulk. Every field set
// must hold; the zero Filter selects every task.
type Filter struct {
	// States keeps the tasks in one of these states as of the clock's now
	// (a due timer is ready, an expired lease ready or dead, like List);
	// none keeps every state.
	States []State
	// Retrying narrows the scheduled tasks to retries or to timers.
	Retrying Retrying
	// Kind keeps the tasks of this kind.
	Kind string
	// Error keeps the tasks whose last error contains this text, ignoring
	// case.
	Error string
	// Partition keeps the tasks of this partition.
	Partition string
	// HeaderKey keeps the tasks with this header; with HeaderValue set,
	// with this value.
	HeaderKey, HeaderValue string
	// MinID and MaxID keep ids in MinID..MaxID, both included; 0 is no
	// bound.
	MinID, MaxID uint64
	// EnqueuedSince keeps the tasks enqueued at or after it and
	// EnqueuedBefore those enqueued before it; zero is no bound.
	EnqueuedSince, EnqueuedBefore time.Time
}

// MaxFilterBytes bounds a Filter's text fields (Error and the header).
const MaxFilterBytes = MaxHeaderBytes

// Active reports whether f selects among the tasks (any field set).
func (f *Filter) Active() bool {
	return len(f.States) > 0 || f.Retrying != AnyRetrying || f.Kind != "" || f.Error != "" || f.Partition != "" ||
		f.HeaderKey != "" || f.MinID != 0 || f.MaxID != 0 || !f.EnqueuedSince.IsZero() || !f.EnqueuedBefore.IsZero()
}

// Validate returns ErrInvalid naming what is wrong with f, nil when it
// can be searched.
func (f *Filter) Validate() error {
	for _, s := range f.States {
		if !s.valid() {
			return invalid("filter state %d", s)
		}
	}
	if f.Retrying > NotRetrying {
		return invalid("filter retrying %d is not one of any (0), only (1) or not (2)", f.Retrying)
	}
	for _, fld := range []struct{ name, v string }{{"kind", f.Kind}, {"partition", f.Partition},
		{"error text", f.Error}, {"header key", f.HeaderKey}, {"header value", f.HeaderValue}} {
		max := MaxNameBytes
		if fld.name != "kind" && fld.name != "partition" {
			max = MaxFilterBytes
		}
		switch {
		case len(fld.v) > max:
			return invalid("filter %s is %d bytes, over the limit of %d", fld.name, len(fld.v), max)
		case !utf8.ValidString(fld.v):
			return invalid("filter %s is not valid UTF-8", fld.name)
		}
	}
	if f.HeaderValue != "" && f.HeaderKey == "" {
		return invalid("filter header value %.40q without a header key", f.HeaderValue)
	}
	maxID := f.MaxID
	if maxID == 0 {
		maxID = math.MaxUint64
	}
	if f.MinID > maxID {
		return invalid("filter id range %d..%d is empty", f.MinID, f.MaxID)
	}
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.EnqueuedSince.IsZero() {
		since = f.EnqueuedSince.UnixMicro()
	}
	if !f.EnqueuedBefore.IsZero() {
		until = f.EnqueuedBefore.UnixMicro()
	}
	if since >= until {
		return invalid("filter enqueued since %s and before %s is empty",
			f.EnqueuedSince.Format(time.RFC3339), f.EnqueuedBefore.Format(time.RFC3339))
	}
	return nil
}

// BulkAction is what Bulk does to each task a filter selects.
type BulkAction uint8

const (
	// BulkRetry redrives dead tasks (ready, with a fresh attempt budget)
	// and runs scheduled ones now (timers and retries, attempts kept).
	BulkRetry BulkAction = iota + 1
	// BulkCancel removes tasks in any state but completed, as Cancel
	// does: a worker holding one gets ErrLeaseLost when it completes.
	BulkCancel
	// BulkRunNow makes scheduled tasks ready at once, as RunNow does.
	BulkRunNow
	// BulkDelete removes ended tasks: dead and retained completed ones.
	// Tasks still to run are skipped (cancel removes those).
	BulkDelete
)

var bulkNames = [...]string{BulkRetry: "retry", BulkCancel: "cancel", BulkRunNow: "run-now", BulkDelete: "delete"}

func (a BulkAction) String() string {
	if int(a) < len(bulkNames) && bulkNames[a] != "" {
		return bulkNames[a]
	}
	return "BulkAction(" + strconv.Itoa(int(a)) + ")"
}

// ParseBulkAction reads retry, cancel, run-now (or run_now) and delete.
func ParseBulkAction(s string) (BulkAction, error) {
	s = strings.ReplaceAll(strings.ToLower(s), "_", "-")
	for a, n := range bulkNames {
		if n != "" && n == s {
			return BulkAction(a), nil
		}
	}
	return 0, invalid("bulk action %.40q is not retry, cancel, run-now or delete", s)
}

// SearchOptions asks Search for a page of the tasks a filter selects.
type SearchOptions struct {
	Filter Filter
	// Newest orders the tasks newest first (descending id); by default
	// they come oldest first.
	Newest bool
	// Limit bounds the page; 0 means 100, at most MaxBatch.
	Limit int
	// Cursor continues after the page that returned it (with the same
	// filter and order); "" starts at the beginning.
	Cursor string
	// Count asks for the number of every task the filter selects, not
	// only this page's: a walk over the whole queue.
	Count bool
}

// SearchPage is one page of a search. Next is "" when nothing more
// matches.
type SearchPage struct {
	Tasks []TaskInfo
	Next  string
	// Count is the number of tasks the filter selects, when
	// SearchOptions.Count asked for it (else 0), and MaxID the highest id
	// among them: a bulk action confirmed for Count tasks can bound its
	// filter by it (Filter.MaxID) to leave out tasks enqueued since. The
	// count is exact over a walk in chunks: a task that changes while the
	// walk runs is counted as its chunk saw it.
	Count int
	MaxID uint64
}

// BulkSkip counts the tasks a bulk action left as they were for one reason.
type BulkSkip struct {
	Reason string
	Count  int
}

// BulkResult says what a bulk action did: Done tasks acted on, and the
// selected tasks it left, by reason.
type BulkResult struct {
	Done    int
	Skipped []BulkSkip
}

// SkippedTotal is the number of tasks skipped for any reason.
func (r BulkResult) SkippedTotal() int {
	n := 0
	for _, s := range r.Skipped {
		n += s.Count
	}
	return n
}
