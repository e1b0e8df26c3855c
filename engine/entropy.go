package engine

import (
	"crypto/rand"
	mrand "math/rand/v2"
)

// newEntropy returns the default entropy: a ChaCha8 stream (a CSPRNG)
// keyed from crypto/rand, never 0. It is called under the engine lock only,
// and costs a fraction of a crypto/rand read per batch.
func newEntropy() func() uint64 {
	var key [32]byte
	rand.Read(key[:]) // never fails (Go 1.24+)
	rng := mrand.NewChaCha8(key)
	return func() uint64 { return max(rng.Uint64(), 1) }
}
