package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestServeDrainsParkedCallsAndStops(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{})
	mux := http.NewServeMux()
	s.Health(mux)
	mux.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) {
		ctx, release, err := s.park(r.Context(), 0)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer release()
		close(parked)
		<-ctx.Done()
		w.Write([]byte("woken"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(mux, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, s, hs, ln, 10*time.Second) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/wait")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-parked
	cancel()
	if g := <-got; g != "woken" {
		t.Fatalf("parked call answered %q; want woken", g)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after a clean stop: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Fatal("still accepting after Serve returned")
	}
}

func TestServeGraceCutsStuckCalls(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	entered, unblock := make(chan struct{}), make(chan struct{})
	defer close(unblock)
	mux := http.NewServeMux()
	mux.HandleFunc("/stuck", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select { // ignores the drain, as a handler stuck in user code would
		case <-unblock:
		case <-r.Context().Done():
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, s, NewHTTPServer(mux, nil), ln, 50*time.Millisecond) }()
	go http.Get("http://" + ln.Addr().String() + "/stuck")
	<-entered
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its grace period")
	}
}

func TestServeReportsListenerFailure(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(context.Background(), s, NewHTTPServer(http.NewServeMux(), nil), ln, time.Second); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
	if !s.Draining() {
		t.Fatal("a failed listener left the server ready")
	}
}
