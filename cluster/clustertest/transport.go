// Package clustertest runs real hashicorp/raft clusters on docket's storage
// in tests: a transport that injects network faults on command, and a Mesh
// of nodes in temporary directories that can be killed, restarted and
// checked for convergence. Nothing here sleeps to synchronise: waits are on
// raft's observations, futures and the FSM's own signals, with deadlines.
package clustertest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ErrUnreachable is what an RPC over a cut or dropping link returns.
var ErrUnreachable = errors.New("clustertest: unreachable")

type link struct{ from, to raft.ServerAddress }

// Network decides the fate of every RPC sent through the Transports it wraps.
// Faults stay until changed by an explicit call; Heal removes them all. A
// fault applies to the sender's side, so a cut link fails the RPC and its
// response together.
type Network struct {
	mu       sync.Mutex
	cut      map[link]bool
	isolated map[raft.ServerAddress]bool
	drop     float64
	delay    time.Duration
	rng      *rand.Rand
	dropped  uint64
}

// NewNetwork returns a healthy network whose random drops follow seed.
func NewNetwork(seed uint64) *Network {
	return &Network{
		cut:      map[link]bool{},
		isolated: map[raft.ServerAddress]bool{},
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Wrap returns t with this network's faults applied to what it sends.
func (n *Network) Wrap(t raft.Transport) *Transport { return &Transport{inner: t, net: n} }

// Cut stops RPCs from one address to another (one direction).
func (n *Network) Cut(from, to raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link{from, to}] = true
}

// Partition cuts, both ways, every link between addresses in different
// groups. Addresses in no group keep their links.
func (n *Network) Partition(groups ...[]raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.cut[link{a, b}] = true
				}
			}
		}
	}
}

// Isolate cuts every link to and from addr.
func (n *Network) Isolate(addr raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[addr] = true
}

// SetDrop makes each RPC fail with probability p, in [0, 1].
func (n *Network) SetDrop(p float64) {
	if p < 0 || p > 1 {
		panic(fmt.Sprintf("clustertest: drop probability %v outside [0, 1]", p))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop = p
}

// SetDelay holds each RPC for d before sending it.
func (n *Network) SetDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = d
}

// Heal removes every fault.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.isolated)
	n.drop, n.delay = 0, 0
}

// Dropped returns how many RPCs faults have failed so far.
func (n *Network) Dropped() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}

// fault applies the network's state to an RPC from one address to another:
// it waits out a delay, then returns ErrUnreachable if the RPC is lost.
func (n *Network) fault(from, to raft.ServerAddress) error {
	n.mu.Lock()
	delay := n.delay
	n.mu.Unlock()
	if delay > 0 {
		// A fault, not synchronisation: the RPC is late.
		t := time.NewTimer(delay)
		<-t.C
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	lost := n.cut[link{from, to}] || n.isolated[from] || n.isolated[to] ||
		(n.drop > 0 && n.rng.Float64() < n.drop)
	if lost {
		n.dropped++
		return fmt.Errorf("%w: %s -> %s", ErrUnreachable, from, to)
	}
	return nil
}

// Transport is a raft.Transport whose outgoing RPCs pass through a Network.
// It does not pipeline AppendEntries, so every replication RPC meets the
// network's faults one by one.
type Transport struct {
	inner raft.Transport
	net   *Network
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
)

// Inner returns the wrapped transport.
func (t *Transport) Inner() raft.Transport { return t.inner }

func (t *Transport) Consumer() <-chan raft.RPC            { return t.inner.Consumer() }
func (t *Transport) LocalAddr() raft.ServerAddress        { return t.inner.LocalAddr() }
func (t *Transport) SetHeartbeatHandler(h func(raft.RPC)) { t.inner.SetHeartbeatHandler(h) }

func (t *Transport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return t.inner.EncodePeer(id, addr)
}

func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return t.inner.DecodePeer(b) }

func (t *Transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.net.fault(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.AppendEntries(id, target, args, resp)
}

func (t *Transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.net.fault(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.RequestVote(id, target, args, resp)
}

// RequestPreVote forwards to the wrapped transport, which must support pre-vote
// (raft's in-memory and TCP transports do).
func (t *Transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := t.inner.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("clustertest: %T does not support pre-vote", t.inner)
	}
	if err := t.net.fault(t.LocalAddr(), target); err != nil {
		return err
	}
	return pv.RequestPreVote(id, target, args, resp)
}

func (t *Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.net.fault(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.InstallSnapshot(id, target, args, resp, data)
}

func (t *Transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.net.fault(t.LocalAddr(), target); err != nil {
		return err
	}
	return t.inner.TimeoutNow(id, target, args, resp)
}

// Close closes the wrapped transport if it can be closed.
func (t *Transport) Close() error {
	if c, ok := t.inner.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
