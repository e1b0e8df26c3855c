// Command docket runs a demo of the docket durable task queue and inspects,
// verifies and repairs docket data directories.
//
//	docket demo [-dir ./docket-data] [-tasks 2000]   run producers and workers, with live progress
//	docket stats [-dir DIR]                           counts per queue and engine counters
//	docket inspect [-dir DIR] -ns P/S -queue Q [-state dead]   list tasks
//	docket dead [-dir DIR] -ns P/S -queue Q [-redrive ID|-redrive-all]   dead-letter queue
//	docket verify DIR                                 check a directory without changing it
//	docket repair DIR                                 cut a torn log tail, keeping a copy
//	docket bench [-workload W1,W2] [-durability always] [-json]   load generator
package main
