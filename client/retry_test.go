package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
)

func testRetrier(t *testing.T, list string, max int) (*retrier, *[]time.Duration) {
	t.Helper()
	eps, err := newEndpoints(list)
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	return &retrier{eps: eps, maxRetries: max, base: 10 * time.Millisecond, max: time.Second,
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}, &slept
}

var (
	errDial  = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
)

func unavailable(err error) error { return connect.NewError(connect.CodeUnavailable, err) }

func TestEndpointsParse(t *testing.T) {
	t.Parallel()
	eps, err := newEndpoints(" http://a:1/, http://b:2,http://a:1 ,")
	if err != nil || len(eps.urls) != 2 || eps.current() != "http://a:1" {
		t.Fatalf("%v %v", eps, err)
	}
	for _, bad := range []string{"", " , ", "a:1", "ftp://x"} {
		if _, err := newEndpoints(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRetryMovesOnWhenNotSent(t *testing.T) {
	t.Parallel()
	r, slept := testRetrier(t, "http://a,http://b,http://c", 5)
	var tried []string
	err := r.do(context.Background(), false, func(_ context.Context, base string) error {
		tried = append(tried, base)
		if base != "http://c" {
			return unavailable(errDial)
		}
		return nil
	})
	if err != nil || len(tried) != 3 || tried[2] != "http://c" || len(*slept) != 2 {
		t.Fatalf("err %v tried %v slept %v", err, tried, *slept)
	}
	if r.eps.current() != "http://c" {
		t.Fatal("the client did not stay on the endpoint that answered")
	}
}

func TestRetryFollowsLeaderHint(t *testing.T) {
	t.Parallel()
	r, _ := testRetrier(t, "http://a,http://b", 5)
	var tried []string
	err := r.do(context.Background(), false, func(_ context.Context, base string) error {
		tried = append(tried, base)
		if base != "http://n3" {
			e := connect.NewError(connect.CodeUnavailable, errors.New("not the leader"))
			e.Meta().Set(LeaderHeader, "http://n3")
			return e
		}
		return nil
	})
	if err != nil || len(tried) != 2 || tried[1] != "http://n3" {
		t.Fatalf("err %v tried %v", err, tried)
	}
}

func TestUnsafeCallWithLostAnswerIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	r, _ := testRetrier(t, "http://a,http://b", 5)
	calls := 0
	err := r.do(context.Background(), false, func(context.Context, string) error {
		calls++
		return unavailable(errReset)
	})
	if !errors.Is(err, ErrOutcomeUnknown) || calls != 1 {
		t.Fatalf("err %v after %d calls; want ErrOutcomeUnknown after 1", err, calls)
	}
	calls = 0
	err = r.do(context.Background(), true, func(context.Context, string) error {
		calls++
		if calls < 3 {
			return connect.NewError(connect.CodeUnknown, io.ErrUnexpectedEOF)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("a repeatable call: err %v after %d calls", err, calls)
	}
}

func TestServerAnswersAreNotRetried(t *testing.T) {
	t.Parallel()
	r, _ := testRetrier(t, "http://a", 5)
	for _, code := range []connect.Code{connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition, connect.CodePermissionDenied, connect.CodeDeadlineExceeded} {
		calls := 0
		want := connect.NewError(code, errors.New("answer"))
		err := r.do(context.Background(), true, func(context.Context, string) error { calls++; return want })
		if !errors.Is(err, want) || calls != 1 {
			t.Errorf("%v: err %v after %d calls", code, err, calls)
		}
	}
}

func TestRetryGivesUp(t *testing.T) {
	t.Parallel()
	r, slept := testRetrier(t, "http://a", 3)
	calls := 0
	err := r.do(context.Background(), true, func(context.Context, string) error { calls++; return unavailable(errReset) })
	if !errors.Is(err, ErrOutcomeUnknown) || calls != 4 || len(*slept) != 3 {
		t.Fatalf("err %v calls %d slept %v", err, calls, *slept)
	}
	for i, d := range *slept {
		hi := r.base << i
		if d < hi/2 || d > hi {
			t.Errorf("backoff %d = %v; want within [%v, %v]", i, d, hi/2, hi)
		}
	}
	calls = 0
	err = r.do(context.Background(), false, func(context.Context, string) error { calls++; return unavailable(errDial) })
	if errors.Is(err, ErrOutcomeUnknown) || calls != 4 {
		t.Fatalf("never sent: err %v calls %d; want the dial error", err, calls)
	}
	// A try that was sent without an answer, then tries that could not be
	// sent (the server went away): the first may have taken effect, so the
	// outcome is unknown, not "no server took it".
	calls = 0
	err = r.do(context.Background(), true, func(context.Context, string) error {
		calls++
		if calls == 1 {
			return unavailable(errReset)
		}
		return unavailable(errDial)
	})
	if !errors.Is(err, ErrOutcomeUnknown) || calls != 4 {
		t.Fatalf("sent once, then never: err %v calls %d; want ErrOutcomeUnknown", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.sleep = sleepCtx
	r.max, r.base = time.Hour, time.Hour
	calls = 0
	cancel()
	err = r.do(ctx, true, func(context.Context, string) error { calls++; return unavailable(errDial) })
	if err == nil || calls != 1 {
		t.Fatalf("a cancelled context: err %v calls %d", err, calls)
	}
}

func TestClassifyRealTransport(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr)
	if classify(err) != notSent {
		t.Fatalf("connection refused classified %v: %v", classify(err), err)
	}
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 1)
		c.Read(buf) // the request arrived; hang up without answering
		c.Close()
	}()
	_, err = http.Post("http://"+ln.Addr().String(), "text/plain", nil)
	if classify(err) != maybeSent {
		t.Fatalf("a hang-up after the request classified %v: %v", classify(err), err)
	}
}

// TestAContextThatEndsAfterASentTry: once a try may have reached a
// server, a context that ends, during a wait between tries or during a
// later try, ends the call with ErrOutcomeUnknown (matching the context's
// error too), whatever the last try's error; a call none of whose tries
// was sent returns that try's error.
func TestAContextThatEndsAfterASentTry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		tries   []error // the errors of the tries; the context ends after the last
		unknown bool
	}{
		{"sent, then the wait ends", []error{unavailable(errReset)}, true},
		{"sent, then refused, then the wait ends", []error{unavailable(errReset), unavailable(errDial)}, true},
		{"cut in flight", []error{connect.NewError(connect.CodeDeadlineExceeded, context.Canceled)}, true},
		{"refused, then cut in flight", []error{unavailable(errDial), connect.NewError(connect.CodeCanceled, context.Canceled)}, true},
		{"sent, then not sent as the context ends", []error{unavailable(errReset), unsentError{context.Canceled}}, true},
		{"refused, then the wait ends", []error{unavailable(errDial)}, false},
		{"not sent as the context ends", []error{unsentError{context.Canceled}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := testRetrier(t, "http://a,http://b", 10)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
			n := 0
			err := r.do(ctx, true, func(context.Context, string) error {
				err := c.tries[n]
				n++
				if n == len(c.tries) {
					cancel()
				}
				return err
			})
			if n != len(c.tries) {
				t.Fatalf("%d tries; want %d", n, len(c.tries))
			}
			if got := errors.Is(err, ErrOutcomeUnknown); got != c.unknown {
				t.Fatalf("%v: ErrOutcomeUnknown %v; want %v", err, got, c.unknown)
			}
			if c.unknown && !errors.Is(err, context.Canceled) {
				t.Fatalf("%v does not match the context's error", err)
			}
		})
	}
}
