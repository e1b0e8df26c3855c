package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/flock"
)

// explainLocked follows an error saying a directory is locked with who
// holds it and how to reach the queues meanwhile. It writes nothing for
// other errors.
func explainLocked(w io.Writer, err error) {
	if !errors.Is(err, engine.ErrLocked) {
		return
	}
	// The engine and the cluster say "directory locked: DIR".
	_, dir, ok := strings.Cut(err.Error(), engine.ErrLocked.Error()+": ")
	who := "another process"
	if ok {
		if pid := flock.Holder(filepath.Join(dir, "LOCK")); pid > 0 {
			who = fmt.Sprintf("process %d", pid)
		}
	}
	fmt.Fprintf(w, "  %s has it open, and one process at a time can.\n", who)
	fmt.Fprintln(w, "  If it is 'docket serve', go through it: docket stats -server URL (the URL it printed; -token or $DOCKET_TOKEN with tokens).")
	fmt.Fprintln(w, "  If it is a program that embeds docket, it can serve the API (and the dashboard) on its own HTTP server:")
	fmt.Fprintln(w, "    mux := server.New(db, server.Options{}).Mux()")
	fmt.Fprintln(w, `    mux.Handle("/docket/", ui.Handler(db, ui.Options{Prefix: "/docket/"}))`)
	fmt.Fprintln(w, "  Or stop it and run the command again.")
}
