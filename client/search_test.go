package client

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// exerciseSearch fills a queue and searches and acts on it through api,
// returning what each call answered.
func exerciseSearch(t *testing.T, api engine.API) []string {
	ctx := context.Background()
	q := api.Queue(engine.NS("acme", "prod"), "search")
	var log []string
	for i := range 30 {
		tk := engine.Task{Kind: []string{"mail", "sms"}[i%2], Headers: map[string]string{"tenant": fmt.Sprint(i % 3)}}
		if i%5 == 0 {
			tk.Delay = time.Hour
		}
		must(q.Enqueue(ctx, tk))(t)
	}
	f := engine.Filter{Kind: "mail", HeaderKey: "tenant", HeaderValue: "1", States: []engine.State{engine.Ready, engine.Scheduled}}
	for _, newest := range []bool{false, true} {
		p := must(q.Search(ctx, engine.SearchOptions{Filter: f, Newest: newest, Limit: 2, Count: true}))(t)
		var ids []uint64
		for _, ti := range p.Tasks {
			ids = append(ids, ti.ID)
		}
		next := must(q.Search(ctx, engine.SearchOptions{Filter: f, Newest: newest, Limit: 2, Cursor: p.Next}))(t)
		log = append(log, fmt.Sprintf("search newest=%v: %v next %q count %d max %d; then %d tasks", newest, ids, p.Next, p.Count, p.MaxID, len(next.Tasks)))
	}
	r := must(q.Bulk(ctx, engine.Filter{States: []engine.State{engine.Scheduled}}, engine.BulkRunNow))(t)
	log = append(log, fmt.Sprintf("run now: %+v", r))
	r = must(q.Bulk(ctx, engine.Filter{Kind: "sms", MaxID: 20}, engine.BulkDelete))(t)
	log = append(log, fmt.Sprintf("delete: %+v", r))
	r = must(q.Bulk(ctx, engine.Filter{Kind: "sms"}, engine.BulkCancel))(t)
	log = append(log, fmt.Sprintf("cancel: %+v", r))
	c := must(q.Counts(ctx))(t)
	log = append(log, fmt.Sprintf("counts: %+v", c))
	_, err := q.Search(ctx, engine.SearchOptions{Filter: engine.Filter{MinID: 9, MaxID: 3}})
	wantErr(t, "empty id range", err, engine.ErrInvalid)
	log = append(log, err.Error())
	_, err = q.Bulk(ctx, engine.Filter{HeaderValue: "x"}, engine.BulkCancel)
	wantErr(t, "value without key", err, engine.ErrInvalid)
	log = append(log, err.Error())
	_, err = q.Bulk(ctx, engine.Filter{}, engine.BulkAction(9))
	wantErr(t, "bad action", err, engine.ErrInvalid)
	log = append(log, err.Error())
	if after := must(q.Counts(ctx))(t); after != c {
		t.Fatalf("refused calls changed the counts: %+v, then %+v", c, after)
	}
	return log
}

// TestSearchOverTheClient: search and bulk actions answer the same over
// the network as in process, errors included.
func TestSearchOverTheClient(t *testing.T) {
	t.Parallel()
	clock := func() engine.Options {
		return engine.Options{Clock: engine.NewManualClock(time.Unix(1_900_000_000, 0))}
	}
	local := exerciseSearch(t, memDB(t, clock()))
	srv := serve(t, memDB(t, clock()), "127.0.0.1:0", server.Options{}, nil)
	remote := exerciseSearch(t, dial(t, srv.url, Options{}))
	if !reflect.DeepEqual(local, remote) {
		t.Fatalf("in process:\n%q\nover the network:\n%q", local, remote)
	}
	t.Logf("%q", remote)
}

// TestBulkNeedsAdminOverTheClient: a reader searches but may not act.
func TestBulkNeedsAdminOverTheClient(t *testing.T) {
	t.Parallel()
	tab, tok := tokens(t)
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab})
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, nil)
	reader := dial(t, srv.url, Options{Token: tok["reader"]}).Queue(engine.NS("acme", "prod"), "q")
	must(reader.Search(context.Background(), engine.SearchOptions{Count: true}))(t)
	_, err := reader.Bulk(context.Background(), engine.Filter{}, engine.BulkCancel)
	wantErr(t, "reader's bulk", err, engine.ErrPermission)
}

// partialAPI serves a DB whose bulk actions stop with an error after
// acting on some tasks.
type partialAPI struct{ engine.API }

func (a partialAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return partialQueue{a.API.Queue(ns, name)}
}

type partialQueue struct{ engine.Queue }

func (partialQueue) Bulk(context.Context, engine.Filter, engine.BulkAction) (engine.BulkResult, error) {
	return engine.BulkResult{Done: 3}, fmt.Errorf("%w: the engine stopped", engine.ErrFailed)
}

// TestBulkStoppedSaysWhatWasDone: a bulk action that fails after acting
// on tasks says how many, with the engine's sentinel.
func TestBulkStoppedSaysWhatWasDone(t *testing.T) {
	t.Parallel()
	srv := serve(t, partialAPI{memDB(t, engine.Options{})}, "127.0.0.1:0", server.Options{}, nil)
	q := dial(t, srv.url, Options{}).Queue(engine.NS("acme", "prod"), "q")
	_, err := q.Bulk(context.Background(), engine.Filter{}, engine.BulkCancel)
	wantErr(t, "stopped bulk", err, engine.ErrFailed)
	if !strings.Contains(err.Error(), "bulk cancel stopped after acting on 3 tasks") {
		t.Fatalf("error %q does not say what was done", err)
	}
}
