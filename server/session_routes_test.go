package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestSessionRoutesCoverEveryCall fails when a case of Call's oneof has no
// route (or a route names a field that is not a case), so that a call
// added to the schema is served by sessions as soon as it is by unary.
func TestSessionRoutesCoverEveryCall(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	routes := s.buildRoutes()
	fields := callOneof.Fields()
	cases := map[protoreflect.FieldNumber]bool{}
	for i := range fields.Len() {
		fd := fields.Get(i)
		cases[fd.Number()] = true
		if fd == abandonField {
			continue // ends another call's wait; no route of its own
		}
		r, ok := routes[fd.Number()]
		if !ok {
			t.Errorf("Call.%s has no route", fd.Name())
			continue
		}
		if r.in != fd || r.out.Number() != fd.Number() || r.proc == "" || r.run == nil {
			t.Errorf("Call.%s: route %+v", fd.Name(), r)
		}
	}
	for n, r := range routes {
		if !cases[n] {
			t.Errorf("route %s (%d) is not a case of Call", r.in.Name(), n)
		}
	}
	if len(routes) != fields.Len()-1 {
		t.Errorf("%d routes for %d calls", len(routes), fields.Len()-1)
	}
}
