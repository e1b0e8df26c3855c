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
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
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
	// Logger receives one line per refused or failed call, with the call's
	// request id as "req", and the server's life events (default
	// slog.Default()).
	Logger *slog.Logger
	// Ready, when set, is asked by /readyz whether the server can take
	// calls (e.g. the engine has not failed; a replica has a leader).
	Ready func(context.Context) error
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

	draining atomic.Bool
	drainCtx context.Context // done when Drain starts
	drain    context.CancelFunc
	boot     string // random, per Server: request ids differ across restarts
	reqID    atomic.Uint64

	onPark func() // tests: called when a ClaimWait has parked
}

// New returns a server over db. db is usually the *engine.DB the process
// opened; calls of authenticated callers run on db.As(caller).
func New(db engine.API, opts Options) *Server {
	if opts.MaxWait <= 0 {
		opts.MaxWait = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		db:   db,
		opts: opts,
		lim:  newLimiter(opts.MaxCalls, opts.MaxParked),
		log:  opts.Logger,
		errw: connect.NewErrorWriter(),
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
	id     string         // request id, in logs and the RequestIDHeader
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
// the RequestIDHeader of the answer), maps the bearer token to a caller,
// refuses a missing or unknown one with Unauthenticated (saying nothing
// about what exists), and caps the caller's concurrent calls.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ci := callInfo{id: s.newRequestID()}
		w.Header().Set(RequestIDHeader, ci.id)
		c, err := s.Caller(r)
		if err != nil {
			s.log.Info("docket: unauthenticated call", "req", ci.id, "path", r.URL.Path, "remote", r.RemoteAddr)
			s.writeError(w, r, connect.NewError(connect.CodeUnauthenticated, err))
			return
		}
		limitKey := ""
		if c != nil {
			ci.caller, limitKey = c, c.ID
		}
		release, err := s.lim.acquire(limitKey, false)
		if err != nil {
			s.log.Info("docket: call refused", "req", ci.id, "path", r.URL.Path, "caller", limitKey, "err", err)
			s.writeError(w, r, connect.NewError(connect.CodeResourceExhausted, err))
			return
		}
		defer release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, ci)))
	})
}

// Caller returns the caller a request's bearer token stands for: nil
// without tokens configured (calls run as the program itself), and
// ErrUnauthenticated for a missing or unknown token. The dashboard uses it
// to map its requests the same way.
func (s *Server) Caller(r *http.Request) (*engine.Caller, error) {
	if s.opts.Tokens == nil {
		return nil, nil
	}
	return s.CallerForToken(bearerOf(r))
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
	}
	http.Error(w, err.Message(), code)
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
// MaxWait and the start of a drain. release must be called.
func (s *Server) park(ctx context.Context, maxWait time.Duration) (context.Context, func(), error) {
	ci := infoFrom(ctx)
	key := ""
	if ci.caller != nil {
		key = ci.caller.ID
	}
	release, err := s.lim.acquireParked(key)
	if err != nil {
		return nil, nil, connect.NewError(connect.CodeResourceExhausted, err)
	}
	if maxWait <= 0 || maxWait > s.opts.MaxWait {
		maxWait = s.opts.MaxWait
	}
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	stop := context.AfterFunc(s.drainCtx, cancel)
	if s.drainCtx.Err() != nil {
		cancel() // draining already: answer at once, not when AfterFunc's goroutine runs
	}
	return ctx, func() {
		stop()
		cancel()
		release()
	}, nil
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
