package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestRescheduleOverTheWire: over sessions and unary calls, Reschedule
// moves a task (time and priority arrive as sent, an unset priority keeps
// the task's), and the engine's refusals arrive as the same errors.
func TestRescheduleOverTheWire(t *testing.T) {
	t.Parallel()
	for _, tr := range []client.Transport{client.TransportSession, client.TransportUnary} {
		_, url := recordingServer(t)
		c, err := client.Dial(context.Background(), url, client.Options{Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		q := c.Queue(engine.NS("p", "s"), "q")
		res, err := q.Enqueue(ctx, engine.Task{Delay: time.Hour, Priority: 2})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(2 * time.Hour).Truncate(time.Microsecond)
		if err := q.Reschedule(ctx, res.ID, engine.Reschedule{At: at}); err != nil {
			t.Fatal(err)
		}
		info, err := q.Get(ctx, res.ID)
		if err != nil || !info.NotBefore.Equal(at) || info.Priority != 2 {
			t.Fatalf("%v: after reschedule: %+v %v", tr, info, err)
		}
		p := -4
		if err := q.Reschedule(ctx, res.ID, engine.Reschedule{Priority: &p}); err != nil {
			t.Fatal(err)
		}
		if info, err := q.Get(ctx, res.ID); err != nil || info.Priority != -4 || !info.NotBefore.Equal(at) {
			t.Fatalf("%v: after priority: %+v %v", tr, info, err)
		}
		if err := q.Reschedule(ctx, res.ID, engine.Reschedule{}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("%v: nothing to change: %v", tr, err)
		}
		if err := q.Reschedule(ctx, 999, engine.Reschedule{Priority: &p}); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%v: missing task: %v", tr, err)
		}
		if err := q.RunNow(ctx, res.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Claim(ctx, "w", time.Minute, 1); err != nil {
			t.Fatal(err)
		}
		err = q.Reschedule(ctx, res.ID, engine.Reschedule{Priority: &p})
		if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "in-flight") {
			t.Fatalf("%v: in flight: %v", tr, err)
		}
	}
}

// TestRescheduleBadTimestamp: a malformed timestamp is refused as
// invalid before the engine is asked.
func TestRescheduleBadTimestamp(t *testing.T) {
	t.Parallel()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := New(db, Options{})
	id, err := db.Queue(engine.NS("p", "s"), "q").Enqueue(context.Background(), engine.Task{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.runReschedule(context.Background(), &v1.RescheduleRequest{Namespace: &v1.Namespace{Project: "p", Scope: "s"},
		Queue: "q", Id: id.ID, At: &timestamppb.Timestamp{Seconds: 1, Nanos: -5}})
	if err == nil || !strings.Contains(err.Error(), "at") {
		t.Fatalf("malformed timestamp: %v", err)
	}
}
