package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// Cluster is what a node of a replicated docket offers its server
// (Options.Cluster): the membership calls of the docket.v1.Cluster service,
// and what the server needs to send a client to the leader. Package
// cluster's Node does the replication; the program that runs it (docket
// serve -raft) implements Cluster over it.
type Cluster interface {
	// Status is this node's own view of the cluster.
	Status(ctx context.Context) (ClusterStatus, error)
	// Join adds the node id, reachable by its peers at raftAddr and by
	// clients at url, as a voter, or updates a member's addresses. Like
	// Remove and TransferLeadership it runs on the leader; elsewhere it
	// returns an error matching engine.ErrNotLeader. A Join that made the
	// node a member but ended before the node caught up returns an error
	// matching engine.ErrNotCaughtUp and its cause.
	Join(ctx context.Context, id, raftAddr, url string) error
	// Remove removes the node id; an id that is not a member is no error.
	Remove(ctx context.Context, id string) error
	// TransferLeadership hands the leadership to the member id, or to the
	// most up-to-date follower when id is "", and returns the new leader's
	// id as far as this node knows it.
	TransferLeadership(ctx context.Context, id string) (string, error)
	// LeaderURL returns the API URL of the leader this node knows of, ""
	// when it knows none or not its URL.
	LeaderURL() string
	// LeaderChanged returns a channel that is closed when this node next
	// sees the leadership change (it wins it, loses it, or learns of
	// another leader).
	LeaderChanged() <-chan struct{}
}

// ClusterStatus is one node's view of its cluster.
type ClusterStatus struct {
	ID    string
	URL   string // the API URL the node published
	State string // Leader, Follower, Candidate, Shutdown
	Term  uint64
	// LastIndex is the last entry in the node's log, CommitIndex the last
	// it knows committed, AppliedIndex the last it applied.
	LastIndex, CommitIndex, AppliedIndex uint64
	LeaderID, LeaderURL                  string // "" when no leader is known
	// LastContact is how long ago a follower last heard from its leader;
	// 0 on the leader.
	LastContact time.Duration
	Members     []ClusterMember
}

// ClusterMember is one server of a cluster's configuration.
type ClusterMember struct {
	ID       string
	RaftAddr string
	URL      string // "" while the member has published none
	Voter    bool
	Leader   bool
}

// clusterInterceptors are the interceptors of a node of a cluster: none
// for a standalone server.
func (s *Server) clusterInterceptors() []connect.Interceptor {
	if s.opts.Cluster == nil {
		return nil
	}
	return []connect.Interceptor{s.clusterCalls()}
}

// clusterCalls adapts calls to a node of a cluster. A request with
// StaleReadsHeader reads with engine.WithStaleReads. A call refused for
// not being the leader answers, when this node knows the leader's URL,
// with it in LeaderHeader, so the client moves there. A ClaimWait parked
// when this node's leadership changes is ended and answered the same way:
// the deposed leader may never see another commit to wake it (it may be
// the minority side of a partition), and the claim has to go to the new
// leader anyway.
func (s *Server) clusterCalls() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if staleReads(req.Header().Get(wire.StaleReadsHeader)) {
				ctx = engine.WithStaleReads(ctx)
			}
			var changed atomic.Bool
			callCtx := ctx
			if req.Spec().Procedure == docketv1connect.QueuesClaimWaitProcedure {
				var cancel context.CancelFunc
				callCtx, cancel = context.WithCancel(ctx)
				defer cancel()
				ch, done := s.opts.Cluster.LeaderChanged(), make(chan struct{})
				defer close(done)
				go func() {
					select {
					case <-ch:
						changed.Store(true)
						cancel()
					case <-done:
					}
				}()
			}
			res, err := next(callCtx, req)
			if err == nil {
				return res, nil
			}
			if changed.Load() && ctx.Err() == nil && connect.CodeOf(err) == connect.CodeCanceled {
				err = wire.ToConnect(fmt.Errorf("%w: the leadership changed while the claim waited", engine.ErrNotLeader))
			}
			return res, s.redirect(err)
		}
	})
}

