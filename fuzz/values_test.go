//go:build linux

package fuzz

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestProgramsWithValues runs programs whose configuration sets a value
// threshold of 64 bytes, so that about a third of their payloads, results
// and progress records live in the value log, in every configuration
// against the model (runMetamorphic: every payload, result and progress
// read back compared with the model's, in memory where all stay in line
// and on disk where they do not), and checks that a run on disk did write
// them to the value log.
func TestProgramsWithValues(t *testing.T) {
	const cfg = 0x1e // one hour's retention, so results are kept and read
	for seed := range uint64(shortOr("", 6, 1)) {
		data := genProgram(rand.New(rand.NewPCG(seed, 13)), maxInstructions, workload, cfg)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runMetamorphic(t, data) })
	}
	data := genProgram(rand.New(rand.NewPCG(99, 13)), maxInstructions, workload, cfg)
	r := newRunner(t, runConfig{name: "values", dur: engine.SyncAlways}, programConfig(data[0]), "", nil)
	r.run(&program{data: data, pos: 1}, maxInstructions)
	r.finish()
	defer r.db.Close()
	vdir := filepath.Join(r.dir, "vlog")
	ents, err := fsOf(r.dir).ReadDir(vdir)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, e := range ents {
		if fi, err := fsOf(r.dir).Stat(filepath.Join(vdir, e.Name())); err == nil {
			bytes += fi.Size()
		}
	}
	if bytes < 1000 {
		t.Fatalf("the program wrote %d bytes to the value log", bytes)
	}
	t.Logf("%d bytes in %d value log files", bytes, len(ents))
}
