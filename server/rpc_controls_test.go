package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// TestControlsOverTheNetwork: Pause, Resume and SetLimits need admin on
// the namespace (a reader is refused, naming it, and nothing changes),
// Settings read; the settings reach the engine and come back, in Queues
// too; bad limits are InvalidArgument.
func TestControlsOverTheNetwork(t *testing.T) {
	t.Parallel()
	_, db, url, tok := tokenServer(t, Options{})
	ctx := context.Background()
	ctl := func(who string) docketv1connect.ControlsClient {
		opts := []connect.ClientOption{connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+tok[who])
				return next(ctx, req)
			}
		}))}
		return docketv1connect.NewControlsClient(http.DefaultClient, url, opts...)
	}
	reader, admin := ctl("reader"), ctl("acmeAdmin")
	_, err := reader.Pause(ctx, connect.NewRequest(&v1.PauseRequest{Namespace: acme, Queue: "q"}))
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("a reader pauses: %v", err)
	}
	limits := &v1.Limits{MaxInFlight: 4, Rate: 10, Per: durationpb.New(time.Second)}
	_, err = reader.SetLimits(ctx, connect.NewRequest(&v1.SetLimitsRequest{Namespace: acme, Queue: "q", Limits: limits}))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a reader sets limits: %v", err)
	}
	root := db.As(engine.Caller{ID: "root"}).Queue(engine.NS("acme", "prod"), "q")
	if s, _ := root.Settings(ctx); s != (engine.QueueSettings{}) {
		t.Fatalf("a refused call changed the settings: %+v", s)
	}
	if _, err := admin.Pause(ctx, connect.NewRequest(&v1.PauseRequest{Namespace: acme, Queue: "q"})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetLimits(ctx, connect.NewRequest(&v1.SetLimitsRequest{Namespace: acme, Queue: "q", Limits: limits})); err != nil {
		t.Fatal(err)
	}
	want := engine.QueueSettings{Paused: true, Limits: engine.Limits{MaxInFlight: 4, Rate: 10, Per: time.Second, Burst: 10}}
	if s, _ := root.Settings(ctx); s != want {
		t.Fatalf("engine settings %+v, want %+v", s, want)
	}
	got, err := reader.Settings(ctx, connect.NewRequest(&v1.SettingsRequest{Namespace: acme, Queue: "q"}))
	if err != nil || wire.Settings(got.Msg.Settings) != want {
		t.Fatalf("Settings: %v %v", got, err)
	}
	qs, err := newStubs(url, tok["reader"]).admin.Queues(ctx, connect.NewRequest(&v1.QueuesRequest{}))
	if err != nil || len(qs.Msg.Queues) != 1 || !qs.Msg.Queues[0].Paused || qs.Msg.Queues[0].Limits.GetMaxInFlight() != 4 {
		t.Fatalf("Queues: %v %v", qs, err)
	}
	if _, err := admin.Resume(ctx, connect.NewRequest(&v1.ResumeRequest{Namespace: acme, Queue: "q"})); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*v1.Limits{
		"negative bound":   {MaxInFlight: -1},
		"rate without per": {Rate: 3},
		"bound past int":   {MaxInFlight: 1 << 62},
		"bad per":          {Rate: 1, Per: &durationpb.Duration{Seconds: 1, Nanos: -1}},
	} {
		_, err := admin.SetLimits(ctx, connect.NewRequest(&v1.SetLimitsRequest{Namespace: acme, Queue: "q", Limits: l}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !errors.Is(wire.FromConnect(err), engine.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s, _ := root.Settings(ctx); s != (engine.QueueSettings{Limits: want.Limits}) {
		t.Fatalf("settings after refused limits: %+v", s)
	}
}

// TestUniqueOverJSON: a JSON client's unique task carries its window and
// states; the same content in another key order is deduplicated.
func TestUniqueOverJSON(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{})
	url := rpcServer(t, s)
	body := func(payload string) string {
		return `{"namespace":{"project":"acme","scope":"prod"},"queue":"q","task":{"kind":"mail","payload":` + payload +
			`,"unique":{"window":"60s","states":["STATE_READY","STATE_SCHEDULED","STATE_IN_FLIGHT","STATE_DEAD"]}}}`
	}
	code, first, _ := post(t, url+"/docket.v1.Queues/Enqueue", "application/json", strings.NewReader(body(`{"to":"a","n":1}`)))
	if code != 200 || strings.Contains(first, "deduplicated") {
		t.Fatalf("first: %d %s", code, first)
	}
	code, again, _ := post(t, url+"/docket.v1.Queues/Enqueue", "application/json", strings.NewReader(body(`{"n": 1, "to": "a"}`)))
	if code != 200 || !strings.Contains(again, `"deduplicated":true`) {
		t.Fatalf("again: %d %s", code, again)
	}
	code, bad, _ := post(t, url+"/docket.v1.Queues/Enqueue", "application/json",
		strings.NewReader(`{"namespace":{"project":"acme","scope":"prod"},"queue":"q","task":{"unique":{"window":"60s","states":["STATE_READY"]}}}`))
	if code != 400 || !strings.Contains(bad, "unique states") {
		t.Fatalf("bad states: %d %s", code, bad)
	}
}
