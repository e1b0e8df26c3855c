package engine

import "context"

// exec runs a validated command: planned and committed here, or, on a
// replicated DB, submitted to the log and planned as it applies.
func (c *core) exec(ctx context.Context, cmd *command, res *cmdResult) error {
	if c.repl != nil {
		return c.submit(ctx, cmd, res)
	}
	var ws []want
	seq, err := c.commit(ctx, func(p *planner) error {
		err := c.planCmd(p, cmd, res)
		if err == nil && c.vals != nil && len(res.Leases) > 0 {
			ws = c.leaseWants(res.Leases, ws)
		}
		return err
	})
	res.Seq = seq
	if err == nil && len(ws) > 0 {
		res.Leases, err = c.fillLeases(ctx, res.Leases, ws)
	}
	return err
}
