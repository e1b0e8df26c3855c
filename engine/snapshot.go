package engine

import (
	"context"
	"time"
)

// Checkpoint writes a snapshot of the current state and truncates the log
// up to the older of the two newest snapshots. In memory it does nothing.
func (d *DB) Checkpoint(ctx context.Context) error {
	if err := d.owner("Checkpoint"); err != nil {
		return err
	}
	c := d.c
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.writable()
	c.mu.Unlock()
	if err != nil || !c.st.snapshots() {
		return err
	}
	return c.snapshotNow(true)
}

// shouldSnapshot reports whether enough log was written to start a
// background snapshot, and marks one as started. Call with mu held.
func (c *core) shouldSnapshot() bool {
	if !c.st.snapshots() || c.opts.SnapshotBytes < 0 || c.sinceSnap < c.opts.SnapshotBytes || c.snapping || c.closed {
		return false
	}
	c.snapping = true
	return true
}

// snapshotNow writes a snapshot from a copy-on-write image of the state: the
// commit path pauses only to take the image. closing allows it to run after
// Close has marked the engine closed.
func (c *core) snapshotNow(closing bool) error {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	if err := c.usable(); err != nil && !(closing && c.closed && c.failed == nil) {
		c.snapping = false
		c.mu.Unlock()
		return err
	}
	img := c.store.Copy()
	c.sinceSnap = 0
	c.mu.Unlock()
	info, err := c.st.snapshot(img)
	c.mu.Lock()
	c.snapping = false
	if err == nil {
		c.stats.Snapshots++
	}
	c.mu.Unlock()
	if obs := c.opts.Observer; obs != nil {
		obs.Snapshot(SnapshotEvent{Seq: img.Seq, Bytes: info.Size, Duration: time.Since(start), Err: err})
	}
	if err != nil {
		c.opts.Logger.Warn("docket: snapshot failed", "err", err)
	}
	return err
}
