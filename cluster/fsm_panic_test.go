package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

var panicNS = engine.NS("acme", "prod")

// startAlone starts a cluster of one node in dir, on an in-memory
// transport of a fixed address (the same across restarts), and waits
// until it leads.
func startAlone(t *testing.T, dir string) *Node {
	t.Helper()
	_, trans := raft.NewInmemTransport("n1")
	n, err := Start(Config{ID: "n1", Dir: dir, Transport: trans, Bootstrap: true, Logger: hclog.NewNullLogger(),
		Raft: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if id, _, err := n.WaitLeader(ctx); err != nil || id != "n1" || !n.IsLeader() {
		n.Close()
		t.Fatalf("the node alone does not lead: %q %v", id, err)
	}
	return n
}

// TestApplyPanicStopsTheProcess: a panic while the FSM applies a committed
// entry (here once the DB has applied it, so its state moved) ends the
// process, naming the entry; the node restarted on its directory replays
// the log on a state rebuilt whole and holds every committed write once.
func TestApplyPanicStopsTheProcess(t *testing.T) {
	if dir := os.Getenv("DOCKET_TEST_APPLY_PANIC"); dir != "" {
		n := startAlone(t, dir)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		q := n.API().Queue(panicNS, "q")
		if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"a"`)}); err != nil {
			t.Fatal(err)
		}
		apply := n.fsm.apply
		n.fsm.apply = func(b []byte) *engine.Applied {
			apply(b)
			panic("a panic while applying")
		}
		_, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"b"`)})
		t.Fatalf("the process goes on after a panic while applying: the enqueue returned %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyPanicStopsTheProcess$")
	cmd.Env = append(os.Environ(), "DOCKET_TEST_APPLY_PANIC="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 ||
		!bytes.Contains(out, []byte("panic: cluster: applying log entry ")) || !bytes.Contains(out, []byte("a panic while applying")) {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	n := startAlone(t, dir)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page, err := n.API().Queue(panicNS, "q").List(ctx, engine.ListOptions{State: engine.Ready})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ti := range page.Tasks {
		got = append(got, string(ti.Payload))
	}
	if len(got) != 2 || got[0] != `"a"` || got[1] != `"b"` {
		t.Fatalf("after the restart the node holds %q, want each write once", got)
	}
}

// TestApplyPanicNamesTheEntry: the panic Apply and ApplyBatch go on with
// names the entry that was applying and wraps what panicked.
func TestApplyPanicNamesTheEntry(t *testing.T) {
	db, err := engine.OpenReplicated(engine.Options{}, noLog{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := NewFSM(db)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("a panic while applying")
	f.apply = func([]byte) *engine.Applied { panic(cause) }
	for name, apply := range map[string]func(){
		"Apply": func() { f.Apply(&raft.Log{Type: raft.LogCommand, Index: 7}) },
		"ApplyBatch": func() {
			f.ApplyBatch([]*raft.Log{{Type: raft.LogNoop, Index: 6}, {Type: raft.LogCommand, Index: 7}, {Type: raft.LogCommand, Index: 8}})
		},
	} {
		p := func() (p any) {
			defer func() { p = recover() }()
			apply()
			return nil
		}()
		err, ok := p.(error)
		if !ok || !errors.Is(err, cause) || !strings.Contains(err.Error(), "applying log entry 7 panicked") {
			t.Fatalf("%s panicked with %v", name, p)
		}
	}
	if at, _ := f.Applied(); at != 0 {
		t.Fatalf("an entry that panicked counts as applied (%d)", at)
	}
}

// noLog is a Replicator that takes no writes: the test applies by hand.
type noLog struct{}

func (noLog) Submit(context.Context, []byte) (*engine.Applied, error) {
	return nil, engine.ErrNotLeader
}
func (noLog) ReadBarrier(context.Context) error { return nil }
