//go:build linux

package fuzz

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

var (
	killCycles = flag.Int("kill-cycles", 20, "TestKillLoop: how many times to SIGKILL the child process")
	killSeed   = flag.Uint64("kill-seed", 0, "TestKillLoop: seed of the kill timing (0: from the clock)")
)

// The child process of TestKillLoop is this test binary run again with
// these variables set.
const (
	envKillDir   = "DOCKET_KILL_CHILD_DIR"
	envKillCycle = "DOCKET_KILL_CHILD_CYCLE"
)

var killQueue = QueueKey{nsProd, "jobs"}

// TestKillLoop runs producers and workers in a child process under
// SyncAlways and kills it with SIGKILL at random moments, over and over on
// the same directory. The child reports on a pipe, after each call
// returns, every acknowledged enqueue, claim, completion and failure (and,
// before each enqueue and completion, that it is about to try). After each
// kill the directory is opened and checked like a total queue:
//
//   - lost: an acknowledged enqueue (deduplicated ones included) that is
//     neither present nor possibly completed (no completion of it was
//     attempted)
//   - unexpected: a task whose payload was never in an attempted enqueue
//   - duplicated: a task completed twice, or present again after its
//     completion was acknowledged
//   - fencing tokens and attempt counts only increase, per task, across
//     claims and crashes, and no token is handed out twice
//   - a dead task stays dead, and is never claimed again
//
// -kill-cycles sets the number of kills (default 20; -kill-cycles=1000 for a
// long run).
func TestKillLoop(t *testing.T) {
	if dir := os.Getenv(envKillDir); dir != "" {
		cycle, _ := strconv.Atoi(os.Getenv(envKillCycle))
		killChild(dir, cycle)
		return
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill seed %d (rerun with -kill-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir() // a real disk: fsync takes time, so kills land inside commits
	j := newJournal()
	deadline := time.Now().Add(50 * time.Second)
	cycles := 0
	for c := 0; c < *killCycles; c++ {
		if *killCycles <= 20 && time.Now().After(deadline) {
			t.Logf("stopping after %d cycles to stay within the time budget", c)
			break
		}
		lines := runChild(t, dir, c, time.Duration(60+rng.IntN(600))*time.Millisecond)
		j.cycle(t, c, lines)
		j.check(t, dir, c)
		cycles++
		if t.Failed() {
			break
		}
	}
	t.Logf("%d kill cycles: %d enqueues acknowledged, %d recovered (present or completed), %d lost, %d unexpected, %d duplicated; %d claims, %d completions, %d failures acknowledged; %d dead",
		cycles, len(j.acked), j.recovered, j.lost, j.unexpected, j.duplicated, j.claims, j.completes, j.fails, len(j.dead))
	if j.lost+j.unexpected+j.duplicated > 0 {
		t.Fatalf("lost %d, unexpected %d, duplicated %d", j.lost, j.unexpected, j.duplicated)
	}
	if len(j.acked) == 0 || j.completes == 0 {
		t.Fatal("the child acknowledged nothing: the loop tested nothing")
	}
	var valueBytes int64
	ents, _ := os.ReadDir(filepath.Join(dir, "vlog"))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			valueBytes += fi.Size()
		}
	}
	if valueBytes == 0 {
		t.Fatal("no cycle wrote to the value log")
	}
	t.Logf("value log: %d files, %d bytes", len(ents), valueBytes)
}

// runChild starts the child on dir, kills it after d and returns the whole
// lines it reported.
func runChild(t *testing.T, dir string, cycle int, d time.Duration) []string {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), envKillDir+"="+dir, envKillCycle+"="+strconv.Itoa(cycle))
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a partial last line was cut by the kill
			}
			lines = append(lines, strings.TrimSuffix(line, "\n"))
		}
	}()
	// The kill lands after a random run time: when it lands is what the
	// loop varies, so this sleep is the fault schedule, not a wait.
	time.Sleep(d)
	cmd.Process.Kill()
	cmd.Wait()
	<-done
	pr.Close()
	return lines
}

