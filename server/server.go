package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/lograte"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// Options configure a Server.
type Options struct {
	// Tokens authenticates bearer tokens. Nil serves every call as the
	// program itself (meant for loopback); with tokens, a call without a
	// valid token is refused with Unauthenticated, and the DB should be
	// opened with Tokens as its Authorizer and Secure set.
	Tokens *Tokens
	// MaxCalls and MaxParked bound what one caller holds at once: calls in
	// progress, and claims waiting for work (DefaultMaxCalls,
	// DefaultMaxParked when zero).
	MaxCalls, MaxParked int
	// MaxWait bounds one long-poll claim; a client asking for longer gets
	// an empty answer after MaxWait and asks again (default 60 s).
	MaxWait time.Duration
	// MaxRequestBytes bounds one request's body, as sent and as it
	// inflates (DefaultMaxRequestBytes when zero, at most
	// MaxRequestBytes). A larger request is refused with
	// ResourceExhausted: a batch that big is split, or the bound raised.
	MaxRequestBytes int64
	// BodyTimeout bounds how long the body of a request may take to
	// arrive, from the end of its headers (DefaultBodyTimeout when zero).
	// It bounds reading the request only: a long-poll claim's answer may
	// take up to MaxWait.
	BodyTimeout time.Duration
	// Logger receives one line per refused or failed call, with the call's
	// request id as "req", and the server's life events (default
	// slog.Default()). Refusals for a caller's limits are sampled: at most
	// one line a second, with the refusals not logged since as "unlogged".
	Logger *slog.Logger
	// Ready, when set, is asked by /readyz whether the server can take
	// calls (e.g. the engine has not failed; a replica has a leader).
	Ready func(context.Context) error
	// BusyPoll is how long a session's reader, having answered every call
	// of its client, asks the connection in a loop for the next before it
	// waits (DefaultBusyPoll when zero; negative: never). A lone
	// caller's next call then finds the server awake: on a virtual machine
	// waking a halted processor costs tens of microseconds a call. It
	// spends a processor while it asks; the reader asks only once its
	// client's calls have come one at a time (eight in a row, none with
	// another in flight) and at once, and at most GOMAXPROCS-1 sessions
	// ask at a time.
	BusyPoll time.Duration
	// Cluster, when set, makes the server a node of a replicated docket:
	// it serves docket.v1.Cluster, names the leader to a client whose call
	// this node cannot take, and honours a client's request for stale
	// reads (see Cluster).
	Cluster Cluster
}

// Server is docket's network API over one DB.
type Server struct {
	db   engine.API
	opts Options
	lim  *limiter
	log  *slog.Logger
	errw *connect.ErrorWriter

	limits string        // the LimitsHeader's value
	large  chan struct{} // slots of large bodies being read (guardedBody)
	// largeBufs holds a frame buffer for each large slot: a session's
	// reader that holds a slot reads its large frames into one, reused, so
	// that large frames one after another do not each leave a buffer of
	// their size for the collector (the heap then grew by several of them).
	largeBufs chan []byte

	parkMu sync.Mutex
	parked map[*parkedCall]struct{} // waiting claims of token holders

	draining atomic.Bool
	drainCtx context.Context // done when Drain starts
	drain    context.CancelFunc
	boot     string // random, per Server: request ids differ across restarts
	reqID    atomic.Uint64

	busyLog lograte.Sampler  // log lines of calls refused for a caller's limits (logFailure)
	now     func() time.Time // the clock of busyLog (a test's fake)

	routes   map[protoreflect.FieldNumber]*route // a session's calls (session_routes.go)
	sessions sessions
	busyPoll time.Duration // Options.BusyPoll with its default
	pollGate *session.Gate // bounds the sessions' readers that poll at once

	onPark func() // tests: called when a ClaimWait has parked
	// onWaitGoroutine, for tests, is called when a session's ClaimWait
	// starts its goroutine.
	onWaitGoroutine func()
	onCall          func() // tests: called when a call has taken its slot
	// onHandoff, for tests, is called when a session's reader has left
	// a batch's answer to the session's answerer.
	onHandoff func()
	// onAnswerer, for tests, is called when a session's answerer has
	// taken a batch, before it looks for others queued behind it.
	onAnswerer func()
	// onLargeReleased, for tests, is called when a session's reader has
	// given back the large body slot.
	onLargeReleased func()
	// largeTimer, for tests, replaces the timer of a session's wait for
	// the large body slot (d is BodyTimeout): the wait ends when the
	// channel it returns receives.
	largeTimer func(d time.Duration) <-chan time.Time
	// maxValue is the engine's payload limit, which a request's values
	// are held to before it is decoded; 0 when db does not say it.
	maxValue int
}

