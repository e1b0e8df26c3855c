package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/engine"
)

// dirArg returns the directory of verify and repair: -dir DIR or the one
// positional argument (the older form), not both.
func dirArg(c cli, name string, fs *flag.FlagSet, args []string) (string, error) {
	dir := fs.String("dir", "", "the data directory (or give it as the argument)")
	pos, err := parseMixed(c, fs, args)
	if err != nil {
		return "", err
	}
	usage := "usage: docket " + name + " " + commandArgs(name)
	switch {
	case len(pos) > 1:
		return "", usageError{fmt.Sprintf("%s: too many arguments (%q); %s", name, pos[1], usage)}
	case len(pos) == 1 && *dir != "":
		return "", usageError{fmt.Sprintf("%s: the directory twice (-dir %s and %s); %s", name, *dir, pos[0], usage)}
	case len(pos) == 1:
		return pos[0], nil
	case *dir == "":
		return "", usageError{usage}
	}
	return *dir, nil
}

func runVerify(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "verify")
	dir, err := dirArg(c, "verify", fs, args)
	if err != nil {
		return err
	}
	if cluster.IsNodeDir(dir) {
		return verifyNode(c, dir)
	}
	rep, err := engine.Check(dir)
	if err != nil && !errors.Is(err, engine.ErrCorrupt) {
		return err // missing, not a docket directory, unreadable: not damage
	}
	rep.Print(c.stdout)
	if err != nil {
		if n := len(rep.Values.LostTasks()); n > 0 {
			fmt.Fprintf(c.stdout, "DAMAGED: %d tasks refer to values the value log no longer holds intact: %s\n", n, message(err))
		} else {
			fmt.Fprintln(c.stdout, "DAMAGED: Open would refuse this directory:", message(err))
		}
		fmt.Fprintf(c.stdout, "'docket repair -salvage %s' keeps what can be kept and says what is lost\n", shellQuote(dir))
		return exitError(1)
	}
	fmt.Fprintln(c.stdout, "OK: Open would open this directory, and every value it refers to reads back")
	return nil
}

// verifyNode verifies a cluster node's directory: exit 1 when the node
// would not start from it or its state does not recover.
func verifyNode(c cli, dir string) error {
	rep, err := cluster.Check(dir)
	if err != nil && !errors.Is(err, engine.ErrCorrupt) {
		return err
	}
	rep.Print(c.stdout)
	if err != nil {
		fmt.Fprintln(c.stdout, "DAMAGED: the node would not start from this directory, or its state does not recover:", message(err))
		fmt.Fprintln(c.stdout, "a damaged node is rebuilt from its peers: remove it (docket cluster remove ID), move this directory aside, and start the node on an empty one with -join")
		return exitError(1)
	}
	fmt.Fprintln(c.stdout, "OK: the node would start from this directory")
	return nil
}

func runRepair(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "repair")
	salvage := fs.Bool("salvage", false, "when the log is damaged after the newest good snapshot, keep the longest valid part, move the rest aside and report what is lost")
	dir, err := dirArg(c, "repair", fs, args)
	if err != nil {
		return err
	}
	if cluster.IsNodeDir(dir) {
		return fmt.Errorf("%w: %s is a cluster node's directory: repair works on a standalone one. A node cuts a torn log tail itself when it starts; 'docket verify %s' says whether it can", engine.ErrInvalid, dir, shellQuote(dir))
	}
	if *salvage {
		rep, err := engine.Salvage(dir)
		if err != nil {
			return err
		}
		rep.Print(c.stdout)
		return nil
	}
	msg, err := engine.Repair(dir)
	if err != nil {
		if errors.Is(err, engine.ErrCorrupt) {
			return fmt.Errorf("%w\n(to keep what can be kept: docket repair -salvage %s)", err, shellQuote(dir))
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
