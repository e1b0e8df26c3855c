package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
	"maragu.dev/goqite"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"
)

// goqiteSchema is goqite's own SQLite schema (schema_sqlite.sql in its
// repository), which the library leaves to the application to create.
const goqiteSchema = `
create table goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;

create trigger goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;

create index goqite_queue_priority_created_idx on goqite (queue, priority desc, created);
`

// goqitePoll is how often a blocking receive polls: goqite has no
// notification, ReceiveAndWait polls the table.
const goqitePoll = time.Millisecond

type goqiteDriver struct {
	db *sql.DB
	q  *goqite.Queue
}

// openGoqite opens goqite on a SQLite file in WAL mode: synchronous=FULL
// (an fsync per commit) when cfg asks for SyncAlways, OFF otherwise. One
// connection, as goqite recommends for SQLite: it has a single writer.
func openGoqite(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[goqite.Message], error) {
	if cfg.InMemory {
		return nil, fmt.Errorf("goqite: in-memory mode is not compared")
	}
	sync := "OFF"
	if cfg.Durability == engine.SyncAlways {
		sync = "FULL"
	}
	dsn := "file:" + filepath.Join(dir, "goqite.db") + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync +
		")&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if _, err := db.ExecContext(ctx, goqiteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("goqite schema: %w", err)
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "tasks", Timeout: 10 * time.Minute, MaxReceive: 1000})
	return &goqiteDriver{db: db, q: q}, nil
}

func (g *goqiteDriver) Enqueue(ctx context.Context, payload []byte) error {
	return g.q.Send(ctx, goqite.Message{Body: payload})
}

func (g *goqiteDriver) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, p := range payloads {
		if err := g.q.SendTx(ctx, tx, goqite.Message{Body: p}); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// Claim receives up to max messages, one transaction each: goqite
// receives one message per call.
func (g *goqiteDriver) Claim(ctx context.Context, max int, wait bool) ([]goqite.Message, error) {
	var out []goqite.Message
	if wait {
		m, err := g.q.ReceiveAndWait(ctx, goqitePoll)
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	for len(out) < max {
		m, err := g.q.Receive(ctx)
		if err != nil {
			return out, err
		}
		if m == nil {
			break
		}
		out = append(out, *m)
	}
	return out, nil
}

func (g *goqiteDriver) Complete(ctx context.Context, m *goqite.Message) error {
	return g.q.Delete(ctx, m.ID)
}

func (g *goqiteDriver) Payload(m *goqite.Message) []byte { return m.Body }

func (g *goqiteDriver) Close() error { return g.db.Close() }
