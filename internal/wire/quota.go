package wire

import (
	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// PBQuota converts a namespace's quota.
func PBQuota(q engine.Quota) *v1.Quota {
	return &v1.Quota{MaxTasks: int64(q.MaxTasks), MaxBytes: q.MaxBytes}
}

// Quota converts a namespace's quota, refusing a task count out of range;
// the engine refuses negative limits itself.
func Quota(pb *v1.Quota) (engine.Quota, error) {
	n, err := intOf("quota max tasks", pb.GetMaxTasks())
	if err != nil {
		return engine.Quota{}, err
	}
	return engine.Quota{MaxTasks: n, MaxBytes: pb.GetMaxBytes()}, nil
}
