// Package taskaction finds the task actions of engine.Queue by reflection,
// and reads and runs them, for the command line and the dashboard, which
// offer every one without a hand-written command or form of its own.
//
// A task action is a method of engine.Queue of the form
//
//	M(ctx context.Context, id uint64) error
//	M(ctx context.Context, id uint64, opts T) error
//
// with T a struct of exported fields of simple kinds: time.Time (given as
// an RFC 3339 time, or as how long from now), time.Duration, a signed
// integer, a pointer to one (optional: unset is nil), string or bool. A
// method of another shape is not one (its layer offers it by hand, or
// says why not). An action carries its method's documentation (Doc),
// which internal/gen copies from engine.Queue's declaration into
// docs_gen.go (go generate ./internal/taskaction/): reflection has no
// comments.
package taskaction
