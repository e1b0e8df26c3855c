package client

import (
	"context"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// Quotas work over the network as in process: an admin sets a namespace's
// quota, a reader reads it with the usage, a tenant past it gets ErrFull
// naming its namespace while another namespace enqueues, and bad input
// and missing permissions are refused.
func TestQuotasOverTheNetwork(t *testing.T) {
	t.Parallel()
	tab, tok := tokens(t)
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab})
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, nil)
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	reader := dial(t, srv.url, Options{Token: tok["reader"]})
	worker := dial(t, srv.url, Options{Token: tok["worker"]})
	root := dial(t, srv.url, Options{Token: tok["root"]})

	wantErr(t, "a reader sets", reader.SetQuota(ctx, ns, engine.Quota{MaxTasks: 2}), engine.ErrPermission)
	wantErr(t, "a negative quota", root.SetQuota(ctx, ns, engine.Quota{MaxBytes: -1}), engine.ErrInvalid)
	wantErr(t, "a task count out of range", root.SetQuota(ctx, ns, engine.Quota{MaxTasks: 1 << 40}), engine.ErrInvalid)
	if err := root.SetQuota(ctx, ns, engine.Quota{MaxTasks: 2, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	q := worker.Queue(ns, "q")
	for range 2 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := q.Enqueue(ctx, engine.Task{})
	wantErr(t, "enqueue past the quota", err, engine.ErrFull)
	if !strings.Contains(err.Error(), "acme/prod") {
		t.Fatalf("error %q does not name the namespace", err)
	}
	if _, err := root.Queue(engine.NS("acme", "dev"), "q").Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatalf("another namespace: %v", err)
	}

	got, u, err := reader.Quota(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	lq, lu, err := db.As(engine.Caller{ID: "reader"}).Quota(ctx, ns)
	if err != nil || got != lq || u != lu || got != (engine.Quota{MaxTasks: 2, MaxBytes: 1 << 20}) || u.Tasks != 2 || u.Bytes <= 0 {
		t.Fatalf("over the network %+v %+v, in process %+v %+v (%v)", got, u, lq, lu, err)
	}
	_, _, err = reader.Quota(ctx, engine.NS("other", "prod"))
	wantErr(t, "a reader elsewhere", err, engine.ErrPermission)
	_, _, err = root.Quota(ctx, engine.Namespace{})
	wantErr(t, "no namespace", err, engine.ErrInvalid)
}
