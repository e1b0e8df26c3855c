package engine

import "context"

// exec runs a validated command: planned and committed here, or, on a
// replicated DB, submitted to the log and planned as it applies.
func (c *core) exec(ctx context.Context, cmd *command, res *cmdResult) error {
	if c.repl != nil {
		return c.submit(ctx, cmd, res)
	}
	seq, err := c.commit(ctx, func(p *planner) error { return c.planCmd(p, cmd, res) })
	res.Seq = seq
	return err
}
