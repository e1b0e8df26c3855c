package engine

import (
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
)

// The hooks the tests outside engine use (see internal/enginetest): not
// part of the public API.
func init() {
	enginetest.Tap = func(opts any, f func(seq uint64, data []byte)) {
		opts.(*Options).tap = f
	}
	enginetest.NewReplica = func() enginetest.Replica { return newReplica() }
	enginetest.FS = func(opts any, fsys vfs.FS) { opts.(*Options).fs = fsys }
	enginetest.Failpoint = func(opts any, f func(name string) error) { opts.(*Options).failpoint = f }
	enginetest.Check = func(fsys vfs.FS, dir string) (uint64, error) {
		rep, err := checkFS(fsys, dir)
		return rep.Seq, err
	}
}
