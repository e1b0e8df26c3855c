package index

import "errors"

var (
	// ErrAssertion reports that an assertion of a batch did not hold against
	// the current state; the batch was not applied.
	ErrAssertion = errors.New("index: assertion failed")
	// ErrCorrupt reports bytes that do not decode to a valid batch or record,
	// or a mutation that does not fit the state it is applied to.
	ErrCorrupt = errors.New("index: corrupt")
)
