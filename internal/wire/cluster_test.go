package wire

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
)

// TestReplicationErrors: the errors only a replicated DB returns keep
// their meaning on the wire. An unknown outcome is never answered as a
// closed DB (which would tell the client nothing was taken), even when
// it wraps ErrClosed; a refusal for not being the leader says nothing was
// taken.
func TestReplicationErrors(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable string // want this UnavailableHeader ("" none)
	}{
		{fmt.Errorf("%w: leadership lost", engine.ErrOutcomeUnknown), ""},
		{fmt.Errorf("%w: %w: shutting down", engine.ErrOutcomeUnknown, engine.ErrClosed), ""},
		{fmt.Errorf("%w: the leader is n1", engine.ErrNotLeader), "not the leader"},
	} {
		ce := ToConnect(tc.err)
		if ce.Code() != connect.CodeUnavailable || ce.Meta().Get(UnavailableHeader) != tc.unavailable || Detail(ce) != nil {
			t.Errorf("%v: %v %q %v", tc.err, ce.Code(), ce.Meta().Get(UnavailableHeader), Detail(ce))
		}
		if !errors.Is(ce, tc.err) {
			t.Errorf("%v: the connect error does not wrap it", tc.err)
		}
	}
	if ce := ToConnect(fmt.Errorf("%w: db closed", engine.ErrClosed)); ce.Meta().Get(UnavailableHeader) != "closed" {
		t.Errorf("a closed DB: %v", ce.Meta())
	}
}
