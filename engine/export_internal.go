package engine

import "github.com/docketdb/docket/internal/enginetest"

// The hooks the tests outside engine use (see internal/enginetest): not
// part of the public API.
func init() {
	enginetest.Tap = func(opts any, f func(seq uint64, data []byte)) {
		opts.(*Options).tap = f
	}
	enginetest.NewReplica = func() enginetest.Replica { return newReplica() }
}
