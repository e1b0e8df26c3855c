// Command docket runs a demo of the docket durable task queue, serves a
// data directory over the network, and reads and acts on queues, offline on
// a directory or live on a server.
//
//	docket demo [-dir ./docket-data] [-tasks 2000]   run producers and workers, with live progress
//	docket serve [-dir DIR] [-listen ADDR] [flags]    the network API, /healthz, /readyz, -ui, -metrics
//	docket serve -raft ADDR -bootstrap | -join URL    a node of a replicated cluster (cluster.go)
//	docket cluster [remove ID | transfer [ID] | bench]   a cluster's members and figures; membership; its benchmark
//	docket token CALLER GRANT...                      a bearer token and its line of the tokens file
//	docket stats | top | inspect | get ID             look at queues and tasks
//	docket dead [-redrive ID,... | -redrive-all | -by-error]   the dead-letter queue;
//	            [-redrive-error TEXT | -delete-error TEXT]    by exact last error
//	docket enqueue [PAYLOAD | -] | cancel [-completed] ID... | run-now ID...   act on tasks
//	docket pause | resume | limits [-max-in-flight N] [-rate N -per D]   a queue's controls
//	docket kv get|scan|set|delete                     a namespace's key-value entries
//	docket verify [-dir] DIR                          check a directory the way Open (or a cluster node) would, changing nothing
//	docket repair [-salvage] [-dir] DIR               cut a torn log tail, keeping a copy; -salvage keeps
//	                                                  the valid part of a damaged log and reports the loss
//	docket bench [-workload W1,W2] [-durability always] [-json]   load generator
//	docket version                                    the build's version
//	docket help                                       the commands
//
// The queue commands are written once, over engine.API: with -dir they run
// on the directory's DB (opened read-only by the commands that only look,
// which create and change nothing and refuse a directory that is not a
// docket data directory; a cluster node's directory is read as of its raft
// log, offline.go in package cluster), with -server on the network client, which
// implements the same interface (remote.go holds that wiring). -json prints
// JSON for scripts. Every action of the dashboard (package ui) has its
// command, so that an operator can do on a live server from a shell what
// the dashboard does: redrive one, some or all dead tasks, or those with
// one exact last error (dead), delete dead tasks by last error (dead
// -delete-error), cancel (cancel), run now (run-now), delete retained
// completions by id or all of them (cancel -completed, -completed-all).
//
// With -raft, serve runs a cluster.Node under the server (cluster.go): the
// members' API URLs are kept in the replicated state, so that a follower
// names the leader's URL to a client; clustermetrics.go has the raft
// figures of /metrics, clusterproc.go the local clusters of processes that
// the cluster benchmark and the failure tests run.
//
// The command is a module of its own: serve pulls in Prometheus (through
// worker/metrics) and hashicorp/raft (through cluster), which a program
// importing only the engine must not get.
// The program is run(ctx, args, stdout, stderr), so its tests run commands
// in-process; runCLI takes the dialer, standard input and serve's reload
// signal as hooks.
package main