// New returns a server over db. db is usually the *engine.DB the process
// opened; calls of authenticated callers run on db.As(caller). A db that
// has a MaxPayloadBytes method (an *engine.DB) has the requests' values
// held to it before they are decoded.
func New(db engine.API, opts Options) *Server {
	if opts.MaxWait <= 0 {
		opts.MaxWait = 60 * time.Second
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	opts.MaxRequestBytes = min(opts.MaxRequestBytes, MaxRequestBytes)
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		db:     db,
		opts:   opts,
		lim:    newLimiter(opts.MaxCalls, opts.MaxParked),
		log:    opts.Logger,
		errw:   connect.NewErrorWriter(),
		parked: map[*parkedCall]struct{}{},
		large:  make(chan struct{}, largeBodies),
		now:    time.Now,
	}
	switch {
	case opts.BusyPoll == 0:
		s.busyPoll = DefaultBusyPoll
	case opts.BusyPoll > 0:
		s.busyPoll = opts.BusyPoll
	}
	s.pollGate = session.NewGate(0)
	s.largeBufs = make(chan []byte, largeBodies)
	for range largeBodies {
		s.largeBufs <- nil
	}
	if p, ok := db.(interface{ MaxPayloadBytes() int }); ok {
		// Values over it are refused as the request is read, before it
		// is decoded (wire.CheckRequest): the engine would refuse them.
		s.maxValue = p.MaxPayloadBytes()
	}
	s.limits = s.lim.header()
	s.routes = s.buildRoutes()
	if opts.Tokens != nil {
		opts.Tokens.onReload(s.revokeParked)
	}
	s.drainCtx, s.drain = context.WithCancel(context.Background())
	var b [4]byte
	rand.Read(b[:])
	s.boot = hex.EncodeToString(b[:])
	return s
}

// RequestIDHeader is the response header that carries a call's request
// id, the "req" of the server's log lines about the call.
const RequestIDHeader = "Docket-Request-Id"

// newRequestID returns the next request id: the Server's random prefix and
// a counter, so that ids are unique across restarts of a server.
func (s *Server) newRequestID() string {
	return s.boot + "-" + strconv.FormatUint(s.reqID.Add(1), 10)
}

type callerKey struct{}

// callInfo is what the authentication middleware learned about a call.
type callInfo struct {
	caller *engine.Caller // nil: the program itself (no tokens configured)
	token  tokenHash      // the hash of the caller's bearer token
	id     string         // request id, in logs and the RequestIDHeader
	body   *guardedBody   // the request's body
}

// callerID is the caller's id, "" for the program itself.
func (ci callInfo) callerID() string {
	if ci.caller == nil {
		return ""
	}
	return ci.caller.ID
}

func infoFrom(ctx context.Context) callInfo {
	ci, _ := ctx.Value(callerKey{}).(callInfo)
	return ci
}

// asViewer is what a DB offers to run calls for a caller.
type asViewer interface {
	As(engine.Caller) *engine.DB
}

// api returns the API the call in ctx runs on: the DB, or its view for the
// authenticated caller.
func (s *Server) api(ctx context.Context) (engine.API, error) {
	ci := infoFrom(ctx)
	if ci.caller == nil {
		return s.db, nil
	}
	v, ok := s.db.(asViewer)
	if !ok {
		return nil, fmt.Errorf("%w: this server cannot run calls for callers", engine.ErrPermission)
	}
	return v.As(*ci.caller), nil
}

// ErrUnauthenticated is the error of a call without a valid bearer token.
var ErrUnauthenticated = errors.New("docket: a valid bearer token is required")

