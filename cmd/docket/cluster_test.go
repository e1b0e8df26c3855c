package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
)

// The tests here run nodes of a cluster in-process (runServe with -raft on
// loopback, raft on its TCP transport): membership, redirects, stale reads,
// readiness, figures and the cluster command. The real-process failure
// harness is in cluster_process_test.go.

// startNode runs `docket serve -raft 127.0.0.1:0 -id id args...` in-process
// on dir and returns once it serves (a node that joins has joined).
func startNode(t *testing.T, dir, id string, args ...string) *served {
	t.Helper()
	return serveInProcess(t, append([]string{"-dir", dir, "-raft", "127.0.0.1:0", "-id", id, "-log-level", "info"}, args...)...)
}

// startCluster starts three nodes: n1 founds the cluster, n2 and n3 join it
// through n1's API.
func startCluster(t *testing.T, args ...string) []*served {
	t.Helper()
	root := t.TempDir()
	n1 := startNode(t, filepath.Join(root, "n1"), "n1", append([]string{"-bootstrap"}, args...)...)
	n1.log.waitFor(t, "entering leader state")
	nodes := []*served{n1}
	for _, id := range []string{"n2", "n3"} {
		nodes = append(nodes, startNode(t, filepath.Join(root, id), id, append([]string{"-join", n1.base}, args...)...))
	}
	return nodes
}

func clusterCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func dialNodes(t *testing.T, opts client.Options, nodes ...*served) *client.Client {
	t.Helper()
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.base)
	}
	c, err := client.Dial(clusterCtx(t, 20*time.Second), strings.Join(urls, ","), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterOf runs `docket cluster -server base -json`.
func clusterOf(t *testing.T, base string) clusterJSON {
	t.Helper()
	code, out, errs := docket(t, "cluster", "-server", base, "-json")
	if code != 0 {
		t.Fatalf("docket cluster: exit %d\n%s%s", code, out, errs)
	}
	return decode[clusterJSON](t, out)
}

// post sends a JSON call to base's API with the headers given and returns
// the status, the response headers and the body.
func clusterPost(t *testing.T, base, procedure, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", base+procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestClusterServe: three nodes in-process. A follower sends writes and
// linearizable reads to the leader's URL (Docket-Leader), serves stale
// reads itself, and a client given every URL works through whichever it
// reaches first; `docket cluster` shows every node's figures; /readyz and
// /metrics carry the raft figures, per follower on the leader; transfer,
// a clean stop of the leader (handing its leadership over) and remove
// change the membership as they say.
func TestClusterServe(t *testing.T) {
	nodes := startCluster(t, "-metrics")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	c := dialNodes(t, client.Options{}, n3, n2, n1)
	q := c.Queue(engine.NS("acme", "prod"), "emails")
	// The enqueues carry idempotency keys: a leadership lost while one
	// commits (raft's election timeouts are short, and a loaded machine
	// misses them) leaves its outcome unknown, which the client may then
	// repeat only for a keyed enqueue, as a program should.
	res, err := q.Enqueue(clusterCtx(t, 20*time.Second), engine.Task{Payload: []byte(`{"to":"a@b"}`), IdempotencyKey: "first"})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(clusterCtx(t, 20*time.Second), "w1", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != res.ID {
		t.Fatalf("claim through the cluster: %v %v", ls, err)
	}
	if _, err := q.Complete(clusterCtx(t, 20*time.Second), ls[0], engine.Done{}); err != nil {
		t.Fatal(err)
	}

	enqueue := `{"namespace":{"project":"acme","scope":"prod"},"queue":"emails","task":{"payload":{"n":2}}}`
	code, h, body := clusterPost(t, n2.base, "/docket.v1.Queues/Enqueue", enqueue)
	if code != http.StatusServiceUnavailable || h.Get(client.LeaderHeader) != n1.base {
		t.Fatalf("a write on a follower: %d, %s %q, want 503 naming %s\n%s", code, client.LeaderHeader, h.Get(client.LeaderHeader), n1.base, body)
	}
	counts := `{"namespace":{"project":"acme","scope":"prod"},"queue":"emails"}`
	if code, h, _ := clusterPost(t, n3.base, "/docket.v1.Queues/Counts", counts); code != http.StatusServiceUnavailable || h.Get(client.LeaderHeader) != n1.base {
		t.Fatalf("a linearizable read on a follower: %d, leader %q", code, h.Get(client.LeaderHeader))
	}
	// A stale read is answered by the follower itself, from what it has.
	if code, _, body := clusterPost(t, n3.base, "/docket.v1.Queues/Counts", counts, "Docket-Stale-Reads", "true"); code != http.StatusOK {
		t.Fatalf("a stale read on a follower: %d\n%s", code, body)
	}

	// A client of the follower alone follows it to the leader for writes.
	f := dialNodes(t, client.Options{}, n2)
	if _, err := f.Queue(engine.NS("acme", "prod"), "emails").Enqueue(clusterCtx(t, 20*time.Second), engine.Task{IdempotencyKey: "via-follower"}); err != nil {
		t.Fatalf("an enqueue through a follower's URL: %v", err)
	}
	stale := dialNodes(t, client.Options{StaleReads: true}, n3)
	if _, err := stale.Queue(engine.NS("acme", "prod"), "emails").Counts(clusterCtx(t, 20*time.Second)); err != nil {
		t.Fatalf("a stale read of a follower: %v", err)
	}

	st := clusterOf(t, n2.base)
	if st.Leader != "n1" || st.LeaderURL != n1.base || len(st.Nodes) != 3 {
		t.Fatalf("docket cluster: %+v", st)
	}
	for _, n := range st.Nodes {
		if n.Error != "" || n.Term == 0 || n.CommitIndex == 0 || n.AppliedIndex == 0 || !n.Voter || n.URL == "" {
			t.Errorf("node %s: %+v", n.ID, n)
		}
		if (n.State == "Leader") != (n.ID == "n1") {
			t.Errorf("node %s is %s", n.ID, n.State)
		}
	}
	code, out, _ := docket(t, "cluster", "-server", n3.base)
	if code != 0 || !strings.Contains(out, "leader: n1 "+n1.base) || strings.Count(out, "Follower") != 2 {
		t.Fatalf("docket cluster:\n%s", out)
	}

	for _, n := range nodes {
		if code, _, body := clusterGet(t, n.base+"/readyz"); code != 200 {
			t.Errorf("%s /readyz: %d %s", n.base, code, body)
		}
	}
	body = clusterMetrics(t, n1.base, `docket_raft_follower_lag_entries{member="n3"}`)
	for _, want := range []string{"docket_raft_leader 1", "docket_raft_has_leader 1", "docket_raft_voters 3",
		`docket_raft_follower_up{member="n2"} 1`, "docket_raft_term ", "docket_raft_commit_index ", "docket_raft_applied_index ",
		"docket_raft_leader_changes_total "} {
		if !strings.Contains(body, want) {
			t.Errorf("the leader's /metrics lack %q", want)
		}
	}
	if _, _, body := clusterGet(t, n2.base+"/metrics"); !strings.Contains(body, "docket_raft_leader 0") || !strings.Contains(body, "docket_raft_last_contact_seconds ") {
		t.Errorf("a follower's /metrics:\n%.3000s", body)
	}

	code, out, errs := docket(t, "cluster", "transfer", "-server", n3.base, "n2")
	if code != 0 || strings.TrimSpace(out) != "leader: n2" {
		t.Fatalf("cluster transfer n2: exit %d\n%s%s", code, out, errs)
	}
	if st := clusterOf(t, n1.base); st.Leader != "n2" {
		t.Fatalf("after the transfer: %+v", st)
	}

	// A clean stop of the leader hands the leadership over first.
	if code := n2.shutdown(t); code != 0 {
		t.Fatalf("the leader's clean stop: exit %d\n%s", code, n2.log.String())
	}
	if !strings.Contains(n2.log.String(), "leadership handed over before stopping") {
		t.Fatalf("the leader stopped without handing over:\n%s", n2.log.String())
	}
	if _, err := q.Enqueue(clusterCtx(t, 20*time.Second), engine.Task{IdempotencyKey: "after-stop"}); err != nil {
		t.Fatalf("an enqueue after the leader stopped: %v", err)
	}
	st = clusterOf(t, n1.base)
	if st.Leader != "n1" && st.Leader != "n3" {
		t.Fatalf("no new leader: %+v", st)
	}
	code, out, errs = docket(t, "cluster", "remove", "-server", n1.base+","+n3.base, "n2")
	if code != 0 || !strings.Contains(out, "removed n2") {
		t.Fatalf("cluster remove: exit %d\n%s%s", code, out, errs)
	}
	if st := clusterOf(t, n3.base); len(st.Nodes) != 2 {
		t.Fatalf("after removing n2: %+v", st)
	}
	if _, err := q.Enqueue(clusterCtx(t, 20*time.Second), engine.Task{IdempotencyKey: "two-nodes"}); err != nil {
		t.Fatalf("an enqueue on two nodes: %v", err)
	}
}

// waitMetrics fetches base's /metrics until it holds want (the leader polls
// its followers every second), and returns it.
func clusterMetrics(t *testing.T, base, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, _, body := clusterGet(t, base+"/metrics")
		if strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics of %s never showed %q:\n%.4000s", base, want, body)
		}
		<-tick.C
	}
}

func clusterGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestSingleNodeCluster: a cluster of one is a docket server: calls work,
// and a restart on its directory (with the id it recorded) has the state.
func TestSingleNodeCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "solo")
	n := startNode(t, dir, "solo", "-bootstrap")
	n.log.waitFor(t, "entering leader state")
	c := dialNodes(t, client.Options{}, n)
	q := c.Queue(engine.NS("acme", "prod"), "emails")
	var ids []uint64
	for i := range 3 {
		res, err := q.Enqueue(clusterCtx(t, 20*time.Second), engine.Task{Payload: []byte(`{"i":` + itoa(uint64(i)) + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	ls, err := q.Claim(clusterCtx(t, 20*time.Second), "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != ids[0] {
		t.Fatalf("claim: %v %v", ls, err)
	}
	if _, err := q.Complete(clusterCtx(t, 20*time.Second), ls[0], engine.Done{}); err != nil {
		t.Fatal(err)
	}
	if code := n.shutdown(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, n.log.String())
	}
	if strings.Contains(n.log.String(), "leadership handed over") {
		t.Error("a cluster of one handed its leadership to no one")
	}

	// The directory recorded the id: no -id, no -bootstrap this time.
	n = serveInProcess(t, "-dir", dir, "-raft", "127.0.0.1:0")
	n.log.waitFor(t, "entering leader state")
	c = dialNodes(t, client.Options{}, n)
	counts, err := c.Queue(engine.NS("acme", "prod"), "emails").Counts(clusterCtx(t, 20*time.Second))
	if err != nil || counts.Ready != 2 || counts.InFlight != 0 {
		t.Fatalf("after the restart: %+v %v", counts, err)
	}
	if st := clusterOf(t, n.base); st.Leader != "solo" || len(st.Nodes) != 1 || st.Nodes[0].URL != n.base {
		t.Fatalf("docket cluster of one, restarted on another port: %+v", st)
	}
}

// TestClusterNodeWithoutLeader: a node that was never bootstrapped nor
// joined knows no leader: /readyz says so, writes are refused as
// unavailable (the client tries elsewhere), /metrics shows it.
func TestClusterNodeWithoutLeader(t *testing.T) {
	n := startNode(t, filepath.Join(t.TempDir(), "alone"), "alone", "-metrics")
	code, _, body := clusterGet(t, n.base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
		t.Fatalf("/readyz without a leader: %d %s", code, body)
	}
	if code, h, _ := clusterPost(t, n.base, "/docket.v1.Queues/Enqueue", `{"namespace":{"project":"a","scope":"b"},"queue":"q","task":{}}`); code != http.StatusServiceUnavailable || h.Get("Docket-Unavailable") == "" || h.Get(client.LeaderHeader) != "" {
		t.Fatalf("a write on a node without a leader: %d %v", code, h)
	}
	if _, _, body := clusterGet(t, n.base+"/metrics"); !strings.Contains(body, "docket_raft_has_leader 0") {
		t.Fatalf("/metrics:\n%.3000s", body)
	}
	c, err := client.Dial(clusterCtx(t, 20*time.Second), n.base, client.Options{MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Queue(engine.NS("a", "b"), "q").Enqueue(clusterCtx(t, 20*time.Second), engine.Task{})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("an enqueue on a node without a leader: %v, want ErrUnavailable", err)
	}
}

// TestClusterFlags: the cluster flags refuse what does not fit, before
// touching anything, and a directory keeps the id of its first start.
func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bootstrap"}, "-bootstrap needs -raft"},
		{[]string{"-join", "http://127.0.0.1:1"}, "-join needs -raft"},
		{[]string{"-raft-peer", "n2=127.0.0.1:1"}, "-raft-peer needs -raft"},
		{[]string{"-raft", "nowhere"}, "want HOST:PORT"},
		{[]string{"-raft", "127.0.0.1:0", "-bootstrap", "-join", "http://127.0.0.1:1"}, "give one of them"},
		{[]string{"-raft", "127.0.0.1:0", "-durability", "never"}, "-durability and -sync-every are for a standalone server"},
		{[]string{"-raft", "127.0.0.1:0", "-raft-peer", "n2"}, "want ID=HOST:PORT"},
		{[]string{"-raft", "127.0.0.1:0", "-advertise-url", "ftp://x"}, "http:// or https://"},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		code, _, errs := docket(t, append([]string{"serve", "-dir", dir, "-listen", "127.0.0.1:0"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("serve %v made the directory", tc.args)
		}
	}

	dir := filepath.Join(t.TempDir(), "d")
	code, _, errs := docket(t, "serve", "-dir", dir, "-listen", "127.0.0.1:0", "-raft", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "give the node an -id") {
		t.Errorf("a port picked at each start as the id: exit %d %q", code, errs)
	}
	n := startNode(t, dir, "first", "-bootstrap")
	n.shutdown(t)
	code, _, errs = docket(t, "serve", "-dir", dir, "-listen", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-id", "second")
	if code != 1 || !strings.Contains(errs, `is the directory of node "first"`) {
		t.Errorf("another id on the directory: exit %d %q", code, errs)
	}

	code, _, errs = docket(t, "cluster", "remove")
	if code != 2 || !strings.Contains(errs, "want the id") {
		t.Errorf("cluster remove without an id: exit %d %q", code, errs)
	}
	solo := serveInProcess(t, "-dir", filepath.Join(t.TempDir(), "standalone"))
	code, _, errs = docket(t, "cluster", "-server", solo.base)
	if code != 1 || !strings.Contains(errs, "is not a node of a cluster") {
		t.Errorf("cluster on a standalone server: exit %d %q", code, errs)
	}
}

// TestClusterCallsNeedGrants: with tokens, the cluster status needs read
// on */*, a change of membership admin on */*, and a node joins with a
// token that has it.
func TestClusterCallsNeedGrants(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	opsTok, opsLine, _ := newTokenLine(t, "ops", "*/*:read+admin")
	readTok, readLine, _ := newTokenLine(t, "viewer", "*/*:read")
	appTok, appLine, _ := newTokenLine(t, "app", "acme/prod:enqueue")
	if err := os.WriteFile(tokens, []byte(opsLine+"\n"+readLine+"\n"+appLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	n1 := startNode(t, filepath.Join(root, "n1"), "n1", "-bootstrap", "-tokens", tokens)
	n1.log.waitFor(t, "entering leader state")

	code, _, errs := docket(t, "serve", "-dir", filepath.Join(root, "n2"), "-listen", "127.0.0.1:0", "-raft", "127.0.0.1:0",
		"-id", "n2", "-tokens", tokens, "-join", n1.base, "-join-token", appTok)
	if code != 1 || !strings.Contains(errs, "lacks admin on */*") {
		t.Fatalf("a join with a token without admin: exit %d %q", code, errs)
	}
	startNode(t, filepath.Join(root, "n2"), "n2", "-tokens", tokens, "-join", n1.base, "-join-token", opsTok)

	for _, tc := range []struct {
		token string
		args  []string
		code  int
	}{
		{appTok, []string{"cluster"}, 1},
		{readTok, []string{"cluster"}, 0},
		{readTok, []string{"cluster", "transfer"}, 1},
		{opsTok, []string{"cluster", "transfer"}, 0},
	} {
		code, out, errs := docket(t, append(tc.args, "-server", n1.base, "-token", tc.token)...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errs)
		}
		if tc.code != 0 && !strings.Contains(errs, "permission") && !strings.Contains(errs, "lacks") {
			t.Errorf("%v: %q does not say what is missing", tc.args, errs)
		}
	}
}

// newTokenLine makes a token and its line of the tokens file.
func newTokenLine(t *testing.T, caller string, grants ...string) (string, string, error) {
	t.Helper()
	code, out, errs := docket(t, append([]string{"token", "-json", caller}, grants...)...)
	if code != 0 {
		t.Fatalf("docket token: %d %s", code, errs)
	}
	var tok struct{ Token, Line string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatal(err)
	}
	return tok.Token, tok.Line, nil
}

// TestClusterDashboardPage: `serve -raft -ui` gives the dashboard's
// cluster page the node's own figures: on the leader, every member with
// its role and API URL, the leader's commit index, and each follower's
// commit and applied indexes as the follower reports them. A follower's
// overview and queue pages read its own state (stale reads) under a banner
// naming the leader, instead of failing with "not the leader".
func TestClusterDashboardPage(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes; run without -short")
	}
	nodes := startCluster(t, "-ui")
	c := dialNodes(t, client.Options{}, nodes...)
	for range 5 {
		if _, err := c.Queue(engine.NS("acme", "prod"), "emails").Enqueue(clusterCtx(t, 20*time.Second), engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	st := clusterOf(t, nodes[0].base)
	base := st.LeaderURL
	if base == "" {
		t.Fatalf("no URL for the leader: %+v", st)
	}
	code, _, body := clusterGet(t, base+"/ui/cluster")
	if code != http.StatusOK {
		t.Fatalf("cluster page: %d\n%s", code, body)
	}
	for _, n := range nodes {
		if !strings.Contains(body, n.base) {
			t.Errorf("the cluster page does not show %s", n.base)
		}
	}
	for _, want := range []string{"n1", "n2", "n3", "leader", "follower"} {
		if !strings.Contains(body, want) {
			t.Errorf("the cluster page lacks %q", want)
		}
	}
	// The leader polls its followers every second: their applied indexes
	// show once it has heard from them.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, _, body = clusterGet(t, base+"/ui/cluster")
		rows := memberRows(body)
		ok := len(rows) == 3
		for id, r := range rows {
			if id != st.Leader && (r[0] == 0 || r[1] == 0) {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader's cluster page never showed its followers' commit and applied indexes: %v\n%s", rows, body)
		}
		<-tick.C
	}

	for _, n := range nodes {
		if n.base == base {
			continue
		}
		for _, path := range []string{"/ui/", "/ui/queue?p=acme&s=prod&q=emails"} {
			code, _, body := clusterGet(t, n.base+path)
			if code != http.StatusOK {
				t.Fatalf("%s on follower %s: %d\n%s", path, n.base, code, body)
			}
			for _, want := range []string{"This node is a follower", "node <strong>" + st.Leader + "</strong>",
				`<a href="` + base + `/ui/">its dashboard</a>`, "emails"} {
				if !strings.Contains(body, want) {
					t.Errorf("%s on follower %s lacks %q:\n%s", path, n.base, want, body)
				}
			}
		}
	}
	// The leader's pages have no banner.
	if code, _, body := clusterGet(t, base+"/ui/"); code != http.StatusOK || strings.Contains(body, "This node is a follower") {
		t.Fatalf("the leader's overview: %d\n%s", code, body)
	}
}

var (
	memberRowRE = regexp.MustCompile(`(?s)<tr>\s*<th scope="row">([^<]+?)(?: <span|</th>)(.*?)</tr>`)
	numCellRE   = regexp.MustCompile(`<td class="num">([0-9,]+)</td>`)
)

// memberRows reads the members table of a cluster page: id to its commit
// and applied indexes.
func memberRows(body string) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, m := range memberRowRE.FindAllStringSubmatch(body, -1) {
		nums := numCellRE.FindAllStringSubmatch(m[2], -1)
		if len(nums) < 2 {
			continue
		}
		var r [2]uint64
		for i := range r {
			r[i], _ = strconv.ParseUint(strings.ReplaceAll(nums[i][1], ",", ""), 10, 64)
		}
		out[m[1]] = r
	}
	return out
}

// TestClusterBenchFlags: the benchmark refuses what it cannot run.
func TestClusterBenchFlags(t *testing.T) {
	for _, args := range [][]string{{"-workload", "W9"}, {"-n", "0"}, {"-failovers", "-1"}, {"extra"}} {
		code, _, errs := docket(t, append([]string{"cluster", "bench"}, args...)...)
		if code != 2 {
			t.Errorf("cluster bench %v: exit %d %q", args, code, errs)
		}
	}
}
