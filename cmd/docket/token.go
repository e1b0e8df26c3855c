package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

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
		if err := checkCallerID(pos[0]); err != nil {
			return usageError{"token: " + message(err)}
		}
	}
	return runToken(ctx, c, args)
}

// checkCallerID is the engine's rule for a caller id (DB.As refuses any
// other): 1 to engine.MaxNameBytes bytes of UTF-8 without control
// characters. The error does not repeat the id.
func checkCallerID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: caller id is empty", engine.ErrInvalid)
	case len(id) > engine.MaxNameBytes:
		return fmt.Errorf("%w: caller id is %d bytes, over the limit of %d", engine.ErrInvalid, len(id), engine.MaxNameBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: caller id is not valid UTF-8", engine.ErrInvalid)
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: caller id contains a control character", engine.ErrInvalid)
	}
	return nil
}
