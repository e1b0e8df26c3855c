package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// ErrUnavailable is returned when no server took a call: none could be
// reached, or those reached were draining or closing, for every try the
// client made. Nothing was done; the call may be made again later.
var ErrUnavailable = errors.New("docket: no server available")

// ErrUnauthenticated is returned when the server refused the token.
var ErrUnauthenticated = errors.New("docket: unauthenticated")

// Defaults of Options.
const (
	DefaultMaxRetries  = 8
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
	DefaultCallTimeout = 30 * time.Second
	DefaultPollWait    = 30 * time.Second
	// DefaultMaxConns is the server's default bound on the calls one
	// caller has in progress (server.DefaultMaxCalls).
	DefaultMaxConns = 256
	// DefaultBusyPoll is how long a lone call asks for its answer in a
	// loop before it waits (Options.BusyPoll).
	DefaultBusyPoll = session.DefaultBusyPoll
)

// Options configure a Client. The zero value talks to a server without
// tokens over plain HTTP or TLS with the system's roots.
type Options struct {
	// Token is the bearer token sent with every call ("" sends none).
	Token string
	// TLS configures https:// addresses: roots, a client certificate for
	// mutual TLS. Nil uses the system's roots. The client uses a copy: the
	// caller's config is not changed.
	TLS *tls.Config
	// HTTPClient, if set, carries every call instead of the client's own
	// (TLS is then the caller's transport's business).
	HTTPClient *http.Client
	// JSON sends and reads JSON instead of protobuf: slower, readable on
	// the wire.
	JSON bool
	// MaxRetries bounds how often one call is repeated after a failure
	// that allows it (DefaultMaxRetries); BackoffBase and BackoffMax shape
	// the jittered, doubling waits between tries (DefaultBackoffBase,
	// DefaultBackoffMax). A call's context ends its tries and its waits.
	MaxRetries              int
	BackoffBase, BackoffMax time.Duration
	// CallTimeout bounds one try of a call (DefaultCallTimeout), so that a
	// server that stopped answering is noticed: a try gets the smaller of
	// CallTimeout and what is left of its context's deadline. A try cut by
	// it counts as sent without an answer, and the call moves on to the
	// next server (as does a try cut by the context's deadline), so that
	// a paused server costs a call one try. It does not apply to
	// ClaimWait, which PollWait bounds.
	CallTimeout time.Duration
	// PollWait bounds one long poll of ClaimWait (DefaultPollWait): when
	// it passes with nothing to claim, the client asks again, until the
	// call's context ends.
	PollWait time.Duration
	// StaleReads asks a node of a cluster to serve every read from its own
	// state at once, as engine.WithStaleReads does for one call: any node
	// answers, a follower possibly behind the leader, and the leader
	// without confirming with a quorum that it still leads. By default a
	// read is linearizable: the leader serves it once a quorum confirmed
	// its leadership. Writes always go to the leader.
	StaleReads bool
	// MaxConns bounds the connections the client keeps to one server for
	// its unary calls (DefaultMaxConns; a session is one connection); a call beyond them waits for one to be
	// free, where more at once would only be refused by the server's own
	// bound on a caller's calls. Besides, the client bounds the calls it
	// has in progress to a server by the limits the server announces in
	// every answer (docket serve -max-calls, -max-parked): a call beyond
	// them waits for a slot, and waiting claims (ClaimWait) are bounded
	// by the parked limit, apart from the other calls. Until a server has
	// announced them (one of an older build never does), the bound on
	// calls is MaxConns, and at most half of them are waiting claims. Unbounded, a burst of thousands of calls
	// opened a connection each (each with its goroutines and buffers on
	// both sides), and on loopback the client and server then spent their
	// CPU on connections rather than calls. ClaimWait's long
	// polls have connections of their own, so that parked claims never
	// hold up other calls. Not used with HTTPClient.
	MaxConns int
	// Transport chooses how the calls of engine.API travel (see the
	// package documentation): TransportSession, the default, carries them
	// on one connection to each server, many in flight; TransportUnary
	// makes each an RPC of its own. The calls go as RPCs whatever this
	// says with HTTPClient or JSON set, and the operator's calls (Stats,
	// Health, the cluster's) always do.
	Transport Transport
	// BusyPoll is how long a call alone on its session, its request
	// written, asks the connection in a loop for the answer before it
	// waits (DefaultBusyPoll when zero; negative: never): on a
	// virtual machine, an answer that has to wake a halted processor
	// costs tens of microseconds more. It spends a processor while it
	// asks; a call asks only once the session's calls have come one at a
	// time (eight in a row, none sent with another in flight), only while
	// the server's answers come at once (not while each waits for a
	// disk's sync), and at most GOMAXPROCS-1 of the client's connections
	// ask at a time.
	BusyPoll time.Duration
}

