package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest/record"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// serverExempt are the methods the server and client do not carry from
// one to the other, each with the reason.
var serverExempt = map[string]string{
	"API.Clock":       "a client reads its own clock; the server's is not sent",
	"API.Close":       "closing a client closes its connections, never the server's DB",
	"Queue.Namespace": "a handle's name is known to the client; the server never asks it",
	"Queue.Name":      "a handle's name is known to the client; the server never asks it",
	"KV.Namespace":    "a handle's name is known to the client; the server never asks it",
	// Over the network a commit not waited for is the client's affair: it
	// sends an Enqueue and hands back a Pending at once; the server runs
	// the Enqueue like any other.
	"Queue.EnqueueAsync": "the client pipelines Enqueue calls; the wire carries Enqueue",
}

// recordingServer serves, on a loopback listener as `docket serve` does,
// a server over an in-memory DB wrapped in a recorder, and returns the
// recorder and the server's URL.
func recordingServer(t *testing.T) (*record.Recorder, string) {
	t.Helper()
	db, err := engine.OpenInMemory(engine.Options{RetainCompleted: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := record.New()
	s := New(rec.Wrap(db), Options{Logger: slog.New(slog.DiscardHandler)})
	addr, _ := serveSessions(t, s)
	return rec, "http://" + addr
}

// TestParityServerClient: a client, over sessions and then over unary
// calls, calls every method of engine.API, Queue, KV, Presence and Quotas
// (the script is checked to, by a recorder on the client's side), and the
// recorder on the DB's side sees each as itself: a method the client
// emulated with others, refused as unsupported, or that the server does
// not route, fails the test, named.
func TestParityServerClient(t *testing.T) {
	t.Parallel()
	for _, tr := range []struct {
		name string
		t    client.Transport
	}{{"session", client.TransportSession}, {"unary", client.TransportUnary}} {
		t.Run(tr.name, func(t *testing.T) {
			dbRec, url := recordingServer(t)
			c, err := client.Dial(context.Background(), url, client.Options{Transport: tr.t})
			if err != nil {
				t.Fatal(err)
			}
			clientRec := record.New()
			driveEveryMethod(t, "server+client ("+tr.name+")", clientRec.Wrap(c))
			clientRec.Check(t, "the parity script", nil)
			dbRec.Check(t, "server+client ("+tr.name+")", serverExempt)
		})
	}
}

// driveEveryMethod calls every method of the interfaces record covers on
// api, in an order where each has something to act on, and fails t (going
// on) on an error a correct API would not return.
func driveEveryMethod(t *testing.T, layer string, api engine.API) {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %s: %v", layer, what, err)
		}
	}
	ns := engine.NS("p", "s")
	q := api.Queue(ns, "q")
	if q.Namespace() != ns || q.Name() != "q" {
		t.Fatalf("handle %v %q", q.Namespace(), q.Name())
	}
	_ = api.Clock().Now()

	e, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"a"`), Partition: "pa"})
	must("Enqueue", err)
	es, err := q.EnqueueBatch(ctx, []engine.Task{{Delay: time.Hour}, {Kind: "k"}, {}, {}, {}})
	must("EnqueueBatch", err)
	if len(es) != 5 {
		t.Fatalf("EnqueueBatch: %+v", es)
	}
	_, err = q.EnqueueAsync(ctx, engine.Task{}).Wait(ctx)
	must("EnqueueAsync", err)

	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	must("Claim", err)
	if len(ls) != 1 || ls[0].ID != e.ID {
		t.Fatalf("Claim: %+v", ls)
	}
	must("Heartbeat", q.Heartbeat(ctx, &ls[0], time.Minute, nil))
	errs, err := q.HeartbeatBatch(ctx, []*engine.Lease{&ls[0]}, time.Minute)
	must("HeartbeatBatch", err)
	if len(errs) == 1 {
		must("HeartbeatBatch[0]", errs[0])
	}
	_, err = q.Complete(ctx, ls[0], engine.Done{})
	must("Complete", err)

	ls, err = q.ClaimWait(ctx, "w", time.Minute, 1)
	must("ClaimWait", err)
	if len(ls) != 1 {
		t.Fatalf("ClaimWait: %+v", ls)
	}
	_, ls2, err := q.CompleteAndClaim(ctx, ls[0], engine.Done{}, "w", time.Minute, 1)
	must("CompleteAndClaim", err)
	if len(ls2) != 1 {
		t.Fatalf("CompleteAndClaim leased %d", len(ls2))
	}
	must("Snooze", q.Snooze(ctx, ls2[0], 0))
	ls, err = q.Claim(ctx, "w", time.Minute, 2)
	must("Claim", err)
	if len(ls) != 2 {
		t.Fatalf("Claim leased %d", len(ls))
	}
	errs, err = q.CompleteBatch(ctx, ls[:1])
	must("CompleteBatch", err)
	if len(errs) == 1 {
		must("CompleteBatch[0]", errs[0])
	}
	must("Fail", q.Fail(ctx, ls[1], engine.Failure{Err: "boom", Permanent: true}))
	must("Redrive", q.Redrive(ctx, ls[1].ID))
	_, err = q.RedriveAll(ctx)
	must("RedriveAll", err)
	must("RunNow", q.RunNow(ctx, es[0].ID))
	prio := 3
	must("Reschedule", q.Reschedule(ctx, es[0].ID, engine.Reschedule{At: api.Clock().Now().Add(time.Hour), Priority: &prio}))
	_, err = q.Get(ctx, es[0].ID)
	must("Get", err)
	must("Cancel", q.Cancel(ctx, es[0].ID))
	_, err = q.List(ctx, engine.ListOptions{State: engine.Ready})
	must("List", err)
	_, err = q.Search(ctx, engine.SearchOptions{})
	must("Search", err)
	_, err = q.Bulk(ctx, engine.Filter{Kind: "k"}, engine.BulkCancel)
	must("Bulk", err)
	_, err = q.Counts(ctx)
	must("Counts", err)
	must("Pause", q.Pause(ctx))
	must("Resume", q.Resume(ctx))
	must("SetLimits", q.SetLimits(ctx, engine.Limits{MaxInFlight: 10}))
	_, err = q.Settings(ctx)
	must("Settings", err)
	_, err = q.Partitions(ctx, engine.PartitionListOptions{})
	must("Partitions", err)
	_, err = api.Queues(ctx)
	must("Queues", err)

	kv := api.KV(ns)
	if kv.Namespace() != ns {
		t.Fatalf("KV handle %v", kv.Namespace())
	}
	_, err = kv.Commit(ctx, engine.Set("k", []byte(`1`)))
	must("KV.Commit", err)
	_, err = kv.Get(ctx, "k")
	must("KV.Get", err)
	_, err = kv.Scan(ctx, engine.ScanOptions{})
	must("KV.Scan", err)

	p, ok := api.(engine.Presence)
	if !ok {
		t.Fatalf("%T does not implement engine.Presence", api)
	}
	must("ReportWorker", p.ReportWorker(ctx, ns, engine.WorkerPresence{ID: "w"}, time.Minute))
	_, err = p.Workers(ctx, ns)
	must("Workers", err)
	must("RemoveWorker", p.RemoveWorker(ctx, ns, "w"))
	must("ReportSchedule", p.ReportSchedule(ctx, ns, engine.ScheduleInfo{Queue: "q", Name: "s", Spec: "@every 1m"}, time.Minute))
	_, err = p.Schedules(ctx, ns)
	must("Schedules", err)
	must("PauseSchedule", p.PauseSchedule(ctx, ns, "q", "s"))
	must("ResumeSchedule", p.ResumeSchedule(ctx, ns, "q", "s"))
	must("RunSchedule", p.RunSchedule(ctx, ns, "q", "s"))

	qs, ok := api.(engine.Quotas)
	if !ok {
		t.Fatalf("%T does not implement engine.Quotas", api)
	}
	must("SetQuota", qs.SetQuota(ctx, ns, engine.Quota{MaxTasks: 1000}))
	_, _, err = qs.Quota(ctx, ns)
	must("Quota", err)

	must("Close", api.Close())
}

// TestParityRoutes: every RPC of every service of docket.v1 answers a
// call with an empty message with something other than "unimplemented" or
// a 404, and so does every case of a session's Call (but Abandon, which
// has no answer of its own). An RPC or call added to the schema and not
// served fails here, named.
func TestParityRoutes(t *testing.T) {
	t.Parallel()
	db, err := engine.OpenInMemory(engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler), Cluster: &testCluster{changed: make(chan struct{})}})
	addr, _ := serveSessions(t, s)

	var methods []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("docket.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				methods = append(methods, sd.Methods().Get(j))
			}
		}
		return true
	})
	if len(methods) < 20 {
		t.Fatalf("only %d RPCs found in docket.v1", len(methods))
	}
	for _, md := range methods {
		proc := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
		if md.IsStreamingClient() || md.IsStreamingServer() {
			t.Errorf("RPC %s streams: not checked here", proc)
			continue
		}
		res, err := http.Post("http://"+addr+proc, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var ce struct{ Code string }
		json.Unmarshal(body, &ce)
		if res.StatusCode == http.StatusNotFound || ce.Code == connect.CodeUnimplemented.String() {
			t.Errorf("server: RPC %s has no route: %d %s", proc, res.StatusCode, body)
		}
	}

	ts, _ := dialSession(t, addr, "")
	fields := (&v1.Call{}).ProtoReflect().Descriptor().Oneofs().ByName("call").Fields()
	var sent int
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "abandon" {
			continue // ends another call's wait; no answer of its own
		}
		c := &v1.Call{Id: uint64(fd.Number())}
		c.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(c.ProtoReflect().NewField(fd).Message()))
		ts.send(c)
		sent++
	}
	for id, r := range ts.recvAll(sent) {
		fd := fields.ByNumber(protoreflect.FieldNumber(id))
		if e := r.GetError(); e != nil && e.GetCode() == connect.CodeUnimplemented.String() {
			t.Errorf("server: session call %s has no route: %v", fd.Name(), e)
		}
	}
}
