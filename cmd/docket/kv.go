package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/docketdb/docket/engine"
)

// kvCommands are the subcommands of docket kv.
var kvCommands = []struct {
	name, args, summary string
	readOnly            bool
	run                 func(ctx context.Context, c cli, t *target, tf *targetFlags, pos []string, o kvFlags) error
	min, max            int
}{
	{"get", "KEY", "print the value of a key (-json: with its version)", true, kvGet, 1, 1},
	{"scan", "", "list entries in key order: -prefix, or -start and -end", true, kvScan, 0, 0},
	{"set", "KEY VALUE|-", "write a value (- reads it from stdin); -if-version or -if-absent make it conditional", false, kvSet, 2, 2},
	{"delete", "KEY", "delete a key; -if-version makes it conditional", false, kvDelete, 1, 1},
}

// kvFlags are the flags of the kv subcommands beyond the target's.
type kvFlags struct {
	prefix, start, end *string
	limit              *int
	ifVersion          *uint64
	ifAbsent           *bool
}

func kvUsage(c cli) error {
	fmt.Fprintln(c.stdout, "usage: docket kv get|scan|set|delete [-dir DIR | -server URL] [-ns P/S] [flags] ...\n\nsubcommands:")
	for _, k := range kvCommands {
		fmt.Fprintf(c.stdout, "  %-7s %s\n", k.name, k.summary)
	}
	fmt.Fprintln(c.stdout, "\nrun 'docket kv <subcommand> -h' for its flags")
	return nil
}

func runKV(ctx context.Context, c cli, args []string) error {
	if len(args) == 0 {
		return usageError{"kv: want a subcommand: get, scan, set or delete (docket kv -h)"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return kvUsage(c)
	}
	for _, k := range kvCommands {
		if k.name != args[0] {
			continue
		}
		fs := newFlagsFor(c, "kv "+k.name, "[-dir DIR | -server URL] [-ns P/S] [flags] "+k.args, k.summary)
		tf := addTargetFlags(c, fs, oneNS)
		var o kvFlags
		switch k.name {
		case "scan":
			o.prefix = fs.String("prefix", "", "only keys that start with this")
			o.start = fs.String("start", "", "only keys from this one on")
			o.end = fs.String("end", "", "only keys before this one")
			o.limit = fs.Int("limit", 100, "entries at most")
		case "set", "delete":
			o.ifVersion = fs.Uint64("if-version", 0, "only if the key is at this version (its last write); otherwise nothing changes")
			if k.name == "set" {
				o.ifAbsent = fs.Bool("if-absent", false, "only if the key does not exist")
			}
		}
		pos, err := tf.parse(args[1:], k.min, k.max)
		if err != nil {
			return err
		}
		if o.ifAbsent != nil && *o.ifAbsent && *o.ifVersion != 0 {
			return usageError{"kv set: -if-version and -if-absent exclude each other"}
		}
		t, err := tf.open(ctx, !k.readOnly)
		if err != nil {
			return err
		}
		defer t.Close()
		return k.run(ctx, c, t, tf, pos, o)
	}
	return usageError{fmt.Sprintf("kv: unknown subcommand %q (get, scan, set or delete)", args[0])}
}

func kvGet(ctx context.Context, c cli, t *target, tf *targetFlags, pos []string, _ kvFlags) error {
	e, err := t.KV().Get(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("key %q: %w", pos[0], err)
	}
	if *tf.json {
		return writeJSON(c.stdout, entryOf(e))
	}
	c.stdout.Write(e.Value)
	fmt.Fprintln(c.stdout)
	return nil
}

func kvScan(ctx context.Context, c cli, t *target, tf *targetFlags, _ []string, o kvFlags) error {
	if *o.limit < 1 || *o.limit > engine.MaxBatch {
		return usageError{fmt.Sprintf("kv scan: -limit must be 1 to %d", engine.MaxBatch)}
	}
	// One entry more than asked says whether there are more, and where
	// they start.
	ask := min(*o.limit+1, engine.MaxBatch)
	es, err := t.KV().Scan(ctx, engine.ScanOptions{Prefix: *o.prefix, Start: *o.start, End: *o.end, Limit: ask})
	if err != nil {
		return err
	}
	next := ""
	if len(es) > *o.limit {
		next, es = es[*o.limit].Key, es[:*o.limit]
	}
	if *tf.json {
		out := struct {
			Entries []entryJSON `json:"entries"`
			Next    string      `json:"next,omitempty"`
		}{Entries: []entryJSON{}, Next: next}
		for _, e := range es {
			out.Entries = append(out.Entries, entryOf(e))
		}
		return writeJSON(c.stdout, out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tversion\tvalue")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%d\t%.80s\n", oneLine(e.Key), e.Version, oneLine(string(e.Value)))
	}
	tw.Flush()
	if next != "" {
		fmt.Fprintf(c.stdout, "more: -start %s\n", shellQuote(next))
	}
	return nil
}

func kvSet(ctx context.Context, c cli, t *target, tf *targetFlags, pos []string, o kvFlags) error {
	value, err := readArg(c, pos[1])
	if err != nil {
		return err
	}
	var ops []engine.Op
	switch {
	case *o.ifVersion != 0:
		ops = append(ops, engine.IfVersion(pos[0], *o.ifVersion))
	case *o.ifAbsent:
		ops = append(ops, engine.IfAbsent(pos[0]))
	}
	res, err := t.KV().Commit(ctx, append(ops, engine.Set(pos[0], value))...)
	return kvReport(c, tf, pos[0], "set", res, err)
}

func kvDelete(ctx context.Context, c cli, t *target, tf *targetFlags, pos []string, o kvFlags) error {
	var ops []engine.Op
	if *o.ifVersion != 0 {
		ops = append(ops, engine.IfVersion(pos[0], *o.ifVersion))
	}
	res, err := t.KV().Commit(ctx, append(ops, engine.Delete(pos[0]))...)
	return kvReport(c, tf, pos[0], "deleted", res, err)
}

func kvReport(c cli, tf *targetFlags, key, verb string, res engine.TxResult, err error) error {
	if err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	if *tf.json {
		return writeJSON(c.stdout, struct {
			Key     string `json:"key"`
			Version uint64 `json:"version"`
		}{key, res.Version})
	}
	fmt.Fprintf(c.stdout, "key %q %s (version %d)\n", key, verb, res.Version)
	return nil
}
