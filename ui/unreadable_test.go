package ui

import (
	"context"
	"fmt"
	"testing"

	"github.com/docketdb/docket/engine"
)

// unreadableAPI answers for task id as a DB does whose value log cannot
// read the task's payload: Get returns the record without it and an error
// wrapping ErrCorrupt, List the task with Unreadable set.
type unreadableAPI struct {
	engine.API
	id uint64
}

const unreadableWhy = "the payload of task %d cannot be read from value log file 0000000003.vlog offset 81920: vlog: corrupt: bad checksum"

func (a unreadableAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return unreadableQueue{a.API.Queue(ns, name), a.id}
}

type unreadableQueue struct {
	engine.Queue
	id uint64
}

func (q unreadableQueue) Get(ctx context.Context, id uint64) (engine.TaskInfo, error) {
	t, err := q.Queue.Get(ctx, id)
	if err != nil || id != q.id {
		return t, err
	}
	t.Payload = nil
	return t, fmt.Errorf("%w: "+unreadableWhy, engine.ErrCorrupt, id)
}

func (q unreadableQueue) List(ctx context.Context, o engine.ListOptions) (engine.Page, error) {
	p, err := q.Queue.List(ctx, o)
	for i := range p.Tasks {
		if p.Tasks[i].ID == q.id {
			p.Tasks[i].Payload = nil
			p.Tasks[i].Unreadable = fmt.Sprintf(unreadableWhy, q.id)
		}
	}
	return p, err
}

// TestUnreadableValueShown: a task whose payload cannot be read is shown,
// its page naming the damage where the payload would be, and the queue's
// list saying so in the payload's column; another task of the queue
// shows as ever.
func TestUnreadableValueShown(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.queue("jobs")
	bad := e.enqueue(q, engine.Task{Payload: []byte(`{"n":"lost"}`)})
	e.enqueue(q, engine.Task{Payload: []byte(`{"n":"fine"}`)})
	e.serve(unreadableAPI{API: e.db, id: bad}, Options{})

	body := e.mustGet(fmt.Sprintf("/docket/task?p=acme&s=prod&q=jobs&id=%d", bad))
	mustContain(t, body, fmt.Sprintf("Task %d", bad), "Cannot be read", "0000000003.vlog offset 81920")
	mustNotContain(t, body, "lost")

	body = e.mustGet("/docket/queue?p=acme&s=prod&q=jobs")
	mustContain(t, body, "cannot be read", "fine")
	mustNotContain(t, body, "lost")
}
