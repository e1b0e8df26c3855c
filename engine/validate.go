package engine

import (
	"fmt"

	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// The index keeps the attempt history: its bound is this one (a
// difference in either direction overflows the unsigned constant).
const _ = uint(MaxAttemptErrors-index.MaxAttemptErrors) + uint(index.MaxAttemptErrors-MaxAttemptErrors)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// The argument checks are package validate's.

func checkNS(ns Namespace) error { return validate.NS(ns) }
