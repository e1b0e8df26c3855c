//go:build !linux

package bench

import "syscall"

// childAttr is nil: only Linux kills a child with its parent.
func childAttr() *syscall.SysProcAttr { return nil }
