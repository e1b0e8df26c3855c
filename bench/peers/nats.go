package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsWait bounds one blocking fetch, so a worker notices the end of a run.
const natsWait = 250 * time.Millisecond

type natsDriver struct {
	srv  *server.Server // embedded; nil with proc
	proc *bench.Process // a nats-server process; nil with srv
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

var (
	_ bench.Pipeliner   = (*natsDriver)(nil)
	_ bench.ServerCPUer = (*natsDriver)(nil)
)

// openNATS starts a NATS server with JetStream in this process, with file
// storage in dir and a work-queue stream with one durable pull consumer
// using explicit acks. Without loopback it has no listener and the client
// connects in-process; with loopback it listens on a fresh 127.0.0.1 port
// and the client connects to it over TCP, as docket's client does in
// remote mode. For SyncAlways the server fsyncs every write
// (sync_interval: always); otherwise it keeps its default (an fsync every
// 2 minutes).
func openNATS(ctx context.Context, cfg bench.Config, dir string, loopback bool) (bench.Driver[jetstream.Msg], error) {
	if cfg.InMemory {
		return nil, fmt.Errorf("nats: in-memory mode is not compared")
	}
	opts := &server.Options{
		JetStream:  true,
		StoreDir:   dir,
		DontListen: !loopback,
		NoLog:      true,
		NoSigs:     true,
		SyncAlways: cfg.Durability == engine.SyncAlways,
	}
	if loopback {
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats: server not ready")
	}
	d := &natsDriver{srv: srv}
	fail := func(err error) (bench.Driver[jetstream.Msg], error) {
		d.Close()
		return nil, err
	}
	if loopback {
		addr, ok := srv.Addr().(*net.TCPAddr)
		if !ok || !addr.IP.IsLoopback() {
			return fail(fmt.Errorf("nats: listening on %v, not on loopback TCP", srv.Addr()))
		}
		d.nc, err = nats.Connect("nats://" + addr.String())
	} else {
		d.nc, err = nats.Connect("", nats.InProcessServer(srv))
	}
	if err != nil {
		return fail(err)
	}
	if err := d.setup(ctx); err != nil {
		return fail(err)
	}
	return d, nil
}

// setup makes the stream and its consumer through the connection d.nc.
func (d *natsDriver) setup(ctx context.Context) error {
	var err error
	if d.js, err = jetstream.New(d.nc); err != nil {
		return err
	}
	if _, err := d.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      "TASKS",
		Subjects:  []string{"tasks"},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	}); err != nil {
		return err
	}
	d.cons, err = d.js.CreateOrUpdateConsumer(ctx, "TASKS", jetstream.ConsumerConfig{
		Durable:       "workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       10 * time.Minute,
		MaxAckPending: -1,
		MaxDeliver:    -1,
	})
	return err
}

func (d *natsDriver) Enqueue(ctx context.Context, payload []byte) error {
	_, err := d.js.Publish(ctx, "tasks", payload)
	return err
}

