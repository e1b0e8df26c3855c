package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/raft"
)

// stoppedMesh runs a three-node cluster, writes to it (n1 takes a raft
// snapshot halfway, so that its recovery is a snapshot and the log after
// it), lets every node converge and kills them all. It returns the nodes'
// directories, the state hash and the task count they converged on.
func stoppedMesh(t *testing.T) (dirs []string, hash [32]byte, tasks int) {
	t.Helper()
	// Few trailing logs: the snapshot compacts n1's log, whose recovery
	// then needs both.
	m := clustertest.NewMesh(t, clustertest.MeshOptions{SegmentSize: 4 << 10,
		Config: func(c *raft.Config) { c.TrailingLogs = 4 }})
	ctx := within(t, 30*time.Second)
	// do runs fn on the leader's API, again on the next leader when
	// leadership moved under it (the enqueues carry idempotency keys, so a
	// repeat after an unknown outcome adds nothing).
	do := func(fn func(api engine.API) error) {
		t.Helper()
		for {
			l, err := m.WaitLeader(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			err = fn(l.API())
			if err == nil {
				return
			}
			if !errors.Is(err, engine.ErrNotLeader) && !errors.Is(err, engine.ErrOutcomeUnknown) || ctx.Err() != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue := func(queue string, task engine.Task) {
		t.Helper()
		do(func(api engine.API) error { _, err := api.Queue(ns, queue).Enqueue(ctx, task); return err })
	}
	for i := range 30 {
		enqueue("a", engine.Task{Payload: fmt.Appendf(nil, `{"n":%d}`, i), IdempotencyKey: fmt.Sprint("a", i)})
	}
	do(func(api engine.API) error {
		ls, err := api.Queue(ns, "a").Claim(ctx, "w", time.Minute, 3)
		if err != nil || len(ls) == 0 {
			return fmt.Errorf("claim: %d leases, %w", len(ls), err)
		}
		_, err = api.Queue(ns, "a").Complete(ctx, ls[0], engine.Done{})
		return err
	})
	if err := m.Converge(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Nodes[0].Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		enqueue("b", engine.Task{Kind: "k", Delay: time.Hour, Payload: fmt.Appendf(nil, `{"b":%d}`, i), IdempotencyKey: fmt.Sprint("b", i)})
	}
	if err := m.Converge(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A node running on its directory keeps the offline tools out.
	if _, err := cluster.Check(m.Nodes[1].Dir); !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("check of a running node's directory: %v, want ErrLocked", err)
	}
	if hash, err = l.DB().StateHash(); err != nil {
		t.Fatal(err)
	}
	tasks = l.DB().Stats().Tasks
	for i, n := range m.Nodes {
		dirs = append(dirs, n.Dir)
		if err := m.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	return dirs, hash, tasks
}

// TestCheckNodeDirectory: the offline check of a cluster node's directory
// reads its stable store, snapshots and raft log, recovers the state the
// node had (the same state hash as the live cluster's), and OpenReadOnly
// serves that state read-only.
func TestCheckNodeDirectory(t *testing.T) {
	dirs, hash, tasks := stoppedMesh(t)
	for i, dir := range dirs {
		rep, err := cluster.Check(dir)
		if err != nil {
			var out strings.Builder
			if rep != nil {
				rep.Print(&out)
			}
			t.Fatalf("%s: %v\n%s", dir, err, out.String())
		}
		if rep.Tasks != tasks || rep.Queues != 2 || rep.Term == 0 || rep.LastIndex == 0 || len(rep.Members) != 3 {
			t.Errorf("%s: %+v, want %d tasks in 2 queues, a term, an index, 3 members", dir, rep, tasks)
		}
		if i == 0 && (rep.Restored == "" || len(rep.Snapshots) != 1 || rep.Snapshots[0].Err != nil || rep.SnapshotIndex == 0 ||
			rep.FirstIndex <= 1 || rep.FirstIndex > rep.SnapshotIndex+1) {
			t.Errorf("%s: snapshots %+v restored %q: want recovery from the snapshot taken", dir, rep.Snapshots, rep.Restored)
		}
		ro, err := cluster.OpenReadOnly(dir, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := ro.StateHash(); err != nil || h != hash {
			t.Errorf("%s: state hash differs from the cluster's (%v)", dir, err)
		}
		ctx := within(t, 10*time.Second)
		if c, err := ro.Queue(ns, "b").Counts(ctx); err != nil || c.Scheduled != 10 {
			t.Errorf("%s: counts of b %+v, %v", dir, c, err)
		}
		if _, err := ro.Queue(ns, "b").Enqueue(ctx, engine.Task{}); !errors.Is(err, engine.ErrReadOnly) {
			t.Errorf("%s: enqueue offline: %v, want ErrReadOnly", dir, err)
		}
		if err := ro.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// flip inverts a byte of the file path at off (from the end when negative).
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckNodeDirectoryDamage: a flipped bit in each part of a node's
// directory is found and located (file, offset), and the read-only open
// refuses the directory.
func TestCheckNodeDirectoryDamage(t *testing.T) {
	dirs, _, _ := stoppedMesh(t)
	segs, err := filepath.Glob(filepath.Join(dirs[1], "raft", "log", "0*"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v, %v: want several", segs, err)
	}
	snaps, err := filepath.Glob(filepath.Join(dirs[0], "raft", "snapshots", "*", "state.bin"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots %v, %v", snaps, err)
	}
	for _, tc := range []struct {
		name, dir, file string
		off             int64
		want            []string
		part            func(*cluster.NodeReport) error
	}{
		{"log", dirs[1], segs[0], 40, []string{filepath.Base(segs[0]), "at offset"},
			func(r *cluster.NodeReport) error { return r.LogErr }},
		{"snapshot", dirs[0], snaps[0], 100, []string{"state.bin", "CRC-64"},
			func(r *cluster.NodeReport) error { return r.Snapshots[0].Err }},
		{"stable", dirs[2], filepath.Join(dirs[2], "raft", "stable"), 6, []string{"stable", "checksum"},
			func(r *cluster.NodeReport) error { return r.StableErr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flip(t, tc.file, tc.off)
			rep, err := cluster.Check(tc.dir)
			if !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("check: %v, want ErrCorrupt", err)
			}
			perr := tc.part(rep)
			if perr == nil {
				t.Fatalf("the report does not blame the %s: %+v", tc.name, rep)
			}
			for _, w := range tc.want {
				if !strings.Contains(perr.Error(), w) {
					t.Errorf("%s damage %q does not say %q", tc.name, perr, w)
				}
			}
			var out strings.Builder
			rep.Print(&out)
			if !strings.Contains(out.String(), "BAD") {
				t.Errorf("printed report says nothing bad:\n%s", out.String())
			}
			if _, err := cluster.OpenReadOnly(tc.dir, engine.Options{}); !errors.Is(err, engine.ErrCorrupt) {
				t.Errorf("read-only open: %v, want ErrCorrupt", err)
			}
		})
	}
	// Without its snapshot, n1's compacted log misses its first entries.
	if err := os.RemoveAll(filepath.Dir(snaps[0])); err != nil {
		t.Fatal(err)
	}
	rep, err := cluster.Check(dirs[0])
	if !errors.Is(err, engine.ErrCorrupt) || rep.LogErr == nil || !strings.Contains(rep.LogErr.Error(), "missing") {
		t.Errorf("check of a log missing its start: %v (log: %v)", err, rep.LogErr)
	}
}

// TestCheckNotANodeDirectory: a directory without a raft directory is
// refused as not a node's; a missing one as missing.
func TestCheckNotANodeDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := cluster.Check(dir); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("check of an empty directory: %v, want ErrInvalid", err)
	}
	if _, err := cluster.OpenReadOnly(dir, engine.Options{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("read-only open of an empty directory: %v, want ErrInvalid", err)
	}
	if _, err := cluster.Check(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("check of a missing directory: %v, want ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check created %v", entries)
	}
}

// TestCheckCountsEntriesThatAreNotCommands: a command entry whose bytes are
// not a docket command (which every node applies as nothing) is counted and
// warned about, not taken for damage.
func TestCheckCountsEntriesThatAreNotCommands(t *testing.T) {
	m := clustertest.NewMesh(t, clustertest.MeshOptions{Nodes: 1})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Raft().Apply([]byte{1, 0xff, 0xff, 0xff}, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.API().Queue(ns, "a").Enqueue(within(t, 10*time.Second), engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(0); err != nil {
		t.Fatal(err)
	}
	rep, err := cluster.Check(m.Nodes[0].Dir)
	if err != nil || rep.NotCommands != 1 || rep.Applied != 2 || rep.Tasks != 1 {
		t.Fatalf("check: %v, %+v", err, rep)
	}
	var out strings.Builder
	rep.Print(&out)
	if !strings.Contains(out.String(), "WARNING: 1 command entries of the log are not docket commands") {
		t.Errorf("report:\n%s", out.String())
	}
}
