package ticket

import (
	"context"
	"errors"
	"testing"

	"github.com/docketdb/docket/dockettype"
)

// TestPending: a Pending settled when made, by its maker (the first
// outcome counts), or with its round (the log's failure wins over the
// commit's own outcome); an error never comes with an Enqueued.
func TestPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	if enq, err := Settled(dockettype.Enqueued{ID: 1}, boom).Wait(ctx); err != boom || enq.ID != 0 {
		t.Fatalf("settled with an error: %+v, %v", enq, err)
	}
	p, settle := New()
	select {
	case <-p.Done():
		t.Fatal("a Pending not settled is done")
	default:
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Wait(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a context that ended: %v", err)
	}
	settle(dockettype.Enqueued{ID: 2}, nil)
	settle(dockettype.Enqueued{ID: 3}, boom)
	if enq, err := p.Wait(ctx); err != nil || enq.ID != 2 {
		t.Fatalf("settled twice: %+v, %v, want the first outcome", enq, err)
	}

	for _, c := range []struct {
		name     string
		own, log error
		wantID   uint64
		wantErr  error
	}{
		{"durable", nil, nil, 4, nil},
		{"refused", boom, nil, 0, boom},
		{"the log failed", nil, dockettype.ErrFailed, 0, dockettype.ErrFailed},
	} {
		r := NewRound()
		p := r.Pending(dockettype.Enqueued{ID: 4}, c.own)
		select {
		case <-p.Done():
			t.Fatalf("%s: done before its round", c.name)
		default:
		}
		r.Settle(c.log)
		if enq, err := p.Wait(ctx); err != c.wantErr || enq.ID != c.wantID {
			t.Errorf("%s: %+v, %v", c.name, enq, err)
		}
	}
}
