package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/docketdb/docket/engine"
)

// Config is what `docket serve` runs: a data directory served on a listen
// address.
type Config struct {
	// Dir is the data directory (engine.Open).
	Dir string
	// Listen is the address to listen on, host:port.
	Listen string
	// TLSCert and TLSKey serve TLS; TLSClientCA requires client
	// certificates signed by it (mutual TLS).
	TLSCert, TLSKey, TLSClientCA string
	// TokensFile maps bearer tokens to callers and grants (see the package
	// documentation). Without it every call runs as the program itself.
	TokensFile string
	// Insecure allows a non-loopback Listen without TLS and tokens.
	Insecure bool
	// AllowHosts are the Host names a server on a loopback Listen answers
	// to besides localhost and the loopback addresses (HostGuard): the
	// name of a proxy in front of it, the host of its advertised URL.
	AllowHosts []string
	// Engine are the options the DB is opened with. With TokensFile, its
	// Authorizer becomes the tokens table and Secure is set.
	Engine engine.Options
	// Server are the options of the network API (limits, logger).
	Server Options
	// Grace bounds how long a clean stop waits for calls (DefaultGrace).
	Grace time.Duration
	// Mount adds handlers next to the API (the dashboard, /metrics) once the
	// DB is open.
	Mount func(db *engine.DB, s *Server, mux *http.ServeMux) error
	// Reload, when it delivers, re-reads the tokens file and the TLS files
	// (SIGHUP); a file that fails to load leaves the old one in force.
	Reload <-chan struct{}
	// Listening, when set, is called with the bound address once the server
	// is ready: the listener bound, the DB open (with OpenReplica, the node
	// started and joined) and every handler mounted. Serving starts as it
	// returns; a connection made from then on is answered (it waits in the
	// listener's backlog until then).
	Listening func(net.Addr)
	// OpenReplica, when set, makes the server a node of a replicated
	// docket: it is called instead of engine.Open, with the engine options
	// as Run settled them (the tokens' Authorizer) and the address the
	// server listens on, and returns the node (see Replica). Dir is then
	// the node's business.
	OpenReplica func(ctx context.Context, opts engine.Options, listen net.Addr) (Replica, error)
}

// Replica is a node of a replicated docket as Run serves it: its DB, its
// membership calls, whether it can take calls (a node that knows no leader
// cannot), and Close, which Run calls once serving stopped (a leader hands
// its leadership over first).
type Replica interface {
	Cluster
	DB() *engine.DB
	Ready(ctx context.Context) error
	Close() error
}

// Run opens the DB, serves it until ctx ends, drains, and closes the DB. It
// refuses to start on an exposed address without TLS and tokens (see
// CheckExposure) before touching the directory.
func Run(ctx context.Context, cfg Config) (err error) {
	log := cfg.Server.Logger
	if log == nil {
		log = slog.Default()
		cfg.Server.Logger = log
	}
	haveTLS := cfg.TLSCert != "" || cfg.TLSKey != ""
	if haveTLS && (cfg.TLSCert == "" || cfg.TLSKey == "") {
		return errors.New("docket: TLS needs both a certificate and a key file")
	}
	if cfg.TLSClientCA != "" && !haveTLS {
		return errors.New("docket: client certificates need TLS (a certificate and a key file)")
	}
	if err := CheckExposure(cfg.Listen, haveTLS, cfg.TokensFile != "", cfg.Insecure); err != nil {
		return err
	}
	var files *TLSFiles
	if haveTLS {
		files = &TLSFiles{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, ClientCAFile: cfg.TLSClientCA}
		if err := files.Load(); err != nil {
			return err
		}
	}
	if cfg.TokensFile != "" {
		tokens, err := LoadTokens(cfg.TokensFile)
		if err != nil {
			return err
		}
		cfg.Server.Tokens = tokens
		cfg.Engine.Authorizer = tokens
		cfg.Engine.Secure = true
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("docket: listen: %w", err)
	}
	defer ln.Close()
	var db *engine.DB
	closeDB := func() error { return db.Close() }
	if cfg.OpenReplica != nil {
		r, err := cfg.OpenReplica(ctx, cfg.Engine, ln.Addr())
		if err != nil {
			return err
		}
		db, closeDB = r.DB(), r.Close
		cfg.Server.Cluster = r
		if cfg.Server.Ready == nil {
			cfg.Server.Ready = r.Ready
		}
	} else if db, err = engine.Open(cfg.Dir, cfg.Engine); err != nil {
		return err
	}
	defer func() {
		if cerr := closeDB(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if cfg.Server.Ready == nil {
		cfg.Server.Ready = func(context.Context) error { return db.Err() }
	}
	s := New(db, cfg.Server)
	mux := s.Mux()
	if cfg.Mount != nil {
		if err := cfg.Mount(db, s, mux); err != nil {
			return err
		}
	}
	var h http.Handler = mux
	if IsLoopback(cfg.Listen) {
		h = HostGuard(mux, cfg.AllowHosts) // the API and everything Mount added
	}
	var hs *http.Server
	if files != nil {
		hs = NewHTTPServer(h, files.Config())
	} else {
		hs = NewHTTPServer(h, nil)
	}
	if cfg.Reload != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-cfg.Reload:
				}
				if t := cfg.Server.Tokens; t != nil {
					if err := t.Reload(); err != nil {
						log.Error("docket: tokens not reloaded; the previous ones stay in force", "err", err)
					} else {
						log.Info("docket: tokens reloaded", "callers", t.Callers())
					}
				}
				if files != nil {
					if err := files.Reload(); err != nil {
						log.Error("docket: TLS files not reloaded; the previous ones stay in force", "err", err)
					} else {
						log.Info("docket: TLS files reloaded")
					}
				}
			}
		}()
	}
	scheme := "http"
	if files != nil {
		scheme = "https"
	}
	log.Info("docket: serving", "dir", cfg.Dir, "url", scheme+"://"+ln.Addr().String(), "tokens", cfg.TokensFile != "", "mtls", cfg.TLSClientCA != "")
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	return Serve(ctx, s, hs, ln, cfg.Grace)
}

// Mux returns the server's routes: the network API and the health
// endpoints. Add more (the dashboard, /metrics) before serving.
func (s *Server) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	s.Health(mux)
	s.register(mux)
	return mux
}
