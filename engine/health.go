package engine

// Err reports whether the DB can take calls: nil while it works, ErrClosed
// after Close, and ErrFailed (wrapping the cause) after a write or fsync of
// the log failed. A server's readiness check asks it.
func (d *DB) Err() error {
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usable()
}
