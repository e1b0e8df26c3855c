package client

import (
	"context"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

var _ engine.Quotas = (*Client)(nil)

func quotasOf(s *stubs) docketv1connect.QuotasClient { return s.quotas }

// SetQuota is repeated after a lost answer: setting the same quota again
// changes nothing.
func (c *Client) SetQuota(ctx context.Context, ns engine.Namespace, q engine.Quota) error {
	_, err := invoke(ctx, c, true, noSession[v1.SetQuotaRequest, v1.SetQuotaResponse](), quotasOf, docketv1connect.QuotasClient.SetQuota,
		&v1.SetQuotaRequest{Namespace: wire.PBNamespace(ns), Quota: wire.PBQuota(q)})
	return err
}

// Quota returns ns's quota and what it holds now.
func (c *Client) Quota(ctx context.Context, ns engine.Namespace) (engine.Quota, engine.NamespaceUsage, error) {
	u := engine.NamespaceUsage{Namespace: ns}
	res, err := invoke(ctx, c, true, noSession[v1.GetQuotaRequest, v1.GetQuotaResponse](), quotasOf, docketv1connect.QuotasClient.GetQuota,
		&v1.GetQuotaRequest{Namespace: wire.PBNamespace(ns)})
	if err != nil {
		return engine.Quota{}, u, err
	}
	q, err := wire.Quota(res.GetQuota())
	if err != nil {
		return engine.Quota{}, u, err
	}
	u.Tasks, u.Bytes = int(res.GetTasks()), res.GetBytes()
	return q, u, nil
}
