package engine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// The index keeps the attempt history: its bound is this one (a
// difference in either direction overflows the unsigned constant).
const _ = uint(MaxAttemptErrors-index.MaxAttemptErrors) + uint(index.MaxAttemptErrors-MaxAttemptErrors)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// The argument checks are package validate's.

func checkNS(ns Namespace) error                      { return validate.NS(ns) }
func checkKey(field, k string) error                  { return validate.Key(field, k) }
func checkJSON(field string, b []byte, max int) error { return validate.JSON(field, b, max) }
func checkDuration(field string, d time.Duration, allowZero bool) error {
	return validate.Duration(field, d, allowZero)
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

// checkTask validates t and makes its spec, with a copy of its payload
// unless borrow is set (see core.borrows).
func checkTask(t *Task, maxPayload int, borrow bool) (spec, error) {
	var s spec
	if err := checkJSON("payload", t.Payload, maxPayload); err != nil {
		return s, err
	}
	if t.Kind != "" {
		if err := validate.Name("kind", t.Kind); err != nil {
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
		s.At = us
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
	s.Size = len(t.Payload) + len(t.IdempotencyKey) + len(t.Kind) + 64
	if len(t.Headers) > 0 {
		s.Headers = make(map[string]string, len(t.Headers))
		for k, v := range t.Headers {
			if k == "" || len(k) > MaxHeaderBytes || len(v) > MaxHeaderBytes {
				return s, invalid("header %.32q: key must be 1..%d bytes and value at most %d", k, MaxHeaderBytes, MaxHeaderBytes)
			}
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return s, invalid("header %.32q: key and value must be valid UTF-8", k)
			}
			s.Headers[k] = v
			s.Size += len(k) + len(v)
		}
	}
	if s.Payload = t.Payload; !borrow {
		s.Payload = clone(t.Payload)
	}
	s.Kind = t.Kind
	s.Delay = t.Delay.Microseconds()
	s.Prio = int64(t.Priority)
	s.MaxAttempts = uint32(t.MaxAttempts)
	if s.MaxAttempts == 0 {
		s.MaxAttempts = 5
	}
	s.Base, s.Max = t.BackoffBase.Microseconds(), t.BackoffMax.Microseconds()
	if s.Base == 0 {
		s.Base = int64(time.Second / time.Microsecond)
	}
	if s.Max == 0 {
		s.Max = int64(time.Minute / time.Microsecond)
	}
	s.Idem = t.IdempotencyKey
	if t.Unique != nil {
		if err := checkUnique(t, &s); err != nil {
			return s, err
		}
		s.Size += len(s.Idem)
	}
	if err := checkDeps(t, &s); err != nil {
		return s, err
	}
	if t.Partition != "" {
		if err := validate.Name("partition", t.Partition); err != nil {
			return s, err
		}
		s.Part = t.Partition
		s.Size += len(s.Part)
	}
	return s, nil
}
