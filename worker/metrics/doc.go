// Package metrics exports a docket engine and its workers to Prometheus.
//
// A Collector is three things at once: an engine.Observer (set it as
// engine.Options.Observer before Open) that counts task events per queue
// and times log fsyncs and snapshots as they happen; a worker.Middleware
// (Collector.Middleware) that times handler runs; and a
// prometheus.Collector that, at scrape time, reads the number of tasks per
// queue and state and the engine's counters from the DB given to Watch.
// Register it with a prometheus.Registerer.
//
// Nothing here runs unless it is plugged in: an engine without an Observer
// and a worker without the middleware pay nothing, and the worker package
// does not depend on Prometheus.
//
// # Metrics
//
// With the default prefix "docket":
//
//	docket_tasks{namespace,queue,state}                  gauge, at scrape (ready, scheduled, in_flight, dead, completed)
//	docket_tasks_enqueued_total{namespace,queue}         counter
//	docket_tasks_claimed_total{namespace,queue}          counter
//	docket_tasks_completed_total{namespace,queue}        counter
//	docket_tasks_failed_total{namespace,queue}           counter, handler runs that returned an error (middleware)
//	docket_tasks_retried_total{namespace,queue}          counter, failures scheduled for another attempt
//	docket_tasks_dead_lettered_total{namespace,queue}    counter
//	docket_tasks_lease_lost_total{namespace,queue}       counter, stale completions, failures and heartbeats refused
//	docket_tasks_reclaimed_total{namespace,queue}        counter, expired leases taken back
//	docket_tasks_cancelled_total{namespace,queue}        counter
//	docket_tasks_redriven_total{namespace,queue}         counter
//	docket_calls_denied_total{namespace}                 counter
//	docket_handler_duration_seconds{namespace,queue,outcome} histogram (middleware)
//	docket_task_latency_seconds{namespace,queue}         histogram, enqueue to completion
//	docket_wal_fsync_duration_seconds                    histogram
//	docket_wal_fsync_group_size                          histogram, commits covered by one fsync
//	docket_snapshot_duration_seconds                     histogram
//	docket_snapshot_bytes                                gauge, size of the last snapshot
//	docket_snapshot_failures_total                       counter
//	docket_commits_total, docket_log_bytes_total, docket_log_syncs_total,
//	docket_snapshots_total                               counters, at scrape
//	docket_task_records                                  gauge, at scrape
package metrics
