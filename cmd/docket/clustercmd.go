package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/client"
)

const clusterAbout = `
Shows and changes the membership of a replicated docket (docket serve -raft).

  docket cluster [-server URL] [-json]          members, leader, term, commit and applied index per node
  docket cluster remove [-server URL] ID        remove a member (on the leader)
  docket cluster transfer [-server URL] [ID]    hand the leadership to ID, or to the most up-to-date follower
  docket cluster bench [flags]                  3-node throughput and latency against one node, and failover time

-server may list several nodes (comma separated): a change goes to the
leader among them. The status asks every member for its own figures at the
URL it published. With tokens the status needs read on */*, a change admin
on */*.`

// clusterAPI is what the cluster command asks of a server's client.
type clusterAPI interface {
	ClusterStatus(context.Context) (client.ClusterStatus, error)
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) (string, error)
}

func runCluster(ctx context.Context, c cli, args []string) error {
	sub := "status"
	if len(args) > 0 {
		switch args[0] {
		case "status", "remove", "transfer", "bench":
			sub, args = args[0], args[1:]
		case "help":
			args = []string{"-h"}
		}
	}
	if sub == "bench" {
		return runClusterBench(ctx, c, args)
	}
	name := "cluster"
	if sub != "status" {
		name += " " + sub
	}
	fs := newFlagsFor(c, name, "[status|remove ID|transfer [ID]|bench] [-server URL] [-json]", clusterAbout)
	serverURL := fs.String("server", "http://127.0.0.1:7070", "URL of a node (several: comma separated)")
	token := fs.String("token", "", "bearer token (default $DOCKET_TOKEN)")
	asJSON := fs.Bool("json", false, "print JSON, for scripts")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the command may take")
	pos, err := parseMixed(c, fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub == "status" && len(pos) > 0:
		return usageError{fmt.Sprintf("cluster: unknown subcommand %q (status, remove, transfer, bench)", pos[0])}
	case sub == "remove" && len(pos) != 1:
		return usageError{"cluster remove: want the id of the member to remove"}
	case sub == "transfer" && len(pos) > 1:
		return usageError{"cluster transfer: want at most one member id"}
	case *timeout <= 0:
		return usageError{name + ": -timeout must be more than 0"}
	}
	if *token == "" {
		*token = os.Getenv("DOCKET_TOKEN")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dial := func(ctx context.Context, url string) (clusterAPI, func(), error) {
		api, err := c.dial(ctx, url, *token)
		if err != nil {
			return nil, nil, err
		}
		ca, ok := api.(clusterAPI)
		if !ok {
			api.Close()
			return nil, nil, errors.New("this client cannot make cluster calls")
		}
		return ca, func() { api.Close() }, nil
	}
	api, done, err := dial(ctx, *serverURL)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "remove":
		if err := api.Remove(ctx, pos[0]); err != nil {
			return clusterErr(*serverURL, err)
		}
		if !*asJSON {
			fmt.Fprintf(c.stdout, "removed %s from the cluster\n", pos[0])
			return nil
		}
		return writeJSON(c.stdout, map[string]string{"removed": pos[0]})
	case "transfer":
		to := ""
		if len(pos) == 1 {
			to = pos[0]
		}
		leader, err := api.TransferLeadership(ctx, to)
		if err != nil {
			return clusterErr(*serverURL, err)
		}
		if !*asJSON {
			fmt.Fprintf(c.stdout, "leader: %s\n", leader)
			return nil
		}
		return writeJSON(c.stdout, map[string]string{"leader": leader})
	}
	st, err := api.ClusterStatus(ctx)
	if err != nil {
		return clusterErr(*serverURL, err)
	}
	nodes := clusterNodes(ctx, st, dial)
	if *asJSON {
		return writeJSON(c.stdout, clusterJSON{Leader: st.LeaderID, LeaderURL: st.LeaderURL, Nodes: nodes})
	}
	if st.LeaderID == "" {
		fmt.Fprintf(c.stdout, "leader: none known to %s\n", st.ID)
	} else {
		fmt.Fprintf(c.stdout, "leader: %s %s\n", st.LeaderID, st.LeaderURL)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTERM\tLAST\tCOMMIT\tAPPLIED\tCONTACT\tRAFT\tURL")
	var unreachable []nodeJSON
	for _, n := range nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\tunreachable\t\t\t\t\t\t%s\t%s\n", n.ID, n.RaftAddr, n.URL)
			unreachable = append(unreachable, n)
			continue
		}
		contact := "-"
		if n.State != "Leader" {
			contact = (time.Duration(n.LastContactMs) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", n.ID, n.State, n.Term, n.LastIndex, n.CommitIndex, n.AppliedIndex, contact, n.RaftAddr, n.URL)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range unreachable {
		fmt.Fprintf(c.stdout, "%s: %s\n", n.ID, n.Error)
	}
	return nil
}

// clusterErr says what a refusal of a cluster call means.
func clusterErr(url string, err error) error {
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return fmt.Errorf("%s is not a node of a cluster (docket serve without -raft)", url)
	}
	return err
}

type clusterJSON struct {
	Leader    string     `json:"leader"`
	LeaderURL string     `json:"leader_url"`
	Nodes     []nodeJSON `json:"nodes"`
}

type nodeJSON struct {
	ID            string `json:"id"`
	URL           string `json:"url"`
	RaftAddr      string `json:"raft_address"`
	Voter         bool   `json:"voter"`
	State         string `json:"state,omitempty"`
	Term          uint64 `json:"term,omitempty"`
	LastIndex     uint64 `json:"last_index,omitempty"`
	CommitIndex   uint64 `json:"commit_index,omitempty"`
	AppliedIndex  uint64 `json:"applied_index,omitempty"`
	LastContactMs int64  `json:"last_contact_ms,omitempty"`
	Error         string `json:"error,omitempty"`
}

// clusterNodes asks every member of st for its own figures, at once.
func clusterNodes(ctx context.Context, st client.ClusterStatus, dial func(context.Context, string) (clusterAPI, func(), error)) []nodeJSON {
	nodes := make([]nodeJSON, len(st.Members))
	var wg sync.WaitGroup
	for i, m := range st.Members {
		nodes[i] = nodeJSON{ID: m.ID, URL: m.URL, RaftAddr: m.RaftAddr, Voter: m.Voter}
		fill := func(s client.ClusterStatus) {
			n := &nodes[i]
			n.State, n.Term, n.LastIndex, n.CommitIndex, n.AppliedIndex = s.State, s.Term, s.LastIndex, s.CommitIndex, s.AppliedIndex
			n.LastContactMs = s.LastContact.Milliseconds()
		}
		switch {
		case m.ID == st.ID:
			fill(st)
			continue
		case m.URL == "":
			nodes[i].Error = "no URL published yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			api, done, err := dial(nctx, m.URL)
			if err != nil {
				nodes[i].Error = message(err)
				return
			}
			defer done()
			s, err := api.ClusterStatus(nctx)
			if err != nil {
				nodes[i].Error = message(err)
				return
			}
			fill(s)
		}()
	}
	wg.Wait()
	return nodes
}
