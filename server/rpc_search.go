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
	return answer(h.s.runSearch(ctx, req.Msg))
}

func (s *Server) runSearch(ctx context.Context, m *v1.SearchRequest) (*v1.SearchResponse, error) {
	f, err := wire.Filter(m.GetFilter())
	if err != nil {
		return nil, err
	}
	o := engine.SearchOptions{Filter: f, Newest: m.GetNewest(), Limit: int(m.GetLimit()), Cursor: m.GetCursor(), Count: m.GetCount()}
	var p engine.SearchPage
	out, err := onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), &v1.SearchResponse{}, func(q engine.Queue) (err error) {
		p, err = q.Search(ctx, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	out.Tasks, out.Next, out.Count, out.MaxId = make([]*v1.TaskInfo, len(p.Tasks)), p.Next, int64(p.Count), p.MaxID
	for i, t := range p.Tasks {
		out.Tasks[i] = wire.PBTaskInfo(t)
	}
	return out, nil
}

func (h searchRPC) Bulk(ctx context.Context, req *connect.Request[v1.BulkRequest]) (*connect.Response[v1.BulkResponse], error) {
	return answer(h.s.runBulk(ctx, req.Msg))
}

func (s *Server) runBulk(ctx context.Context, m *v1.BulkRequest) (*v1.BulkResponse, error) {
	f, err := wire.Filter(m.GetFilter())
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	a := wire.BulkAction(m.GetAction())
	r, err := q.Bulk(ctx, f, a)
	if err != nil && r.Done > 0 {
		// The commits made before the failure stand; calling again
		// finishes the rest.
		err = fmt.Errorf("bulk %s stopped after acting on %d tasks: %w", a, r.Done, err)
	}
	if err != nil {
		return nil, err
	}
	return wire.PBBulkResult(r), nil
}
