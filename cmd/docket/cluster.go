package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/server"
)

// clusterFlags are the flags of serve that make it a node of a cluster.
type clusterFlags struct {
	raft, advertise, id, join, joinToken, url *string
	bootstrap                                 *bool
	peers                                     map[string]string
}

func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	cf := &clusterFlags{peers: map[string]string{}}
	cf.raft = fs.String("raft", "", "serve as a node of a replicated cluster: the address raft listens on for its peers, HOST:PORT (without it, serve is standalone)")
	cf.advertise = fs.String("raft-advertise", "", "with -raft: the address peers reach -raft at, when it is not -raft itself")
	cf.id = fs.String("id", "", "with -raft: this node's id, for its whole life (default: the id the directory recorded at its first start, or else the raft address)")
	cf.bootstrap = fs.Bool("bootstrap", false, "with -raft: found a new cluster of one on an empty directory (the other nodes -join it); ignored once the directory has state")
	cf.join = fs.String("join", "", "with -raft: URL of a node of the cluster to join (several: comma separated); the join goes to the leader")
	cf.joinToken = fs.String("join-token", "", "with -raft: bearer token this node presents to its peers' API to join and to read their replication figures; needs admin on */* (default $DOCKET_TOKEN)")
	cf.url = fs.String("advertise-url", "", "with -raft: the URL clients reach this node's API at, which a follower names when it sends a client to the leader (default: http(s)://the -listen address)")
	fs.Func("raft-peer", "with -raft: ID=HOST:PORT, dial peer ID at this address instead of the one in the cluster's configuration (a tunnel, a NAT, a fault proxy); repeatable, and then give every peer", func(v string) error {
		id, addr, ok := strings.Cut(v, "=")
		if !ok || id == "" || addr == "" {
			return errors.New("want ID=HOST:PORT")
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("address %q: %v", addr, err)
		}
		cf.peers[id] = addr
		return nil
	})
	return cf
}

// check refuses cluster flags that do not fit together; set holds the
// flags given on the command line.
func (cf *clusterFlags) check(set map[string]bool) error {
	if *cf.raft == "" {
		for _, name := range []string{"raft-advertise", "id", "bootstrap", "join", "join-token", "advertise-url", "raft-peer"} {
			if set[name] {
				return usageError{fmt.Sprintf("serve: -%s needs -raft (a node of a cluster)", name)}
			}
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(*cf.raft); err != nil {
		return usageError{fmt.Sprintf("serve: -raft %q: want HOST:PORT", *cf.raft)}
	}
	if *cf.bootstrap && *cf.join != "" {
		return usageError{"serve: -bootstrap founds a new cluster and -join joins one: give one of them"}
	}
	if set["durability"] || set["sync-every"] {
		return usageError{"serve: with -raft every entry is fsynced on a majority before it is acknowledged; -durability and -sync-every are for a standalone server"}
	}
	if *cf.url != "" {
		if err := checkURL(*cf.url); err != nil {
			return usageError{"serve: -advertise-url: " + err.Error()}
		}
	}
	return nil
}

func (cf *clusterFlags) enabled() bool { return cf != nil && *cf.raft != "" }

// checkURL accepts the http:// or https:// URL of a node's API.
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%w: URL %q: %v", engine.ErrInvalid, s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: URL %q must start with http:// or https://", engine.ErrInvalid, s)
	case u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "":
		return fmt.Errorf("%w: URL %q: want scheme://host:port and nothing after", engine.ErrInvalid, s)
	}
	return nil
}

// Where a cluster keeps the API URL of each member: in the system area of
// a namespace of its own, so that it is replicated, snapshotted and
// restored with the rest of the state (a follower has to name the
// leader's URL, and raft knows only raft addresses). A KV listing never
// shows the system area.
var (
	clusterNS = engine.NS("docket", "cluster")
	// clusterCaller is the identity the node writes its directory as. A
	// tokens file cannot name it (caller ids there hold no space).
	clusterCaller = engine.Caller{ID: "docket cluster"}
)

const memberPrefix = engine.ReservedPrefix + "cluster/member/"

