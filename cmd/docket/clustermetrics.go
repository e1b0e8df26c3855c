package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/docketdb/docket/client"
)

// lagEvery is how often a leader asks its followers how far they are.
const lagEvery = time.Second

// followerLag is what a leader last learned of one follower.
type followerLag struct {
	up           bool          // it answered the last poll
	lastIndex    uint64        // the last entry in its log
	commitIndex  uint64        // the last entry it knows committed
	appliedIndex uint64        // the last entry it applied
	lastContact  time.Duration // since it last heard from the leader
}

// lagPoller asks, while this node leads, every other member for its
// figures (the Cluster service's Status), for the replication lag of
// /metrics: raft keeps its followers' progress to itself.
type lagPoller struct {
	r       *replica
	mu      sync.Mutex
	lags    map[string]followerLag
	clients map[string]*client.Client
}

func newLagPoller(r *replica) *lagPoller {
	return &lagPoller{r: r, lags: map[string]followerLag{}, clients: map[string]*client.Client{}}
}

// run polls until ctx ends (the node stops leading), then forgets the
// figures: only a leader has them.
func (p *lagPoller) run(ctx context.Context) {
	t := time.NewTicker(lagEvery)
	defer t.Stop()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.lags = map[string]followerLag{}
		for _, c := range p.clients {
			c.Close()
		}
		p.clients = map[string]*client.Client{}
	}()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *lagPoller) poll(ctx context.Context) {
	st, err := p.r.Status(ctx)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	lags := make(map[string]followerLag)
	var mu sync.Mutex
	for _, m := range st.Members {
		if m.ID == st.ID || m.URL == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := followerLag{}
			if c := p.client(ctx, m.URL); c != nil {
				pctx, cancel := context.WithTimeout(ctx, lagEvery)
				fs, err := c.ClusterStatus(pctx)
				cancel()
				if err == nil {
					l = followerLag{up: true, lastIndex: fs.LastIndex, commitIndex: fs.CommitIndex,
						appliedIndex: fs.AppliedIndex, lastContact: fs.LastContact}
				}
			}
			mu.Lock()
			lags[m.ID] = l
			mu.Unlock()
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	p.lags = lags
	p.mu.Unlock()
}

// client returns the client of one follower, dialled on first use.
func (p *lagPoller) client(ctx context.Context, url string) *client.Client {
	p.mu.Lock()
	c := p.clients[url]
	p.mu.Unlock()
	if c != nil {
		return c
	}
	dctx, cancel := context.WithTimeout(ctx, lagEvery)
	defer cancel()
	c, err := client.Dial(dctx, url, p.r.client)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.clients[url]; old != nil {
		c.Close()
		return old
	}
	p.clients[url] = c
	return c
}

func (p *lagPoller) snapshot() map[string]followerLag {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]followerLag, len(p.lags))
	for k, v := range p.lags {
		out[k] = v
	}
	return out
}

// raftCollector exports a node's raft figures to Prometheus.
type raftCollector struct{ r *replica }

var (
	descTerm          = prometheus.NewDesc("docket_raft_term", "The raft term this node is in.", nil, nil)
	descLastIndex     = prometheus.NewDesc("docket_raft_last_index", "The last entry in this node's raft log.", nil, nil)
	descCommitIndex   = prometheus.NewDesc("docket_raft_commit_index", "The last raft entry this node knows committed on a majority.", nil, nil)
	descAppliedIndex  = prometheus.NewDesc("docket_raft_applied_index", "The last raft entry this node applied to its state.", nil, nil)
	descLeader        = prometheus.NewDesc("docket_raft_leader", "1 if this node is the leader.", nil, nil)
	descHasLeader     = prometheus.NewDesc("docket_raft_has_leader", "1 if this node knows a leader (/readyz is false otherwise).", nil, nil)
	descLeaderChanges = prometheus.NewDesc("docket_raft_leader_changes_total", "Leaders this node has seen elected since it started.", nil, nil)
	descLastContact   = prometheus.NewDesc("docket_raft_last_contact_seconds", "On a follower, how long ago it last heard from the leader.", nil, nil)
	descVoters        = prometheus.NewDesc("docket_raft_voters", "Voters in the cluster's configuration as this node has it.", nil, nil)
	descFollowerUp    = prometheus.NewDesc("docket_raft_follower_up", "On the leader, 1 if the follower answered the last poll of its figures (every second).", []string{"member"}, nil)
	descFollowerLag   = prometheus.NewDesc("docket_raft_follower_lag_entries", "On the leader, raft entries its log holds that the follower's did not at the last poll.", []string{"member"}, nil)
	descFollowerSeen  = prometheus.NewDesc("docket_raft_follower_last_contact_seconds", "On the leader, how long before the last poll the follower had last heard from it.", []string{"member"}, nil)
)

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTerm, descLastIndex, descCommitIndex, descAppliedIndex, descLeader, descHasLeader,
		descLeaderChanges, descLastContact, descVoters, descFollowerUp, descFollowerLag, descFollowerSeen} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.node.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge(descTerm, float64(s.Term))
	gauge(descLastIndex, float64(s.LastIndex))
	gauge(descCommitIndex, float64(s.CommitIndex))
	gauge(descAppliedIndex, float64(s.AppliedIndex))
	leader := s.LeaderID != "" && s.LeaderID == s.ID
	gauge(descLeader, b(leader))
	gauge(descHasLeader, b(s.LeaderID != ""))
	ch <- prometheus.MustNewConstMetric(descLeaderChanges, prometheus.CounterValue, float64(c.r.leaderChanges.Load()))
	if !leader && !s.LastContact.IsZero() {
		gauge(descLastContact, time.Since(s.LastContact).Seconds())
	}
	voters := 0
	for _, m := range s.Members {
		if m.Voter {
			voters++
		}
	}
	gauge(descVoters, float64(voters))
	if !leader {
		return
	}
	for id, l := range c.r.lag.snapshot() {
		gauge(descFollowerUp, b(l.up), id)
		if !l.up {
			continue
		}
		lag := float64(0)
		if s.LastIndex > l.lastIndex {
			lag = float64(s.LastIndex - l.lastIndex)
		}
		gauge(descFollowerLag, lag, id)
		gauge(descFollowerSeen, l.lastContact.Seconds(), id)
	}
}
