// Package dockettest helps a program test its use of docket without
// sleeping: an in-memory engine on a manual clock (New), a way to wait
// until a blocking claim is parked so that the next commit or clock move
// reaches it (DB.WaitParked), assertions on what a queue holds
// (RequireEnqueued, RequireNotEnqueued, RequireCounts), and running a
// queue's handlers to completion in the test's own goroutine (Drain,
// DrainHandler), so that a test sees the outcome of its handlers as soon
// as the call returns.
//
// A typical test enqueues through the code under test, asserts what was
// enqueued, drains the queue with the program's handlers, and asserts what
// the handlers left; moving the clock (DB.Advance) makes retries, timers
// and expired leases due for the next Drain.
package dockettest
