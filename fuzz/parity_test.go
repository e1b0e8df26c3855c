//go:build linux

package fuzz

import (
	"math/rand/v2"
	"testing"

	"github.com/docketdb/docket/engine"
	calls "github.com/docketdb/docket/internal/enginetest/record"
)

// modelExempt are the methods programs do not call, each with the reason
// the model does not predict them.
var modelExempt = map[string]string{
	"API.Clock":       "programs move the runner's manual clock, which is the engine's, themselves",
	"Queue.Name":      "a handle's name is fixed when it is made: no state to predict",
	"Queue.Namespace": "a handle's name is fixed when it is made: no state to predict",
	"KV.Namespace":    "a handle's name is fixed when it is made: no state to predict",

	"Presence.ReportWorker":   "not modelled: presence is records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.RemoveWorker":   "not modelled: presence is records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.Workers":        "not modelled: presence is records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.ReportSchedule": "not modelled: schedules are records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.Schedules":      "not modelled: schedules are records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.PauseSchedule":  "not modelled: schedules are records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.ResumeSchedule": "not modelled: schedules are records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",
	"Presence.RunSchedule":    "not modelled: schedules are records in the namespace's system area, swept as they expire; the model keeps tasks and user entries",

	"Quotas.SetQuota": "not modelled: a quota refuses enqueues by the tasks and bytes a namespace holds, and the model counts no bytes",
	"Quotas.Quota":    "not modelled: a quota refuses enqueues by the tasks and bytes a namespace holds, and the model counts no bytes",
}

// paritySeeds are the programs of TestParityModel: generated from fixed
// seeds, long enough to draw every instruction and its variants.
const paritySeeds, parityOps = 4, 400

// TestParityModel runs programs of the fuzz package's runner (the engine
// and the model side by side) over a recording DB and checks that they
// call every method of engine.API, Queue, KV, Presence and Quotas, or that
// the method is exempt with a reason: a method added to the engine and not
// to the programs and the model fails here, named.
func TestParityModel(t *testing.T) {
	rec := calls.New()
	for seed := range uint64(paritySeeds) {
		prog := genProgram(rand.New(rand.NewPCG(seed, 2026)), parityOps, workload, byte(seed*37))
		r := newRunner(t, runConfig{name: "parity", dur: engine.SyncNever}, programConfig(prog[0]), "", nil)
		r.fullCheck = false
		r.wrap = rec.Wrap
		r.run(&program{data: prog[1:]}, parityOps)
		r.finish()
	}
	rec.Check(t, "fuzz model", modelExempt)
}
