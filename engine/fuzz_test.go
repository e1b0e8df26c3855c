package engine

import (
	"errors"
	"testing"
	"time"
)

// FuzzCallers drives the API with random callers and random, often hostile,
// input: nothing may panic, no call may succeed outside the caller's grants,
// and nothing a caller reads may come from another namespace.
func FuzzCallers(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"))
	f.Add([]byte("\x10a\x00\xff\x21\x32\x43\x54\x65\x76\x87\x98\xa9\xba\xcb\xdc\xed\xfe"))
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		clock := NewManualClock(t0)
		db, err := OpenInMemory(Options{Clock: clock, MaxPayloadBytes: 256, Authorizer: Policy{
			"a": {{Project: "A", Scope: "s", Perms: PermAll}},
			"b": {{Project: "B", Scope: "s", Perms: PermAll &^ PermAdmin}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		callers := []struct {
			view *DB
			home Namespace
		}{
			{db.As(Caller{ID: "a"}), NS("A", "s")},
			{db.As(Caller{ID: "b"}), NS("B", "s")},
			{db.As(Caller{ID: "nobody"}), NS("A", "s")},
		}
		owner := map[uint64]Namespace{} // task id -> namespace it was enqueued in
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		str := func() string {
			n := int(next() % 8)
			if n > len(data) {
				n = len(data)
			}
			s := string(data[:n])
			data = data[n:]
			return s
		}
		var leases []Lease
		for len(data) > 0 {
			c := callers[int(next())%len(callers)]
			target := c.home
			if next()%4 == 0 {
				target = NS(string([]byte{'A' + next()%3}), "s")
			}
			q := c.view.Queue(target, "q"+string(rune('0'+next()%2)))
			allowed := c.view.permit(target, PermAll&^PermAdmin) == nil
			check := func(err error) {
				if err == nil && !allowed {
					t.Fatalf("call by %q on %v succeeded", c.view.caller.ID, target)
				}
			}
			checkNS := func(n Namespace, id uint64) {
				if n != target || (owner[id] != Namespace{} && owner[id] != n) {
					t.Fatalf("task %d of %v seen through %v", id, owner[id], target)
				}
			}
			switch next() % 9 {
			case 0:
				payload := []byte(str())
				if next()%2 == 0 {
					payload = []byte(`{"v":"` + string(rune('a'+next()%26)) + `"}`)
				}
				r, err := q.Enqueue(ctx, Task{Payload: payload, IdempotencyKey: str(), Priority: int(int8(next())),
					Delay: time.Duration(next()) * time.Second}, Set(str(), []byte(str())))
				check(err)
				if err == nil && !r.Deduplicated {
					owner[r.ID] = target
				}
			case 1:
				ls, err := q.Claim(ctx, "w"+str(), time.Duration(int8(next()))*time.Second, int(next()%4))
				check(err)
				for _, l := range ls {
					checkNS(l.Namespace, l.ID)
				}
				leases = append(leases, ls...)
			case 2:
				if len(leases) > 0 {
					l := leases[int(next())%len(leases)]
					_, err := q.Complete(ctx, l, Done{Result: []byte(str()), FollowUps: []FollowUp{{Queue: "q1"}}})
					check(err)
				}
			case 3:
				if len(leases) > 0 {
					l := leases[int(next())%len(leases)]
					check(q.Fail(ctx, l, Failure{Err: str(), Permanent: next()%2 == 0}))
				}
			case 4:
				id := uint64(next() % 16)
				info, err := q.Get(ctx, id)
				check(err)
				if err == nil {
					checkNS(info.Namespace, id)
				}
			case 5:
				page, err := q.List(ctx, ListOptions{State: State(next() % 7), Limit: int(next() % 5), Cursor: str()})
				if err == nil {
					check(err)
				}
				for _, ti := range page.Tasks {
					checkNS(ti.Namespace, ti.ID)
				}
			case 6:
				ents, err := c.view.KV(target).Scan(ctx, ScanOptions{Prefix: str(), Limit: int(next() % 5)})
				check(err)
				_ = ents
			case 7:
				err := q.Cancel(ctx, uint64(next()%16))
				if err == nil && (c.view.permit(target, PermAdmin) != nil) {
					t.Fatalf("cancel without admin succeeded")
				}
				if errors.Is(err, ErrNotFound) || err == nil {
					continue
				}
			case 8:
				clock.Advance(time.Duration(next()) * time.Second)
			}
		}
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}
