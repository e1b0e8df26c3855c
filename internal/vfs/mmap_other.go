//go:build !linux

package vfs

import "errors"

// Unmap removes a mapping Map made; no file maps on this system.
func Unmap(b []byte) error { return errors.New("vfs: no mappings on this system") }
