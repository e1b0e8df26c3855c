package wire

import (
	"math"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// intOf narrows a count the other side sent; one out of range is refused.
func intOf(field string, n int64) (int, error) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, Invalid("%s %d is out of range", field, n)
	}
	return int(n), nil
}

// PBWorker converts a worker's presence.
func PBWorker(p engine.WorkerPresence) *v1.WorkerPresence {
	pb := &v1.WorkerPresence{Id: p.ID, Host: p.Host, Pid: int64(p.PID), Version: p.Version, Started: PBTime(p.Started),
		Draining: p.Draining, Heartbeat: PBTime(p.Heartbeat), Expires: PBTime(p.Expires)}
	for _, q := range p.Queues {
		pb.Queues = append(pb.Queues, &v1.WorkerQueue{Queue: q.Queue, Concurrency: int64(q.Concurrency)})
	}
	for _, t := range p.Running {
		pb.Running = append(pb.Running, &v1.RunningTask{Queue: t.Queue, Id: t.ID, Kind: t.Kind, Attempt: int64(t.Attempt),
			Started: PBTime(t.Started)})
	}
	return pb
}

// Worker converts a worker's presence, refusing malformed fields.
func Worker(pb *v1.WorkerPresence) (engine.WorkerPresence, error) {
	p := engine.WorkerPresence{ID: pb.GetId(), Host: pb.GetHost(), Version: pb.GetVersion(), Draining: pb.GetDraining()}
	var err error
	if p.PID, err = intOf("worker pid", pb.GetPid()); err != nil {
		return p, err
	}
	if p.Started, err = Time("worker started", pb.GetStarted()); err != nil {
		return p, err
	}
	p.Heartbeat, p.Expires = timeOf(pb.GetHeartbeat()), timeOf(pb.GetExpires())
	for _, q := range pb.GetQueues() {
		c, err := intOf("worker queue concurrency", q.GetConcurrency())
		if err != nil {
			return p, err
		}
		p.Queues = append(p.Queues, engine.WorkerQueue{Queue: q.GetQueue(), Concurrency: c})
	}
	for _, t := range pb.GetRunning() {
		a, err := intOf("running task attempt", t.GetAttempt())
		if err != nil {
			return p, err
		}
		st, err := Time("running task started", t.GetStarted())
		if err != nil {
			return p, err
		}
		p.Running = append(p.Running, engine.RunningTask{Queue: t.GetQueue(), ID: t.GetId(), Kind: t.GetKind(), Attempt: a, Started: st})
	}
	return p, nil
}

// PBSchedule converts a periodic schedule.
func PBSchedule(s engine.ScheduleInfo) *v1.ScheduleInfo {
	return &v1.ScheduleInfo{Queue: s.Queue, Name: s.Name, Spec: s.Spec, Kind: s.Kind, Worker: s.Worker, Next: PBTime(s.Next),
		Last: PBTime(s.Last), LastTask: s.LastTask, Outcome: s.Outcome, Paused: s.Paused, RunRequested: s.RunRequested,
		Updated: PBTime(s.Updated), Expires: PBTime(s.Expires)}
}

// Schedule converts a periodic schedule, refusing malformed fields.
func Schedule(pb *v1.ScheduleInfo) (engine.ScheduleInfo, error) {
	s := engine.ScheduleInfo{Queue: pb.GetQueue(), Name: pb.GetName(), Spec: pb.GetSpec(), Kind: pb.GetKind(), Worker: pb.GetWorker(),
		LastTask: pb.GetLastTask(), Outcome: pb.GetOutcome(), Paused: pb.GetPaused(), RunRequested: pb.GetRunRequested(),
		Updated: timeOf(pb.GetUpdated()), Expires: timeOf(pb.GetExpires())}
	var err error
	if s.Next, err = Time("schedule next", pb.GetNext()); err != nil {
		return s, err
	}
	s.Last, err = Time("schedule last", pb.GetLast())
	return s, err
}