// authenticate wraps the RPC handler: it gives the call a request id (in
// the RequestIDHeader of the answer) and the caller's limits (the
// LimitsHeader), maps the bearer token to a caller, and refuses a missing
// or unknown one with Unauthenticated (saying nothing about what exists),
// all before a byte of the body is read. It then bounds the body: its size
// (Options.MaxRequestBytes, refused at once and the connection closed, without
// reading the rest) and the time it may take to arrive (BodyTimeout). The
// call slot is taken once the request has been read (slots).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ci := callInfo{id: s.newRequestID(), body: s.guardBody(w, r)}
		w.Header().Set(RequestIDHeader, ci.id)
		w.Header().Set(LimitsHeader, s.limits)
		c, h, err := s.caller(r)
		if err != nil {
			s.log.Info("docket: unauthenticated call", "req", ci.id, "path", r.URL.Path, "remote", r.RemoteAddr)
			s.refuse(w, r, connect.NewError(connect.CodeUnauthenticated, err))
			return
		}
		ci.caller, ci.token = c, h
		if r.ContentLength > s.opts.MaxRequestBytes {
			err := errTooLarge(r.ContentLength, s.opts.MaxRequestBytes)
			s.log.Info("docket: call refused", "req", ci.id, "path", r.URL.Path, "caller", ci.callerID(), "err", err)
			s.refuse(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, ci))
		r.Body = ci.body
		defer ci.body.end()
		next.ServeHTTP(w, r)
	})
}

// slots is the interceptor that takes one of the caller's call slots for a
// call whose request has been read, so that a client slow to send its
// request holds none. A ClaimWait takes a parked slot instead (park).
func (s *Server) slots() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if b := infoFrom(ctx).body; b != nil {
				b.releaseLarge()
				b.finish() // the request is read: its deadline must not cut the answer
			}
			if req.Spec().Procedure == docketv1connect.QueuesClaimWaitProcedure {
				return next(ctx, req)
			}
			release, err := s.lim.acquire(infoFrom(ctx).callerID())
			if err != nil {
				return nil, connect.NewError(connect.CodeResourceExhausted, err)
			}
			defer release()
			if s.onCall != nil {
				s.onCall()
			}
			return next(ctx, req)
		}
	})
}

// Caller returns the caller a request's bearer token stands for: nil
// without tokens configured (calls run as the program itself), and
// ErrUnauthenticated for a missing or unknown token. The dashboard uses it
// to map its requests the same way.
func (s *Server) Caller(r *http.Request) (*engine.Caller, error) {
	c, _, err := s.caller(r)
	return c, err
}

// caller is Caller, with the hash of the token.
func (s *Server) caller(r *http.Request) (*engine.Caller, tokenHash, error) {
	if s.opts.Tokens == nil {
		return nil, tokenHash{}, nil
	}
	tok := bearerOf(r)
	c, err := s.CallerForToken(tok)
	if err != nil {
		return nil, tokenHash{}, err
	}
	return c, hashToken(tok), nil
}

// CallerForToken is Caller for a token obtained otherwise (a login form).
func (s *Server) CallerForToken(token string) (*engine.Caller, error) {
	if s.opts.Tokens == nil {
		return nil, nil
	}
	c, ok := s.opts.Tokens.Authenticate(token)
	if !ok {
		return nil, ErrUnauthenticated
	}
	return &c, nil
}

func bearerOf(r *http.Request) string {
	tok, _ := bearer(r.Header.Get("Authorization"))
	return tok
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if s.errw.IsSupported(r) {
		s.errw.Write(w, r, err)
		return
	}
	code := http.StatusBadRequest
	switch err.Code() {
	case connect.CodeUnauthenticated:
		code = http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		code = http.StatusTooManyRequests
		if errors.Is(err, errRequestTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
	}
	http.Error(w, err.Message(), code)
}

// refuse answers a call refused before its body was read, and closes the
// connection after the answer rather than read a body nobody wants.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	if r.ContentLength != 0 && r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	s.writeError(w, r, err)
}