// memberEntry is the value of a member's directory entry.
type memberEntry struct {
	URL string `json:"url"`
}

// clusterAuthorizer lets the node keep its directory whatever the tokens
// say, and asks the tokens about everything else.
type clusterAuthorizer struct{ inner engine.Authorizer }

func (a clusterAuthorizer) Allowed(c engine.Caller, ns engine.Namespace, want engine.Perm) engine.Perm {
	if c == clusterCaller {
		if ns == clusterNS {
			return want & (engine.PermSystem | engine.PermKVRead | engine.PermKVWrite)
		}
		return 0
	}
	if a.inner == nil {
		return 0
	}
	return a.inner.Allowed(c, ns, want)
}

// replica is a cluster.Node as the server serves it (server.Replica): the
// membership calls, the directory of API URLs, the leader's URL for
// redirects, and the raft figures of /metrics.
type replica struct {
	node   *cluster.Node
	url    string // this node's API URL
	dir    engine.KV
	log    *slog.Logger
	token  string // presented to peers
	client client.Options

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on a leadership change

	leaderChanges atomic.Uint64
	lag           *lagPoller

	obs      chan raft.Observation
	observer *raft.Observer
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   sync.Once
	closeErr error
}

var _ server.Replica = (*replica)(nil)

// nodeIDFile records the node's id in its directory at the first start.
const nodeIDFile = "NODE_ID"

// nodeID settles the node's id: the flag, else the one the directory
// recorded, else the raft address; and records it at the first start. A
// flag that contradicts the record is refused: a node keeps its id.
func nodeID(dir, flagID, raftAddr string) (string, error) {
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		rec := strings.TrimSpace(string(b))
		if flagID != "" && flagID != rec {
			return "", fmt.Errorf("%w: -id %q, but %s is the directory of node %q (a node keeps its id; remove it from the cluster and start afresh on a new directory)",
				engine.ErrInvalid, flagID, dir, rec)
		}
		return rec, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	id := flagID
	if id == "" {
		if _, port, _ := net.SplitHostPort(raftAddr); port == "0" {
			return "", fmt.Errorf("%w: serve: -raft %s picks a port at each start: give the node an -id", engine.ErrInvalid, raftAddr)
		}
		id = raftAddr
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := fsync.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	return id, nil
}

// apiURL is the URL clients reach the node at: -advertise-url, or the
// listen address with the scheme the server speaks.
func apiURL(advertise string, listen net.Addr, tls bool) (string, error) {
	if advertise != "" {
		return strings.TrimRight(advertise, "/"), nil
	}
	a, ok := listen.(*net.TCPAddr)
	if !ok || a.IP == nil || a.IP.IsUnspecified() {
		return "", fmt.Errorf("%w: serve: -listen %s is not an address clients can be sent to; give -advertise-url", engine.ErrInvalid, listen)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + a.String(), nil
}

// raftLogger is raft's logger: the serve log's level and format, where
// the serve log goes.
func raftLogger(w io.Writer, level slog.Level, json bool) hclog.Logger {
	l := hclog.Warn
	switch {
	case level <= slog.LevelDebug:
		l = hclog.Debug
	case level <= slog.LevelInfo:
		l = hclog.Info
	case level > slog.LevelWarn:
		l = hclog.Error
	}
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: l, Output: w, JSONFormat: json})
}

// peerAddrs is the ServerAddressProvider of -raft-peer: where to dial the
// peers listed, and this node's own address for what raft tells its peers.
type peerAddrs struct {
	self     raft.ServerID
	selfAddr raft.ServerAddress
	peers    map[raft.ServerID]raft.ServerAddress
}

func (p peerAddrs) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := p.peers[id]; ok {
		return a, nil
	}
	if id == p.self {
		return p.selfAddr, nil
	}
	return "", fmt.Errorf("no -raft-peer for %s", id)
}

