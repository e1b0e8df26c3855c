package worker

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/docketdb/docket/engine"
)

// checkName applies the engine's rules for names, so that a name the engine
// would refuse at every claim is reported once, by Start.
func checkName(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("worker: %s is empty: %w", field, engine.ErrInvalid)
	case len(s) > engine.MaxNameBytes:
		return fmt.Errorf("worker: %s is %d bytes, over the limit of %d: %w", field, len(s), engine.MaxNameBytes, engine.ErrInvalid)
	case !utf8.ValidString(s):
		return fmt.Errorf("worker: %s %q is not valid UTF-8: %w", field, s, engine.ErrInvalid)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("worker: %s %q contains a NUL byte: %w", field, s, engine.ErrInvalid)
	}
	return nil
}

// checkQueue checks a namespace and queue name.
func checkQueue(ns engine.Namespace, queue string) error {
	if err := checkName("namespace project", ns.Project); err != nil {
		return err
	}
	if err := checkName("namespace scope", ns.Scope); err != nil {
		return err
	}
	return checkName(fmt.Sprintf("queue name (namespace %s)", ns), queue)
}
