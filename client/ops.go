package client

import (
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// The session form of each call of engine.API: its Call and the answer
// in its Reply.

func sop[Req, Res any](wrap func(*Req) *v1.Call, unwrap func(*v1.Reply) *Res) *sessionOp[Req, Res] {
	return &sessionOp[Req, Res]{wrap: wrap, unwrap: unwrap}
}

// noSession is the op of a call that has no session form: it always goes
// as a unary RPC.
func noSession[Req, Res any]() *sessionOp[Req, Res] { return nil }

// leaseList reads a claim's answer into engine leases, as the unary path's
// wire.LeaseCodec does.
func leaseList(pb []*v1.Lease) *wire.LeaseList { return &wire.LeaseList{Leases: wire.Leases(pb)} }

var (
	opEnqueue = sop(func(m *v1.EnqueueRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Enqueue{Enqueue: m}} },
		(*v1.Reply).GetEnqueue)
	opEnqueueBatch = sop(func(m *v1.EnqueueBatchRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_EnqueueBatch{EnqueueBatch: m}}
	}, (*v1.Reply).GetEnqueueBatch)
	opClaim = sop(func(m *v1.ClaimRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Claim{Claim: m}} },
		func(r *v1.Reply) *wire.LeaseList {
			if res := r.GetClaim(); res != nil {
				return leaseList(res.Leases)
			}
			return nil
		})
	opClaimWait = &sessionOp[v1.ClaimWaitRequest, wire.LeaseList]{
		wrap: func(m *v1.ClaimWaitRequest) *v1.Call { return &v1.Call{Call: &v1.Call_ClaimWait{ClaimWait: m}} },
		unwrap: func(r *v1.Reply) *wire.LeaseList {
			if res := r.GetClaimWait(); res != nil {
				return leaseList(res.Leases)
			}
			return nil
		},
		parked: true,
	}
	opComplete = sop(func(m *v1.CompleteRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Complete{Complete: m}} },
		(*v1.Reply).GetComplete)
	opCompleteBatch = sop(func(m *v1.CompleteBatchRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_CompleteBatch{CompleteBatch: m}}
	}, (*v1.Reply).GetCompleteBatch)
	opFail      = sop(func(m *v1.FailRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Fail{Fail: m}} }, (*v1.Reply).GetFail)
	opHeartbeat = sop(func(m *v1.HeartbeatRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Heartbeat{Heartbeat: m}} },
		(*v1.Reply).GetHeartbeat)
	opSnooze = sop(func(m *v1.SnoozeRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Snooze{Snooze: m}} }, (*v1.Reply).GetSnooze)
	opList   = sop(func(m *v1.ListRequest) *v1.Call { return &v1.Call{Call: &v1.Call_List{List: m}} }, (*v1.Reply).GetList)
	opCounts = sop(func(m *v1.CountsRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Counts{Counts: m}} }, (*v1.Reply).GetCounts)
	opSearch = sop(func(m *v1.SearchRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Search{Search: m}} }, (*v1.Reply).GetSearch)
	opBulk   = sop(func(m *v1.BulkRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Bulk{Bulk: m}} }, (*v1.Reply).GetBulk)

	opCompleteAndClaim = sop(func(m *v1.CompleteAndClaimRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_CompleteAndClaim{CompleteAndClaim: m}}
	}, (*v1.Reply).GetCompleteAndClaim)
	opHeartbeatBatch = sop(func(m *v1.HeartbeatBatchRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_HeartbeatBatch{HeartbeatBatch: m}}
	}, (*v1.Reply).GetHeartbeatBatch)

	opKVGet    = sop(func(m *v1.KVGetRequest) *v1.Call { return &v1.Call{Call: &v1.Call_KvGet{KvGet: m}} }, (*v1.Reply).GetKvGet)
	opKVScan   = sop(func(m *v1.KVScanRequest) *v1.Call { return &v1.Call{Call: &v1.Call_KvScan{KvScan: m}} }, (*v1.Reply).GetKvScan)
	opKVCommit = sop(func(m *v1.KVCommitRequest) *v1.Call { return &v1.Call{Call: &v1.Call_KvCommit{KvCommit: m}} },
		(*v1.Reply).GetKvCommit)

	opPause     = sop(func(m *v1.PauseRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Pause{Pause: m}} }, (*v1.Reply).GetPause)
	opResume    = sop(func(m *v1.ResumeRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Resume{Resume: m}} }, (*v1.Reply).GetResume)
	opSetLimits = sop(func(m *v1.SetLimitsRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_SetLimits{SetLimits: m}}
	}, (*v1.Reply).GetSetLimits)
	opSettings = sop(func(m *v1.SettingsRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_Settings{Settings: m}}
	}, (*v1.Reply).GetSettings)
	opPartitions = sop(func(m *v1.PartitionsRequest) *v1.Call {
		return &v1.Call{Call: &v1.Call_Partitions{Partitions: m}}
	}, (*v1.Reply).GetPartitions)

	opQueues = sop(func(m *v1.QueuesRequest) *v1.Call { return &v1.Call{Call: &v1.Call_Queues{Queues: m}} }, (*v1.Reply).GetQueues)
)
