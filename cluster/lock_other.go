//go:build !unix && !windows

package cluster

import "os"

// lockFile cannot lock on this platform (js, wasip1, plan9): a second
// process opening the same directory is not detected.
func lockFile(*os.File) error { return nil }
