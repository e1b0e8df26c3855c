package engine

import (
	"context"
	"strings"

	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/engine/internal/view"
)

// Partitions lists, in key order, the partitions of the queue that hold a
// task, with their tasks by state as of now. A queue none of whose tasks
// named a partition since it last held none has no partitions to list. It
// costs O(p log p) for p partitions, whatever the page. PermRead.
func (q *queue) Partitions(ctx context.Context, o PartitionListOptions) (PartitionPage, error) {
	if err := validate.PageLimit("limit", &o.Limit); err != nil {
		return PartitionPage{}, err
	}
	after, from := "", false
	if o.Cursor != "" {
		// A cursor is "@" and the last key of the page before: the default
		// partition's key is "", so a bare key could not say it.
		if !strings.HasPrefix(o.Cursor, "@") {
			return PartitionPage{}, invalid("partition cursor %.40q", o.Cursor)
		}
		after, from = o.Cursor[1:], true
	}
	if err := q.check(PermRead); err != nil {
		return PartitionPage{}, err
	}
	var page PartitionPage
	qk := q.key()
	c := q.db.c
	err := c.read(ctx, func() {
		if iq := c.store.Queue(qk); iq != nil {
			page = view.Partitions(iq, after, from, o.Limit, c.now())
		}
	})
	return page, err
}
