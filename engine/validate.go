package engine

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/internal/index"
)

// Limits on what a call may ask for. Each is checked before anything is
// planned; exceeding one returns ErrInvalid naming it.
const (
	MaxNameBytes     = 255     // project, scope, queue, owner, kind, caller ids
	MaxKeyBytes      = 4096    // KV keys and idempotency keys
	MaxErrorBytes    = 8192    // a failure's error text (longer text is cut, not refused)
	MaxHeaders       = 64      // headers per task
	MaxHeaderBytes   = 1024    // one header key or value
	MaxBatch         = 10_000  // tasks per batch enqueue, claim max, list and scan limits
	MaxOps           = 10_000  // ops (KV mutations, assertions, follow-ups) in one commit
	MaxAttemptsLimit = 1 << 20 // a task's attempt budget
	MaxAttemptErrors = 20      // failed attempts a task remembers (TaskInfo.Errors)
	MaxCommitBytes   = 64 << 20
	// MaxDuration bounds delays, leases and backoffs (about 100 years), so
	// that now+duration never overflows.
	MaxDuration = 100 * 365 * 24 * time.Hour
)

// The index keeps the attempt history: its bound is this one (a
// difference in either direction overflows the unsigned constant).
const _ = uint(MaxAttemptErrors-index.MaxAttemptErrors) + uint(index.MaxAttemptErrors-MaxAttemptErrors)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func checkName(field, s string) error {
	switch {
	case s == "":
		return invalid("%s is empty", field)
	case len(s) > MaxNameBytes:
		return invalid("%s is %d bytes, over the limit of %d", field, len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", field)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s contains a NUL byte", field)
	}
	return nil
}

func checkNS(ns Namespace) error {
	if err := checkName("namespace project", ns.Project); err != nil {
		return err
	}
	return checkName("namespace scope", ns.Scope)
}

func checkKey(field, k string) error {
	switch {
	case k == "":
		return invalid("%s is empty", field)
	case len(k) > MaxKeyBytes:
		return invalid("%s is %d bytes, over the limit of %d", field, len(k), MaxKeyBytes)
	}
	return nil
}

// checkJSON accepts empty or valid JSON of at most max bytes, in valid
// UTF-8 (inside strings too: the value is sent back inside JSON answers).
func checkJSON(field string, b []byte, max int) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > max {
		return invalid("%s is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", field, len(b), max)
	}
	if !validJSON(b) {
		if !utf8.Valid(b) {
			return invalid("%s is not valid UTF-8 (JSON text must be)", field)
		}
		return invalid("%s is not valid JSON", field)
	}
	return nil
}