// killChild is the child process: producers and workers on dir until it is
// killed. Every line goes out in one write, after the call it reports has
// returned. Two producers enqueue the same ids under idempotency keys, as
// clients retrying do; a third enqueues ids of its own.
func killChild(dir string, cycle int) {
	out := os.NewFile(3, "report")
	var mu sync.Mutex
	report := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...) + "\n"
		mu.Lock()
		defer mu.Unlock()
		if _, err := out.WriteString(line); err != nil {
			os.Exit(2)
		}
	}
	// Every other cycle keeps values of 64 bytes or more in the value log,
	// which half the payloads and some progress records cross.
	threshold := 0
	if cycle%2 == 0 {
		threshold = 64
	}
	db, err := engine.Open(dir, engine.Options{Durability: engine.SyncAlways, SnapshotBytes: 48 << 10,
		SegmentBytes: 16 << 10, Logger: quiet, ValueThreshold: threshold})
	if err != nil {
		report("X open %v", err)
		select {}
	}
	report("O")
	q := db.Queue(killQueue.NS, killQueue.Name)
	// drained is poked by a worker each time a task leaves the backlog; a
	// producer that finds the backlog full waits for it instead of polling.
	drained := make(chan struct{}, 1)
	poke := func() {
		select {
		case drained <- struct{}{}:
		default:
		}
	}
	for p := range 3 {
		dedup := p < 2
		go func() {
			rng := rand.New(rand.NewPCG(uint64(cycle), uint64(p)))
			for n := 0; ; n++ {
				// Keep the backlog bounded, so that a long run measures
				// crashes rather than a growing queue.
				if c, err := q.Counts(ctx); err == nil && c.Ready+c.Scheduled > 1000 {
					<-drained
					continue
				}
				var tasks []engine.Task
				var uids []string
				for range 1 + rng.IntN(3) {
					uid := fmt.Sprintf("%d-%d-%d", cycle, p, n)
					key := ""
					if dedup {
						uid = fmt.Sprintf("%d-k-%d", cycle, n)
						key = uid
					}
					n++
					uids = append(uids, uid)
					report("e %s", uid)
					payload := fmt.Sprintf(`{"u":%q}`, uid)
					if n%2 == 0 {
						payload = fmt.Sprintf(`{"u":%q,"pad":%q}`, uid, padFor(uid))
					}
					tasks = append(tasks, engine.Task{Payload: []byte(payload), IdempotencyKey: key,
						Priority: rng.IntN(3), MaxAttempts: 3, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
				}
				res, err := q.EnqueueBatch(ctx, tasks)
				if err != nil {
					report("X enqueue %v", err)
					continue
				}
				for i, r := range res {
					report("E %s %d", uids[i], r.ID)
				}
				// Random gaps between enqueues vary where the kill cuts.
				time.Sleep(time.Duration(rng.IntN(6000)) * time.Microsecond)
			}
		}()
	}
	for w := range 3 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(cycle), uint64(100+w)))
			owner := fmt.Sprintf("w%d-%d", cycle, w)
			for {
				// ClaimWait parks until a task is enqueued, a retry comes due
				// or a lease expires: an idle worker does not poll.
				ls, err := q.ClaimWait(ctx, owner, time.Duration(20+rng.IntN(60))*time.Millisecond, 1+rng.IntN(8))
				if err != nil {
					report("X claim %v", err)
					continue
				}
				for _, l := range ls {
					report("C %d %d %d", l.ID, l.Token, l.Attempt)
				}
				for _, l := range ls {
					// Sometimes pause past the lease on the real clock the
					// child runs on: a zombie worker (the fault under test).
					if rng.IntN(10) == 0 {
						time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
					}
					switch x := rng.IntN(10); {
					case x < 7:
						report("d %d %d", l.ID, l.Token)
						_, err := q.Complete(ctx, l, engine.Done{})
						if err == nil {
							poke()
							report("D %d %d", l.ID, l.Token)
						} else {
							report("L %d %d %s", l.ID, l.Token, ErrClass(err))
						}
					case x < 9:
						permanent := rng.IntN(8) == 0
						err := q.Fail(ctx, l, engine.Failure{Err: "boom", Permanent: permanent})
						if err == nil {
							poke()
							dead := permanent || l.Attempt >= l.MaxAttempts
							report("F %d %d %d %t", l.ID, l.Token, l.Attempt, dead)
						} else {
							report("L %d %d %s", l.ID, l.Token, ErrClass(err))
						}
					default:
						progress := []byte(`{"p":1}`)
						if rng.IntN(2) == 0 {
							progress = []byte(fmt.Sprintf(`{"p":%q}`, padFor(strconv.FormatUint(l.ID, 10))))
						}
						if _, err := hb(ctx, q, l, 50*time.Millisecond, progress); err != nil {
							report("L %d %d %s", l.ID, l.Token, ErrClass(err))
						} else {
							report("H %d %d", l.ID, l.Token)
						}
					}
				}
			}
		}()
	}
	select {}
}

