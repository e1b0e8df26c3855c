package index

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
)

// TestTokenBucket: the bucket refills at Rate tokens per Per up to Burst,
// exactly (no rounding drifts over many refills), takes tokens at once,
// and says when the next token comes.
func TestTokenBucket(t *testing.T) {
	// 3 tokens per 1000 µs, at most 2: a token every 333⅓ µs.
	c := QueueConf{Queue: qk, Rate: 3, Per: 1000, Burst: 2, Credit: 2000, At: 0}
	if n := c.Tokens(0); n != 2 {
		t.Fatalf("full bucket: %d tokens", n)
	}
	c = c.Take(0, 2)
	if n := c.Tokens(0); n != 0 || c.NextToken(0) != 334 {
		t.Fatalf("empty bucket: %d tokens, next at %d", n, c.NextToken(0))
	}
	if c.Tokens(333) != 0 || c.Tokens(334) != 1 || c.Tokens(667) != 2 || c.Tokens(1<<40) != 2 {
		t.Fatalf("refill: %d %d %d %d", c.Tokens(333), c.Tokens(334), c.Tokens(667), c.Tokens(1<<40))
	}
	// A thousand takes of one token as soon as it comes: exactly 3 per 1000
	// µs on average, none lost to rounding.
	now := int64(0)
	for range 3000 {
		now = c.NextToken(now)
		if c.Tokens(now) < 1 {
			t.Fatalf("no token at %d", now)
		}
		c = c.Take(now, 1)
	}
	if now < 999_999 || now > 1_000_000 {
		t.Fatalf("3000 tokens at 3/ms took until %d µs", now)
	}
	// The extremes do not overflow.
	big := QueueConf{Queue: qk, Rate: MaxRateTokens, Per: MaxRatePer, Burst: MaxRateTokens}
	if n := big.Tokens(math.MaxInt64); n != MaxRateTokens {
		t.Fatalf("largest bucket: %d tokens", n)
	}
	slow := QueueConf{Queue: qk, Rate: 1, Per: MaxRatePer, Burst: MaxRateTokens}
	if got := slow.NextToken(5); got != MaxRatePer { // empty at 0, filling since
		t.Fatalf("slowest bucket: next token at %d", got)
	}
	if n := slow.Tokens(math.MaxInt64); n != MaxRateTokens {
		t.Fatalf("slowest bucket after a long time: %d tokens", n)
	}
}

// TestConfRecords: settings records apply and restore independently of
// the queue's tasks, a change of settings (not of the bucket's level) is
// reported, a record that sets nothing or holds nonsense is damage, and a
// limited queue whose task leaves flight has claimable room again.
func TestConfRecords(t *testing.T) {
	s := NewStore()
	conf := QueueConf{Queue: qk, Paused: true}
	if _, err := s.Apply(&Batch{Seq: 1, Mutations: []Mutation{{Kind: MutPutConf, Conf: conf}}}); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Conf(qk); !ok || got != conf || s.Queue(qk) != nil {
		t.Fatalf("settings of a queue without tasks: %+v %v", got, ok)
	}
	if !slices.Equal(s.Reconfigured(), []QueueKey{qk}) {
		t.Fatalf("reconfigured %v", s.Reconfigured())
	}
	limited := QueueConf{Queue: qk, MaxInFlight: 1, Rate: 1, Per: 10, Burst: 1, Credit: 10}
	if _, err := s.Apply(&Batch{Seq: 2, Mutations: []Mutation{{Kind: MutPutConf, Conf: limited}}}); err != nil {
		t.Fatal(err)
	}
	// Only the bucket's level changes: nobody parked needs to look again.
	used := limited.Take(5, 1)
	if _, err := s.Apply(&Batch{Seq: 3, Mutations: []Mutation{{Kind: MutPutConf, Conf: used}}}); err != nil {
		t.Fatal(err)
	}
	if len(s.Reconfigured()) != 0 {
		t.Fatalf("a bucket level change reported as reconfigured: %v", s.Reconfigured())
	}
	tk := task(s, 1, StateInFlight)
	tk = edit(tk, func(f *Fields) { f.Owner, f.Token, f.LeaseUntil = "w", 1, 100 })
	if _, err := s.Apply(putBatch(s, 4, tk)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&Batch{Seq: 5, Mutations: []Mutation{{Kind: MutDeleteTask, Update: TaskUpdate{ID: 1, Flags: UpdCompleted}}}}); err != nil {
		t.Fatal(err)
	}
	if a := s.Affected(); len(a) != 1 || a[0].Key != qk {
		t.Fatalf("a completion on a limited queue did not free room for a parked claimer: %v", a)
	}
	img := s.Copy()
	var recs [][]byte
	if err := WriteImage(img, NewEncoder(), func(rec []byte) error { recs = append(recs, slices.Clone(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	s2 := NewStore()
	dec := NewDecoder(s2)
	for _, rec := range recs {
		r, err := dec.Record(rec)
		if err == nil {
			err = s2.Load(r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s2.Conf(qk); got != used {
		t.Fatalf("restored settings %+v, want %+v", got, used)
	}
	if mustHash(t, s2) != mustHash(t, s) {
		t.Fatal("restored state hashes differently")
	}
	if err := s2.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(&Batch{Seq: 6, Mutations: []Mutation{{Kind: MutDeleteConf, Conf: QueueConf{Queue: qk}}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Conf(qk); ok || !reflect.DeepEqual(s.Reconfigured(), []QueueKey{qk}) {
		t.Fatalf("delete: still there %v, reconfigured %v", ok, s.Reconfigured())
	}
	for name, bad := range map[string]QueueConf{
		"default":        {Queue: qk},
		"no queue name":  {Paused: true},
		"negative limit": {Queue: qk, MaxInFlight: -1},
		"rate, no per":   {Queue: qk, Rate: 1, Burst: 1},
		"per, no rate":   {Queue: qk, Paused: true, Per: 1},
		"overfull":       {Queue: qk, Rate: 1, Per: 10, Burst: 1, Credit: 11},
		"huge rate":      {Queue: qk, Rate: MaxRateTokens + 1, Per: 10, Burst: 1},
		"huge per":       {Queue: qk, Rate: 1, Per: MaxRatePer + 1, Burst: 1},
	} {
		_, err := s.Apply(&Batch{Seq: s.Seq() + 1, Mutations: []Mutation{{Kind: MutPutConf, Conf: bad}}})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
		if err := NewStore().LoadConf(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("load %s: %v", name, err)
		}
	}
}
