// Package validate checks the arguments of the engine's calls, and of the
// commands a log replays, against the API's limits: names, keys, JSON
// values, durations, queue limits, unique states. Each check
// returns nil or an error wrapping dockettype.ErrInvalid that says what is
// wrong. It is pure: no state, no lock, no I/O. The shell checks a call
// with it before planning; the machine's codec checks what it decodes.
package validate

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/jsonvalid"
	"github.com/docketdb/docket/internal/index"
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dockettype.ErrInvalid}, args...)...)
}

// Name checks a name (a queue, a kind, a namespace part, an owner): 1 to
// MaxNameBytes of UTF-8 without a NUL byte.
func Name(field, s string) error {
	switch {
	case s == "":
		return invalid("%s is empty", field)
	case len(s) > dockettype.MaxNameBytes:
		return invalid("%s is %d bytes, over the limit of %d", field, len(s), dockettype.MaxNameBytes)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", field)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s contains a NUL byte", field)
	}
	return nil
}

// Limits checks a queue's limits.
func Limits(l dockettype.Limits) error {
	switch {
	case l.MaxInFlight < 0 || l.MaxInFlight > index.MaxInFlightLimit:
		return invalid("max in flight %d is outside 0..%d", l.MaxInFlight, index.MaxInFlightLimit)
	case l.PartitionMaxInFlight < 0 || l.PartitionMaxInFlight > index.MaxInFlightLimit:
		return invalid("partition max in flight %d is outside 0..%d", l.PartitionMaxInFlight, index.MaxInFlightLimit)
	}
	if err := checkRate(l.Rate, l.Per, l.Burst, ""); err != nil {
		return err
	}
	return checkRate(l.PartitionRate, l.PartitionPer, l.PartitionBurst, "partition ")
}

// checkRate checks a token bucket's limit, its errors naming it with the
// prefix of ("" for the queue's, "partition " for each partition's).
func checkRate(rate int, per time.Duration, burst int, of string) error {
	switch {
	case rate < 0 || rate > index.MaxRateTokens:
		return invalid("%srate %d is outside 0..%d", of, rate, index.MaxRateTokens)
	case rate == 0 && (per != 0 || burst != 0):
		return invalid("a %sper (%v) or %sburst (%d) without a %srate", of, per, of, burst, of)
	case rate > 0 && (per < time.Microsecond || per > maxRatePer):
		return invalid("%srate per %v is outside 1µs..%v", of, per, maxRatePer)
	case burst < 0 || burst > index.MaxRateTokens:
		return invalid("%sburst %d is outside 0..%d", of, burst, index.MaxRateTokens)
	}
	return nil
}

const (
	UniqueRequired = 1<<index.StateReady | 1<<index.StateScheduled | 1<<index.StateInFlight
	uniqueAllowed  = UniqueRequired | 1<<index.StateDead | 1<<index.StateCompleted
	UniqueDefault  = UniqueRequired | 1<<index.StateCompleted
)

// UniqueStates validates a set of blocking states as a bit mask.
func UniqueStates(mask uint8) error {
	if mask&^uniqueAllowed != 0 || mask&UniqueRequired != UniqueRequired {
		return invalid("unique states %s: want ready, scheduled and in-flight, and optionally dead and completed", StatesOf(mask))
	}
	return nil
}

