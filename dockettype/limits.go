package dockettype

import (
	"fmt"
	"strings"
	"time"
)

// Limits bound how fast a queue's tasks are leased, counted across every
// claimer of every process. The zero value is no limit.
type Limits struct {
	// MaxInFlight bounds the queue's tasks in flight at once: a claim
	// leases at most MaxInFlight minus those in flight. A lease that has
	// expired is not in flight (its task is ready again). 0: no bound.
	MaxInFlight int
	// Rate and Per limit claims to Rate tasks per Per on average, with a
	// token bucket: it holds up to Burst tokens, gains Rate tokens every
	// Per, and each task leased takes one. Over any span of time d, at most
	// Burst + Rate*d/Per tasks are leased. Rate 0 is no rate limit (Per and
	// Burst must then be 0).
	Rate int
	Per  time.Duration
	// Burst is the size of the bucket, how many tasks may be leased at once
	// after a quiet spell; 0 means Rate. Settings reports the burst in
	// effect.
	Burst int
	// PartitionMaxInFlight bounds the tasks in flight at once of each
	// partition of the queue (Task.Partition; the tasks that name none are
	// one partition), as MaxInFlight bounds the queue's: a partition at its
	// bound is passed over by claims, which serve the others. 0: no bound.
	PartitionMaxInFlight int
	// PartitionRate, PartitionPer and PartitionBurst limit the claims of
	// each partition of the queue as Rate, Per and Burst limit the queue's:
	// every partition (the default one too) has a token bucket of its own,
	// and a partition out of tokens is passed over by claims, which serve
	// the others. The queue's own limits apply as well. PartitionRate 0 is
	// none (PartitionPer and PartitionBurst must then be 0);
	// PartitionBurst 0 means PartitionRate.
	PartitionRate  int
	PartitionPer   time.Duration
	PartitionBurst int
}

// String says the limits in words, as the CLI and the dashboard show them:
// "at most 3 in flight; 10 per 1s, bursts of 20", or "" for none.
func (l Limits) String() string {
	var parts []string
	if l.MaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in flight", l.MaxInFlight))
	}
	if l.Rate > 0 {
		parts = append(parts, rateString(l.Rate, l.Per, l.Burst, ""))
	}
	if l.PartitionMaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in flight per partition", l.PartitionMaxInFlight))
	}
	if l.PartitionRate > 0 {
		parts = append(parts, rateString(l.PartitionRate, l.PartitionPer, l.PartitionBurst, " per partition"))
	}
	return strings.Join(parts, "; ")
}

// rateString says a token bucket's limit: "10 per 1s<of>, bursts of 20".
func rateString(rate int, per time.Duration, burst int, of string) string {
	s := fmt.Sprintf("%d per %v%s", rate, per, of)
	if burst != 0 && burst != rate {
		s += fmt.Sprintf(", bursts of %d", burst)
	}
	return s
}
