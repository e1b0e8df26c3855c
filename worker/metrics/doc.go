// Package metrics exports a docket engine and its workers to Prometheus.
//
// A Collector is three things at once: an engine.Observer that counts task
// events per queue and times log fsyncs and snapshots as they happen; a
// worker.Middleware that times handler runs; and a prometheus.Collector
// that, at scrape time, reads the number of tasks per queue and state (and
// the engine's counters) from the API it watches. Wiring it is two calls
// and a registration:
//
//	c := metrics.New(metrics.Options{})
//	db, err := c.Open(dir, engine.Options{}) // Observer set, DB watched
//	...
//	c.Instrument(w)                          // each Worker's middleware
//	prometheus.MustRegister(c)
//
// (Collector.Observe, Collector.Watch and Collector.Middleware are the
// separate steps, for an engine opened elsewhere or an API that is not a
// DB.) At its first scrapes the Collector warns once, through
// Options.Logger, of a step that is missing: no API watched; a watched DB
// that commits without ever calling the Collector (not its Observer); tasks
// claimed while no Worker uses the middleware.
//
// On a network client (package client) the engine runs in the server's
// process: Watch the client for the queues' gauges and the engine counters
// (read with the client's Stats, which needs admin on */* where the server
// has tokens) and Instrument the Workers; the task events, fsync and
// snapshot timings are the server's own (`docket serve -metrics`).
//
// Nothing here runs unless it is plugged in: an engine without an Observer
// and a worker without the middleware pay nothing, and neither the engine
// nor the worker package depends on Prometheus (this is a module of its
// own).
//
// Every per-queue series is labelled with the namespace's project and
// scope, and the queue. The per-state gauges exist while the queue holds
// tasks (a state with none reads 0); when the queue is gone (the watched
// API no longer lists it) its gauges disappear, and so do its counters and
// histograms at the first scrape that saw no event for it: nothing is kept
// for queues that no longer exist.
//
// # Metrics
//
// With the default prefix "docket":
//
//	docket_tasks{project,scope,queue,state}                       gauge, at scrape (ready, scheduled, in_flight, dead, completed)
//	docket_tasks_enqueued_total{project,scope,queue}              counter
//	docket_tasks_claimed_total{project,scope,queue}               counter
//	docket_tasks_completed_total{project,scope,queue}             counter
//	docket_tasks_failed_total{project,scope,queue}                counter, handler runs that returned an error (middleware)
//	docket_tasks_retried_total{project,scope,queue}               counter, failures scheduled for another attempt
//	docket_tasks_dead_lettered_total{project,scope,queue}         counter
//	docket_tasks_lease_lost_total{project,scope,queue}            counter, stale completions, failures and heartbeats refused
//	docket_tasks_reclaimed_total{project,scope,queue}             counter, expired leases taken back
//	docket_tasks_cancelled_total{project,scope,queue}             counter
//	docket_tasks_redriven_total{project,scope,queue}              counter
//	docket_calls_denied_total{project,scope}                      counter, see below
//	docket_handler_duration_seconds{project,scope,queue,outcome}  histogram (middleware)
//	docket_task_latency_seconds{project,scope,queue}              histogram, enqueue to completion
//	docket_wal_fsync_duration_seconds                             histogram
//	docket_wal_fsync_group_size                                   histogram, commits covered by one fsync
//	docket_snapshot_duration_seconds                              histogram
//	docket_snapshot_bytes                                         gauge, size of the last snapshot
//	docket_snapshot_failures_total                                counter
//	docket_commits_total, docket_log_bytes_total, docket_log_syncs_total,
//	docket_snapshots_total                                        counters, at scrape
//	docket_task_records                                           gauge, at scrape
//
// A refused call names a namespace the caller chose, which may not exist:
// docket_calls_denied_total has a series per namespace only for namespaces
// the Collector keeps queues of, and counts refusals naming any other
// namespace (and calls refused outside any namespace) under empty project
// and scope labels. So callers inventing names cost one series in all,
// and a namespace's series goes with its queues.
package metrics
