// Package browsertest drives the dashboard in headless Chromium (Debian's
// chromium package) through chromedp: pages load, live updates arrive,
// actions work with their CSRF token and fail without it, payloads holding
// markup stay inert, the pages work from the keyboard and on a phone-sized
// screen. It is its own module so the docket module does not depend on
// chromedp.
//
// Run it with `go test ./...` here; -docs ../../docs refreshes the
// screenshots the README shows.
package browsertest