// openReplica returns serve's server.Config.OpenReplica: it starts the
// node on the serve flags, joins the cluster if asked, and keeps the
// node's URL in the directory whenever it leads.
func (sc *serveConfig) openReplica() func(ctx context.Context, opts engine.Options, listen net.Addr) (server.Replica, error) {
	cf := sc.cluster
	return func(ctx context.Context, opts engine.Options, listen net.Addr) (server.Replica, error) {
		myURL, err := apiURL(*cf.url, listen, sc.TLSCert != "")
		if err != nil {
			return nil, err
		}
		adv := *cf.advertise
		if adv == "" {
			adv = *cf.raft
		}
		id, err := nodeID(sc.Dir, *cf.id, adv)
		if err != nil {
			return nil, err
		}
		token := *cf.joinToken
		if token == "" {
			token = os.Getenv("DOCKET_TOKEN")
		}
		opts.Authorizer = clusterAuthorizer{inner: opts.Authorizer}
		logger := raftLogger(sc.logw, sc.level, sc.jsonLog)
		ncfg := cluster.Config{ID: id, Dir: sc.Dir, Bind: *cf.raft, Advertise: *cf.advertise,
			Bootstrap: *cf.bootstrap, Engine: opts, Logger: logger}
		if len(cf.peers) > 0 {
			if ncfg.Transport, err = peerTransport(*cf.raft, adv, id, cf.peers, logger); err != nil {
				return nil, err
			}
		}
		node, err := cluster.Start(ncfg)
		if err != nil {
			return nil, err
		}
		r := newReplica(node, myURL, token, sc.log)
		sc.log.Info("docket: raft node started", "id", id, "raft", node.Addr(), "url", myURL, "bootstrap", *cf.bootstrap)
		if *cf.join != "" {
			members, _ := node.Members()
			if len(members) == 0 {
				// A new node is no member until the leader adds it: wait.
				if err := r.join(ctx, *cf.join); err != nil {
					r.Close()
					return nil, err
				}
			} else {
				// A member coming back refreshes its addresses without
				// waiting: the cluster may need this very node to elect a
				// leader.
				r.wg.Add(1)
				go func() {
					defer r.wg.Done()
					if err := r.join(r.stopCtx(ctx), *cf.join); err != nil && ctx.Err() == nil {
						sc.log.Warn("docket: could not refresh this node's addresses at the leader", "err", err)
					}
				}()
			}
		}
		return r, nil
	}
}

// peerTransport is raft's TCP transport that dials the peers of -raft-peer
// at the addresses given.
func peerTransport(bind, advertise, id string, peers map[string]string, logger hclog.Logger) (raft.Transport, error) {
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("%w: serve: -raft-advertise %q: %v", engine.ErrInvalid, advertise, err)
	}
	p := peerAddrs{self: raft.ServerID(id), selfAddr: raft.ServerAddress(advertise), peers: map[raft.ServerID]raft.ServerAddress{}}
	for pid, a := range peers {
		p.peers[raft.ServerID(pid)] = raft.ServerAddress(a)
	}
	t, err := raft.NewTCPTransportWithConfig(bind, adv, &raft.NetworkTransportConfig{
		ServerAddressProvider: p, MaxPool: 3, Timeout: 10 * time.Second, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport on %s: %w", bind, err)
	}
	return t, nil
}

func newReplica(node *cluster.Node, myURL, token string, log *slog.Logger) *replica {
	r := &replica{node: node, url: myURL, dir: node.DB().As(clusterCaller).SystemKV(clusterNS), log: log, token: token,
		changed: make(chan struct{}), stop: make(chan struct{}), obs: make(chan raft.Observation, 16)}
	r.client = client.Options{Token: token, MaxRetries: 2, CallTimeout: 2 * time.Second}
	r.lag = newLagPoller(r)
	r.observer = raft.NewObserver(r.obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	node.Raft().RegisterObserver(r.observer)
	r.wg.Add(1)
	go r.watch()
	return r
}

// stopCtx is a context that ends with ctx or when the replica closes.
func (r *replica) stopCtx(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-r.stop
		cancel()
	}()
	return ctx
}

