package wire

import (
	"strconv"
	"strings"
)

// LimitsHeader is the response header by which a server tells a caller
// its per-caller limits, as "calls=N, parked=M": how many calls it may
// have in progress at once (waiting claims aside), and how many claims it
// may have waiting (ClaimWait). The client bounds its own calls by them.
const LimitsHeader = "Docket-Limits"

// ParseLimits reads a LimitsHeader value. ok is false when it lacks a
// limit or holds a malformed one; keys it does not know are
// skipped, so that a server may add limits.
func ParseLimits(v string) (calls, parked int, ok bool) {
	if v == "" {
		return 0, 0, false
	}
	for _, part := range strings.Split(v, ",") {
		key, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return 0, 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		switch strings.TrimSpace(key) {
		case "calls":
			if err != nil || n <= 0 {
				return 0, 0, false
			}
			calls = n
		case "parked":
			if err != nil || n <= 0 {
				return 0, 0, false
			}
			parked = n
		}
	}
	if calls == 0 || parked == 0 {
		return 0, 0, false
	}
	return calls, parked, true
}
