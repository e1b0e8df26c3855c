//go:build !linux

package vfs

import "os"

// datasync is a full Sync where the system has no fdatasync the standard
// library reaches (on macOS, Sync is F_FULLFSYNC, which a data sync needs
// there too).
func datasync(f *os.File) error { return f.Sync() }