// Client is docket's API over the network: engine.API (queues, KV, the
// list of queues) plus the admin calls. It is safe for concurrent use.
type Client struct {
	opts    Options
	hc      *http.Client
	pollHC  *http.Client // for ClaimWait's long polls
	ownHC   bool
	r       *retrier
	copts   []connect.ClientOption
	codec   connect.Codec // what copts encode with
	mu      sync.Mutex
	stubs   map[string]*stubs
	closed  atomic.Bool
	closing context.Context // done when Close is called
	close   context.CancelFunc
	now     func() time.Time // time.Now; tests move it

	// sessions are the session state of each server (session.go), by
	// base URL, under mu; async bounds the asynchronous enqueues in
	// flight (EnqueueAsync).
	sessions map[string]*sessionHost
	async    chan struct{}
	pollGate *session.Gate // bounds the connections that poll at once (Options.BusyPoll)
}

var _ engine.API = (*Client)(nil)

// stubs are the connect clients of one server.
type stubs struct {
	q        docketv1connect.QueuesClient
	kv       docketv1connect.KVClient
	admin    docketv1connect.AdminClient
	cluster  docketv1connect.ClusterClient
	controls docketv1connect.ControlsClient
	pipe     docketv1connect.PipelineClient
	presence docketv1connect.PresenceClient
	search   docketv1connect.SearchClient
	quotas   docketv1connect.QuotasClient
	// claim and claimWait read their replies straight into engine leases
	// (wire.LeaseCodec).
	claim     *connect.Client[v1.ClaimRequest, wire.LeaseList]
	claimWait *connect.Client[v1.ClaimWaitRequest, wire.LeaseList]
}