// watch follows the leadership: it wakes LeaderChanged's waiters, counts
// new leaders, and, while this node leads, keeps its URL in the directory
// and polls its followers' replication figures.
func (r *replica) watch() {
	defer r.wg.Done()
	ctx := r.stopCtx(context.Background())
	leading := r.node.IsLeader()
	var lagStop context.CancelFunc = func() {}
	defer func() { lagStop() }()
	onLead := func() {
		var lctx context.Context
		lctx, lagStop = context.WithCancel(ctx)
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			r.publish(lctx)
		}()
		go func() {
			defer r.wg.Done()
			r.lag.run(lctx)
		}()
	}
	if leading {
		onLead()
	}
	for {
		select {
		case <-r.stop:
			return
		case o := <-r.obs:
			lo := o.Data.(raft.LeaderObservation)
			if lo.LeaderID != "" {
				r.leaderChanges.Add(1)
			}
			r.mu.Lock()
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
			now := r.node.IsLeader()
			if now && !leading {
				onLead()
			} else if !now && leading {
				lagStop()
			}
			leading = now
		}
	}
}

// publish writes this node's URL into the directory if it is not there
// yet; it runs on the leader.
func (r *replica) publish(ctx context.Context) {
	if cur, ok := r.memberURLs(ctx)[r.node.ID()]; ok && cur == r.url {
		return
	}
	if err := r.setURL(ctx, r.node.ID(), r.url); err != nil && ctx.Err() == nil {
		r.log.Warn("docket: could not publish this node's URL", "err", err)
	}
}

func (r *replica) setURL(ctx context.Context, id, u string) error {
	v, err := json.Marshal(memberEntry{URL: u})
	if err != nil {
		return err
	}
	_, err = r.dir.Commit(ctx, engine.Set(memberPrefix+id, v))
	return err
}

// memberURLs reads the directory from this node's own state.
func (r *replica) memberURLs(ctx context.Context) map[string]string {
	out := map[string]string{}
	es, err := r.dir.Scan(engine.WithStaleReads(ctx), engine.ScanOptions{Prefix: memberPrefix})
	if err != nil {
		return out
	}
	for _, e := range es {
		var m memberEntry
		if json.Unmarshal(e.Value, &m) == nil {
			out[strings.TrimPrefix(e.Key, memberPrefix)] = m.URL
		}
	}
	return out
}

// join asks the cluster at urls to add this node, until it is added or
// ctx ends; a refusal that another try cannot change (a bad token, an
// address taken by another member) returns at once.
func (r *replica) join(ctx context.Context, urls string) error {
	for attempt := 0; ; attempt++ {
		err := func() error {
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			c, err := client.Dial(actx, urls, client.Options{Token: r.token})
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Join(actx, r.node.ID(), r.node.Addr(), r.url)
		}()
		if err == nil {
			r.log.Info("docket: joined the cluster", "via", urls, "id", r.node.ID())
			return nil
		}
		if errors.Is(err, engine.ErrInvalid) || errors.Is(err, engine.ErrPermission) || errors.Is(err, client.ErrUnauthenticated) {
			return fmt.Errorf("docket: join %s: %w", urls, err)
		}
		r.log.Info("docket: joining the cluster", "via", urls, "attempt", attempt+1, "err", err)
		wait := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("docket: join %s: %w (last try: %v)", urls, ctx.Err(), err)
		case <-t.C:
		}
	}
}

func (r *replica) DB() *engine.DB { return r.node.DB() }

// Ready reports whether the node can take calls: its DB works and it
// knows a leader (to serve, or to send clients to).
func (r *replica) Ready(context.Context) error {
	if err := r.node.DB().Err(); err != nil {
		return err
	}
	if id, _ := r.node.Leader(); id == "" {
		return errors.New("no leader known: the cluster is electing one, or this node cannot reach a majority")
	}
	return nil
}

// Close stops the node: a leader first hands its leadership over.
func (r *replica) Close() error {
	r.closed.Do(func() {
		close(r.stop)
		r.node.Raft().DeregisterObserver(r.observer)
		r.wg.Wait()
		r.handOver()
		r.closeErr = r.node.Close()
	})
	return r.closeErr
}