// journal is what the parent knows from every report of every cycle.
type journal struct {
	attempted map[string]bool           // uids an enqueue was attempted for
	acked     map[string]uint64         // uid -> id of acknowledged enqueues
	idOf      map[uint64]string         // id -> uid
	tryDone   map[uint64]bool           // ids a completion was attempted for
	doneAcks  map[uint64]int            // acknowledged completions per id
	tokens    map[uint64]map[uint64]int // id -> token -> attempt, of acknowledged claims
	maxToken  map[uint64]uint64         // newest token known durable per id
	maxAtt    map[uint64]int
	dead      map[uint64]bool // observed dead, or a dead-ending failure acknowledged
	present   map[uint64]bool // present at the last check

	recovered, lost, unexpected, duplicated int
	claims, completes, fails                int
}

func newJournal() *journal {
	return &journal{attempted: map[string]bool{}, acked: map[string]uint64{}, idOf: map[uint64]string{},
		tryDone: map[uint64]bool{}, doneAcks: map[uint64]int{}, tokens: map[uint64]map[uint64]int{},
		maxToken: map[uint64]uint64{}, maxAtt: map[uint64]int{}, dead: map[uint64]bool{}, present: map[uint64]bool{}}
}

// cycle takes in one child's reports.
func (j *journal) cycle(t *testing.T, c int, lines []string) {
	t.Helper()
	claimed := map[uint64]bool{}
	for _, line := range lines {
		f := strings.Fields(line)
		num := func(i int) uint64 { n, _ := strconv.ParseUint(f[i], 10, 64); return n }
		switch f[0] {
		case "X":
			t.Errorf("cycle %d: the child got an unexpected error: %s", c, line)
		case "e":
			j.attempted[f[1]] = true
		case "E":
			uid, id := f[1], num(2)
			if prev, ok := j.acked[uid]; ok && prev != id {
				t.Errorf("cycle %d: %s acknowledged as task %d and as task %d", c, uid, prev, id)
			}
			j.acked[uid] = id
			if prev, ok := j.idOf[id]; ok && prev != uid {
				t.Errorf("cycle %d: task %d acknowledged for %s and for %s", c, id, prev, uid)
			}
			j.idOf[id] = uid
		case "C":
			id, tok, att := num(1), num(2), int(num(3))
			j.claims++
			if j.dead[id] {
				t.Errorf("cycle %d: task %d claimed (token %d) after it was dead", c, id, tok)
			}
			if tok <= j.maxToken[id] {
				t.Errorf("cycle %d: task %d claimed with token %d, not above %d known from before", c, id, tok, j.maxToken[id])
			}
			if j.tokens[id] == nil {
				j.tokens[id] = map[uint64]int{}
			}
			if _, dup := j.tokens[id][tok]; dup {
				t.Errorf("cycle %d: task %d leased twice with token %d", c, id, tok)
			}
			j.tokens[id][tok] = att
			claimed[id] = true
		case "d":
			j.tryDone[num(1)] = true
		case "D":
			id := num(1)
			j.completes++
			j.doneAcks[id]++
			if j.doneAcks[id] > 1 {
				j.duplicated++
				t.Errorf("cycle %d: task %d completed twice", c, id)
			}
		case "F":
			j.fails++
			if f[4] == "true" {
				j.dead[num(1)] = true
			}
		}
	}
	// Tokens and attempts rise together: order this cycle's claims (and
	// the ones before) by token.
	for id := range claimed {
		toks := make([]uint64, 0, len(j.tokens[id]))
		for tok := range j.tokens[id] {
			toks = append(toks, tok)
		}
		slices.Sort(toks)
		for i := 1; i < len(toks); i++ {
			if a, b := j.tokens[id][toks[i-1]], j.tokens[id][toks[i]]; b <= a {
				t.Errorf("cycle %d: task %d attempt %d with token %d after attempt %d with token %d", c, id, b, toks[i], a, toks[i-1])
			}
		}
		last := toks[len(toks)-1]
		j.maxToken[id], j.maxAtt[id] = max(j.maxToken[id], last), max(j.maxAtt[id], j.tokens[id][last])
	}
}

