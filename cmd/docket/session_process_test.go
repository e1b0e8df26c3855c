//go:build linux

package main

import (
	"bufio"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// TestSessionKillProcess: sessions enqueueing into a `docket serve`
// process that is killed (SIGKILL) see their sessions end; every enqueue
// a session acknowledged is in the directory when it is opened again.
func TestSessionKillProcess(t *testing.T) {
	docketBinary(t) // skipped in -short
	dir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, "-dir", dir)
	addr := strings.TrimPrefix(p.base, "http://")
	var mu sync.Mutex
	var acked []uint64
	var wg sync.WaitGroup
	started := make(chan struct{}, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			hello, _ := session.AppendFrame([]byte(session.Preface), &v1.Hello{Version: session.Version})
			c.Write(hello)
			br := bufio.NewReaderSize(c, session.BufSize)
			var w v1.Welcome
			if err := session.ReadMessage(br, session.MaxHelloBytes, &w); err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			go func() {
				var id uint64
				for range 5000 {
					var b []byte
					for range 16 {
						id++
						b, _ = session.AppendFrame(b, &v1.Call{Id: id, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{
							Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: "kill", Task: &v1.Task{Payload: []byte(`1`)}}}})
					}
					if _, err := c.Write(b); err != nil {
						return
					}
				}
			}()
			first := true
			for {
				var r v1.Reply
				if err := session.ReadMessage(br, 1<<20, &r); err != nil {
					if first {
						started <- struct{}{}
					}
					return
				}
				if id := r.GetEnqueue().GetEnqueued().GetId(); id != 0 {
					mu.Lock()
					acked = append(acked, id)
					n := len(acked)
					mu.Unlock()
					if first && n > 0 {
						first = false
						started <- struct{}{}
					}
				}
			}
		}()
	}
	for range 3 {
		<-started
	}
	p.signal(t, syscall.SIGKILL)
	wg.Wait()
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(engine.NS("p", "s"), "kill")
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged before the kill")
	}
	for _, id := range acked {
		if _, err := q.Get(context.Background(), id); err != nil {
			t.Fatalf("acknowledged task %d after the kill: %v", id, err)
		}
	}
	t.Logf("%d acknowledged enqueues, all there after SIGKILL", len(acked))
}
