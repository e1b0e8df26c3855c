//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package session

import "net"

// Peek is not available on this platform: NewPeek returns nil.
type Peek struct{}

// NewPeek returns nil: this platform has no recv that neither waits nor
// takes the bytes.
func NewPeek(net.Conn) *Peek { return nil }

// Ask is never called (NewPeek returns nil).
func (*Peek) Ask() (bool, error) { return true, nil }
