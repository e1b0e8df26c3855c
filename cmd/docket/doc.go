// Command docket runs a demo of the docket durable task queue and inspects,
// verifies and repairs docket data directories.
//
//	docket demo [-dir ./docket-data] [-tasks 2000]   run producers and workers, with live progress
//	docket stats [-dir DIR]                           counts per queue and engine counters (read-only)
//	docket inspect [-dir DIR] -ns P/S -queue Q [-state dead]   list tasks (read-only)
//	docket dead [-dir DIR] -ns P/S -queue Q [-redrive ID|-redrive-all]   dead-letter queue
//	docket verify DIR                                 check a directory the way Open would, changing nothing
//	docket repair [-salvage] DIR                      cut a torn log tail, keeping a copy; -salvage keeps
//	                                                  the valid part of a damaged log and reports the loss
//	docket bench [-workload W1,W2] [-durability always] [-json]   load generator
//	docket version                                    the build's version
//	docket help                                       the commands
//
// The read-only commands (stats, inspect, dead without -redrive, verify)
// create and change nothing and refuse a directory that is not a docket
// data directory. The program is run(ctx, args, stdout, stderr), so its
// tests run commands in-process.
package main