func bearer(h string) (string, bool) {
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// park bounds a waiting claim: it takes one of the caller's parked slots and
// returns a context that ends at the earliest of the call's deadline,
// MaxWait, the start of a drain, and a reload of the tokens that no longer
// maps the call's token to its caller (then with errRevoked as its cause).
// release must be called.
func (s *Server) park(ctx context.Context, maxWait time.Duration) (context.Context, func(), error) {
	ci := infoFrom(ctx)
	sw := sessionWaitOf(ctx)
	var release func()
	if sw != nil && sw.release != nil {
		release = sw.release // taken by the session's reader
	} else {
		var err error
		if release, err = s.lim.acquireParked(ci.callerID()); err != nil {
			return nil, nil, connect.NewError(connect.CodeResourceExhausted, err)
		}
	}
	if maxWait <= 0 || maxWait > s.opts.MaxWait {
		maxWait = s.opts.MaxWait
	}
	ctx, revoke := context.WithCancelCause(ctx)
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	stop := context.AfterFunc(s.drainCtx, cancel)
	if s.drainCtx.Err() != nil {
		cancel() // draining already: answer at once, not when AfterFunc's goroutine runs
	}
	if sw != nil { // a session's Abandon of the call
		stopAbandon := context.AfterFunc(sw.abandon, cancel)
		prev := stop
		stop = func() bool { prev(); return stopAbandon() }
	}
	unregister := func() {}
	if ci.caller != nil && s.opts.Tokens != nil {
		p := &parkedCall{token: ci.token, caller: ci.caller.ID, revoke: revoke}
		s.parkMu.Lock()
		s.parked[p] = struct{}{}
		s.parkMu.Unlock()
		unregister = func() {
			s.parkMu.Lock()
			delete(s.parked, p)
			s.parkMu.Unlock()
		}
		// A reload between authentication and registration is not missed.
		if !s.opts.Tokens.holds(p.token, p.caller) {
			revoke(errRevoked)
		}
	}
	return ctx, func() {
		unregister()
		stop()
		cancel()
		revoke(nil)
		release()
	}, nil
}

// parkedCall is a waiting claim of a token holder.
type parkedCall struct {
	token  tokenHash
	caller string
	revoke context.CancelCauseFunc
}

// errRevoked ends a waiting claim whose token a reload took away (or gave
// to another caller).
var errRevoked = errors.New("docket: the call's bearer token was revoked while it waited (the tokens file was reloaded)")

// revokeParked ends the waiting claims whose token no longer stands for
// their caller; the tokens call it after each reload, before Reload
// returns, so that no claim of a revoked token is served after it.
func (s *Server) revokeParked() {
	s.parkMu.Lock()
	for p := range s.parked {
		if !s.opts.Tokens.holds(p.token, p.caller) {
			p.revoke(errRevoked)
		}
	}
	s.parkMu.Unlock()
	// A session whose token was revoked reads no more calls, answers
	// those it read, and closes.
	s.sessions.each(func(x *sess) {
		if ci := x.auth.Load(); ci != nil && ci.caller != nil && !s.opts.Tokens.holds(ci.token, ci.caller.ID) {
			x.log.Info("docket: session closed: its bearer token was revoked", "req", x.id, "caller", ci.callerID())
			x.stop()
		}
	})
}

// Drain starts a clean stop: readiness fails, waiting claims return empty
// at once, and new waiting claims return at once. In-flight calls finish;
// the caller then shuts the HTTP server down and closes the DB.
func (s *Server) Drain() {
	if !s.draining.Swap(true) {
		s.drain()
		s.log.Info("docket: draining")
	}
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// Health serves /healthz (the process answers) and /readyz (ready to take
// calls: not draining, and the engine works).
func (s *Server) Health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		draining, err := s.readiness(r.Context())
		switch {
		case draining:
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		default:
			w.Write([]byte("ready\n"))
		}
	})
}

// readiness reports whether the server is draining and, if not, what the
// Ready hook says (asked for at most 2 s).
func (s *Server) readiness(ctx context.Context) (draining bool, err error) {
	if s.Draining() {
		return true, nil
	}
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return false, s.opts.Ready(ctx)
	}
	return false, nil
}
