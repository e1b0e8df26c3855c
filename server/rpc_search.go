package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// searchRPC serves search and bulk actions over a whole queue: the engine
// checks the caller's permissions (read to search, admin to act) and the
// filter, as in process.
type searchRPC struct{ s *Server }

var _ docketv1connect.SearchHandler = searchRPC{}

func (h searchRPC) Search(ctx context.Context, req *connect.Request[v1.SearchRequest]) (*connect.Response[v1.SearchResponse], error) {
	m := req.Msg
	f, err := wire.Filter(m.GetFilter())
	if err != nil {
		return nil, fail(err)
	}
	o := engine.SearchOptions{Filter: f, Newest: m.GetNewest(), Limit: int(m.GetLimit()), Cursor: m.GetCursor(), Count: m.GetCount()}
	var p engine.SearchPage
	err = controlsRPC(h).onQueue(ctx, m.GetNamespace(), m.GetQueue(), func(q engine.Queue) (err error) {
		p, err = q.Search(ctx, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &v1.SearchResponse{Tasks: make([]*v1.TaskInfo, len(p.Tasks)), Next: p.Next, Count: int64(p.Count), MaxId: p.MaxID}
	for i, t := range p.Tasks {
		out.Tasks[i] = wire.PBTaskInfo(t)
	}
	return reply(out)
}

func (h searchRPC) Bulk(ctx context.Context, req *connect.Request[v1.BulkRequest]) (*connect.Response[v1.BulkResponse], error) {
	m := req.Msg
	f, err := wire.Filter(m.GetFilter())
	if err != nil {
		return nil, fail(err)
	}
	q, err := h.s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, fail(err)
	}
	a := wire.BulkAction(m.GetAction())
	r, err := q.Bulk(ctx, f, a)
	if err != nil && r.Done > 0 {
		// The commits made before the failure stand; calling again
		// finishes the rest.
		err = fmt.Errorf("bulk %s stopped after acting on %d tasks: %w", a, r.Done, err)
	}
	if err != nil {
		return nil, fail(err)
	}
	return reply(wire.PBBulkResult(r))
}
