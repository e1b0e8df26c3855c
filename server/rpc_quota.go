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

// quotasRPC serves engine.Quotas: the engine checks the caller's
// permissions (admin to set, read to read) as in process.
type quotasRPC struct{ s *Server }

var _ docketv1connect.QuotasHandler = quotasRPC{}

// quotas runs fn on the call's view of the engine.
func (h quotasRPC) quotas(ctx context.Context, fn func(engine.Quotas) error) error {
	api, err := h.s.api(ctx)
	if err == nil {
		q, ok := api.(engine.Quotas)
		if !ok {
			err = fmt.Errorf("%w: this server keeps no namespace quotas", engine.ErrInvalid)
		} else {
			err = fn(q)
		}
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

func (h quotasRPC) SetQuota(ctx context.Context, req *connect.Request[v1.SetQuotaRequest]) (*connect.Response[v1.SetQuotaResponse], error) {
	m := req.Msg
	q, err := wire.Quota(m.GetQuota())
	if err != nil {
		return nil, fail(err)
	}
	if err := h.quotas(ctx, func(api engine.Quotas) error {
		return api.SetQuota(ctx, wire.Namespace(m.GetNamespace()), q)
	}); err != nil {
		return nil, err
	}
	return reply(&v1.SetQuotaResponse{})
}

func (h quotasRPC) GetQuota(ctx context.Context, req *connect.Request[v1.GetQuotaRequest]) (*connect.Response[v1.GetQuotaResponse], error) {
	var q engine.Quota
	var u engine.NamespaceUsage
	if err := h.quotas(ctx, func(api engine.Quotas) (err error) {
		q, u, err = api.Quota(ctx, wire.Namespace(req.Msg.GetNamespace()))
		return err
	}); err != nil {
		return nil, err
	}
	return reply(&v1.GetQuotaResponse{Quota: wire.PBQuota(q), Tasks: int64(u.Tasks), Bytes: u.Bytes})
}
