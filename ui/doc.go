// Package ui is docket's web dashboard: an http.Handler over engine.API, so
// it runs inside a program that embeds a DB and, unchanged, over the network
// client.
//
//	http.Handle("/docket/", ui.Handler(db, ui.Options{Prefix: "/docket/"}))
//
// Pages:
//
//   - the overview: every queue with its counts by state, the age of its
//     oldest ready task, its enqueue, completion and failure rates per
//     second and the share of failed attempts, whether it is paused or
//     limited, and charts of the last hour for every queue together;
//   - a queue: charts of its last hour, its limits (an admin sets them in a
//     form), its tasks by state, retrying apart from scheduled, paged with
//     the engine's cursors, filtered by kind, text in the last error, error
//     group, id or the task they wait for, in the engine's order or sorted
//     by priority, due time or age;
//   - a task: payload, progress and result pretty-printed, headers, lease,
//     every failed attempt, a timeline, the task that created it and the
//     follow-ups it created (when TaskInfo reports them), and a tree of the
//     tasks it waits for and of the waiting tasks that wait for it, with
//     their states;
//   - dead letters grouped by the shape of their last error (errKey:
//     numbers, ids, times and quoted values as placeholders), paged;
//   - a KV browser by prefix;
//   - the cluster (members, leader, commit and applied indexes, lag) when
//     Options.Cluster is set.
//
// Rates and charts come from sampling QueueInfo.Totals every
// Options.SampleEvery into a ring per queue kept in memory (an hour by
// default, at most Options.MaxTrackedQueues queues): a restarted dashboard
// starts empty. The charts are drawn by uPlot, embedded with its licence,
// from the JSON the rates path answers.
//
// Every page refreshes its live regions about every 1.5 s without a reload.
//
// Work per request is bounded whatever a queue's size: a page in the
// engine's order reads one page of tasks; a filter, or a sort the engine
// does not keep, reads at most Options.ScanWindow tasks and says so (the
// next page reads on from there); an id is one lookup.
//
// The dashboard is read-only unless Options.AllowActions is set. Actions
// (redrive one, selected, every task of an error group or all; delete an
// error group or every dead task; cancel; run now; delete retained
// completions; pause and resume a queue; set its limits) are confirmed on
// a page of their own (the limits form is its own confirmation), report
// how many tasks they touched, need a CSRF token, and run as the caller that Options.Caller (or
// Options.Login's token) maps the request to, so the engine's authorizer
// decides: an action needs the admin permission. Pages show the actions
// only to a caller who holds it on the namespace (as the API's view
// reports, engine.DB.Permissions); a refused action answers 403 with a page
// headed "Refused".
//
// With Options.Login, the sign-in form starts a session kept in the
// dashboard's memory; the browser's cookie holds only its random id. A
// session ends at sign-out, after Options.SessionIdle without use,
// Options.SessionLifetime after sign-in, or once its token is no longer
// accepted. Signing in returns to the page first asked for (a page of the
// dashboard only). Under TLS, responses carry Strict-Transport-Security.
//
// On a node of a cluster that is not the leader (Options.Cluster), pages
// read the node's own state, which may trail the leader by a moment, and
// say so in a banner naming the leader; actions are refused there.
//
// Rendering uses html/template, so every payload, error, header, key and
// name is escaped; the Content-Security-Policy allows only the dashboard's
// own scripts and stylesheets (its own and uPlot's), which are embedded in
// the binary (no CDN, no build step, works offline).
package ui
