package main

import (
	"context"
	"strings"

	"github.com/docketdb/docket/ui"
)

// clusterView is a node's view of its cluster for the dashboard's cluster
// page (ui.ClusterInfo): the node's own raft figures, and, while it leads,
// what the lag poller last heard from each follower: its commit and
// applied indexes as it reported them, and its lag behind the leader's log
// (a follower's page shows the members without their figures: only a
// leader polls them).
type clusterView struct{ r *replica }

var _ ui.ClusterInfo = clusterView{}

func (v clusterView) ClusterStatus(ctx context.Context) (ui.ClusterStatus, error) {
	st, err := v.r.Status(ctx)
	if err != nil {
		return ui.ClusterStatus{}, err
	}
	out := ui.ClusterStatus{Self: st.ID, Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex}
	lags := v.r.lag.snapshot()
	for _, m := range st.Members {
		mem := ui.Member{ID: m.ID, Address: m.URL, Voter: m.Voter, State: "follower"}
		if mem.Address == "" {
			mem.Address = m.RaftAddr
		}
		switch {
		case m.Leader:
			mem.State = "leader"
		case m.ID != st.ID && st.LeaderID == st.ID:
			if l, ok := lags[m.ID]; ok && l.up {
				mem.CommitIndex, mem.AppliedIndex, mem.LastContact = l.commitIndex, l.appliedIndex, l.lastContact
				if st.LastIndex > l.lastIndex {
					mem.Lag = st.LastIndex - l.lastIndex
				}
			} else if ok {
				mem.State = "unreachable"
			}
		}
		if m.ID == st.ID {
			mem.CommitIndex, mem.AppliedIndex = st.CommitIndex, st.AppliedIndex
			if m.Leader {
				mem.State = "leader"
			} else if st.State != "" {
				mem.State = strings.ToLower(st.State)
			}
		}
		out.Members = append(out.Members, mem)
	}
	return out, nil
}
