// Package ui is docket's web dashboard: an http.Handler over engine.API, so
// it runs inside a program that embeds a DB and, unchanged, over the network
// client.
//
//	http.Handle("/docket/", ui.Handler(db, ui.Options{Prefix: "/docket/"}))
//
// Pages: an overview of every queue (counts by state, oldest ready task,
// enqueue, completion and error rates sampled from QueueInfo.Totals), a queue
// page (tasks by state, paged with the engine's cursors, filtered and sorted
// within a bounded window), a task page, dead letters grouped by last error,
// a KV browser and, when Options.Cluster is set, a cluster page. Every page
// refreshes itself about once a second without a reload.
//
// The dashboard is read-only unless Options.AllowActions is set. Actions
// (redrive, cancel, run now, delete retained completions) are confirmed on
// a page of their own, need a CSRF token, and run as the caller that
// Options.Caller (or Options.Login's token) maps the request to, so the
// engine's authorizer decides: an action needs the admin permission.
//
// Rendering uses html/template, so every payload, error and key is escaped;
// the Content-Security-Policy allows only the dashboard's own script and
// stylesheet, which are embedded in the binary (no CDN, works offline).
package ui
