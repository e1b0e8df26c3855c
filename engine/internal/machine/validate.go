package machine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

func CheckName(field, s string) error {
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

func CheckLimits(l dockettype.Limits) error {
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

// CheckUniqueStates validates a set of blocking states as a bit mask.
func CheckUniqueStates(mask uint8) error {
	if mask&^uniqueAllowed != 0 || mask&UniqueRequired != UniqueRequired {
		return invalid("unique states %s: want ready, scheduled and in-flight, and optionally dead and completed", StatesOf(mask))
	}
	return nil
}

func StatesOf(mask uint8) string {
	var names []string
	for st := index.StateReady; st < index.NumStates; st++ {
		if mask&(1<<st) != 0 {
			names = append(names, st.String())
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

// RepeatedLeases returns, one per lease, ErrLeaseLost for a lease whose task
// appears earlier in leases and nil for the others.
func RepeatedLeases(leases []dockettype.Lease) []error {
	errs := make([]error, len(leases))
	if len(leases) > 1 {
		seen := make(map[uint64]struct{}, len(leases))
		for i := range leases {
			if _, dup := seen[leases[i].ID]; dup {
				errs[i] = fmt.Errorf("%w: task %d appears twice in the batch", dockettype.ErrLeaseLost, leases[i].ID)
			}
			seen[leases[i].ID] = struct{}{}
		}
	}
	return errs
}

// maxRatePer is dockettype's MaxRatePer: a bucket's period bound.
const maxRatePer = time.Duration(index.MaxRatePer) * time.Microsecond

func validAction(a dockettype.BulkAction) bool {
	return a >= dockettype.BulkRetry && a <= dockettype.BulkDelete
}
