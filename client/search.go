package client

import (
	"context"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

func searchOf(s *stubs) docketv1connect.SearchClient { return s.search }

// Search returns a page of the queue's tasks that o.Filter selects; the
// server walks the whole queue.
func (q *queue) Search(ctx context.Context, o engine.SearchOptions) (engine.SearchPage, error) {
	res, err := invoke(ctx, q.c, true, opSearch, searchOf, docketv1connect.SearchClient.Search,
		&v1.SearchRequest{Namespace: q.pb, Queue: q.name, Filter: wire.PBFilter(o.Filter), Newest: o.Newest,
			Limit: wire.Int32(o.Limit), Cursor: o.Cursor, Count: o.Count})
	if err != nil {
		return engine.SearchPage{}, err
	}
	p := engine.SearchPage{Next: res.Next, Count: int(res.Count), MaxID: res.MaxId}
	if len(res.Tasks) > 0 {
		p.Tasks = make([]engine.TaskInfo, len(res.Tasks))
		for i, t := range res.Tasks {
			p.Tasks[i] = wire.TaskInfo(t)
		}
	}
	return p, nil
}

// Bulk is not repeated after a lost answer: running it again would change
// nothing more, but its counts would leave out what the lost one did, so
// the caller gets ErrOutcomeUnknown and decides (calling Bulk again
// finishes whatever is left).
func (q *queue) Bulk(ctx context.Context, f engine.Filter, a engine.BulkAction) (engine.BulkResult, error) {
	res, err := invoke(ctx, q.c, false, opBulk, searchOf, docketv1connect.SearchClient.Bulk,
		&v1.BulkRequest{Namespace: q.pb, Queue: q.name, Filter: wire.PBFilter(f), Action: v1.BulkAction(a)})
	if err != nil {
		return engine.BulkResult{}, err
	}
	return wire.BulkResult(res), nil
}