// staleReads reports whether a StaleReadsHeader value asks for stale reads.
func staleReads(v string) bool {
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// redirect adds the leader's URL to the answer of a call refused with
// engine.ErrNotLeader.
func (s *Server) redirect(err error) error {
	if !errors.Is(err, engine.ErrNotLeader) {
		return err
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = wire.ToConnect(err)
	}
	if url := s.opts.Cluster.LeaderURL(); url != "" {
		ce.Meta().Set(wire.LeaderHeader, url)
	}
	return ce
}

// registerCluster mounts the docket.v1.Cluster service on a node of a
// cluster.
func (s *Server) registerCluster(mux *http.ServeMux, opts connect.HandlerOption) {
	if s.opts.Cluster == nil {
		return
	}
	path, h := docketv1connect.NewClusterHandler(clusterRPC{s}, opts)
	mux.Handle(path, s.authenticate(h))
}

type clusterRPC struct{ s *Server }

var _ docketv1connect.ClusterHandler = clusterRPC{}

// clusterAccess checks that the caller of a Cluster call holds perm on
// every namespace: read for Status (it is what /metrics shows), admin for
// a change of membership or leadership.
func (s *Server) clusterAccess(ctx context.Context, perm engine.Perm, call string) error {
	ci := infoFrom(ctx)
	if ci.caller == nil {
		return nil
	}
	if s.opts.Tokens == nil || s.opts.Tokens.Allowed(*ci.caller, everyNamespace, perm) != perm {
		return fmt.Errorf("%w: caller %q lacks %s on */* (%s concerns the whole cluster)",
			engine.ErrPermission, ci.caller.ID, perm, call)
	}
	return nil
}

func (h clusterRPC) Status(ctx context.Context, _ *connect.Request[v1.ClusterStatusRequest]) (*connect.Response[v1.ClusterStatusResponse], error) {
	if err := h.s.clusterAccess(ctx, engine.PermRead, "Status"); err != nil {
		return nil, fail(err)
	}
	st, err := h.s.opts.Cluster.Status(ctx)
	if err != nil {
		return nil, fail(err)
	}
	res := &v1.ClusterStatusResponse{
		Id: st.ID, Url: st.URL, State: st.State, Term: st.Term,
		LastIndex: st.LastIndex, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		LeaderId: st.LeaderID, LeaderUrl: st.LeaderURL, LastContactMs: st.LastContact.Milliseconds(),
	}
	for _, m := range st.Members {
		res.Members = append(res.Members, &v1.ClusterMember{Id: m.ID, RaftAddress: m.RaftAddr, Url: m.URL, Voter: m.Voter, Leader: m.Leader})
	}
	return reply(res)
}

func (h clusterRPC) Join(ctx context.Context, req *connect.Request[v1.JoinRequest]) (*connect.Response[v1.JoinResponse], error) {
	if err := h.s.clusterAccess(ctx, engine.PermAdmin, "Join"); err != nil {
		return nil, fail(err)
	}
	m := req.Msg
	if err := h.s.opts.Cluster.Join(ctx, m.GetId(), m.GetRaftAddress(), m.GetUrl()); err != nil {
		return nil, fail(err)
	}
	return reply(&v1.JoinResponse{})
}

func (h clusterRPC) Remove(ctx context.Context, req *connect.Request[v1.RemoveRequest]) (*connect.Response[v1.RemoveResponse], error) {
	if err := h.s.clusterAccess(ctx, engine.PermAdmin, "Remove"); err != nil {
		return nil, fail(err)
	}
	if err := h.s.opts.Cluster.Remove(ctx, req.Msg.GetId()); err != nil {
		return nil, fail(err)
	}
	return reply(&v1.RemoveResponse{})
}

func (h clusterRPC) TransferLeadership(ctx context.Context, req *connect.Request[v1.TransferLeadershipRequest]) (*connect.Response[v1.TransferLeadershipResponse], error) {
	if err := h.s.clusterAccess(ctx, engine.PermAdmin, "TransferLeadership"); err != nil {
		return nil, fail(err)
	}
	leader, err := h.s.opts.Cluster.TransferLeadership(ctx, req.Msg.GetId())
	if err != nil {
		return nil, fail(err)
	}
	return reply(&v1.TransferLeadershipResponse{LeaderId: leader})
}
