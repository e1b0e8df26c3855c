package wire

import (
	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// Unique converts a task's uniqueness by content; nil is none.
func Unique(pb *v1.Unique) (*engine.Unique, error) {
	if pb == nil {
		return nil, nil
	}
	w, err := Duration("unique window", pb.Window)
	if err != nil {
		return nil, err
	}
	u := &engine.Unique{Window: w}
	for _, st := range pb.States {
		u.States = append(u.States, engine.State(st))
	}
	return u, nil
}

// PBUnique converts a task's uniqueness by content; nil is none.
func PBUnique(u *engine.Unique) *v1.Unique {
	if u == nil {
		return nil
	}
	pb := &v1.Unique{Window: PBDuration(u.Window)}
	for _, st := range u.States {
		pb.States = append(pb.States, v1.State(st))
	}
	return pb
}

// Limits converts a queue's limits; nil is no limit.
func Limits(pb *v1.Limits) (engine.Limits, error) {
	var l engine.Limits
	var err error
	if l.MaxInFlight, err = toInt("max in flight", pb.GetMaxInFlight()); err != nil {
		return l, err
	}
	if l.Rate, err = toInt("rate", pb.GetRate()); err != nil {
		return l, err
	}
	if l.Burst, err = toInt("burst", pb.GetBurst()); err != nil {
		return l, err
	}
	if l.PartitionMaxInFlight, err = toInt("partition max in flight", pb.GetPartitionMaxInFlight()); err != nil {
		return l, err
	}
	if l.PartitionRate, err = toInt("partition rate", pb.GetPartitionRate()); err != nil {
		return l, err
	}
	if l.PartitionBurst, err = toInt("partition burst", pb.GetPartitionBurst()); err != nil {
		return l, err
	}
	if l.PartitionPer, err = Duration("partition rate per", pb.GetPartitionPer()); err != nil {
		return l, err
	}
	l.Per, err = Duration("rate per", pb.GetPer())
	return l, err
}

// limitsOf converts limits the server sent.
func limitsOf(pb *v1.Limits) engine.Limits {
	l, _ := Limits(pb)
	return l
}

// PBLimits converts a queue's limits; no limit is nil.
func PBLimits(l engine.Limits) *v1.Limits {
	if l == (engine.Limits{}) {
		return nil
	}
	return &v1.Limits{MaxInFlight: int64(l.MaxInFlight), Rate: int64(l.Rate), Per: PBDuration(l.Per), Burst: int64(l.Burst),
		PartitionMaxInFlight: int64(l.PartitionMaxInFlight), PartitionRate: int64(l.PartitionRate),
		PartitionPer: PBDuration(l.PartitionPer), PartitionBurst: int64(l.PartitionBurst)}
}

// PBSettings converts a queue's settings.
func PBSettings(s engine.QueueSettings) *v1.QueueSettings {
	return &v1.QueueSettings{Paused: s.Paused, Limits: PBLimits(s.Limits)}
}

// Settings converts a queue's settings the server sent.
func Settings(pb *v1.QueueSettings) engine.QueueSettings {
	return engine.QueueSettings{Paused: pb.GetPaused(), Limits: limitsOf(pb.GetLimits())}
}

// PBPartitions converts a page of a queue's partitions.
func PBPartitions(p engine.PartitionPage) *v1.PartitionsResponse {
	res := &v1.PartitionsResponse{Next: p.Next, Partitions: make([]*v1.Partition, len(p.Partitions))}
	for i, pi := range p.Partitions {
		res.Partitions[i] = &v1.Partition{Key: pi.Key, Counts: PBCounts(pi.Counts)}
	}
	return res
}

// Partitions converts a page of a queue's partitions the server sent.
func Partitions(pb *v1.PartitionsResponse) engine.PartitionPage {
	p := engine.PartitionPage{Next: pb.GetNext()}
	for _, pi := range pb.GetPartitions() {
		p.Partitions = append(p.Partitions, engine.PartitionInfo{Key: pi.GetKey(), Counts: Counts(pi.GetCounts())})
	}
	return p
}
