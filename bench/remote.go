package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// Remote is the name runs through the client report as their System;
// RemoteSingle that of runs whose client sends every call as a unary RPC
// (Config.NoCoalesce).
const (
	Remote       = "remote"
	RemoteSingle = "remote-single"
)

// remoteSystem is the System of a run through the client.
func remoteSystem(cfg Config) string {
	if cfg.ServeBinary != "" {
		return Serve
	}
	if cfg.NoCoalesce {
		return RemoteSingle
	}
	return Remote
}

// transport is the client's transport for cfg.
func transport(cfg Config) client.Transport {
	if cfg.NoCoalesce {
		return client.TransportUnary
	}
	return client.TransportSession
}

// serverCalls bounds the calls the server started for a remote run lets
// its one caller hold at once: W6R's pacers may have maxInFlightSends
// enqueues outstanding, beside the workers' calls.
const serverCalls = maxInFlightSends + 256

// openRemote returns a driver of docket through the client: to a server
// started here on a 127.0.0.1 port over a fresh DB of cfg's mode, or to
// the running server cfg.Server.
func openRemote(ctx context.Context, cfg Config, dir string) (*docketDriver, error) {
	if cfg.Server != "" {
		return dialServer(ctx, cfg)
	}
	if cfg.ServeBinary != "" {
		return openServe(ctx, cfg, dir)
	}
	db, err := openDB(cfg, dir, nil)
	if err != nil {
		return nil, err
	}
	url, stop, err := serveLoopback(db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	d, err := dialPair(ctx, url, client.Options{Transport: transport(cfg)}, "tasks")
	if err != nil {
		return nil, errors.Join(err, stop(), db.Close())
	}
	d.db, d.counters = db, dbCounters(db)
	closeClients := d.close
	d.close = func() error { return errors.Join(closeClients(), stop(), db.Close()) }
	return d, nil
}

// dialPair drives queue through two clients of the server at url, one
// for the producers' enqueues and one for the workers' claims and
// completions, as a deployment has them in different processes: one
// client's calls beyond its connections (client.Options.MaxConns) wait
// in turn, so a client shared with producers that offer more than the
// server takes (W6R) would keep the workers' completions waiting behind
// the enqueues.
func dialPair(ctx context.Context, url string, opts client.Options, queue string) (*docketDriver, error) {
	producers, err := client.Dial(ctx, url, opts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	workers, err := client.Dial(ctx, url, opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("dial %s: %w", url, err), producers.Close())
	}
	return &docketDriver{
		q:     producers.Queue(benchNS, queue),
		wq:    workers.Queue(benchNS, queue),
		close: func() error { return errors.Join(producers.Close(), workers.Close()) },
	}, nil
}

// serveLoopback serves db on a fresh 127.0.0.1 port, in this process but
// through a real TCP listener, and returns its URL and a function that
// stops serving (draining the calls in flight).
func serveLoopback(db *engine.DB) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := server.New(db, server.Options{
		Logger:    slog.New(slog.DiscardHandler),
		MaxCalls:  serverCalls,
		MaxParked: serverCalls,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, s, server.NewHTTPServer(s.Mux(), nil), ln, 5*time.Second) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel()
		return <-done
	}, nil
}

// openServe starts `docket serve` (cfg.ServeBinary) over a fresh
// directory in dir with cfg's durability and drives it through the
// client: its counters are the server's Stats (this run is its only
// caller), its CPU the process's.
func openServe(ctx context.Context, cfg Config, dir string) (*docketDriver, error) {
	calls := fmt.Sprint(serverCalls)
	p, url, err := StartServe(ctx, cfg.ServeBinary, filepath.Join(dir, "data"), cfg.Durability.String(),
		"-max-calls", calls, "-max-parked", calls)
	if err != nil {
		return nil, err
	}
	d, err := dialPair(ctx, url, client.Options{Transport: transport(cfg)}, "tasks")
	if err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	c, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		return nil, errors.Join(err, d.close(), p.Stop())
	}
	d.counters = func() (Counters, bool) {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.Stats(sctx)
		if err != nil {
			return Counters{}, false
		}
		return Counters{Commits: s.Commits, Fsyncs: s.LogSyncs, LogBytes: s.LogBytes, Groups: s.LogGroups,
			SyncTime: s.LogSyncTime, Gathers: s.LogGathers, GatherMisses: s.LogGatherMisses}, true
	}
	d.server = p
	closeClients := d.close
	d.close = func() error { return errors.Join(closeClients(), c.Close(), p.Stop()) }
	return d, nil
}

// dialServer drives a queue of its own on the running server cfg.Server.
// The counters are the server's (every client's calls), when its Stats
// answer: with tokens they need admin on */*.
func dialServer(ctx context.Context, cfg Config) (*docketDriver, error) {
	name := fmt.Sprintf("bench-%s-%d", cfg.Workload, time.Now().UnixNano())
	d, err := dialPair(ctx, cfg.Server, client.Options{Token: cfg.Token, Transport: transport(cfg)}, name)
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, cfg.Server, client.Options{Token: cfg.Token})
	if err != nil {
		return nil, errors.Join(err, d.close())
	}
	counters := func() (Counters, bool) {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.Stats(sctx)
		if err != nil {
			return Counters{}, false
		}
		return Counters{Commits: s.Commits, Fsyncs: s.LogSyncs, LogBytes: s.LogBytes}, true
	}
	if _, ok := counters(); ok {
		d.counters = counters
	}
	closeClients := d.close
	d.close = func() error { return errors.Join(closeClients(), c.Close()) }
	return d, nil
}