func checkDuration(field string, d time.Duration, allowZero bool) error {
	switch {
	case d < 0:
		return invalid("%s is negative (%v)", field, d)
	case d == 0 && !allowZero:
		return invalid("%s is zero", field)
	case d > MaxDuration:
		return invalid("%s is %v, over the limit of %v", field, d, MaxDuration)
	}
	return nil
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	// make and copy, which the compiler turns into one allocation that is
	// not cleared first; append would round the capacity up to the size
	// class and clear what is past the copy.
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// spec is a validated Task, with its byte fields copied so the caller may
// reuse them.
type spec struct {
	payload     []byte
	kind        string
	delay       int64 // micros
	at          int64 // absolute micros, 0 when unset
	prio        int64
	maxAttempts uint32
	base, max   int64
	idem        string // the caller's idempotency key, or the one derived from the content
	headers     map[string]string
	size        int
	uniq        uint8 // unique by content: the blocking states (0: not unique)
	window      int64 // unique by content: the window, micros
	// deps are the ids the task depends on and sibs the positions of the
	// siblings it depends on, each sorted without repeats; policy is its
	// DependencyPolicy (deps.go).
	deps   []uint64
	sibs   []int
	policy uint8
	part   string // Task.Partition
}

func checkTask(t *Task, maxPayload int) (spec, error) {
	var s spec
	if err := checkJSON("payload", t.Payload, maxPayload); err != nil {
		return s, err
	}
	if t.Kind != "" {
		if err := checkName("kind", t.Kind); err != nil {
			return s, err
		}
	}
	if err := checkDuration("delay", t.Delay, true); err != nil {
		return s, err
	}
	if !t.At.IsZero() {
		us := t.At.UnixMicro()
		if t.At.Year() < 1970 || t.At.Year() > 9999 || us <= 0 {
			return s, invalid("at %v is outside the years 1970-9999", t.At)
		}
		s.at = us
	}
	if t.MaxAttempts < 0 || t.MaxAttempts > MaxAttemptsLimit {
		return s, invalid("max attempts %d is outside 0..%d", t.MaxAttempts, MaxAttemptsLimit)
	}
	if err := checkDuration("backoff base", t.BackoffBase, true); err != nil {
		return s, err
	}
	if err := checkDuration("backoff max", t.BackoffMax, true); err != nil {
		return s, err
	}
	if t.BackoffBase > 0 && t.BackoffBase < time.Microsecond || t.BackoffMax > 0 && t.BackoffMax < time.Microsecond {
		// Stored in microseconds, it would become 0: the default.
		return s, invalid("backoff base %v or max %v is under a microsecond", t.BackoffBase, t.BackoffMax)
	}
	if t.BackoffMax > 0 && t.BackoffBase > t.BackoffMax {
		// A zero on either side is the default and is not compared: a base
		// over the default max is capped at it, as before.
		return s, invalid("backoff base %v is over backoff max %v", t.BackoffBase, t.BackoffMax)
	}
	if t.IdempotencyKey != "" {
		if err := checkKey("idempotency key", t.IdempotencyKey); err != nil {
			return s, err
		}
		if strings.HasPrefix(t.IdempotencyKey, ReservedPrefix) {
			return s, invalid("idempotency key %.40q is under the reserved prefix %q", t.IdempotencyKey, ReservedPrefix)
		}
	}
	if len(t.Headers) > MaxHeaders {
		return s, invalid("%d headers, over the limit of %d", len(t.Headers), MaxHeaders)
	}
	s.size = len(t.Payload) + len(t.IdempotencyKey) + len(t.Kind) + 64
	if len(t.Headers) > 0 {
		s.headers = make(map[string]string, len(t.Headers))
		for k, v := range t.Headers {
			if k == "" || len(k) > MaxHeaderBytes || len(v) > MaxHeaderBytes {
				return s, invalid("header %.32q: key must be 1..%d bytes and value at most %d", k, MaxHeaderBytes, MaxHeaderBytes)
			}
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return s, invalid("header %.32q: key and value must be valid UTF-8", k)
			}
			s.headers[k] = v
			s.size += len(k) + len(v)
		}
	}
	s.payload = clone(t.Payload)
	s.kind = t.Kind
	s.delay = t.Delay.Microseconds()
	s.prio = int64(t.Priority)
	s.maxAttempts = uint32(t.MaxAttempts)
	if s.maxAttempts == 0 {
		s.maxAttempts = 5
	}
	s.base, s.max = t.BackoffBase.Microseconds(), t.BackoffMax.Microseconds()
	if s.base == 0 {
		s.base = int64(time.Second / time.Microsecond)
	}
	if s.max == 0 {
		s.max = int64(time.Minute / time.Microsecond)
	}
	s.idem = t.IdempotencyKey
	if t.Unique != nil {
		if err := checkUnique(t, &s); err != nil {
			return s, err
		}
		s.size += len(s.idem)
	}
	if err := checkDeps(t, &s); err != nil {
		return s, err
	}
	if t.Partition != "" {
		if err := checkName("partition", t.Partition); err != nil {
			return s, err
		}
		s.part = t.Partition
		s.size += len(s.part)
	}
	return s, nil
}

// backoff is base * 2^(attempts-1), capped at max.
func backoff(base, max int64, attempts uint32) int64 {
	shift := uint(0)
	if attempts > 1 {
		shift = uint(attempts - 1)
	}
	if shift > 62 {
		return max
	}
	if base > math.MaxInt64>>shift {
		return max
	}
	d := base << shift
	if d > max {
		return max
	}
	return d
}
