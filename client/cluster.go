package client

import (
	"context"
	"time"

	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// ClusterStatus is one node's view of its cluster (docket serve -raft).
type ClusterStatus struct {
	ID    string // the node that answered
	URL   string // its API URL, as it published it
	State string // Leader, Follower, Candidate, Shutdown
	Term  uint64
	// LastIndex is the last entry in the node's log, CommitIndex the last
	// it knows committed, AppliedIndex the last it applied.
	LastIndex, CommitIndex, AppliedIndex uint64
	LeaderID, LeaderURL                  string // "" when it knows no leader
	// LastContact is how long ago a follower last heard from its leader;
	// 0 on the leader.
	LastContact time.Duration
	Members     []ClusterMember
}

// ClusterMember is one server of a cluster's configuration.
type ClusterMember struct {
	ID       string
	RaftAddr string // where its peers reach it
	URL      string // its API URL; "" while it has published none
	Voter    bool
	Leader   bool
}

func clusterOf(s *stubs) docketv1connect.ClusterClient { return s.cluster }

// ClusterStatus asks the current server for its view of the cluster. Any
// node answers from its own state; a standalone server answers with
// Unimplemented. With tokens it needs read on every namespace (*/*).
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	res, err := invoke(ctx, c, true, noSession[v1.ClusterStatusRequest, v1.ClusterStatusResponse](), clusterOf, docketv1connect.ClusterClient.Status, &v1.ClusterStatusRequest{})
	if err != nil {
		return ClusterStatus{}, err
	}
	st := ClusterStatus{ID: res.Id, URL: res.Url, State: res.State, Term: res.Term,
		LastIndex: res.LastIndex, CommitIndex: res.CommitIndex, AppliedIndex: res.AppliedIndex,
		LeaderID: res.LeaderId, LeaderURL: res.LeaderUrl, LastContact: time.Duration(res.LastContactMs) * time.Millisecond}
	for _, m := range res.Members {
		st.Members = append(st.Members, ClusterMember{ID: m.Id, RaftAddr: m.RaftAddress, URL: m.Url, Voter: m.Voter, Leader: m.Leader})
	}
	return st, nil
}

// Join adds the node id, reachable by its peers at raftAddr and by clients
// at url, to the cluster as a voter (or updates a member's addresses). The
// call follows the leader and returns once the new configuration is
// committed and the new node has acknowledged it, which needs the node
// running. If it ends before that (its deadline, a leader that stopped),
// the node is a member all the same: the error matches
// engine.ErrNotCaughtUp, and a Join again waits anew. Admin on */*, as
// Stats.
func (c *Client) Join(ctx context.Context, id, raftAddr, url string) error {
	_, err := invoke(ctx, c, true, noSession[v1.JoinRequest, v1.JoinResponse](), clusterOf, docketv1connect.ClusterClient.Join,
		&v1.JoinRequest{Id: id, RaftAddress: raftAddr, Url: url})
	return err
}

// Remove removes the node id from the cluster, on the leader; removing an
// id that is not a member does nothing. Admin on */*.
func (c *Client) Remove(ctx context.Context, id string) error {
	_, err := invoke(ctx, c, true, noSession[v1.RemoveRequest, v1.RemoveResponse](), clusterOf, docketv1connect.ClusterClient.Remove, &v1.RemoveRequest{Id: id})
	return err
}

// TransferLeadership makes the leader hand its leadership to the member id,
// or to the most up-to-date follower when id is "", and returns the new
// leader's id. Admin on */*.
func (c *Client) TransferLeadership(ctx context.Context, id string) (string, error) {
	res, err := invoke(ctx, c, false, noSession[v1.TransferLeadershipRequest, v1.TransferLeadershipResponse](), clusterOf, docketv1connect.ClusterClient.TransferLeadership,
		&v1.TransferLeadershipRequest{Id: id})
	if err != nil {
		return "", err
	}
	return res.LeaderId, nil
}
