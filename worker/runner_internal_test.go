package worker

import (
	"errors"
	"fmt"
	"testing"
)

type overLimitErr struct{}

func (overLimitErr) Error() string   { return "resource_exhausted: too many concurrent calls" }
func (overLimitErr) OverLimit() bool { return true }

// TestUnansweredSaysWhatARefusalIs: a server's refusal for being over the
// caller's limit (a 429) is logged as such, not as "no answer".
func TestUnansweredSaysWhatARefusalIs(t *testing.T) {
	if got := unanswered(fmt.Errorf("completing: %w", overLimitErr{})); got != "refused for being over the server's limit on the caller's calls" {
		t.Errorf("a refusal for a limit reads %q", got)
	}
	if got := unanswered(errors.New("unexpected EOF")); got != "no answer" {
		t.Errorf("a lost answer reads %q", got)
	}
}
