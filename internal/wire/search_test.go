package wire

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// TestFilterRoundTrip: every field of a filter crosses the wire; bad
// states, retrying values and timestamps are ErrInvalid.
func TestFilterRoundTrip(t *testing.T) {
	f := engine.Filter{States: []engine.State{engine.Dead, engine.Scheduled}, Retrying: engine.OnlyRetrying,
		Kind: "k", Error: "boom", Partition: "p", HeaderKey: "h", HeaderValue: "v", MinID: 3, MaxID: 9,
		EnqueuedSince: time.UnixMicro(1_700_000_000_000_001).UTC(), EnqueuedBefore: time.UnixMicro(1_800_000_000_000_000).UTC()}
	got, err := Filter(PBFilter(f))
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, f)
	}
	if got, err := Filter(nil); err != nil || got.Active() {
		t.Fatalf("no filter: %+v, %v", got, err)
	}
	for _, pb := range []*v1.Filter{
		{States: []v1.State{-1}},
		{States: []v1.State{300}},
		{Retrying: -2},
		{EnqueuedSince: &timestamppb.Timestamp{Seconds: 1, Nanos: -5}},
		{States: make([]v1.State, 9)},
	} {
		if _, err := Filter(pb); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", pb, err)
		}
	}
}
