package main

import (
	"context"
	"flag"
	"io"

	"github.com/docketdb/docket/engine"
)

// runTokenChecked is the token command: it refuses a caller id the engine
// would refuse on every call the token made, before a tokens line is
// written for it, then runs runToken.
func runTokenChecked(ctx context.Context, c cli, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("json", false, "")
	quiet := cli{stdout: io.Discard, stderr: io.Discard}
	if pos, err := parseMixed(quiet, fs, args); err == nil && len(pos) > 0 {
		if err := (engine.Caller{ID: pos[0]}.Validate()); err != nil {
			return usageError{"token: " + message(err)}
		}
	}
	return runToken(ctx, c, args)
}
