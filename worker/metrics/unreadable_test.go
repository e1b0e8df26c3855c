package metrics_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker/metrics"
)

// TestUnreadableValuesCounted: the reads of a damaged value in the value
// log are a counter to alert on.
func TestUnreadableValuesCounted(t *testing.T) {
	c := metrics.New(metrics.Options{})
	dir := t.TempDir()
	db, err := c.Open(dir, engine.Options{ValueThreshold: 256, Clock: engine.NewManualClock(t0),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	q := db.Queue(ns, "q")
	enq, err := q.Enqueue(bg, engine.Task{Payload: []byte(`"` + strings.Repeat("x", 1000) + `"`)})
	if err != nil {
		t.Fatal(err)
	}
	// The value log holds that one value: damage its last byte.
	f, err := os.OpenFile(filepath.Join(dir, "vlog", "0000000000.vlog"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'y'}, st.Size()-2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := q.Get(bg, enq.ID); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("Get of the damaged task: %v", err)
	}
	if ls, err := q.Claim(bg, "w", time.Minute, 1); err != nil || len(ls) != 0 {
		t.Fatalf("claim of the damaged task: %d leases, %v", len(ls), err)
	}
	const want = `
# HELP docket_unreadable_values_total Reads of a value in the value log that failed (damage or an I/O error; docket verify lists the damage).
# TYPE docket_unreadable_values_total counter
docket_unreadable_values_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "docket_unreadable_values_total"); err != nil {
		t.Fatal(err)
	}
}