// StatesOf names the states of a bit mask, as [ready scheduled].
func StatesOf(mask uint8) string {
	var names []string
	for st := index.StateReady; st < index.NumStates; st++ {
		if mask&(1<<st) != 0 {
			names = append(names, st.String())
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

// maxRatePer is dockettype's MaxRatePer: a bucket's period bound.
const maxRatePer = time.Duration(index.MaxRatePer) * time.Microsecond

// BulkAction says whether a is one of the bulk actions.
func BulkAction(a dockettype.BulkAction) bool {
	return a >= dockettype.BulkRetry && a <= dockettype.BulkDelete
}

// NS checks a namespace: both parts are names.
func NS(ns dockettype.Namespace) error {
	if err := Name("namespace project", ns.Project); err != nil {
		return err
	}
	return Name("namespace scope", ns.Scope)
}

// Key checks a key (a KV key, an idempotency key): 1 to dockettype.MaxKeyBytes.
func Key(field, k string) error {
	switch {
	case k == "":
		return invalid("%s is empty", field)
	case len(k) > dockettype.MaxKeyBytes:
		return invalid("%s is %d bytes, over the limit of %d", field, len(k), dockettype.MaxKeyBytes)
	}
	return nil
}

// JSON accepts empty or valid JSON of at most max bytes, in valid
// UTF-8 (inside strings too: the value is sent back inside JSON answers).
func JSON(field string, b []byte, max int) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > max {
		return invalid("%s is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", field, len(b), max)
	}
	if !jsonvalid.Valid(b) {
		if !utf8.Valid(b) {
			return invalid("%s is not valid UTF-8 (JSON text must be)", field)
		}
		return invalid("%s is not valid JSON", field)
	}
	return nil
}

// Duration checks a duration: not negative, not over dockettype.MaxDuration, and not
// zero unless allowZero.
func Duration(field string, d time.Duration, allowZero bool) error {
	switch {
	case d < 0:
		return invalid("%s is negative (%v)", field, d)
	case d == 0 && !allowZero:
		return invalid("%s is zero", field)
	case d > dockettype.MaxDuration:
		return invalid("%s is %v, over the limit of %v", field, d, dockettype.MaxDuration)
	}
	return nil
}

// LeaseTime checks the length of a lease (field lease or extend): a
// duration of at least a microsecond.
func LeaseTime(field string, d time.Duration) error {
	if err := Duration(field, d, false); err != nil {
		return err
	}
	if d < time.Microsecond {
		return invalid("%s %v is under a microsecond", field, d)
	}
	return nil
}

// Claim checks a claim's arguments.
func Claim(owner string, lease time.Duration, max int) error {
	if err := Name("owner", owner); err != nil {
		return err
	}
	if err := LeaseTime("lease", lease); err != nil {
		return err
	}
	if max < 1 || max > dockettype.MaxBatch {
		return invalid("claim max %d is outside 1..%d", max, dockettype.MaxBatch)
	}
	return nil
}

// PresenceTTL checks the time to live of a presence report.
func PresenceTTL(ttl time.Duration) error {
	if ttl < dockettype.MinPresenceTTL || ttl > dockettype.MaxPresenceTTL {
		return invalid("presence ttl %v is outside %v..%v", ttl, dockettype.MinPresenceTTL, dockettype.MaxPresenceTTL)
	}
	return nil
}

// Text checks free text: at most limit bytes of UTF-8.
func Text(field, s string, limit int) error {
	switch {
	case len(s) > limit:
		return invalid("%s is %d bytes, over the limit of %d", field, len(s), limit)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", field)
	}
	return nil
}

// Worker checks a worker process's presence report.
func Worker(p *dockettype.WorkerPresence) error {
	if err := Name("worker id", p.ID); err != nil {
		return err
	}
	if err := Text("worker host", p.Host, 255); err != nil {
		return err
	}
	if err := Text("worker version", p.Version, 200); err != nil {
		return err
	}
	if p.PID < 0 {
		return invalid("worker pid %d is negative", p.PID)
	}
	for i, q := range p.Queues {
		if err := Name(fmt.Sprintf("worker queue %d", i), q.Queue); err != nil {
			return err
		}
		if q.Concurrency < 0 {
			return invalid("worker queue %q concurrency %d is negative", q.Queue, q.Concurrency)
		}
	}
	for i, t := range p.Running {
		if err := Name(fmt.Sprintf("running task %d queue", i), t.Queue); err != nil {
			return err
		}
		if err := Text(fmt.Sprintf("running task %d kind", i), t.Kind, dockettype.MaxNameBytes); err != nil {
			return err
		}
	}
	return nil
}

// Schedule checks a periodic schedule's report.
func Schedule(s *dockettype.ScheduleInfo) error {
	if err := Name("schedule queue", s.Queue); err != nil {
		return err
	}
	if err := Name("schedule name", s.Name); err != nil {
		return err
	}
	if err := Text("schedule spec", s.Spec, 1000); err != nil {
		return err
	}
	if err := Text("schedule kind", s.Kind, dockettype.MaxNameBytes); err != nil {
		return err
	}
	if err := Text("schedule worker", s.Worker, dockettype.MaxNameBytes); err != nil {
		return err
	}
	return Text("schedule outcome", s.Outcome, 2000)
}

// Quota checks a namespace's quota.
func Quota(q dockettype.Quota) error {
	if q.MaxTasks < 0 {
		return invalid("quota max tasks %d is negative", q.MaxTasks)
	}
	if q.MaxBytes < 0 {
		return invalid("quota max bytes %d is negative", q.MaxBytes)
	}
	return nil
}

// PageLimit checks the limit of a page (the field named what) and makes
// its 0 the default of 100.
func PageLimit(what string, limit *int) error {
	if *limit < 0 || *limit > dockettype.MaxBatch {
		return invalid("%s %d is outside 0..%d", what, *limit, dockettype.MaxBatch)
	}
	if *limit == 0 {
		*limit = 100
	}
	return nil
}

// Done checks the result of a completion and returns its ops: d.Ops, then
// an Enqueue op for each of its follow-ups.
func Done(d *dockettype.Done, maxPayload int) ([]dockettype.Op, error) {
	if err := JSON("result", d.Result, maxPayload); err != nil {
		return nil, err
	}
	if len(d.FollowUps) > dockettype.MaxOps {
		return nil, invalid("%d follow-ups, over the limit of %d", len(d.FollowUps), dockettype.MaxOps)
	}
	if len(d.FollowUps) == 0 {
		return d.Ops, nil
	}
	ops := make([]dockettype.Op, 0, len(d.Ops)+len(d.FollowUps))
	ops = append(ops, d.Ops...)
	for _, f := range d.FollowUps {
		ops = append(ops, dockettype.Enqueue(f.Queue, f.Task))
	}
	return ops, nil
}
