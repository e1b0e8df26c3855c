package engine

import (
	"crypto/rand"
	"maps"
	mrand "math/rand/v2"
	"slices"

	"github.com/docketdb/docket/internal/index"
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

// infoOf describes t as it is at now.
func infoOf(t *index.Task, now int64) TaskInfo {
	t = at(t, now)
	x := t.Ex()
	k := t.Queue.Key
	info := TaskInfo{
		ID: t.ID, Namespace: Namespace{Project: k.Project, Scope: k.Scope}, Queue: k.Name, Kind: x.Kind, State: State(t.State),
		Payload: clone(t.Payload()), Headers: maps.Clone(x.Headers), Priority: int(t.Priority), Attempts: int(t.Attempts),
		MaxAttempts: int(t.MaxAttempts()), NotBefore: timeOf(t.NotBefore), Owner: t.Owner(), Token: t.Token(),
		LeaseUntil: timeOf(t.LeaseUntil()), Progress: clone(x.Progress), Result: clone(x.Result), LastError: x.LastError,
		IdempotencyKey: x.IdemKey, BackoffBase: micros(t.BackoffBase()), BackoffMax: micros(t.BackoffMax()),
		CreatedAt: timeOf(t.Created), UpdatedAt: timeOf(t.Updated()), Parent: x.Parent, FollowUps: slices.Clone(x.FollowUps),
		OnParentFailure: DependencyPolicy(x.DepPolicy), Partition: t.PartitionKey(),
	}
	if len(x.Errors) > 0 {
		info.Errors = make([]AttemptError, len(x.Errors))
		for i, e := range x.Errors {
			info.Errors[i] = AttemptError{Attempt: int(e.Attempt), At: timeOf(e.At), Error: e.Error}
		}
	}
	return info
}
