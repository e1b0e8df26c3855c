package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

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
	if d.js, err = jetstream.New(d.nc); err != nil {
		return fail(err)
	}
	if _, err := d.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      "TASKS",
		Subjects:  []string{"tasks"},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	}); err != nil {
		return fail(err)
	}
	d.cons, err = d.js.CreateOrUpdateConsumer(ctx, "TASKS", jetstream.ConsumerConfig{
		Durable:       "workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       10 * time.Minute,
		MaxAckPending: -1,
		MaxDeliver:    -1,
	})
	if err != nil {
		return fail(err)
	}
	return d, nil
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

func (d *natsDriver) Close() error {
	if d.nc != nil {
		d.nc.Close()
	}
	d.srv.Shutdown()
	d.srv.WaitForShutdown()
	return nil
}
