package admit

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/internal/index"
)

// TestAdds: what a command adds to the state: an enqueue its task, a
// value kept in the value log only its reference, a completion its
// result (and may use the reserve), a failure nothing.
func TestAdds(t *testing.T) {
	t.Parallel()
	task := index.TaskCost + index.ExtraCost + index.RunCost
	for _, c := range []struct {
		name       string
		cmd        machine.Command
		outOfLine  int
		want       int64
		completion bool
	}{
		{"enqueue", machine.Command{Args: &machine.Enqueue{Task: machine.Spec{Size: 100, Payload: make([]byte, 100)}}}, 0, task + 100, false},
		{"enqueue, value on disk", machine.Command{Args: &machine.Enqueue{Task: machine.Spec{Size: 100, Payload: make([]byte, 100)}}}, 64,
			task + index.RefsCost, false},
		{"enqueue, value under the threshold", machine.Command{Args: &machine.Enqueue{Task: machine.Spec{Size: 100, Payload: make([]byte, 100)}}}, 101,
			task + 100, false},
		{"idempotent", machine.Command{Args: &machine.Enqueue{Task: machine.Spec{Idem: "k"}}}, 0, task + index.IdemCost + 1, false},
		{"batch", machine.Command{Args: &machine.EnqueueBatch{Tasks: []machine.Spec{{Size: 1}, {Size: 2}}}}, 0, 2*task + 3, false},
		{"complete", machine.Command{Args: &machine.Complete{Result: make([]byte, 10)}}, 0, 10, true},
		{"fail", machine.Command{Args: &machine.Fail{}}, 0, 0, false},
	} {
		n, completion := Adds(&c.cmd, c.outOfLine)
		if n != c.want || completion != c.completion {
			t.Errorf("%s: adds %d (completion %v), want %d (%v)", c.name, n, completion, c.want, c.completion)
		}
	}
}

// TestBudgetOf: MaxMemory itself, none for a negative one, a share of
// what is available for 0.
func TestBudgetOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want int64 }{{12345, 12345}, {-1, 0}, {0, AvailableMemory() / DefaultMemoryShare}} {
		if got := BudgetOf(c.in); got != c.want {
			t.Errorf("BudgetOf(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestAdmitBudget: an enqueue past the budget is ErrFull, a completion
// may use the reserve beyond it, and a claim is cut to what fits (one
// task at least).
func TestAdmitBudget(t *testing.T) {
	t.Parallel()
	st := index.NewStore()
	enq := func(size int) *machine.Command {
		return &machine.Command{Args: &machine.Enqueue{Task: machine.Spec{Size: size}}}
	}
	one, _ := Adds(enq(0), 0)
	a := &Admitter{Budget: one + 100, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock{}}
	for _, c := range []struct {
		name string
		cmd  *machine.Command
		full bool
	}{
		{"within", enq(100), false},
		{"past", enq(101), true},
		{"completion within the reserve", &machine.Command{Args: &machine.Complete{Result: make([]byte, one+100+(one+100)/ReserveShare)}}, false},
		{"completion past the reserve", &machine.Command{Args: &machine.Complete{Result: make([]byte, one+101+(one+100)/ReserveShare)}}, true},
	} {
		if err := a.Admit(st, c.cmd, 0); errors.Is(err, dockettype.ErrFull) != c.full {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	claim := &machine.Claim{Owner: "worker", Max: 1000}
	if err := a.Admit(st, &machine.Command{Args: claim}, 0); err != nil {
		t.Fatal(err)
	}
	if per, _ := ClaimAdds(&machine.Command{Args: claim}); claim.Max < 1 || int64(claim.Max) > (a.Budget+a.Budget/ReserveShare)/per {
		t.Fatalf("a claim of 1000 cut to %d, each adding %d of a budget of %d", claim.Max, per, a.Budget)
	}
}

// TestFits: what a batch not applied yet adds counts against the budget.
func TestFits(t *testing.T) {
	t.Parallel()
	st := index.NewStore()
	cmd := &machine.Command{NS: dockettype.NS("p", "s"), Args: &machine.Enqueue{Task: machine.Spec{Size: 10}}}
	add, _ := Adds(cmd, 0)
	a := &Admitter{Budget: 2 * add}
	var pend Pending
	if !a.Fits(st, cmd, 0, &pend) {
		t.Fatal("an enqueue does not fit an empty batch")
	}
	pend.Add(index.Namespace(cmd.NS), []index.Mutation{{Kind: index.MutPutIdem, Idem: index.Idem{Key: "k"}}})
	if !a.Fits(st, cmd, 0, &pend) {
		t.Fatalf("an enqueue does not fit beside %d pending bytes", pend.bytes)
	}
	pend.Add(index.Namespace(cmd.NS), []index.Mutation{{Kind: index.MutPutDep}, {Kind: index.MutPutDep}, {Kind: index.MutPutDep}})
	for pend.bytes <= add {
		pend.Add(index.Namespace(cmd.NS), []index.Mutation{{Kind: index.MutPutDep}})
	}
	if a.Fits(st, cmd, 0, &pend) {
		t.Fatalf("an enqueue of %d fits a budget of %d beside %d pending bytes", add, a.Budget, pend.bytes)
	}
	pend.Reset()
	if !a.Fits(st, cmd, 0, &pend) {
		t.Fatal("an enqueue does not fit once the batch is reset")
	}
}

type clock struct{}

func (clock) Now() time.Time                          { return time.Unix(0, 0) }
func (clock) NewTimer(time.Duration) dockettype.Timer { return nil }
