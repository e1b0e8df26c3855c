package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// DefaultGrace is how long a drain waits for in-flight calls.
const DefaultGrace = 30 * time.Second

// Serve answers calls on ln with hs (whose Handler should come from
// s.Handler) until ctx ends, then stops cleanly: it drains s (readiness
// fails, waiting claims return), stops accepting, and waits up to grace for
// in-flight calls before cutting the connections that remain. It serves
// sessions on the same port: in cleartext, connections that begin with
// the session preface; under TLS, those that negotiate the ALPN protocol
// "docket/1" (added to hs.TLSConfig.NextProtos). A session stopping
// answers the calls it read, then closes; none outlives Serve. It returns nil
// after a clean stop and the listener's error otherwise. The caller closes
// the DB after Serve returns, so every answered call was committed before.
func Serve(ctx context.Context, s *Server, hs *http.Server, ln net.Listener, grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultGrace
	}
	if hs.TLSConfig != nil {
		s.serveALPN(hs)
	} else {
		ln = s.sniff(ln)
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		if hs.TLSConfig != nil {
			err = hs.ServeTLS(ln, "", "")
		} else {
			err = hs.Serve(ln)
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		s.Drain()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		s.stopSessions(sctx)
		return err
	case <-ctx.Done():
	}
	s.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	sessionsDone := make(chan struct{})
	go func() {
		defer close(sessionsDone)
		s.stopSessions(sctx)
	}()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("docket: calls still running after the grace period; closing their connections", "grace", grace)
		hs.Close()
		err = nil
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	<-sessionsDone
	s.log.Info("docket: stopped serving")
	return err
}
