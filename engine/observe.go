package engine

import (
	"github.com/docketdb/docket/wal"
)

// The buckets of Stats.LogGroups are the log's (a difference in either
// direction overflows the unsigned constant).
const _ = uint(LogGroupBuckets-wal.GroupBuckets) + uint(wal.GroupBuckets-LogGroupBuckets)

// LogGroupRange returns the smallest and the largest number of batches an
// fsync counted in bucket i of Stats.LogGroups covered; hi is 0 for the
// last bucket, which has no bound.
func LogGroupRange(i int) (lo, hi int) { return wal.GroupRange(i) }
