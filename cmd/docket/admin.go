package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/docketdb/docket/engine"
)

func runVerify(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "verify")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: docket verify DIR"}
	}
	rep, err := engine.Check(fs.Arg(0))
	if err != nil && !errors.Is(err, engine.ErrCorrupt) {
		return err // missing, not a docket directory, unreadable: not damage
	}
	rep.Print(c.stdout)
	if err != nil {
		fmt.Fprintln(c.stdout, "DAMAGED: Open would refuse this directory:", message(err))
		fmt.Fprintf(c.stdout, "'docket repair -salvage %s' keeps what can be kept and says what is lost\n", shellQuote(fs.Arg(0)))
		return exitError(1)
	}
	fmt.Fprintln(c.stdout, "OK: Open would open this directory")
	return nil
}

func runRepair(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "repair")
	salvage := fs.Bool("salvage", false, "when the log is damaged after the newest good snapshot, keep the longest valid part, move the rest aside and report what is lost")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: docket repair [-salvage] DIR"}
	}
	if *salvage {
		rep, err := engine.Salvage(fs.Arg(0))
		if err != nil {
			return err
		}
		rep.Print(c.stdout)
		return nil
	}
	msg, err := engine.Repair(fs.Arg(0))
	if err != nil {
		if errors.Is(err, engine.ErrCorrupt) {
			return fmt.Errorf("%w\n(to keep what can be kept: docket repair -salvage %s)", err, shellQuote(fs.Arg(0)))
		}
		return err
	}
	fmt.Fprintln(c.stdout, msg)
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it, so that a printed
// command can be pasted as it is.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
