package client

import (
	"testing"

	"github.com/docketdb/docket/internal/wire"
)

// TestLeaderHeaderIsTheServers: the header the client follows is the one a
// node of a cluster names the leader in.
func TestLeaderHeaderIsTheServers(t *testing.T) {
	t.Parallel()
	if LeaderHeader != wire.LeaderHeader {
		t.Fatalf("client follows %q, servers send %q", LeaderHeader, wire.LeaderHeader)
	}
}