// handOver hands a leader's leadership to an up-to-date follower, so that
// writes resume at once rather than after an election timeout. (Node.Close
// would too; here it is logged.)
func (r *replica) handOver() {
	if !r.node.IsLeader() {
		return
	}
	members, err := r.node.Members()
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		}
	}
	if err != nil || voters < 2 {
		return
	}
	start := time.Now()
	if err := r.node.Raft().LeadershipTransfer().Error(); err != nil {
		r.log.Warn("docket: leadership not handed over before stopping; the others elect a leader once their election timeout passes", "err", err)
		return
	}
	id, _ := r.node.Leader()
	r.log.Info("docket: leadership handed over before stopping", "to", id, "took", time.Since(start).Round(time.Millisecond))
}

func (r *replica) LeaderChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *replica) LeaderURL() string {
	id, _ := r.node.Leader()
	if id == "" || id == r.node.ID() {
		return ""
	}
	return r.memberURLs(context.Background())[id]
}

func (r *replica) Status(ctx context.Context) (server.ClusterStatus, error) {
	s := r.node.Stats()
	st := server.ClusterStatus{ID: s.ID, URL: r.url, State: s.State, Term: s.Term,
		LastIndex: s.LastIndex, CommitIndex: s.CommitIndex, AppliedIndex: s.AppliedIndex, LeaderID: s.LeaderID}
	if !s.LastContact.IsZero() {
		st.LastContact = time.Since(s.LastContact)
	}
	urls := r.memberURLs(ctx)
	st.LeaderURL = urls[s.LeaderID]
	if s.LeaderID == s.ID {
		st.LeaderURL = r.url
	}
	for _, m := range s.Members {
		st.Members = append(st.Members, server.ClusterMember{ID: m.ID, RaftAddr: m.Addr, URL: urls[m.ID], Voter: m.Voter, Leader: m.Leader})
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st, nil
}

func (r *replica) Join(ctx context.Context, id, raftAddr, u string) error {
	if err := checkURL(u); err != nil {
		return err
	}
	if err := r.node.Join(ctx, id, raftAddr); err != nil {
		return err
	}
	if cur, ok := r.memberURLs(ctx)[id]; ok && cur == u {
		return nil
	}
	return r.setURL(ctx, id, u)
}

func (r *replica) Remove(ctx context.Context, id string) error {
	if err := r.node.Remove(ctx, id); err != nil {
		return err
	}
	// A leader that removed itself is no longer one: its entry stays, for
	// a member that is gone, and does no harm.
	if _, err := r.dir.Commit(ctx, engine.Delete(memberPrefix+id)); err != nil && !errors.Is(err, engine.ErrNotLeader) {
		return err
	}
	return nil
}

func (r *replica) TransferLeadership(ctx context.Context, id string) (string, error) {
	if !r.node.IsLeader() {
		lid, laddr := r.node.Leader()
		return "", &cluster.NotLeaderError{LeaderID: lid, LeaderAddr: laddr}
	}
	changed := r.LeaderChanged()
	var f raft.Future
	if id == "" {
		f = r.node.Raft().LeadershipTransfer()
	} else {
		members, err := r.node.Members()
		if err != nil {
			return "", err
		}
		var addr string
		for _, m := range members {
			if m.ID == id && m.Voter {
				addr = m.Addr
			}
		}
		switch {
		case addr == "":
			return "", fmt.Errorf("%w: %q is not a voter of the cluster", engine.ErrInvalid, id)
		case id == r.node.ID():
			return id, nil // the leader already
		}
		f = r.node.Raft().LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return "", &cluster.NotLeaderError{}
		}
		return "", fmt.Errorf("docket: leadership transfer: %w", err)
	}
	// The new leader is known once this node hears from it.
	for {
		if lid, _ := r.node.Leader(); lid != "" && lid != r.node.ID() {
			return lid, nil
		}
		select {
		case <-changed:
			changed = r.LeaderChanged()
		case <-ctx.Done():
			lid, _ := r.node.Leader()
			return lid, nil
		}
	}
}

// lockedWriter makes one writer of two loggers: a line of one is never
// interleaved with a line of the other.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