// check opens the directory the killed child left and compares it with
// everything reported so far.
func (j *journal) check(t *testing.T, dir string, c int) {
	t.Helper()
	// Reads report the state at the clock's now, so listings made one after
	// another on a running clock could miss a lease expiring between the
	// ready and the in-flight listing: the check reads at one moment.
	db, err := engine.Open(dir, engine.Options{Logger: quiet, SnapshotBytes: -1, Clock: engine.NewManualClock(time.Now())})
	if err != nil {
		t.Fatalf("cycle %d: open after the kill: %v", c, err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("cycle %d: verify: %v", c, err)
	}
	q := db.Queue(killQueue.NS, killQueue.Name)
	now := map[uint64]engine.TaskInfo{}
	for _, s := range States {
		cursor := ""
		for {
			page, err := q.List(ctx, engine.ListOptions{State: s, Limit: engine.MaxBatch, Cursor: cursor})
			if err != nil {
				t.Fatalf("cycle %d: list: %v", c, err)
			}
			for _, info := range page.Tasks {
				now[info.ID] = info
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	j.recovered, j.lost = 0, 0
	for id, info := range now {
		var p struct{ U, Pad string }
		if err := json.Unmarshal(info.Payload, &p); err != nil || !j.attempted[p.U] || p.Pad != "" && p.Pad != padFor(p.U) {
			j.unexpected++
			t.Errorf("cycle %d: task %d with payload %s was never enqueued", c, id, info.Payload)
			continue
		}
		if pr := info.Progress; len(pr) > 0 && string(pr) != `{"p":1}` && string(pr) != fmt.Sprintf(`{"p":%q}`, padFor(strconv.FormatUint(id, 10))) {
			t.Errorf("cycle %d: task %d with progress %s, never reported", c, id, pr)
		}
		if uid, ok := j.idOf[id]; ok && uid != p.U {
			t.Errorf("cycle %d: task %d holds %s, was acknowledged for %s", c, id, p.U, uid)
		}
		if j.doneAcks[id] > 0 {
			j.duplicated++
			t.Errorf("cycle %d: task %d is back (%s) after its completion was acknowledged", c, id, info.State)
		}
		if info.Token < j.maxToken[id] {
			t.Errorf("cycle %d: task %d recovered with token %d, below acknowledged token %d", c, id, info.Token, j.maxToken[id])
		}
		if info.Attempts < j.maxAtt[id] {
			t.Errorf("cycle %d: task %d recovered with %d attempts, below acknowledged attempt %d", c, id, info.Attempts, j.maxAtt[id])
		}
		if j.dead[id] && info.State != engine.Dead {
			t.Errorf("cycle %d: task %d was dead and is now %s", c, id, info.State)
		}
		if info.State == engine.Dead {
			j.dead[id] = true
		}
		j.maxToken[id] = max(j.maxToken[id], info.Token)
	}
	for uid, id := range j.acked {
		_, ok := now[id]
		switch {
		case ok || j.doneAcks[id] > 0:
			j.recovered++
		case j.tryDone[id]:
			j.recovered++ // its completion was attempted and may have committed
		default:
			j.lost++
			t.Errorf("cycle %d: acknowledged enqueue %s (task %d) is gone", c, uid, id)
		}
	}
	for id := range j.present {
		if _, ok := now[id]; !ok && !j.tryDone[id] {
			t.Errorf("cycle %d: task %d disappeared without a completion attempt", c, id)
		}
	}
	j.present = map[uint64]bool{}
	for id := range now {
		j.present[id] = true
	}
}

// padFor is the padding of a payload or progress record that crosses the
// value threshold, made of key so that bytes of another record show.
func padFor(key string) string { return strings.Repeat(key+".", 1+96/(len(key)+1))[:96] }