// Dial returns a client of the servers at addrs, a comma-separated list of
// http:// or https:// URLs (the nodes of a cluster, or one server), and
// checks that one of them answers and takes the token. It tries, with
// backoff, until ctx ends or the retries run out; a refused token returns
// ErrUnauthenticated at once.
func Dial(ctx context.Context, addrs string, opts Options) (*Client, error) {
	eps, err := newEndpoints(addrs)
	if err != nil {
		return nil, err
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = DefaultBackoffBase
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = DefaultBackoffMax
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.PollWait <= 0 {
		opts.PollWait = DefaultPollWait
	}
	if opts.BusyPoll == 0 {
		opts.BusyPoll = DefaultBusyPoll
	}
	c := &Client{
		opts:     opts,
		hc:       opts.HTTPClient,
		pollHC:   opts.HTTPClient,
		r:        &retrier{eps: eps, maxRetries: opts.MaxRetries, base: opts.BackoffBase, max: opts.BackoffMax, sleep: sleepCtx},
		stubs:    map[string]*stubs{},
		sessions: map[string]*sessionHost{},
		async:    make(chan struct{}, engine.DefaultMaxInFlight),
		pollGate: session.NewGate(0),
		now:      time.Now,
		copts: []connect.ClientOption{
			connect.WithReadMaxBytes(4 * engine.MaxCommitBytes),
			connect.WithSendMaxBytes(engine.MaxCommitBytes + 8<<20),
			// The client asks for no compression: on the networks a
			// queue's workers run on, gzip costs more than it saves.
			connect.WithAcceptCompression("gzip", nil, nil),
		},
	}
	c.codec = wire.ClientProto{}
	if opts.JSON {
		c.codec = wire.NewJSONCodec(wire.JSONName, false)
	}
	c.copts = append(c.copts, connect.WithCodec(c.codec))
	if c.hc == nil {
		if opts.MaxConns <= 0 {
			opts.MaxConns = DefaultMaxConns
		}
		c.opts.MaxConns = opts.MaxConns
		lim := newLimits(opts.MaxConns)
		c.hc = &http.Client{Transport: limited{next: oneWrite{newTransport(opts.TLS, opts.MaxConns, opts.MaxConns)}, lim: lim}}
		// Each parked claim holds its connection for up to PollWait: as
		// many as there are claimers, kept idle between polls.
		c.pollHC = &http.Client{Transport: limited{next: oneWrite{newTransport(opts.TLS, 0, opts.MaxConns)}, lim: lim, parked: true}}
		c.ownHC = true
	} else {
		// The caller's client, its transport wrapped to bound the calls
		// in progress by the server's limits.
		lim := newLimits(DefaultMaxConns)
		next := opts.HTTPClient.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		hc, poll := *opts.HTTPClient, *opts.HTTPClient
		hc.Transport = limited{next: next, lim: lim}
		poll.Transport = limited{next: next, lim: lim, parked: true}
		c.hc, c.pollHC = &hc, &poll
	}
	if opts.HTTPClient != nil || opts.JSON {
		c.opts.Transport = TransportUnary
	}
	c.closing, c.close = context.WithCancel(context.Background())
	if _, err := c.Health(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the client: waiting claims return ErrClosed, later calls
// return ErrClosed, idle connections are closed. Calls in progress finish.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return fmt.Errorf("%w: the client is already closed", engine.ErrClosed)
	}
	c.close()
	c.closeSessions()
	if c.ownHC {
		c.hc.CloseIdleConnections()
		c.pollHC.CloseIdleConnections()
	}
	return nil
}

// newTransport is the client's own transport: at most maxConns
// connections to one server (0: no bound), of which maxIdle are kept open
// between calls. It asks for no compression: left to itself, the
// transport asks every server for gzip (Accept-Encoding) on the client's
// behalf, which connect's server then uses for large answers, although
// the client asks connect for none (Dial).
func newTransport(tlsConfig *tls.Config, maxConns, maxIdle int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig.Clone(), // the transport adds to it (NextProtos): the caller's stays as it is
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxConnsPerHost:       maxConns,
		MaxIdleConnsPerHost:   maxIdle,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Clock returns the local system clock. The server's clock decides due
// times, lease deadlines and backoff; what a caller times with Clock are
// intervals (the worker runtime's heartbeats, timeouts, retries of failed
// claims), which do not depend on the two clocks agreeing. A test that
// needs a manual clock drives an in-process DB instead.
func (c *Client) Clock() engine.Clock { return engine.SystemClock }

// Queue returns a handle on the queue name of namespace ns. Names are
// checked by the server on each call.
func (c *Client) Queue(ns engine.Namespace, name string) engine.Queue {
	return &queue{c: c, ns: ns, name: name, pb: wire.PBNamespace(ns)}
}

// KV returns a handle on the key-value entries of namespace ns.
func (c *Client) KV(ns engine.Namespace) engine.KV {
	return &kv{c: c, ns: ns, pb: wire.PBNamespace(ns)}
}

// Queues lists every queue that holds tasks or has settings that the
// caller may read.
func (c *Client) Queues(ctx context.Context) ([]engine.QueueInfo, error) {
	res, err := invoke(ctx, c, true, opQueues, adminOf, docketv1connect.AdminClient.Queues, &v1.QueuesRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]engine.QueueInfo, len(res.Queues))
	for i, q := range res.Queues {
		out[i] = wire.QueueInfo(q)
	}
	return out, nil
}

// Stats returns the server's engine counters (engine.DB.Stats). With
// tokens it needs the admin permission on every namespace (*/*).
func (c *Client) Stats(ctx context.Context) (engine.Stats, error) {
	res, err := invoke(ctx, c, true, noSession[v1.StatsRequest, v1.StatsResponse](), adminOf, docketv1connect.AdminClient.Stats, &v1.StatsRequest{})
	if err != nil {
		return engine.Stats{}, err
	}
	return wire.Stats(res.Stats), nil
}

// Checkpoint makes the server write a snapshot and truncate its log
// (engine.DB.Checkpoint). Admin on */*, as Stats.
func (c *Client) Checkpoint(ctx context.Context) error {
	_, err := invoke(ctx, c, true, noSession[v1.CheckpointRequest, v1.CheckpointResponse](), adminOf, docketv1connect.AdminClient.Checkpoint, &v1.CheckpointRequest{})
	return err
}

// Verify makes the server check every index against the primary records
// (engine.DB.Verify); damage returns an error wrapping engine.ErrCorrupt.
// Admin on */*, as Stats.
func (c *Client) Verify(ctx context.Context) error {
	_, err := invoke(ctx, c, true, noSession[v1.VerifyRequest, v1.VerifyResponse](), adminOf, docketv1connect.AdminClient.Verify, &v1.VerifyRequest{})
	return err
}

// Health is a server's answer to Health.
type Health struct {
	Ready    bool   // takes calls
	Draining bool   // stopping: calls go elsewhere
	Reason   string // why not ready
}

// Health asks the current server whether it takes calls.
func (c *Client) Health(ctx context.Context) (Health, error) {
	res, err := invoke(ctx, c, true, noSession[v1.HealthRequest, v1.HealthResponse](), adminOf, docketv1connect.AdminClient.Health, &v1.HealthRequest{})
	if err != nil {
		return Health{}, err
	}
	return Health{Ready: res.Ready, Draining: res.Draining, Reason: res.Reason}, nil
}

func queuesOf(s *stubs) docketv1connect.QueuesClient { return s.q }
func kvOf(s *stubs) docketv1connect.KVClient         { return s.kv }
func adminOf(s *stubs) docketv1connect.AdminClient   { return s.admin }

func claimOf(s *stubs) *connect.Client[v1.ClaimRequest, wire.LeaseList] { return s.claim }
func claimWaitOf(s *stubs) *connect.Client[v1.ClaimWaitRequest, wire.LeaseList] {
	return s.claimWait
}

// stub returns the connect clients of the server at base.
func (c *Client) stub(base string) *stubs {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stubs[base]
	if s == nil {
		leases := append(slices.Clip(c.copts), connect.WithCodec(wire.LeaseCodec{Inner: c.codec}))
		s = &stubs{
			q:        docketv1connect.NewQueuesClient(c.hc, base, c.copts...),
			kv:       docketv1connect.NewKVClient(c.hc, base, c.copts...),
			admin:    docketv1connect.NewAdminClient(c.hc, base, c.copts...),
			cluster:  docketv1connect.NewClusterClient(c.hc, base, c.copts...),
			controls: docketv1connect.NewControlsClient(c.hc, base, c.copts...),
			pipe:     docketv1connect.NewPipelineClient(c.hc, base, c.copts...),
			presence: docketv1connect.NewPresenceClient(c.hc, base, c.copts...),
			search:   docketv1connect.NewSearchClient(c.hc, base, c.copts...),
			quotas:   docketv1connect.NewQuotasClient(c.hc, base, c.copts...),
			claim:    connect.NewClient[v1.ClaimRequest, wire.LeaseList](c.hc, base+docketv1connect.QueuesClaimProcedure, leases...),
			claimWait: connect.NewClient[v1.ClaimWaitRequest, wire.LeaseList](c.pollHC, base+docketv1connect.QueuesClaimWaitProcedure,
				leases...),
		}
		c.stubs[base] = s
	}
	return s
}

var errClosed = fmt.Errorf("%w: the client is closed", engine.ErrClosed)

// invoke makes one call: on the current server, again on transient
// failures when repeatable allows it (see the package documentation), and
// returns the server's answer or the error rebuilt as the engine's. The
// call goes on the server's session when op is set and the client uses
// sessions, else as the unary RPC rpc.
func invoke[S, Req, Res any](ctx context.Context, c *Client, repeatable bool, op *sessionOp[Req, Res], pick func(*stubs) S,
	rpc func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (*Res, error) {
	res, _, err := invokeBounded(ctx, c, repeatable, c.opts.CallTimeout, op, pick, rpc, msg)
	return res, err
}

// invokeBounded is invoke with a bound on each try of a call whose context
// has no deadline; retried says whether an earlier try was sent and got no
// answer (so the call may have taken effect before the answer came).
func invokeBounded[S, Req, Res any](ctx context.Context, c *Client, repeatable bool, bound time.Duration, op *sessionOp[Req, Res], pick func(*stubs) S,
	rpc func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (res *Res, retried bool, err error) {
	if err := c.usable(ctx); err != nil {
		return nil, false, err
	}
	return invokeAfter(ctx, c, repeatable, bound, op, pick, rpc, msg, nil)
}

// invokeAfter is invokeBounded for a call whose first try was made
// elsewhere (an asynchronous enqueue) and failed with first, if not nil.
func invokeAfter[S, Req, Res any](ctx context.Context, c *Client, repeatable bool, bound time.Duration, op *sessionOp[Req, Res], pick func(*stubs) S,
	rpc func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req, first error) (res *Res, retried bool, err error) {
	sess := op != nil && op.wrap != nil && c.useSession(ctx)
	res, retried, err = tries(ctx, c, repeatable, func(ctx context.Context, base string) (*Res, error) {
		if first != nil {
			err := first
			first = nil
			return nil, err
		}
		if sess {
			res, err := op.try(ctx, c, base, msg, bound)
			if !errors.Is(err, errNoSession) {
				return res, err
			}
		}
		return try(ctx, c, pick(c.stub(base)), bound, rpc, msg)
	})
	if err != nil {
		return nil, retried, c.fail(ctx, err)
	}
	return res, retried, nil
}

// usable reports why no call may start: the client is closed, or ctx has
// ended. Nothing was sent, so the error is returned as it is.
func (c *Client) usable(ctx context.Context) error {
	if c.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

// tries makes attempt on the current server, and again on transient
// failures when repeatable allows it, and returns its answer or the last
// error as it came; retried says whether a try was sent and got no answer.
func tries[Res any](ctx context.Context, c *Client, repeatable bool, attempt func(ctx context.Context, base string) (*Res, error)) (res *Res, retried bool, err error) {
	err = c.r.do(ctx, repeatable, func(ctx context.Context, base string) error {
		r, err := attempt(ctx, base)
		if err != nil {
			if classify(err) == maybeSent {
				retried = true
			}
			return err
		}
		res = r
		return nil
	})
	return res, retried, err
}

// try is one try of a call on the server of stub, bounded by bound (or
// what is left of ctx's deadline, if less): a try cut by bound is
// reported as sent without an answer (errNoAnswer), and the call moves on
// to the next server.
func try[S, Req, Res any](ctx context.Context, c *Client, stub S, bound time.Duration,
	rpc func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (*Res, error) {
	req := connect.NewRequest(msg)
	c.setHeaders(ctx, req.Header())
	actx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	var mark slotMark
	r, err := rpc(stub, context.WithValue(actx, slotMarkKey{}, &mark), req)
	if err != nil {
		if actx.Err() != nil && !mark.got.Load() {
			// Its context ended while it waited for a slot: not sent.
			return nil, &slotWaitError{err}
		}
		if ctx.Err() == nil && actx.Err() != nil {
			err = fmt.Errorf("%w within %v: %w", errNoAnswer, bound, err)
		}
		return nil, err
	}
	return r.Msg, nil
}

// setHeaders sets the headers of a request for a call made with ctx: the
// token, and the wish for stale reads.
func (c *Client) setHeaders(ctx context.Context, h http.Header) {
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if c.opts.StaleReads || engine.StaleReads(ctx) {
		h.Set(wire.StaleReadsHeader, "true")
	}
}

// fail turns the error of a call into what the caller gets: the engine's
// sentinel for a server's answer, the context's error when the caller's
// context ended before the call was sent (ErrOutcomeUnknown wrapping it
// when it may have been), ErrUnavailable when no server took the call.
func (c *Client) fail(ctx context.Context, err error) error {
	if errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	if connect.CodeOf(err) == connect.CodeDeadlineExceeded {
		// The server gets the deadline in whole milliseconds, so its copy
		// can pass a moment before the caller's: let the caller's pass too.
		// Wait for ctx itself, not a timer: on a loaded machine the timer
		// that ends ctx can run well after its deadline, and after this
		// answer was read, so ctx.Err() was still nil past the deadline.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 10*time.Millisecond {
			<-ctx.Done()
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		if code := connect.CodeOf(err); code == connect.CodeCanceled || code == connect.CodeDeadlineExceeded || errors.Is(err, cerr) {
			if cutInFlight(err) {
				// The server's copy of the deadline passed: it may have
				// begun the call.
				return outcomeUnknown(cerr, err)
			}
			return cerr
		}
	}
	switch classify(err) {
	case notSent, redirected:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case busy:
		return &overLimitError{err}
	}
	var notJSON *wire.NotJSONError
	if errors.As(err, &notJSON) {
		return notJSON // refused before it was sent, as the engine would
	}
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeUnauthenticated {
		return &wire.RemoteError{Sentinel: ErrUnauthenticated, Message: ce.Message(), Cause: ce}
	}
	return wire.FromConnect(err)
}

// mayHaveApplied marks a lost-lease answer to a fenced call that was sent
// before without an answer: the earlier try may be what ended the lease.
// The error matches both engine.ErrLeaseLost (the work must be abandoned)
// and ErrOutcomeUnknown (a completion may have been committed).
func mayHaveApplied(err error) error { return &appliedMaybe{err} }

type appliedMaybe struct{ err error }

func (e *appliedMaybe) Error() string {
	return e.err.Error() + " (an earlier try of this call got no answer and may have taken effect)"
}

func (e *appliedMaybe) Unwrap() []error { return []error{e.err, ErrOutcomeUnknown} }
