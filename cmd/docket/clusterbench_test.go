package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/docketdb/docket/bench"
)

// TestClusterTargets judges fixed pairs: durable W2 at half of one node
// passes, below fails, and other workloads are not judged.
func TestClusterTargets(t *testing.T) {
	pair := func(w string, single, three float64) clusterBenchPair {
		return clusterBenchPair{
			Single: bench.Result{System: "1 node", Workload: w, Mode: "durable", Producers: 16, TasksPerSec: single},
			Three:  bench.Result{System: "3 nodes", Workload: w, Mode: "durable", Producers: 16, TasksPerSec: three},
			Ratio:  three / single,
		}
	}
	ts := clusterTargets([]clusterBenchPair{pair("W1", 100, 10), pair("W2", 4000, 2000)})
	if len(ts) != 1 || !ts[0].Pass || ts[0].Ratio != 0.5 || !strings.Contains(ts[0].Name, "16 producers on one client") {
		t.Fatalf("at 0.5x: %+v", ts)
	}
	ts = clusterTargets([]clusterBenchPair{pair("W2", 4000, 1999)})
	if len(ts) != 1 || ts[0].Pass {
		t.Fatalf("below 0.5x: %+v", ts)
	}
	var b bytes.Buffer
	if err := bench.WritePerfTargets(&b, ts); err != nil || !strings.Contains(b.String(), "FAIL") || !strings.Contains(b.String(), "1999 vs 4000 tasks/s") {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if ts := clusterTargets([]clusterBenchPair{pair("W2", 0, 0)}); len(ts) != 0 {
		t.Fatalf("a pair that measured nothing: %+v", ts)
	}
}