// EnqueueBatch publishes asynchronously and waits for every
// acknowledgement: JetStream has no multi-message commit.
func (d *natsDriver) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	futures := make([]jetstream.PubAckFuture, 0, len(payloads))
	for _, p := range payloads {
		f, err := d.js.PublishAsync("tasks", p)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (d *natsDriver) Claim(ctx context.Context, max int, wait bool) ([]jetstream.Msg, error) {
	for {
		var batch jetstream.MessageBatch
		var err error
		if wait {
			batch, err = d.cons.Fetch(max, jetstream.FetchMaxWait(natsWait))
		} else {
			batch, err = d.cons.FetchNoWait(max)
		}
		if err != nil {
			return nil, err
		}
		var out []jetstream.Msg
		for m := range batch.Messages() {
			out = append(out, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return out, err
		}
		if len(out) > 0 || !wait {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// Complete acknowledges and waits for the server to confirm the ack, as
// docket's Complete returns only once the completion is committed.
func (d *natsDriver) Complete(ctx context.Context, m *jetstream.Msg) error {
	return (*m).DoubleAck(ctx)
}

func (d *natsDriver) Payload(m *jetstream.Msg) []byte { return (*m).Data() }

// EnqueueAsync publishes without waiting for the stream's
// acknowledgement, which the Awaiter waits for.
func (d *natsDriver) EnqueueAsync(ctx context.Context, payload []byte) bench.Awaiter {
	f, err := d.js.PublishAsync("tasks", payload)
	return pubAwaiter{f, err}
}

type pubAwaiter struct {
	f   jetstream.PubAckFuture
	err error
}

func (a pubAwaiter) Wait(ctx context.Context) error {
	if a.err != nil {
		return a.err
	}
	select {
	case <-a.f.Ok():
		return nil
	case err := <-a.f.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServerCPU is the nats-server process's CPU time, where it is one.
func (d *natsDriver) ServerCPU() (time.Duration, bool) {
	if d.proc == nil {
		return 0, false
	}
	return d.proc.CPU(), true
}

func (d *natsDriver) Close() error {
	if d.nc != nil {
		d.nc.Close()
	}
	if d.proc != nil {
		return d.proc.Stop()
	}
	d.srv.Shutdown()
	d.srv.WaitForShutdown()
	return nil
}

// natsReadyTimeout bounds how long a nats-server process may take to
// write its ports file.
const natsReadyTimeout = 30 * time.Second

// natsConfig is a nats-server configuration for one run: client port on
// 127.0.0.1 chosen by the kernel (written to the ports file in portsDir),
// JetStream with file storage in storeDir, every write fsynced when
// durable (sync_interval: always, as the embedded server's SyncAlways);
// otherwise the server's default (an fsync every 2 minutes), as the
// embedded one.
func natsConfig(storeDir, portsDir string, durable bool) string {
	sync := ""
	if durable {
		sync = "\n  sync_interval: always"
	}
	return fmt.Sprintf("listen: \"127.0.0.1:-1\"\nports_file_dir: %q\njetstream {\n  store_dir: %q%s\n}\n", portsDir, storeDir, sync)
}

// natsURL reads the client URL on 127.0.0.1 from a ports file's JSON.
func natsURL(ports []byte) (string, error) {
	var p server.Ports
	if err := json.Unmarshal(ports, &p); err != nil {
		return "", err
	}
	for _, u := range p.Nats {
		if strings.HasPrefix(u, "nats://127.0.0.1:") {
			return u, nil
		}
	}
	return "", fmt.Errorf("nats-server: no client URL on 127.0.0.1 in %s", ports)
}

// startNATSServer starts the nats-server binary bin for one run of cfg
// with its files in dir, and returns the process and its client URL once
// it has written its ports file.
func startNATSServer(ctx context.Context, bin string, cfg bench.Config, dir string) (*bench.Process, string, error) {
	store, ports := filepath.Join(dir, "store"), filepath.Join(dir, "ports")
	if err := os.MkdirAll(ports, 0o755); err != nil {
		return nil, "", err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(natsConfig(store, ports, cfg.Durability == engine.SyncAlways)), 0o644); err != nil {
		return nil, "", err
	}
	p, err := bench.StartProcess("nats-server", bin, "-c", conf)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(natsReadyTimeout)
	for {
		// The server writes the file (not atomically) once it listens:
		// a partial one is read again.
		files, _ := filepath.Glob(filepath.Join(ports, "*.ports"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				if u, err := natsURL(b); err == nil {
					return p, u, nil
				}
			}
		}
		select {
		case <-p.Exited():
			return nil, "", p.Stop()
		case <-ctx.Done():
			p.Kill()
			return nil, "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, "", fmt.Errorf("nats-server: no ports file in %s after %v", ports, natsReadyTimeout)
		}
	}
}

// openNATSProcess drives JetStream in a nats-server process started for
// the run (bin), through a client connected over TCP on 127.0.0.1.
func openNATSProcess(ctx context.Context, bin string, cfg bench.Config, dir string) (bench.Driver[jetstream.Msg], error) {
	if cfg.InMemory {
		return nil, fmt.Errorf("nats: in-memory mode is not compared")
	}
	p, url, err := startNATSServer(ctx, bin, cfg, dir)
	if err != nil {
		return nil, err
	}
	d := &natsDriver{proc: p}
	if d.nc, err = nats.Connect(url); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if err := d.setup(ctx); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}
